# Report and disclosure: the run record, the GRID card, the headline the report opens on (workflow.rst) and
# the figures of `snakemake --report`.
from safetyrepro.results.provenance import code_state, environment_fingerprint, recorded_settings

report: "../report/workflow.rst"

# A config with `imports` gets its record from its import job.
if not IMPORTS:

    # reruns the record when an installed package or the Python version changes, and states the commit and
    # dirty flag of the code
    DEPENDS["provenance"] = lambda w: {
        "environment": environment_fingerprint(),
        "settings": recorded_settings(SETTINGS),
        "models": list(MODELS),
        "code": code("provenance"),
        "source": code_state(),
        "data": data_digests(SETTINGS, SETTINGS.benchmarks),
    }

    rule provenance:
        localrule: True
        input:
            models=expand(f"{RESULTS}/models/{{model}}.json", model=MODELS),
            rows=f"{RESULTS}/items.parquet",
            data=[path for benchmark in SETTINGS.benchmarks for path in data_files(benchmark)],
            outdated=outdated("provenance"),
        output:
            record=f"{RESULTS}/provenance.json",
            job_record=job_record(f"{RESULTS}/provenance.json"),
        params:
            record=record_args("provenance"),
        conda:
            "../../envs/safetyrepro.yaml"
        log:
            f"{RESULTS}/logs/provenance.log",
        shell:
            "safetyrepro provenance --configfile \"$SAFETYREPRO_RUN_CONFIG\" --models {input.models:q}"
            " --items {input.rows:q} --out {output.record:q} {params.record} > {log:q} 2>&1"


DEPENDS["grid_card"] = lambda w: {"code": code("grid_card")}


rule grid_card:
    localrule: True
    input:
        provenance=f"{RESULTS}/provenance.json",
        cells=f"{RESULTS}/cells.parquet",
        rho=f"{RESULTS}/analysis/rho_flip_sig.parquet",  # rho_flip beside rho_flip_sig
        tiers=f"{RESULTS}/analysis/tiers.parquet",  # the rankings reached, for the headline
        clean=f"{RESULTS}/analysis/parse_clean.parquet",  # the parse-clean rho_flip, for the headline
        corrected=f"{RESULTS}/analysis/scorer_correction.parquet",  # verdicts corrected for scorer error, too
        outdated=outdated("grid_card"),
    output:
        json=f"{RESULTS}/grid_card.json",
        markdown=report(f"{RESULTS}/grid_card.md", caption="../report/grid_card.rst", category="07. GRID card"),
        job_record=job_record(f"{RESULTS}/grid_card.json"),
    params:
        record=record_args("grid_card"),
    conda:
        "../../envs/safetyrepro.yaml"
    log:
        f"{RESULTS}/logs/grid_card.log",
    shell:
        "safetyrepro grid-card --configfile \"$SAFETYREPRO_RUN_CONFIG\" --provenance {input.provenance:q}"
        " --cells {input.cells:q} --rho {input.rho:q} --tiers {input.tiers:q} --parse-clean {input.clean:q}"
        " --scorer-correction {input.corrected:q}"
        " --json-out {output.json:q} --markdown-out {output.markdown:q} {params.record} > {log:q} 2>&1"


# The report's landing page (workflow/report/workflow.rst) embeds this table of the answer.
DEPENDS["headline"] = lambda w: {"code": code("headline")}


rule headline:
    localrule: True
    input:
        sig=f"{RESULTS}/analysis/rho_flip_sig.parquet",
        tiers=f"{RESULTS}/analysis/tiers.parquet",
        clean=f"{RESULTS}/analysis/parse_clean.parquet",
        corrected=f"{RESULTS}/analysis/scorer_correction.parquet",
        cells=f"{RESULTS}/cells.parquet",
        outdated=outdated("headline"),
    output:
        html=f"{RESULTS}/headline.html",
        job_record=job_record(f"{RESULTS}/headline.html"),
    params:
        record=record_args("headline"),
    conda:
        "../../envs/safetyrepro.yaml"
    log:
        f"{RESULTS}/logs/headline.log",
    shell:
        'safetyrepro headline --configfile "$SAFETYREPRO_RUN_CONFIG" --sig {input.sig:q} --tiers {input.tiers:q}'
        " --parse-clean {input.clean:q} --scorer-correction {input.corrected:q} --cells {input.cells:q}"
        " --out {output.html:q} {params.record} > {log:q} 2>&1"


# The run checks itself: the headline recomputed from the tables it cites, against the report's fragment,
# summary.md and the GRID card (JSON and Markdown); the run fails with one line naming the first mismatch.
DEPENDS["check_headline"] = lambda w: {"code": code("check_headline")}


rule check_headline:
    localrule: True
    input:
        sig=f"{RESULTS}/analysis/rho_flip_sig.parquet",
        tiers=f"{RESULTS}/analysis/tiers.parquet",
        clean=f"{RESULTS}/analysis/parse_clean.parquet",
        corrected=f"{RESULTS}/analysis/scorer_correction.parquet",
        cells=f"{RESULTS}/cells.parquet",
        html=f"{RESULTS}/headline.html",
        summary=f"{RESULTS}/summary.md",
        grid_json=f"{RESULTS}/grid_card.json",
        grid_md=f"{RESULTS}/grid_card.md",
        outdated=outdated("check_headline"),
    output:
        check=f"{RESULTS}/headline_check.txt",
        job_record=job_record(f"{RESULTS}/headline_check.txt"),
    params:
        record=record_args("check_headline"),
    conda:
        "../../envs/safetyrepro.yaml"
    log:
        f"{RESULTS}/logs/check_headline.log",
    shell:
        'safetyrepro check-headline --configfile "$SAFETYREPRO_RUN_CONFIG" --sig {input.sig:q} --tiers {input.tiers:q}'
        " --parse-clean {input.clean:q} --scorer-correction {input.corrected:q} --cells {input.cells:q}"
        " --html {input.html:q} --summary {input.summary:q}"
        " --grid-json {input.grid_json:q} --grid-md {input.grid_md:q} --out {output.check:q} {params.record} > {log:q} 2>&1"


# The figures (safetyrepro.results.figures.FIGURES), one rule each: figure_NAME draws figures/NAME.png
# from its table, or figures/NAME_{benchmark}.png for each benchmark (schedule.figure_file); its caption is
# report/NAME.rst.
for figure_name, figure in FIGURES.items():
    DEPENDS[f"figure_{figure_name}"] = lambda w, name=figure_name: {"code": code("figure"), "figure": name}

    rule:
        name:
            f"figure_{figure_name}"
        localrule: True
        input:
            table=f"{RESULTS}/{figure.table}",
            outdated=outdated(f"figure_{figure_name}"),
        output:
            figure=report(
                f"{RESULTS}/{schedule.figure_file(figure_name)}.png",
                caption=f"../report/{figure_name}.rst",
                **schedule.figure_report(figure_name),
            ),
            job_record=job_record(f"{RESULTS}/{schedule.figure_file(figure_name)}.png"),
        params:
            record=record_args(f"figure_{figure_name}"),
            # the shell command is evaluated when the job runs, after the loop: what varies per figure
            # goes through params, which take their values here
            name=figure_name,
            benchmark=(lambda w: ["--benchmark", w.benchmark]) if figure.per_benchmark else [],
        log:
            f"{RESULTS}/logs/{schedule.figure_file(figure_name)}.log",
        conda:
            "../../envs/safetyrepro.yaml"
        shell:
            "safetyrepro figure {params.name} {params.benchmark} --table {input.table:q} --out {output.figure:q} {params.record} > {log:q} 2>&1"
