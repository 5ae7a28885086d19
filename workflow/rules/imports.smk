# Imported results (a config with `imports`; docs/importing.md): one job reads every
# source into the tables the analyses read and the record the GRID card discloses; no model runs. The
# benchmarks are known only once it has run, so it is a checkpoint and the per-benchmark figures follow it.


DEPENDS["import_results"] = lambda w: {"imports": SETTINGS.document["imports"], "code": code("import")}


checkpoint import_results:
    input:
        sources=[str(path) for source in SETTINGS.imports for path in (source.path, source.mapping) if path is not None],
        outdated=outdated("import_results"),
    output:
        cells=f"{RESULTS}/cells.parquet",
        rows=f"{RESULTS}/items.parquet",
        probe=f"{RESULTS}/precision_probe.parquet",
        record=f"{RESULTS}/provenance.json",
        job_record=job_record(f"{RESULTS}/cells.parquet"),
    params:
        out_dir=lambda w, output: os.path.dirname(output.cells),
        record=record_args("import_results"),
    conda:
        "../../envs/case_study.yaml"
    log:
        f"{RESULTS}/logs/import.log",
    shell:
        "safetyrepro import --configfile \"$SAFETYREPRO_RUN_CONFIG\" --out-dir {params.out_dir:q} {params.record} > {log:q} 2>&1"

