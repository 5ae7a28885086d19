# The auditor's search (safetyrepro.audit; docs/audit.md): the target
# results/audit/<benchmark>/<A>_vs_<B>.md runs one step per checkpoint. Step n reads the configs run so
# far (step n-1's record) and the cells of the config step n-1 chose, then picks the next config or
# stops; the cells are the grid's own (same paths, cached), so a later full run reuses them, and a
# rerun replays the steps without rerunning a cell.
DEPENDS["audit_step"] = lambda w: {"audit": SETTINGS.document["audit"], "space": audit_space(w), "code": code("audit")}
DEPENDS["audit"] = lambda w: DEPENDS["audit_step"](w) | {"significance": SETTINGS.document["analysis"]["significance"]}


checkpoint audit_step:
    input:
        unpack(audit_step_input),
        outdated=outdated("audit_step"),
    output:
        step=f"{AUDIT}/step-{{n}}.json",
        job_record=job_record(f"{AUDIT}/step-{{n}}.json"),
    wildcard_constraints:
        model_a=AUDIT_MODEL,
        model_b=AUDIT_MODEL,
        n=r"\d+",
    params:
        record=record_args("audit_step"),
    conda:
        "../../envs/safetyrepro.yaml"
    log:
        f"{RESULTS}/logs/audit/{{benchmark}}/{{model_a}}_vs_{{model_b}}/step-{{n}}.log",
    shell:
        "safetyrepro audit-step --configfile \"$SAFETYREPRO_RUN_CONFIG\" --benchmark {wildcards.benchmark}"
        " --pair {wildcards.model_a:q} {wildcards.model_b:q} --step {wildcards.n} --previous {input.previous:q}"
        " --cells {input.cells:q} --out {output.step:q} {params.record} > {log:q} 2>&1"


rule audit:
    input:
        unpack(audit_report_input),
        outdated=outdated("audit"),
    output:
        json=f"{AUDIT}.json",
        markdown=f"{AUDIT}.md",
        job_record=job_record(f"{AUDIT}.json"),
    wildcard_constraints:
        model_a=AUDIT_MODEL,
        model_b=AUDIT_MODEL,
    params:
        record=record_args("audit"),
    conda:
        "../../envs/safetyrepro.yaml"
    log:
        f"{RESULTS}/logs/audit/{{benchmark}}/{{model_a}}_vs_{{model_b}}.log",
    shell:
        "safetyrepro audit-report --configfile \"$SAFETYREPRO_RUN_CONFIG\" --step {input.step:q}"
        " --items {input.rows:q} --cells {input.cells:q} --json {output.json:q} --markdown {output.markdown:q} {params.record} > {log:q} 2>&1"
