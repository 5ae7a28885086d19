# Cross-package case study (docs/case-study.md): off unless the config's
# `case_study` section says `enabled: true` (e.g. `--configfile config/case_study.yaml`).
CASE_STUDY = SETTINGS.case_study
CASE_STUDY_OUTPUTS = [f"{RESULTS}/case_study.parquet", f"{RESULTS}/case_study.md"] if CASE_STUDY else []

if CASE_STUDY:
    # rerun triggers: the section, its model, the envelope
    DEPENDS["case_study"] = lambda w: {
        "study": CASE_STUDY.section,
        "model": CASE_STUDY.model.record(),
        "envelope": SETTINGS.envelope.digest(),
        "subset": [SETTINGS.subset_seed, SETTINGS.fewshot_pool],
        "code": code("case_study"),
        "data": data_digests(SETTINGS, CASE_STUDY.benchmarks),
    }

    rule case_study:
        input:
            data=[path for b in CASE_STUDY.benchmarks for path in data_files(b)],
            model=[CASE_STUDY.model.path] if CASE_STUDY.model.embedded else [],
            outdated=outdated("case_study"),
        output:
            table=f"{RESULTS}/case_study.parquet",
            markdown=f"{RESULTS}/case_study.md",
            job_record=job_record(f"{RESULTS}/case_study.parquet"),
        params:
            work_dir=f"{RESULTS}/case_study",
            record=record_args("case_study"),
        threads: workflow.cores
        conda:
            "../../envs/case_study.yaml"
        log:
            f"{RESULTS}/logs/case_study.log",
        shell:
            "safetyrepro -v case-study --configfile \"$SAFETYREPRO_RUN_CONFIG\" --out {output.table:q}"
            " --markdown {output.markdown:q} --work-dir {params.work_dir:q} {params.record} > {log:q} 2>&1"
