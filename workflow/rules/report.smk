# Report and disclosure: the run record, the GRID card, the headline the report opens on (workflow.rst) and
# the figures of `snakemake --report`.
from safetyrepro.results.provenance import code_state, environment_fingerprint, recorded_settings

report: "../report/workflow.rst"

# A config with `imports` gets its record from its import job.
if not IMPORTS:

    rule provenance:
        input:
            models=expand(f"{RESULTS}/models/{{model}}.json", model=MODELS),
            rows=f"{RESULTS}/items.parquet",
            data=[path for benchmark in SETTINGS.benchmarks for path in data_files(benchmark)],
        output:
            f"{RESULTS}/provenance.json",
        params:
            # reruns the record when an installed package or the Python version changes
            environment=environment_fingerprint(),
            settings=recorded_settings(SETTINGS),
            code=code("provenance"),
            source=code_state(),  # the commit and dirty flag the record states
        conda:
            "../../envs/safetyrepro.yaml"
        log:
            f"{RESULTS}/logs/provenance.log",
        shell:
            "safetyrepro provenance --configfile \"$SAFETYREPRO_RUN_CONFIG\" --models {input.models:q}"
            " --items {input.rows:q} --out {output:q} > {log:q} 2>&1"


rule grid_card:
    input:
        provenance=f"{RESULTS}/provenance.json",
        cells=f"{RESULTS}/cells.parquet",
        rho=f"{RESULTS}/analysis/rho_flip_sig.parquet",  # rho_flip beside rho_flip_sig
        tiers=f"{RESULTS}/analysis/tiers.parquet",  # the orderings reached, for the headline
    output:
        json=f"{RESULTS}/grid_card.json",
        markdown=report(f"{RESULTS}/grid_card.md", caption="../report/grid_card.rst", category="7. GRID card"),
    params:
        code=code("grid_card"),
    conda:
        "../../envs/safetyrepro.yaml"
    log:
        f"{RESULTS}/logs/grid_card.log",
    shell:
        "safetyrepro grid-card --configfile \"$SAFETYREPRO_RUN_CONFIG\" --provenance {input.provenance:q}"
        " --cells {input.cells:q} --rho {input.rho:q} --tiers {input.tiers:q} --json-out {output.json:q}"
        " --markdown-out {output.markdown:q} > {log:q} 2>&1"


# The report's landing page (workflow/report/workflow.rst) embeds this table of the answer.
rule headline:
    input:
        sig=f"{RESULTS}/analysis/rho_flip_sig.parquet",
        tiers=f"{RESULTS}/analysis/tiers.parquet",
    output:
        f"{RESULTS}/headline.html",
    params:
        code=code("headline"),
    conda:
        "../../envs/safetyrepro.yaml"
    log:
        f"{RESULTS}/logs/headline.log",
    shell:
        "safetyrepro headline --sig {input.sig:q} --tiers {input.tiers:q} --out {output:q} > {log:q} 2>&1"


rule figure_rho_heatmap:
    input:
        f"{RESULTS}/rho_flip.parquet",
    output:
        report(f"{RESULTS}/figures/rho_heatmap_{{benchmark}}.png", caption="../report/rho_heatmap.rst",
               category="1. rho_flip per model pair", subcategory="{benchmark}",
               labels={"benchmark": "{benchmark}", "figure": "rho_flip heat map"}),
    params:
        code=code("figure"),
    log:
        f"{RESULTS}/logs/figures/rho_heatmap_{{benchmark}}.log",
    conda:
        "../../envs/safetyrepro.yaml"
    shell:
        "safetyrepro figure rho_heatmap --benchmark {wildcards.benchmark} --table {input:q} --out {output:q} > {log:q} 2>&1"


rule figure_scores:
    input:
        f"{RESULTS}/cells.parquet",
    output:
        report(f"{RESULTS}/figures/scores_{{benchmark}}.png", caption="../report/scores.rst",
               category="2. Scores across configs", subcategory="{benchmark}",
               labels={"benchmark": "{benchmark}", "figure": "scores per config"}),
    params:
        code=code("figure"),
    log:
        f"{RESULTS}/logs/figures/scores_{{benchmark}}.log",
    conda:
        "../../envs/safetyrepro.yaml"
    shell:
        "safetyrepro figure scores --benchmark {wildcards.benchmark} --table {input:q} --out {output:q} > {log:q} 2>&1"


rule figure_orderings:
    input:
        f"{RESULTS}/analysis/tiers.parquet",
    output:
        report(f"{RESULTS}/figures/orderings.png", caption="../report/orderings.rst",
               category="3. Orderings per tier"),
    params:
        code=code("figure"),
    log:
        f"{RESULTS}/logs/figures/orderings.log",
    conda:
        "../../envs/safetyrepro.yaml"
    shell:
        "safetyrepro figure orderings --table {input:q} --out {output:q} > {log:q} 2>&1"


rule figure_anova:
    input:
        f"{RESULTS}/analysis/variance.parquet",
    output:
        report(f"{RESULTS}/figures/anova.png", caption="../report/anova.rst", category="4. ANOVA shares"),
    params:
        code=code("figure"),
    log:
        f"{RESULTS}/logs/figures/anova.log",
    conda:
        "../../envs/safetyrepro.yaml"
    shell:
        "safetyrepro figure anova --table {input:q} --out {output:q} > {log:q} 2>&1"


rule figure_shap:
    input:
        f"{RESULTS}/analysis/shap.parquet",
    output:
        report(f"{RESULTS}/figures/shap.png", caption="../report/shap.rst", category="5. SHAP per axis"),
    params:
        code=code("figure"),
    log:
        f"{RESULTS}/logs/figures/shap.log",
    conda:
        "../../envs/safetyrepro.yaml"
    shell:
        "safetyrepro figure shap --table {input:q} --out {output:q} > {log:q} 2>&1"


rule figure_parse_rate:
    input:
        f"{RESULTS}/cells.parquet",
    output:
        report(f"{RESULTS}/figures/parse_rate.png", caption="../report/parse_rate.rst",
               category="6. Parse rate per template"),
    params:
        code=code("figure"),
    log:
        f"{RESULTS}/logs/figures/parse_rate.log",
    conda:
        "../../envs/safetyrepro.yaml"
    shell:
        "safetyrepro figure parse_rate --table {input:q} --out {output:q} > {log:q} 2>&1"


rule figure_paired_differences:
    input:
        f"{RESULTS}/analysis/paired_tests.parquet",
    output:
        report(f"{RESULTS}/figures/paired_differences_{{benchmark}}.png", caption="../report/paired_differences.rst",
               category="8. Paired differences", subcategory="{benchmark}",
               labels={"benchmark": "{benchmark}", "figure": "paired differences per config"}),
    params:
        code=code("figure"),
    log:
        f"{RESULTS}/logs/figures/paired_differences_{{benchmark}}.log",
    conda:
        "../../envs/safetyrepro.yaml"
    shell:
        "safetyrepro figure paired_differences --benchmark {wildcards.benchmark} --table {input:q} --out {output:q}"
        " > {log:q} 2>&1"


rule figure_stability:
    input:
        f"{RESULTS}/analysis/item_stability.parquet",
    output:
        report(f"{RESULTS}/figures/stability.png", caption="../report/stability.rst",
               category="9. Stability over seeds"),
    params:
        code=code("figure"),
    log:
        f"{RESULTS}/logs/figures/stability.log",
    conda:
        "../../envs/safetyrepro.yaml"
    shell:
        "safetyrepro figure stability --table {input:q} --out {output:q} > {log:q} 2>&1"
