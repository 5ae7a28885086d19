# SafetyRepro: models x benchmarks x configs -> tidy Parquet tables -> rho_flip.
# Run from the repository root: `snakemake --cores 1 --resources gpu=1` (see README).
from snakemake.utils import min_version, validate

min_version("9.0")

configfile: "config/config.yaml"

# The package's checks give one message per problem (common.smk); the schema validation then
# only fills in defaults.
include: "workflow/rules/common.smk"

validate(config, "workflow/schemas/config.schema.yaml")

include: "workflow/rules/inference.smk"
include: "workflow/rules/aggregate.smk"
include: "workflow/rules/analysis.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/case_study.smk"


onsuccess:
    stop_servers(SETTINGS)

onerror:
    stop_servers(SETTINGS)


rule all:
    input:
        f"{RESULTS}/cells.parquet",
        f"{RESULTS}/items.parquet",
        f"{RESULTS}/rho_flip.parquet",
        f"{RESULTS}/rho_flip.md",
        expand(f"{RESULTS}/analysis/{{name}}.md", name=ANALYSES),
        f"{RESULTS}/summary.md",
        REPORT_OUTPUTS,
        CASE_STUDY_OUTPUTS,
