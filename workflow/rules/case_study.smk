# Cross-package case study (docs/case-study.md): off unless the config's
# `case_study` section says `enabled: true` (e.g. `--configfile config/case_study.yaml`).
CASE_STUDY = SETTINGS.case_study
CASE_STUDY_OUTPUTS = [f"{RESULTS}/case_study.parquet", f"{RESULTS}/case_study.md"] if CASE_STUDY else []

if CASE_STUDY:

    rule case_study:
        input:
            data=[path for b in CASE_STUDY.benchmarks for path in data_files(b)],
            model=[CASE_STUDY.model.path] if CASE_STUDY.model.embedded else [],
        output:
            table=f"{RESULTS}/case_study.parquet",
            markdown=f"{RESULTS}/case_study.md",
        params:
            study=CASE_STUDY.section,  # rerun triggers: the section, its model, the envelope
            model=vars(CASE_STUDY.model),
            envelope=SETTINGS.envelope.digest(),
            subset=[SETTINGS.subset_seed, SETTINGS.fewshot_pool],
            work_dir=f"{RESULTS}/case_study",
            code=code("case_study"),
        threads: workflow.cores
        conda:
            "../../envs/case_study.yaml"
        log:
            f"{RESULTS}/logs/case_study.log",
        shell:
            "safetyrepro -v case-study --configfile \"$SAFETYREPRO_RUN_CONFIG\" --out {output.table:q}"
            " --markdown {output.markdown:q} --work-dir {params.work_dir:q} > {log:q} 2>&1"
