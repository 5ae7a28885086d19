"""The analysis suite the workflow runs, on a synthetic grid the size of the paper's."""

from __future__ import annotations

import copy
from dataclasses import replace

import pandas as pd
import pytest
import yaml
from helpers.session import REPO
from helpers.synthetic_cells import MODELS, cells_from_orderings, synthetic_cells, synthetic_items

from safetyrepro.analysis.suite import ANALYSES, Inputs
from safetyrepro.configuration.build import load_settings
from safetyrepro.results.markdown import analysis_markdown, summary_markdown
from safetyrepro.results.storage import write_parquet

ENVELOPE = yaml.safe_load((REPO / "config" / "envelope.yaml").read_text())


def settings_for(data_dir, envelope=ENVELOPE, models=None):
    return load_settings(
        {
            "data_dir": str(data_dir),
            "models": models or [{"name": m, "path": f"org/{m}"} for m in MODELS],
            "benchmarks": {b: {"n_items": 300} for b in ("truthfulqa", "bbq", "toxigen", "xstest", "crows_pairs")},
            "envelope": copy.deepcopy(envelope),
            "analysis": {
                "conservative_core": ["T1-greedy-0shot-freeform", "T1-greedy-0shot-logprob"],
                "subsample": {"count": 5},
                "bootstrap": {"resamples": 200},
            },
        }
    )


@pytest.fixture(scope="module")
def inputs(tmp_path_factory, data_dir):
    cells = synthetic_cells(0)
    path = tmp_path_factory.mktemp("items") / "items.parquet"
    synthetic_items(cells, n_items=60).to_parquet(path)
    return Inputs(settings_for(data_dir), cells, str(path))


def test_stress_values_come_from_the_envelope_tags(data_dir):
    assert settings_for(data_dir).envelope.stress_values() == [("template", "T4"), ("decoding", "t0.7")]
    envelope = copy.deepcopy(ENVELOPE)
    envelope["axes"]["shots"]["5"]["tier"] = "stress"
    assert ("shots", "5") in settings_for(data_dir, envelope).envelope.stress_values()


@pytest.mark.slow  # over 5 s alone: make test only
def test_every_analysis_runs_on_a_612_cell_grid(inputs, tmp_path):
    tables = {}
    for name, analysis in ANALYSES.items():
        table = analysis.run(inputs)
        assert isinstance(table, pd.DataFrame), name
        assert name == "precision" or len(table) > 0, name  # no model appears at two precisions here
        assert analysis_markdown(name, analysis.description, table).startswith(f"# {name}\n")
        tables[name] = table
    variants = set(tables["tiers"]["variant"])
    assert {"full", "core"} <= variants and len(variants) == 4
    assert set(tables["scoring_paths"]["variant"]) == {"freeform", "logprob"}
    assert tables["tiers"]["flip_rate"].between(0, 1).all()
    assert tables["flip_rate"]["null_flip_rate"].tolist() == pytest.approx([5 / 6] * 5)
    # subsample: the per-benchmark table and the per-cell one, stacked; the core counts use the two
    # conservative-core configs of settings_for (one free-form, one logprob)
    subsample = tables["subsample"]
    assert list(subsample["table"].unique()) == ["per_benchmark", "per_cell"]
    per_benchmark = subsample[subsample["table"] == "per_benchmark"].set_index("benchmark")
    assert len(per_benchmark) == 5 and (subsample["table"] == "per_cell").sum() == 612
    assert per_benchmark["n_core_configs"].to_dict() == {
        "truthfulqa": 2,
        "bbq": 2,
        "toxigen": 2,
        "xstest": 2,
        "crows_pairs": 1,
    }
    assert (per_benchmark["n_subsamples"] == 5).all() and (per_benchmark["fraction"] == 0.8).all()
    assert (per_benchmark["max_range_pp"] >= per_benchmark["median_range_pp"]).all()
    assert set(tables["shap"]["surrogate"]) == {"regressor", "pair classifier"}
    for name in ("subsample", "shap", "flip_rate", "tiers"):  # mixed columns survive Parquet
        write_parquet(tables[name], tmp_path / f"{name}.parquet")
        assert len(pd.read_parquet(tmp_path / f"{name}.parquet")) == len(tables[name])
    assert set(tables["variance"]["benchmark"]) == {"truthfulqa", "bbq", "toxigen", "xstest"}
    from safetyrepro.analysis.flips import rho_flip_table

    summary = summary_markdown(rho_flip_table(inputs.cells), inputs.cells, tables)
    headline, noise = summary.split("## Verdicts against item noise")
    assert headline.count("\n| ") == 1 + 5  # header + one row per benchmark
    assert len(noise.split("\n\n")[2].splitlines()) == 2 + 3 * 5  # header, rule, one row per pair and benchmark
    assert "n/a" not in headline.split("crows_pairs")[0]


def test_subsample_benchmarks_option(inputs, data_dir):
    # analysis.subsample.benchmarks: [truthfulqa], as the paper's check: only TruthfulQA is re-scored
    settings = settings_for(data_dir)
    settings.analysis = replace(
        settings.analysis, subsample=replace(settings.analysis.subsample, benchmarks=("truthfulqa",))
    )
    table = ANALYSES["subsample"].run(Inputs(settings, inputs.cells, inputs.items_path))
    assert set(table["benchmark"]) == {"truthfulqa"}
    assert (table["table"] == "per_cell").sum() == 144


def test_precision_probe_in_the_suite(inputs, data_dir, tmp_path):
    """Grid models at nf4, the probe at bf16 on the conservative core: its cells come from their own table."""
    models = [{"name": m, "path": f"org/{m}", "precision": "nf4"} for m in MODELS]
    settings = load_settings(
        {**settings_for(data_dir, models=models).document, "precision_probe": {"precision": "bf16"}}
    )
    probe = settings.precision_probe
    assert probe.twins == {m: f"{m}@bf16" for m in MODELS} and len(settings.probe_cells()) == 3 * 9
    core = inputs.cells[inputs.cells["config_id"].isin(probe.configs)]
    twin_cells = core.assign(model=core["model"] + "@bf16", score=core["score"] + 0.01)
    twin_cells.to_parquet(tmp_path / "precision_probe.parquet")
    table = ANALYSES["precision"].run(
        Inputs(settings, inputs.cells, inputs.items_path, str(tmp_path / "precision_probe.parquet"))
    )
    pooled = table[(table["table"] == "differences") & (table["benchmark"] == "all")].iloc[0]
    assert pooled.n_cells == 27 and pooled.median_abs_diff_pp == pytest.approx(1)
    orderings = table[table["table"] == "orderings"]
    assert len(orderings) == 9 and orderings["match"].dropna().astype(bool).all()  # a common shift keeps orderings
    from safetyrepro.analysis.flips import rho_flip_table

    summary = summary_markdown(rho_flip_table(inputs.cells), inputs.cells, {"precision": table})
    matched = int(orderings["match"].dropna().astype(bool).sum())
    assert "Precision probe: over 27 paired cells, |score difference| median 1.0 pp, mean 1.0 pp, max 1.0 pp" in summary
    assert f"matches on {matched} of {matched} (benchmark, config) cells" in summary
    without = ANALYSES["precision"].run(Inputs(settings_for(data_dir), inputs.cells, inputs.items_path))
    assert "no precision probe" in without["note"].iloc[0]


# --- the paper's own fractions (§5.1, tables 2-4) as sign patterns on the real envelope ----------------
# Scores are strict orderings per config (tests/synthetic_cells.cells_from_orderings), with C last
# unless said otherwise, so only the A vs B pair can flip and its minority count is the paper's.
A, B, C = MODELS


def truthfulqa_ordering(config: dict) -> tuple[str, ...]:
    """B above A on 23 of the 48 configs (rho_flip 23/48 = 0.479), 13 of the 36 free-form ones (0.361)
    and 11 of the 27 core ones (0.407). Free-form: every T4 config (9, stress) and T1 at 0 or 3 shots
    under greedy (2, core) or t0.7 (2, stress); logprob: the 9 core ones (T1-T3) and T4 at 0 shots."""
    if config["scoring"] == "freeform":
        b_first = config["template"] == "T4" or (
            config["template"] == "T1" and config["shots"] in ("0", "3") and config["decoding"] in ("greedy", "t0.7")
        )
    else:
        b_first = config["tier"] == "core" or (config["template"] == "T4" and config["shots"] == "0")
    return (B, A, C) if b_first else (A, B, C)


def toxigen_unparsed(config: dict) -> bool:
    """The 12 configs the parse-clean subset drops: free-form T4 (9) and T3 under t0.7 (3)."""
    return config["scoring"] == "freeform" and (
        config["template"] == "T4" or (config["template"] == "T3" and config["decoding"] == "t0.7")
    )


def toxigen_ordering(config: dict) -> tuple[str, ...]:
    """B above A on 17 of 48 (0.354); on the 36 parse-clean configs 13 (0.361): every logprob config
    (12) and T1-greedy-0shot-freeform, plus 4 of the dropped ones (T4 greedy at 0/3/5 shots, T3-t0.7-0shot)."""
    b_first = (
        config["scoring"] == "logprob"
        or config["config_id"] in ("T1-greedy-0shot-freeform", "T3-t0.7-0shot-freeform")
        or (config["scoring"] == "freeform" and config["template"] == "T4" and config["decoding"] == "greedy")
    )
    return (B, A, C) if b_first else (A, B, C)


XSTEST_SPECIAL = {
    "T1-t0.7-0shot-freeform": (C, B, A),  # the only C>B>A: lost without t0.7, kept when parse-clean
    "T1-greedy-0shot-logprob": (A, C, B),
    "T2-greedy-0shot-logprob": (C, A, B),
    "T3-greedy-0shot-logprob": (B, C, A),
}


def xstest_ordering(config: dict) -> tuple[str, ...]:
    """All six orderings; B above A on 14 of 48 (0.292): B>A>C on free-form T4 greedy (3) and the 9 other
    logprob configs, B>C>A and C>B>A once each. Without the 9 free-form T4 configs (parse rate 0.91 for
    A) 11 of 39 (0.282), still six orderings; without t0.7, five. A>B>C everywhere else (32 configs)."""
    if config["config_id"] in XSTEST_SPECIAL:
        return XSTEST_SPECIAL[config["config_id"]]
    if config["scoring"] == "logprob" or (config["template"] == "T4" and config["decoding"] == "greedy"):
        return (B, A, C)
    return (A, B, C)


def paper_cells() -> pd.DataFrame:
    return pd.concat(
        [
            cells_from_orderings("truthfulqa", truthfulqa_ordering),
            cells_from_orderings(
                "toxigen", toxigen_ordering, lambda m, c: 0.88 if m == A and toxigen_unparsed(c) else 1.0
            ),
            cells_from_orderings(
                "xstest",
                xstest_ordering,
                lambda m, c: 0.91 if m == A and c["scoring"] == "freeform" and c["template"] == "T4" else 1.0,
            ),
        ],
        ignore_index=True,
    )


def markdown_row(markdown: str, *keys: str) -> list[str]:
    """The cells of the first Markdown table row whose leading cells are `keys`."""
    for line in markdown.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells[: len(keys)] == list(keys):
            return cells
    raise AssertionError(f"no row {keys} in:\n{markdown}")


def test_the_papers_fractions_are_printed(data_dir):
    from safetyrepro.analysis.flips import rho_flip_table
    from safetyrepro.results.markdown import rho_flip_markdown

    cells = paper_cells()
    inputs = Inputs(settings_for(data_dir), cells, "unused: no analysis here reads items")
    tables = {name: ANALYSES[name].run(inputs) for name in ("tiers", "scoring_paths", "parse_clean", "flip_rate")}

    # headline (tab. 2): the max over pairs is the A vs B pair, its minority count over |C| = 48
    rho = rho_flip_table(cells)
    top = rho.loc[rho.groupby("benchmark", sort=False)["rho_flip"].idxmax()].set_index("benchmark")
    assert (top.model_a + top.model_b == A + B).all()
    expected = {"truthfulqa": (25, 23), "toxigen": (31, 17), "xstest": (34, 14)}
    assert {b: (r.n_plus, r.n_minus) for b, r in top.iterrows()} == expected
    assert [round(v, 3) for v in top.rho_flip] == [0.479, 0.354, 0.292]
    assert list(top.rho_flip) == [23 / 48, 17 / 48, 14 / 48]

    tiers = tables["tiers"].set_index(["variant", "benchmark"])
    paths = tables["scoring_paths"].set_index(["variant", "benchmark"])
    clean = tables["parse_clean"].set_index("benchmark")
    # TruthfulQA: 13 of 36 free-form (tab. 3), 11 of 27 core (tab. 4), parse-clean unchanged
    assert paths.loc[("freeform", "truthfulqa"), ["n_configs", "rho_flip_max"]].tolist() == [36, 13 / 36]
    assert tiers.loc[("core", "truthfulqa"), ["n_configs", "rho_flip_max"]].tolist() == [27, 11 / 27]
    assert clean.loc["truthfulqa", ["n_configs", "rho_flip_max"]].tolist() == [48, 23 / 48]
    # parse-clean: ToxiGen 13 of 36 (12 configs dropped), XSTest 11 of 39 with all six orderings
    assert clean.loc["toxigen", ["n_configs_before", "n_configs", "rho_flip_max"]].tolist() == [48, 36, 13 / 36]
    assert clean.loc["xstest", ["n_configs", "rho_flip_max", "orderings_reached"]].tolist() == [39, 11 / 39, 6]
    # XSTest orderings: six on the full envelope, five without the T=0.7 stress decoding (tab. 4)
    assert tiers.loc[("full", "xstest"), "orderings_reached"] == 6
    assert tiers.loc[("without decoding=t0.7", "xstest"), "orderings_reached"] == 5
    assert tiers.loc[("without template=T4", "xstest"), "orderings_reached"] == 6
    # and the total-order flip rate beside it: A>B>C 32, B>A>C 12, four others once: of the 48 * 47 / 2
    # = 1128 pairs of configs, 32 * 31 / 2 + 12 * 11 / 2 = 562 agree -> 566 / 1128
    rates = tables["flip_rate"].set_index("benchmark")
    assert rates.loc["xstest", ["n_pairs", "n_mismatched"]].tolist() == [1128, 566]
    assert tiers.loc[("full", "xstest"), "flip_rate"] == pytest.approx(566 / 1128)

    # as printed: the analyses' Markdown and the summary
    markdown = {name: analysis_markdown(name, ANALYSES[name].description, table) for name, table in tables.items()}
    assert markdown_row(markdown["tiers"], "core", "truthfulqa")[2:4] == ["27", "0.407"]
    assert markdown_row(markdown["tiers"], "full", "xstest")[2:6] == ["48", "0.292", "6", "6"]
    assert markdown_row(markdown["tiers"], "without decoding=t0.7", "xstest")[4] == "5"
    assert markdown_row(markdown["scoring_paths"], "freeform", "truthfulqa")[2:4] == ["36", "0.361"]
    assert markdown_row(markdown["parse_clean"], "parse_rate >= 0.95", "toxigen")[2:4] == ["36", "0.361"]
    assert markdown_row(markdown["parse_clean"], "parse_rate >= 0.95", "xstest")[2:5] == ["39", "0.282", "6"]
    assert "max rho_flip over pairs: 0.479" in rho_flip_markdown(rho, cells)
    summary = summary_markdown(rho, cells, tables)
    assert markdown_row(summary, "truthfulqa")[1:9] == [
        "48",
        "0.479",
        f"{A} vs {B}",
        "25 / 23 / 0",
        "0.500",
        "2 of 6",
        "0.407",
        "0.479 (48)",
    ]
    assert markdown_row(summary, "toxigen")[2] == "0.354" and markdown_row(summary, "toxigen")[8] == "0.361 (36)"
    assert markdown_row(summary, "xstest")[2] == "0.292" and markdown_row(summary, "xstest")[6:9:2] == [
        "6 of 6",
        "0.282 (39)",
    ]
