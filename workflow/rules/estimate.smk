# A budgeted run (config section `estimate`; safetyrepro.estimation, docs/estimation.md): each benchmark's configs
# run in rounds, a checkpoint a round. Round n reads round n-1's record and the cells of the configs it chose, and
# chooses the next ones or stops; the cells are the grid's own (same paths, cached), so a raised budget, or a full
# run later, reuses every one. The tables are of the cells run; rule estimate fills in the envelope.
ROUND = f"{RESULTS}/estimate/{{benchmark}}/round-{{n}}.json"
DEPENDS["estimate_round"] = lambda w: {
    "estimate": SETTINGS.document["estimate"],
    "models": [m.name for m in SETTINGS.models],
    "space": [c.config_id for c in SETTINGS.configs(w.benchmark)],
    "code": code("estimate"),
}
DEPENDS["estimate"] = lambda w: {"seed": SETTINGS.estimate.seed, "code": code("estimate")}


checkpoint estimate_round:
    localrule: True
    input:
        unpack(estimate_round_input),
        outdated=outdated("estimate_round"),
    output:
        record=ROUND,
        job_record=job_record(ROUND),
    wildcard_constraints:
        n=r"\d+",
    params:
        record=record_args("estimate_round"),
    conda:
        "../../envs/safetyrepro.yaml"
    log:
        f"{RESULTS}/logs/estimate/{{benchmark}}/round-{{n}}.log",
    shell:
        "safetyrepro estimate-round --configfile \"$SAFETYREPRO_RUN_CONFIG\" --benchmark {wildcards.benchmark}"
        " --round {wildcards.n} --previous {input.previous:q} --cells {input.cells:q} --out {output.record:q}"
        " {params.record} > {log:q} 2>&1"


rule estimate:
    localrule: True
    input:
        cells=f"{RESULTS}/cells.parquet",
        item_rows=f"{RESULTS}/items.parquet",
        outdated=outdated("estimate"),
    output:
        rho=f"{RESULTS}/estimate/rho_flip.parquet",
        quantiles=f"{RESULTS}/estimate/quantiles.parquet",
        new_values=f"{RESULTS}/estimate/new_values.parquet",
        variance=f"{RESULTS}/estimate/variance.parquet",
        markdown=f"{RESULTS}/estimate.md",
        job_record=job_record(f"{RESULTS}/estimate/rho_flip.parquet"),
    params:
        record=record_args("estimate"),
    conda:
        "../../envs/safetyrepro.yaml"
    log:
        f"{RESULTS}/logs/estimate.log",
    shell:
        "safetyrepro estimate-grid --configfile \"$SAFETYREPRO_RUN_CONFIG\" --cells {input.cells:q} --items {input.item_rows:q}"
        " --rho-out {output.rho:q} --quantiles-out {output.quantiles:q} --new-values-out {output.new_values:q}"
        " --variance-out {output.variance:q}"
        " --markdown {output.markdown:q}"
        " {params.record} > {log:q} 2>&1"
