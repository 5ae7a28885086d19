# Report and disclosure: the run record, the GRID card, the headline the report opens on (workflow.rst) and
# the figures of `snakemake --report`.
from safetyrepro.results.provenance import code_state, environment_fingerprint, recorded_settings

report: "../report/workflow.rst"

# A config with `imports` gets its record from its import job.
if not IMPORTS:

    rule provenance:
        localrule: True
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
    localrule: True
    input:
        provenance=f"{RESULTS}/provenance.json",
        cells=f"{RESULTS}/cells.parquet",
        rho=f"{RESULTS}/analysis/rho_flip_sig.parquet",  # rho_flip beside rho_flip_sig
        tiers=f"{RESULTS}/analysis/tiers.parquet",  # the rankings reached, for the headline
        clean=f"{RESULTS}/analysis/parse_clean.parquet",  # the parse-clean rho_flip, for the headline
    output:
        json=f"{RESULTS}/grid_card.json",
        markdown=report(f"{RESULTS}/grid_card.md", caption="../report/grid_card.rst", category="07. GRID card"),
    params:
        code=code("grid_card"),
    conda:
        "../../envs/safetyrepro.yaml"
    log:
        f"{RESULTS}/logs/grid_card.log",
    shell:
        "safetyrepro grid-card --configfile \"$SAFETYREPRO_RUN_CONFIG\" --provenance {input.provenance:q}"
        " --cells {input.cells:q} --rho {input.rho:q} --tiers {input.tiers:q} --parse-clean {input.clean:q}"
        " --json-out {output.json:q} --markdown-out {output.markdown:q} > {log:q} 2>&1"


# The report's landing page (workflow/report/workflow.rst) embeds this table of the answer.
rule headline:
    localrule: True
    input:
        sig=f"{RESULTS}/analysis/rho_flip_sig.parquet",
        tiers=f"{RESULTS}/analysis/tiers.parquet",
        clean=f"{RESULTS}/analysis/parse_clean.parquet",
        cells=f"{RESULTS}/cells.parquet",
    output:
        f"{RESULTS}/headline.html",
    params:
        code=code("headline"),
    conda:
        "../../envs/safetyrepro.yaml"
    log:
        f"{RESULTS}/logs/headline.log",
    shell:
        'safetyrepro headline --configfile "$SAFETYREPRO_RUN_CONFIG" --sig {input.sig:q} --tiers {input.tiers:q}'
        " --parse-clean {input.clean:q} --cells {input.cells:q} --out {output:q} > {log:q} 2>&1"


# The run checks itself: the headline recomputed from the tables it cites, against the report's fragment,
# summary.md and the GRID card (JSON and Markdown); the run fails with one line naming the first mismatch.
rule check_headline:
    localrule: True
    input:
        sig=f"{RESULTS}/analysis/rho_flip_sig.parquet",
        tiers=f"{RESULTS}/analysis/tiers.parquet",
        clean=f"{RESULTS}/analysis/parse_clean.parquet",
        cells=f"{RESULTS}/cells.parquet",
        html=f"{RESULTS}/headline.html",
        summary=f"{RESULTS}/summary.md",
        grid_json=f"{RESULTS}/grid_card.json",
        grid_md=f"{RESULTS}/grid_card.md",
    output:
        f"{RESULTS}/headline_check.txt",
    params:
        code=code("check_headline"),
    conda:
        "../../envs/safetyrepro.yaml"
    log:
        f"{RESULTS}/logs/check_headline.log",
    shell:
        'safetyrepro check-headline --configfile "$SAFETYREPRO_RUN_CONFIG" --sig {input.sig:q} --tiers {input.tiers:q}'
        " --parse-clean {input.clean:q} --cells {input.cells:q} --html {input.html:q} --summary {input.summary:q}"
        " --grid-json {input.grid_json:q} --grid-md {input.grid_md:q} --out {output:q} > {log:q} 2>&1"


# The figures (safetyrepro.results.figures.FIGURES), one rule each: figure_NAME draws figures/NAME.png
# from its table, or figures/NAME_{benchmark}.png for each benchmark (figure_file); its caption is
# report/NAME.rst.
for figure_name, figure in FIGURES.items():

    rule:
        name:
            f"figure_{figure_name}"
        localrule: True
        input:
            f"{RESULTS}/{figure.table}",
        output:
            report(
                f"{RESULTS}/{figure_file(figure_name)}.png",
                caption=f"../report/{figure_name}.rst",
                **figure_report(figure_name),
            ),
        params:
            code=code("figure"),
            # the shell command is evaluated when the job runs, after the loop: what varies per figure
            # goes through params, which take their values here
            name=figure_name,
            benchmark=(lambda w: ["--benchmark", w.benchmark]) if figure.per_benchmark else [],
        log:
            f"{RESULTS}/logs/{figure_file(figure_name)}.log",
        conda:
            "../../envs/safetyrepro.yaml"
        shell:
            "safetyrepro figure {params.name} {params.benchmark} --table {input:q} --out {output:q} > {log:q} 2>&1"
