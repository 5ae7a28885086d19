"""The GRID card: a disclosure of exactly which harness produced a run's verdicts.

results/grid_card.json holds every axis value used (with its tier and parameters), the validity
rules, the envelope and its hash (the seal), the configs and item subsets per benchmark, the models
with precision and file hashes or revisions, data file hashes, package versions, seeds, every
analysis option and the precision probe, the code's commit (and whether the tree was dirty),
hardware, the headline (per benchmark the most fragile pair and its sentence, and what the models are:
safetyrepro.results.headline) and the rho_flip table with N+/N-/N0. results/grid_card.md renders the same, opening on the headline.
Two runs of the same config give the same card apart from `created`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pandas as pd

from safetyrepro.analysis.flips import orderings_reached
from safetyrepro.backends import describe_batches
from safetyrepro.results.headline import Headline, headline_markdown
from safetyrepro.results.markdown import budget_line, format_number

if TYPE_CHECKING:
    from safetyrepro.configuration.settings import BackendSettings, Settings

# Packages shown in the Markdown card's short table (all of them are in the JSON and listed below it),
# after this one and each registered backend's (`Backend.packages`; key_packages).
ANALYSIS_PACKAGES = (
    "numpy",
    "pandas",
    "scipy",
    "statsmodels",
    "lightgbm",
    "shap",
    "snakemake",
)


def key_packages() -> tuple[str, ...]:
    """The packages of the Markdown card's short table: this one, the backends', the analyses'."""
    from safetyrepro.backends import registered

    backends = (name for backend in registered().values() for name in backend.packages)
    return tuple(dict.fromkeys(("safetyrepro", *backends, *ANALYSIS_PACKAGES)))


def _axis_values(settings: Settings, cells: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """Per axis, every value the run used, in envelope order, with its tier and parameters."""
    out = {}
    for axis in settings.envelope.axis_names:
        used = set(cells[axis].astype(str))
        out[axis] = {
            value: dict(params) for value, params in settings.envelope.axes[axis].items() if str(value) in used
        }
    return out


def _envelope(settings: Settings, cells: pd.DataFrame) -> dict[str, Any]:
    """A run's envelope: the axis values used, the validity rules, mechanisms, defaults and the envelope itself."""
    envelope = settings.envelope
    return {
        "axes_used": _axis_values(settings, cells),
        "rules": [
            {
                "name": rule.name,
                "if": {k: list(v) for k, v in rule.when.items()},
                "then": {k: list(v) for k, v in rule.then.items()},
            }
            for rule in envelope.rules
        ],
        "tier_rule": "a config is core when every one of its axis values is tagged core, else stress",
        "mechanisms": envelope.mechanisms,
        "defaults": envelope.defaults,
        "source": envelope.source,
    }


def _imported_design(record: Mapping[str, Any], cells: pd.DataFrame) -> dict[str, Any]:
    """Imported results' design: the axis values present (tiers from the mapping files' `stress`)."""
    design = record["run"]["design"]
    stress = {tuple(pair) for pair in design["stress_values"]}
    return {
        "axes_used": {
            axis: {
                value: {"tier": "stress" if (axis, value) in stress else "core"}
                for value in sorted(set(cells[axis].dropna().astype(str)))
            }
            for axis in design["axes"]
        },
        "rules": [],
        "tier_rule": "a config is stress when any of its axis values is listed under `stress` in a mapping file",
        "mechanisms": {},
        "defaults": {},
        "source": None,
    }


def _configs(cells: pd.DataFrame) -> dict[str, dict[str, Any]]:
    out = {}
    for benchmark, frame in cells.groupby("benchmark", sort=False):
        tiers = frame.drop_duplicates("config_id").set_index("config_id")["tier"].sort_index()
        out[benchmark] = {
            "n_configs": len(tiers),
            "n_core": int((tiers == "core").sum()),
            "config_ids": list(tiers.index),
        }
    return out


def _headline(rho: pd.DataFrame, cells: pd.DataFrame) -> dict[str, Any]:
    out = {}
    for benchmark, table in rho.groupby("benchmark", sort=False):
        reached, possible = orderings_reached(cells, benchmark)
        out[benchmark] = {
            "orderings_reached": reached,
            "orderings_possible": possible,
            "pairs": [
                {key: _plain(value) for key, value in row.items() if key != "benchmark"}
                for row in table.to_dict("records")
            ],
        }
    return out


def _plain(value: Any) -> Any:
    """A table's value as standard JSON holds it: a Python scalar, None where it is missing (NaN: a pair that
    shares no items has no interval), so that every JSON reader, provenance-diff's among them, takes the card."""
    value = value.item() if hasattr(value, "item") else value
    return None if isinstance(value, float) and math.isnan(value) else value


def grid_card(
    settings: Settings,
    record: Mapping[str, Any],
    cells: pd.DataFrame,
    rho: pd.DataFrame,
    headline: Headline,
    missing_cells: Sequence[str] = (),
    budget: dict | None = None,
) -> dict:
    """The card as a JSON-ready dict, from the settings, the run record, cells, rho_flip (with rho_flip_sig),
    the run's headline, the cells a partial run lacks (model/benchmark/config_id) and a budgeted run's budget."""
    prompt_formats = cells.groupby("model")["prompt_format"].first().to_dict() if "prompt_format" in cells else {}
    models = {name: {**info, "prompt_format": prompt_formats.get(name)} for name, info in record["models"].items()}
    return {
        "seal": record["seal"],
        "envelope": _envelope(settings, cells) if settings.envelope is not None else _imported_design(record, cells),
        "code": record["code"],
        "run": record["run"],
        "analysis": record["analysis"],
        "precision_probe": record["precision_probe"],
        "configs": _configs(cells),
        "batch_conditions": batch_conditions(cells, settings.backend if settings.envelope is not None else None),
        "missing_cells": list(missing_cells),
        "budget": budget,
        "items": record["items"],
        "models": models,
        "data": record["data"],
        "scorer_files": record.get("scorer_files", {}),  # imports have none
        "packages": record["packages"],
        "server_packages": record.get("server_packages"),
        "seeds": record["seeds"],
        "hardware": record["hardware"],
        "headline": _headline(rho, cells),
        "most_fragile": headline.records(),
        "headline_models": headline.models,
        "scorer_corrected": headline.corrected_records(),
        "created": record["created"],
    }


def batch_conditions(cells: pd.DataFrame, backend: BackendSettings | None) -> list[dict[str, Any]]:
    """Each batch condition the cells ran under (HF batch size, or vLLM with or without batch-invariant
    kernels) with the backend that served them (from the run's `backend` settings; None for imported
    cells, which no backend of this package served) and its number of cells."""
    if "batch_size" not in cells:
        return []
    served = cells["scoring"].map(backend.serving) if backend is not None else None
    keys = cells[["batch_size", "batch_invariant"]].assign(backend=served)[["backend", "batch_size", "batch_invariant"]]
    counts = keys.astype(object).where(keys.notna()).value_counts(dropna=False, sort=False)
    return [
        {
            "backend": None if pd.isna(kind) else kind,
            "batch_size": None if pd.isna(size) else int(size),
            "batch_invariant": bool(invariant),
            "n_cells": int(n),
        }
        for (kind, size, invariant), n in counts.items()
    ]


def _tree_state(dirty: bool | None) -> str:
    return {True: "tracked files had uncommitted changes", False: "a clean tree", None: "no git state"}[dirty]


def _params(params: Mapping[str, Any]) -> str:
    shown = {k: v for k, v in params.items() if k not in ("tier", "text", "logprob_text")}
    texts = [k for k in ("text", "logprob_text") if k in params]
    parts = [f"{k}={json.dumps(v)}" for k, v in shown.items()] + [f"{k}: see JSON" for k in texts]
    return ", ".join(parts) or "-"


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|")


def _run_lines(card: Mapping[str, Any]) -> list[str]:
    """The card's lines on how a run ran its cells."""
    return [
        f"- select_configs: {card['run']['select_configs'] or 'all valid configs'}",
        f"- max_new_tokens_cap: {card['run']['max_new_tokens_cap']}",
        f"- a model's generation_config: {card['run']['generation_config']}",
        f"- vLLM batch-invariant kernels: {'on' if card['run']['backend']['batch_invariant'] else 'off'}",
        f"- HF prefix reuse: {'on' if card['run']['backend']['prefix_reuse'] else 'off'}",
        "- batch conditions (cells): "
        + (
            "; ".join(
                f"{describe_batches(c['backend'], c['batch_size'], c['batch_invariant'])} ({c['n_cells']})"
                for c in card["batch_conditions"]
            )
            or "not recorded"
        ),
        f"- missing cells (partial run): {', '.join(card['missing_cells']) or 'none, the grid is complete'}",
        *_budget_lines(card.get("budget")),
    ]


def _budget_lines(budget: Mapping[str, Any] | None) -> list[str]:
    """The card's lines on a budgeted run: the cells it ran of the grid's, and per benchmark its rounds."""
    if budget is None:
        return ["- budget: none, every cell of the grid ran"]
    return [
        f"- budget: {budget_line(budget)}; rho_flip and score quantiles over the envelope are estimated (estimate.md)",
        *(
            f"  - {name}: {state['configs_run']} of {state['configs']} configs in {state['rounds']} round(s), "
            f"stopped as {state['stopped']}"
            for name, state in budget["benchmarks"].items()
        ),
    ]


def _imported_lines(card: Mapping[str, Any]) -> list[str]:
    """The card's lines on where imported results came from and what could not be mapped."""
    sizes = sorted({c["batch_size"] for c in card["batch_conditions"] if c["batch_size"] is not None})
    return [
        *(
            f"- imported: {source['kind']} results from `{source['path']}`"
            + (f" (mapping `{source['mapping']}`)" if source["mapping"] else "")
            for source in card["run"]["imports"]
        ),
        f"- batch sizes the harnesses recorded: {', '.join(map(str, sizes)) or 'none'}",
        f"- missing cells: {', '.join(card['missing_cells']) or 'none'}",
        *(f"- not mapped: {note}" for note in card["run"]["notes"]),
    ]


def _run_models(card: Mapping[str, Any]) -> list[str]:
    """The run's models and judges (path, precision, revision, file hashes) and data files (hash, pin)."""
    lines = [
        "",
        "## Models",
        "",
        "| model | path | precision | revision | prompt format | files (SHA-256) |",
        "|---|---|---|---|---|---|",
    ]
    judges = card["run"].get("judges", ())
    unseeded = []  # served models whose server gave two texts for one seed
    for name, model in card["models"].items():
        files = "<br>".join(f"{f}: `{h[:16]}…`" for f, h in model.get("files", {}).items()) or (
            f"hub snapshot {model.get('cached_snapshot')}" if model["path"] else "-"
        )
        path = _cell(model["path"])
        if server := model.get("endpoint"):  # a served model: where, under which name, what the server is
            path = _cell(
                f"served: {server['model']} at {server['host']} ({server['api']} API, "
                f"{server['owned_by'] or 'server'} {server['server_version'] or '(version not stated)'}); "
                f"seeds {'honoured' if server['seeds_honoured'] else 'NOT honoured'}"
                + (f"; tokenizer {model['path']}" if model["path"] else "")
            )
            if not server["seeds_honoured"]:
                unseeded.append(name)
        lines.append(
            f"| {name}{' (judge)' if name in judges else ''} | {path} | {model['precision']} | {model.get('revision') or '-'} | "
            f"{model.get('prompt_format') or '-'} | {files} |"
        )
    lines += [
        f"\n{name}'s server did not honour seeds (one sampled request, sent twice, drew two texts): its sampled "
        "cells would draw other texts if asked again; the responses this run kept are what it scored."
        for name in unseeded
    ]
    lines += ["", "## Data files", "", "| file | SHA-256 | matches pin |", "|---|---|---|"]
    lines += [
        f"| {path} | `{info['sha256']}` | {'yes' if info['pinned'] else 'NO'} |" for path, info in card["data"].items()
    ]
    return lines + scorer_file_lines(card)


def scorer_file_lines(card: Mapping[str, Any]) -> list[str]:
    """The files the run's scorers read besides their code (a fitted head), each as shipped or not."""
    if not card["scorer_files"]:
        return []
    lines = ["", "## Files the scorers read", "", "| scorer's file | SHA-256 | as shipped |", "|---|---|---|"]
    for name, info in card["scorer_files"].items():
        shipped = "yes" if info["shipped"] else f"NO: refitted or edited, {_cell(info['path'])}"
        lines.append(f"| {name} | `{info['sha256']}` | {shipped} |")
    return lines


def _imported_models(card: Mapping[str, Any]) -> list[str]:
    """Imported results' models (with the kinds of source they came from) and every file read."""
    lines = ["", "## Models", "", "| model | sources | as the harnesses name it | prompt format |", "|---|---|---|---|"]
    lines += [
        f"| {name} | {', '.join(model['sources'])} | "
        f"{_cell(', '.join(dict.fromkeys(str(h['name']) for h in model['harness'])))} | {model.get('prompt_format')} |"
        for name, model in card["models"].items()
    ]
    lines += ["", "## Imported files", "", "| file | SHA-256 | bytes |", "|---|---|---|"]
    lines += [f"| {_cell(path)} | `{info['sha256']}` | {info['bytes']} |" for path, info in card["data"].items()]
    return lines


def grid_card_markdown(card: Mapping[str, Any]) -> str:
    """The card rendered as Markdown: every section of the JSON, item ids and packages in full."""
    imported = "imports" in card["run"]
    lines = [
        "# GRID card",
        "",
        headline_markdown(
            Headline(
                pd.DataFrame(card["most_fragile"]), card["headline_models"], pd.DataFrame(card["scorer_corrected"])
            )
        ).rstrip("\n"),
        "",
        "## What produced these verdicts",
        "",
        "In enough detail to rerun the exact harness. The JSON twin (grid_card.json) holds the same and "
        + (
            "every imported file, whose hashes make the seal."
            if imported
            else "the full envelope whose SHA-256 is the seal."
        ),
        "",
        f"- **seal** (SHA-256 of {'the imported files' if imported else 'the envelope'}): `{card['seal']}`",
        f"- created: {card['created']}",
        f"- code: safetyrepro {card['code']['version']}, commit {card['code']['commit'] or 'unknown'} "
        f"({_tree_state(card['code']['dirty'])}; {card['code']['source']})",
        *(_imported_lines(card) if imported else _run_lines(card)),
        "",
        "## Axis values used",
        "",
        "| axis | mechanism | value | tier | parameters |",
        "|---|---|---|---|---|",
    ]
    mechanisms, defaults = card["envelope"]["mechanisms"], card["envelope"]["defaults"]
    for axis, values in card["envelope"]["axes_used"].items():
        lines += [
            f"| {axis} | {mechanisms.get(axis, 'built in')} | {value}{' (default)' if defaults.get(axis) == value else ''} "
            f"| {params['tier']} | {_cell(_params(params))} |"
            for value, params in values.items()
        ]
    lines += ["", f"Tiers: {card['envelope']['tier_rule']}.", "", "## Validity rules", ""]
    lines += [
        f"- {rule['name']}: if {json.dumps(rule['if'])} then {json.dumps(rule['then'])}"
        for rule in card["envelope"]["rules"]
    ] or ["(none)"]
    lines += [
        "",
        "## Configs and item subsets",
        "",
        "| benchmark | \\|C\\| | core configs | items | item ids SHA-256 |",
        "|---|---|---|---|---|",
    ]
    for benchmark, configs in card["configs"].items():
        items = card["items"].get(benchmark, {})
        lines.append(
            f"| {benchmark} | {configs['n_configs']} | {configs['n_core']} | {items.get('n_items')} | "
            f"`{items.get('ids_sha256')}` |"
        )
    lines += _imported_models(card) if imported else _run_models(card)
    lines += ["", "## Analysis options", ""]
    lines += [f"- {key}: {json.dumps(value)}" for key, value in card["analysis"].items()]
    lines.append(f"- precision_probe: {json.dumps(card['precision_probe']) if card['precision_probe'] else 'none'}")
    lines += ["", "## Seeds", ""] + [f"- {key}: {value}" for key, value in card["seeds"].items()]
    hardware = card["hardware"] or {"hardware": "not recorded (the harnesses that produced imported results ran it)"}
    lines += ["", "## Hardware", ""] + [f"- {key}: {value}" for key, value in hardware.items()]
    packages = card["packages"]
    lines += ["", "## Packages", "", "| package | version |", "|---|---|"]
    lines += [f"| {name} | {packages[name]} |" for name in key_packages() if name in packages]
    lines += ["", "All installed: " + ", ".join(f"{name}=={version}" for name, version in packages.items())]
    if card.get("server_packages"):  # backend.server_python: the model servers ran in another environment
        served = card["server_packages"]
        lines += [
            "",
            "The model servers ran under backend.server_python, with: "
            + ", ".join(f"{name}=={served[name]}" for name in key_packages() if name in served),
        ]
    lines += [
        "",
        "## rho_flip per model pair",
        "",
        "rho_flip = min(N+, N-) / |C|; N+ (N-) counts configs where A scores strictly above (below) B, N0 the ties. "
        "rho_flip_sig counts only the configs where a paired test over the items finds A (B) better after the "
        "multiple-comparison correction; the interval is rho_flip's over item resamples (analysis rho_flip_sig).",
        "",
    ]
    lines += _rho_flip_lines(card["headline"], card["analysis"]["significance"]["power"])
    lines += ["## Item ids", ""]
    lines += [
        f"- {benchmark} ({items['n_items']}): {', '.join(items['ids'])}" for benchmark, items in card["items"].items()
    ]
    return "\n".join(lines) + "\n"


def _rho_flip_lines(headlines: Mapping[str, Any], power: float) -> list[str]:
    """The Markdown card's rho_flip table of each benchmark (the JSON card's `headline`), n/a where a value is
    missing (null: a pair that shares no items has no interval)."""
    lines = []
    for benchmark, headline in headlines.items():
        lines += [
            f"### {benchmark}",
            "",
            f"Strict orderings of the models reached: {headline['orderings_reached']} of "
            f"{headline['orderings_possible']}.",
            "",
            "| model A | model B | N+ | N- | N0 | \\|C\\| | rho_flip | ceiling | rho_flip interval (items) |"
            " N+sig / N-sig | rho_flip_sig |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        lines += [
            f"| {p['model_a']} | {p['model_b']} | {p['n_plus']} | {p['n_minus']} | {p['n_ties']} | "
            f"{p['n_configs']} | {format_number(p['rho_flip'])} | {format_number(p['ceiling'])} | "
            f"[{format_number(p['rho_flip_lower'])}, {format_number(p['rho_flip_upper'])}] | "
            f"{format_number(p['n_plus_sig'], '.0f')} / {format_number(p['n_minus_sig'], '.0f')} | "
            f"{format_number(p['rho_flip_sig'])} |"
            for p in headline["pairs"]
        ]
        first = headline["pairs"][0] if headline["pairs"] else None
        if first is not None and first["n_items"] is not None:  # the pair shares items (not: scores alone)
            lines += [
                "",
                f"With {first['n_items']:.0f} items, differences under {first['mdd_pp']:.1f} pp cannot be told from "
                f"noise (one two-sided test at alpha {first['alpha']}, power {power}; "
                f"{first['mdd_adjusted_pp']:.1f} pp at alpha / |C|, the level of each config's test under the correction).",
            ]
        lines.append("")
    return lines
