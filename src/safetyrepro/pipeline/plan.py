"""What a run will do, in numbers: printed by `safetyrepro check`, `safetyrepro envelope` and the Snakefile."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from safetyrepro.backends import describe_batches
from safetyrepro.pipeline.schedule import rescored_configs

if TYPE_CHECKING:
    from safetyrepro.configuration.settings import Settings


def grid_plan(settings: Settings) -> dict[str, Any]:
    """Cells, generation runs, token budgets and backends of the run the settings describe; the cells of a
    scorer axis off its default (`rescored_cells`) run no model under test: they label their twins' responses."""
    envelope, cells = settings.envelope, settings.cells()
    run = [(m, b, c) for m, b, c in cells if envelope.generation_twin(c, b) is None]  # the cells that call a model
    budgets = Counter(envelope.decoding(c).max_new_tokens for _, _, c in run if c.scoring == "freeform")
    batches = Counter((settings.backend.serving(c.scoring, m), settings.batch_condition(c, m)) for m, _, c in run)
    return {
        "config": list(settings.layers),
        "models": [m.name for m in settings.models],
        "benchmarks": settings.benchmarks,
        "configs_per_benchmark": {b: len(settings.configs(b)) for b in settings.benchmarks},
        "cells": len(cells),
        "core_cells": sum(c.tier == "core" for _, _, c in cells),
        "rescored_cells": len(cells) - len(run),
        "judges": dict(Counter(judge.name for _, b, c in cells if (judge := settings.judge_model(b, c)))),
        "generation_runs": sum(len(envelope.seeds_for(c)) for _, _, c in run),
        "max_new_tokens": {int(tokens): count for tokens, count in sorted(budgets.items())},
        "max_new_tokens_cap": envelope.token_cap,
        "backend": {
            **settings.backend.kinds(),
            "device": settings.backend.device,
            "batch_size": settings.backend.batch_size,
        },
        "batch_conditions": [
            {"backend": kind, **vars(condition), "cells": count} for (kind, condition), count in batches.items()
        ],
        "precision_probe": _probe(settings),
        "data_dir": str(settings.data_dir),
        "results_dir": str(settings.results_dir),
        "envelope_sha256": envelope.digest(),
    }


def import_plan_lines(settings: Settings) -> list[str]:
    """The plan of a config with `imports`: its sources, read by one import job, then the analyses."""
    return [
        "config: " + "; ".join(settings.layers),
        "imports (no model runs; the analyses of imported results): "
        + "; ".join(
            f"{source.kind} {source.path}" + (f" (mapping {source.mapping})" if source.mapping else "")
            for source in settings.imports
        ),
        f"results: {settings.results_dir}/",
    ]


def budget_plan_line(settings: Settings) -> str:
    """What a budgeted run runs of its grid: the configs a benchmark at most, chosen in rounds."""
    most = {b: settings.budget_configs(b) for b in settings.benchmarks}
    cells = len(settings.models) * sum(most.values())
    twins = (
        "; a chosen config that relabels its twin's responses (scorer axis) runs the twin's cells too, outside the "
        "budget, where the rounds did not choose it"
        if rescored_configs(settings)
        else ""
    )
    return (
        f"budget ({settings.estimate.budget}): at most {cells} of the grid's {len(settings.cells())} cells, every "
        "model on at most "
        + ", ".join(f"{b} {n}" for b, n in most.items())
        + f" configs, chosen in rounds of {settings.estimate.round_configs} (results/estimate.md fills in the rest){twins}"
    )


def plan_lines(settings: Settings) -> list[str]:
    """The plan as a few readable lines."""
    if settings.imports:
        return import_plan_lines(settings)
    plan = grid_plan(settings)
    backend = plan["backend"]
    budgets = ", ".join(f"{tokens} for {count} cells" for tokens, count in plan["max_new_tokens"].items()) or "none"
    cap = plan["max_new_tokens_cap"]
    return [
        "config: " + "; ".join(plan["config"]),
        f"grid: {len(plan['models'])} models x {len(plan['benchmarks'])} benchmarks = {plan['cells']} cells "
        f"({plan['core_cells']} core), {plan['generation_runs']} generation runs"
        + (f"; {n} cells relabel their twin's responses (scorer axis)" if (n := plan["rescored_cells"]) else ""),
        "configs per benchmark: " + ", ".join(f"{b} {n}" for b, n in plan["configs_per_benchmark"].items()),
        *([budget_plan_line(settings)] if settings.budgeted else []),
        *(
            ["judges (a model server each, loaded once): " + ", ".join(f"{j} for {n} cells" for j, n in judges.items())]
            if (judges := plan["judges"])
            else []
        ),
        *(
            [
                f"note: no cell of this run asks judge(s) {', '.join(unasked)} (select_configs leaves out their configs, "
                "or the run's benchmarks have none they label): not served"
            ]
            if (unasked := [spec.name for spec in settings.judges if spec not in settings.used_judges()])
            else []
        ),
        f"max new tokens (free-form cells): {budgets}"
        + (f" (capped at {cap} by max_new_tokens_cap)" if cap is not None else " (no cap)"),
        f"backend: generate {backend['generate']}, loglikelihood {backend['loglikelihood']}, "
        f"device {backend['device']}, batch size {backend['batch_size']}",
        "batch conditions: "
        + "; ".join(
            f"{describe_batches(c['backend'], c['batch_size'], c['batch_invariant'])} for {c['cells']} cells"
            for c in plan["batch_conditions"]
        ),
        f"data: {plan['data_dir']}/, results: {plan['results_dir']}/",
        *(
            [
                f"precision probe: {len(probe['twins'])} model{'s' if len(probe['twins']) != 1 else ''} paired with "
                f"their {probe['precision']} twin on "
                f"{len(probe['configs'])} configs; {probe['cells']} cells of its own (outside the headline tables)"
            ]
            if (probe := plan["precision_probe"])
            else []
        ),
    ]


def _probe(settings: Settings) -> dict[str, Any] | None:
    probe = settings.precision_probe
    if probe is None:
        return None
    return {**probe.disclosed(), "cells": len(settings.probe_cells())}
