# Analyses: each a pure function of the tidy tables (safetyrepro.analysis.suite), one job each.
from safetyrepro.analysis.suite import ANALYSES
from safetyrepro.pipeline.fingerprints import analysis_modules
from safetyrepro.running.hashing import file_sha256


# an analysis reruns when its own options, description or code change
DEPENDS["analysis"] = lambda w: {
    "options": SETTINGS.analysis.options(ANALYSES[w.name].options),
    "sections": {key: SETTINGS.document.get(key) for key in ANALYSES[w.name].sections},
    "description": ANALYSES[w.name].description,
    "function": ANALYSES[w.name].function,
    "code": code_digest(*analysis_modules(w.name, SETTINGS.benchmarks)),
    "judges": in_results(judge_agreement_input(w)),
    "label_files": {name: file_sha256(Path(path)) for name, path in human_label_input(w).items()},  # by their bytes
}


rule analysis:
    localrule: True
    input:
        cells=f"{RESULTS}/cells.parquet",
        rows=f"{RESULTS}/items.parquet",
        probe=f"{RESULTS}/precision_probe.parquet",
        judges=judge_agreement_input,
        labels=lambda w: list(human_label_input(w).values()),
        outdated=outdated("analysis"),
    output:
        table=f"{RESULTS}/analysis/{{name}}.parquet",
        markdown=f"{RESULTS}/analysis/{{name}}.md",
        job_record=job_record(f"{RESULTS}/analysis/{{name}}.parquet"),
    params:
        record=record_args("analysis"),
    wildcard_constraints:
        name="|".join(ANALYSES),
    conda:
        "../../envs/safetyrepro.yaml"
    log:
        f"{RESULTS}/logs/analysis/{{name}}.log",
    shell:
        'safetyrepro analyse {wildcards.name} --configfile "$SAFETYREPRO_RUN_CONFIG" --cells {input.cells:q}'
        " --items {input.rows:q} --probe {input.probe:q} --out {output.table:q} --markdown {output.markdown:q} {params.record} > {log:q} 2>&1"


DEPENDS["summary"] = lambda w: {"tables": list(ANALYSES), "code": code("summary")}


rule summary:
    localrule: True
    input:
        rho=f"{RESULTS}/rho_flip.parquet",
        cells=f"{RESULTS}/cells.parquet",
        tables=expand(f"{RESULTS}/analysis/{{name}}.parquet", name=ANALYSES),
        estimate=[f"{RESULTS}/estimate/rho_flip.parquet"] if BUDGETED else [],
        outdated=outdated("summary"),
    output:
        summary=f"{RESULTS}/summary.md",
        job_record=job_record(f"{RESULTS}/summary.md"),
    params:
        analysis_dir=lambda w, input: os.path.dirname(input.tables[0]),
        record=record_args("summary"),
    conda:
        "../../envs/safetyrepro.yaml"
    log:
        f"{RESULTS}/logs/summary.log",
    shell:
        'safetyrepro summary --configfile "$SAFETYREPRO_RUN_CONFIG" --rho {input.rho:q} --cells {input.cells:q}'
        " --analysis-dir {params.analysis_dir:q} --estimate {input.estimate:q} --out {output.summary:q} {params.record} > {log:q} 2>&1"
