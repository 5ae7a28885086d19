# Aggregation: the tidy tables and the rho_flip verdicts.


# A config with `imports` gets these tables from its import job (workflow/rules/imports.smk).
if not IMPORTS:

    # A partial run (partial_results: true) aggregates the cells finished so far and lists the missing
    # ones in every table; otherwise the grid must be complete.
    # the cells aggregated are what a config narrows or widens (select_configs, models, benchmarks)
    # a budgeted run aggregates the cells its rounds chose (workflow/rules/estimate.smk)
    DEPENDS["aggregate"] = lambda w: {
        "partial": SETTINGS.partial_results,
        "cells": in_results(
            (grid_cell_paths("summary")(w) if BUDGETED else grid_cell_paths("summary"))
            + finished_cell_paths("summary", schedule.PROBE)
        ),
        "code": code("aggregate"),
        **({"budget": code("estimate")} if BUDGETED else {}),  # the budget its tables carry (estimation.budget_summary)
    }

    rule aggregate:
        localrule: True
        input:
            summaries=grid_cell_paths("summary"),
            rows=grid_cell_paths("items"),
            probe=finished_cell_paths("summary", schedule.PROBE),
            rounds=lambda w: list(last_rounds().values()) if BUDGETED else [],
            outdated=outdated("aggregate"),
        output:
            cells=f"{RESULTS}/cells.parquet",
            rows=f"{RESULTS}/items.parquet",
            probe=f"{RESULTS}/precision_probe.parquet",
            job_record=job_record(f"{RESULTS}/cells.parquet"),
        params:
            partial="--partial" if SETTINGS.partial_results else "",
            record=record_args("aggregate"),
        conda:
            "../../envs/safetyrepro.yaml"
        log:
            f"{RESULTS}/logs/aggregate.log",
        shell:
            "safetyrepro aggregate --configfile \"$SAFETYREPRO_RUN_CONFIG\" {params.partial}"
            " --summaries {input.summaries:q} --items {input.rows:q} --probe-summaries {input.probe:q} --rounds {input.rounds:q}"
            " --cells-out {output.cells:q} --items-out {output.rows:q} --probe-out {output.probe:q} {params.record} > {log:q} 2>&1"


DEPENDS["rho_flip"] = lambda w: {"code": code("rho_flip")}


rule rho_flip:
    localrule: True
    input:
        cells=f"{RESULTS}/cells.parquet",
        outdated=outdated("rho_flip"),
    output:
        table=f"{RESULTS}/rho_flip.parquet",
        markdown=f"{RESULTS}/rho_flip.md",
        job_record=job_record(f"{RESULTS}/rho_flip.parquet"),
    params:
        record=record_args("rho_flip"),
    conda:
        "../../envs/safetyrepro.yaml"
    log:
        f"{RESULTS}/logs/rho_flip.log",
    shell:
        "safetyrepro rho-flip --cells {input.cells:q} --out {output.table:q} --markdown {output.markdown:q} {params.record} > {log:q} 2>&1"
