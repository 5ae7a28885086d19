# Inference: one job per cell (the grid's, and the precision probe's own). Cells are thin clients of
# a per-model server that loads the model once (see safetyrepro.running.server). A model's cells all depend
# on its describe_model job and share its group, so on a cluster they form one job per model: one
# load per model there too. In a budgeted run, a round's cells of a model form the job (cell_group).


rule build_embedded_model:
    output:
        directory(f"{SETTINGS.resources_dir}/models/{{name}}"),
    params:
        code=code("build_embedded_model"),
    conda:
        "../../envs/safetyrepro.yaml"
    log:
        f"{RESULTS}/logs/build_model/{{name}}.log",
    priority: build_priority
    shell:
        "safetyrepro -v build-model --out {output:q} > {log:q} 2>&1"


DEPENDS["describe_model"] = lambda w: describe_dependencies(MODELS[w.model])
# the files of a local model folder, against the hashes its description holds: weights replaced redo it
CURRENT["describe_model"] = lambda w, outputs: changed_model_files(MODELS[w.model], Path(outputs[0]))


rule describe_model:
    input:
        model=model_input,
        outdated=outdated("describe_model"),
    output:
        description=f"{RESULTS}/models/{{model}}.json",
        job_record=job_record(f"{RESULTS}/models/{{model}}.json"),
    params:
        record=record_args("describe_model"),
    conda:
        "../../envs/safetyrepro.yaml"
    log:
        f"{RESULTS}/logs/models/{{model}}.log",
    group:
        lambda w: f"model-{w.model}"
    resources:
        gpu=model_gpus,
    priority: describe_priority
    shell:
        "safetyrepro describe-model --configfile \"$SAFETYREPRO_RUN_CONFIG\" --model {wildcards.model:q}"
        " --out {output.description:q} {params.record} > {log:q} 2>&1"


DEPENDS["cell"] = lambda w: cell_dependencies(
    SETTINGS, MODELS[w.model], w.benchmark, SETTINGS.config(w.benchmark, w.config_id)
)
DEPENDS["rescore_cell"] = DEPENDS["probe_cell"] = DEPENDS["cell"]


rule cell:
    input:
        data=lambda w: data_files(w.benchmark),
        model=f"{RESULTS}/models/{{model}}.json",
        scorer_model=scorer_model_input,
        outdated=outdated("cell"),
    output:
        rows=f"{RESULTS}/cells/{{model}}/{{benchmark}}/{{config_id}}.parquet",
        summary=f"{RESULTS}/cells/{{model}}/{{benchmark}}/{{config_id}}.json",
        job_record=job_record(f"{RESULTS}/cells/{{model}}/{{benchmark}}/{{config_id}}.parquet"),
    wildcard_constraints:
        model="|".join(re.escape(m.name) for m in SETTINGS.models),
    params:
        record=record_args("cell"),
    conda:
        "../../envs/safetyrepro.yaml"
    log:
        f"{RESULTS}/logs/cells/{{model}}/{{benchmark}}/{{config_id}}.log",
    group:
        cell_group
    resources:
        gpu=model_gpus,
    priority: cell_priority
    shell:
        "safetyrepro -v run-cell --configfile \"$SAFETYREPRO_RUN_CONFIG\" --model {wildcards.model:q}"
        " --benchmark {wildcards.benchmark} --config-id {wildcards.config_id:q}"
        " --items {output.rows:q} --summary {output.summary:q} {params.record} > {log:q} 2>&1"


# A cell of another scorer: its generation twin's responses labelled by its own scorer; no model under
# test runs (XSTest's learned scorer reads with the embedded model: scorer_model_input; a judge scorer asks
# its judge model's server: judge_input) (docs/scorers.md).
# Only configs in RESCORED match it, and for those it comes before `cell`.
rule rescore_cell:
    input:
        data=lambda w: data_files(w.benchmark),
        twin=lambda w: f"{RESULTS}/cells/{w.model}/{w.benchmark}/{RESCORED[w.config_id]}.parquet",
        scorer_model=scorer_model_input,
        judge=judge_input,
        outdated=outdated("rescore_cell"),
    output:
        rows=f"{RESULTS}/cells/{{model}}/{{benchmark}}/{{config_id}}.parquet",
        summary=f"{RESULTS}/cells/{{model}}/{{benchmark}}/{{config_id}}.json",
        job_record=job_record(f"{RESULTS}/cells/{{model}}/{{benchmark}}/{{config_id}}.parquet"),
    wildcard_constraints:
        model="|".join(re.escape(m.name) for m in SETTINGS.models),
        config_id="|".join(map(re.escape, RESCORED)) or "(?!)",  # no scorer axis: matches nothing
    params:
        record=record_args("rescore_cell"),
    conda:
        "../../envs/safetyrepro.yaml"
    log:
        f"{RESULTS}/logs/cells/{{model}}/{{benchmark}}/{{config_id}}.log",
    group:
        rescore_group
    resources:
        gpu=rescore_gpus,
    priority: rescore_priority
    shell:
        "safetyrepro -v rescore-cell --configfile \"$SAFETYREPRO_RUN_CONFIG\" --model {wildcards.model:q}"
        " --benchmark {wildcards.benchmark} --config-id {wildcards.config_id:q} --twin-items {input.twin:q}"
        " --items {output.rows:q} --summary {output.summary:q} {params.record} > {log:q} 2>&1"


ruleorder: rescore_cell > cell


# The judge of a scorer axis value asked, in the value's wording of its question, about a benchmark's
# human-labelled replies (XSTest's labelled completions): its agreement with the human labels, which the scorers
# analysis reports beside the other scorers' (docs/scorers.md). In the judge's group, on its server.
DEPENDS["judge_agreement"] = lambda w: {
    "judge_agreement": judge_agreement_fingerprint(SETTINGS, w.benchmark, w.value)
}


rule judge_agreement:
    input:
        data=lambda w: data_files(w.benchmark),
        judge=lambda w: f"{RESULTS}/models/{asked_judge(w)}.json",
        outdated=outdated("judge_agreement"),
    output:
        table=f"{RESULTS}/judges/{{benchmark}}/{{value}}.parquet",
        job_record=job_record(f"{RESULTS}/judges/{{benchmark}}/{{value}}.parquet"),
    wildcard_constraints:
        benchmark="|".join(map(re.escape, HUMAN_JUDGES)) or "(?!)",  # no benchmark with human labels: matches nothing
        value="|".join(map(re.escape, sorted({v for values in HUMAN_JUDGES.values() for v in values}))) or "(?!)",
    params:
        record=record_args("judge_agreement"),
    conda:
        "../../envs/safetyrepro.yaml"
    log:
        f"{RESULTS}/logs/judges/{{benchmark}}/{{value}}.log",
    group:
        lambda w: f"model-{asked_judge(w)}"
    resources:
        gpu=judge_gpus,
    priority: judge_priority
    shell:
        "safetyrepro -v judge-agreement --configfile \"$SAFETYREPRO_RUN_CONFIG\" --benchmark {wildcards.benchmark}"
        " --value {wildcards.value:q}"
        " --out {output.table:q} {params.record} > {log:q} 2>&1"


# The precision probe's own cells (its twins at the probe precision): the same job as a grid cell, in
# a folder of their own, outside the headline tables.
use rule cell as probe_cell with:
    input:
        data=lambda w: data_files(w.benchmark),
        model=f"{RESULTS}/models/{{model}}.json",
        scorer_model=scorer_model_input,
        outdated=outdated("probe_cell"),
    output:
        rows=f"{RESULTS}/precision_probe/{{model}}/{{benchmark}}/{{config_id}}.parquet",
        summary=f"{RESULTS}/precision_probe/{{model}}/{{benchmark}}/{{config_id}}.json",
        job_record=job_record(f"{RESULTS}/precision_probe/{{model}}/{{benchmark}}/{{config_id}}.parquet"),
    params:
        record=record_args("probe_cell"),
    wildcard_constraints:
        model="|".join(map(re.escape, PROBE_MODELS)) or "(?!)",  # no own cells: matches nothing
    log:
        f"{RESULTS}/logs/precision_probe/{{model}}/{{benchmark}}/{{config_id}}.log",
