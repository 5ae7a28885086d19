# Cross-package case study (README "Cross-package case study"): off unless the config's
# `case_study` section says `enabled: true` (e.g. `--configfile config/case_study.yaml`).
from safetyrepro.case_study import case_study_settings

CASE_STUDY = case_study_settings(SETTINGS)
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
            study=config["case_study"],  # rerun trigger: any change of the section
            subset=[SETTINGS.subset_seed, SETTINGS.fewshot_pool],
            configfile=RUN_CONFIG,
            work_dir=f"{RESULTS}/case_study",
        threads: workflow.cores
        conda:
            "../../envs/case_study.yaml"
        log:
            f"{RESULTS}/logs/case_study.log",
        shell:
            "safetyrepro -v case-study --configfile {params.configfile:q} --out {output.table:q}"
            " --markdown {output.markdown:q} --work-dir {params.work_dir:q} > {log:q} 2>&1"
