# Analyses: each a pure function of the tidy tables (safetyrepro.analysis.suite), one job each.

ANALYSES = ["proposition1", "tiers", "scoring_paths", "parse_clean", "kendall_tau", "variance", "subsample",
            "bootstrap", "conservative_core", "shap", "precision"]


rule analysis:
    input:
        cells=f"{RESULTS}/cells.parquet",
        rows=f"{RESULTS}/items.parquet",
    output:
        table=f"{RESULTS}/analysis/{{name}}.parquet",
        markdown=f"{RESULTS}/analysis/{{name}}.md",
    params:
        options=config.get("analysis", {}),
        configfile=RUN_CONFIG,
    wildcard_constraints:
        name="|".join(ANALYSES),
    conda:
        "../../envs/safetyrepro.yaml"
    log:
        f"{RESULTS}/logs/analysis/{{name}}.log",
    shell:
        "safetyrepro analyse {wildcards.name} --configfile {params.configfile:q} --cells {input.cells:q}"
        " --items {input.rows:q} --out {output.table:q} --markdown {output.markdown:q} > {log:q} 2>&1"


rule summary:
    input:
        rho=f"{RESULTS}/rho_flip.parquet",
        cells=f"{RESULTS}/cells.parquet",
        tables=expand(f"{RESULTS}/analysis/{{name}}.parquet", name=ANALYSES),
    output:
        f"{RESULTS}/summary.md",
    conda:
        "../../envs/safetyrepro.yaml"
    log:
        f"{RESULTS}/logs/summary.log",
    shell:
        "safetyrepro summary --rho {input.rho:q} --cells {input.cells:q} --analysis-dir {RESULTS}/analysis"
        " --out {output:q} > {log:q} 2>&1"
