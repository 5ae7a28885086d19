"""The report and disclosure: run record, GRID card, figures, `snakemake --report` in headless Chromium.

The module reads the session's run of the tiny 3-model workflow (tests/conftest.py, `report_run`),
made as `make run` does, with the report made after the run. That a second run of a config gives the
same GRID card and run record is tests/end_to_end/test_faults.py's (a killed and resumed run against the
reference run).
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path

import pandas as pd
import pytest
from helpers.session import REPO
from helpers.synthetic_cells import synthetic_cells, synthetic_items
from helpers.workflow import BENCHMARKS, PROBE, SELECTED

from safetyrepro.analysis.frames import stack_named
from safetyrepro.configuration.build import load_settings
from safetyrepro.results.figures import FIGURES, draw, flipped_configs, save
from safetyrepro.results.headline import COLUMNS, build_headline, headline_html, headline_markdown
from safetyrepro.results.provenance import compare_records, data_files, run_record
from safetyrepro.running.models import describe_model

pytestmark = pytest.mark.e2e

BIN = Path(sys.executable).parent
FIGURE_FILES = {f"{name}_{b}.png" for name in ("rho_heatmap", "scores", "paired_differences") for b in BENCHMARKS} | {
    "orderings.png",
    "anova.png",
    "shap.png",
    "parse_rate.png",
    "stability.png",
    "scorers.png",
}
CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")
# Where the browser test also copies its screenshot (besides the run's results/), when set.
ARTEFACTS_ENV = "SAFETYREPRO_TEST_ARTEFACTS"


@pytest.fixture(scope="module")
def run(report_run) -> Path:
    """The tiny run's folder (its results/ with report.html; tests/conftest.py)."""
    return report_run


def _json(path: Path) -> dict:
    return json.loads(path.read_text())


def test_the_run_writes_every_figure_and_the_report(run, tmp_path):
    """Every figure rule draws its own figure from its own table: each PNG is the one `draw` makes here
    (rules made in a loop once all ran the last figure's command)."""
    assert {p.name for p in (run / "results" / "figures").glob("*.png")} == FIGURE_FILES
    for name, figure in FIGURES.items():
        if figure.budgeted:  # this run has no budget: tests/end_to_end/test_budget_run.py draws it
            continue
        table = pd.read_parquet(run / "results" / figure.table)
        for benchmark in BENCHMARKS if figure.per_benchmark else [None]:
            png = f"{name}_{benchmark}.png" if benchmark else f"{name}.png"
            save(draw(name, table, benchmark), tmp_path / png)
            assert (run / "results" / "figures" / png).read_bytes() == (tmp_path / png).read_bytes(), png
    html = (run / "results" / "report.html").read_text()
    for name in FIGURE_FILES:
        assert f'"filename": "{name}"' in html
    assert "grid_card.md" in html and "SafetyRepro measures" in html


def test_provenance_records_what_the_run_used(run):
    settings = load_settings(run / "config.yaml")
    record = _json(run / "results" / "provenance.json")
    assert record["seal"] == settings.envelope.digest()
    for package in ("safetyrepro", "torch", "transformers", "snakemake", "numpy"):
        assert record["packages"][package] == metadata.version(package)
    for spec in settings.models:
        files = record["models"][spec.name]["files"]
        assert {"config.json", "model.safetensors", "tokenizer.json"} <= set(files)
        assert (
            files["model.safetensors"]
            == hashlib.sha256((Path(spec.path) / "model.safetensors").read_bytes()).hexdigest()
        )
    assert record["data"] and all(info["pinned"] for info in record["data"].values())
    assert {path.split("/")[0] for path in record["data"]} == set(BENCHMARKS)
    items = pd.read_parquet(run / "results" / "items.parquet")
    for benchmark in BENCHMARKS:
        ids = sorted(items.loc[items.benchmark == benchmark, "item_id"].unique())
        assert record["items"][benchmark]["ids"] == ids and record["items"][benchmark]["n_items"] == 4
    assert record["seeds"] == {
        "generation": [0, 1, 2, 3, 4],
        "subset": 3,
        "subsample": 0,
        "bootstrap": 0,
        "significance": 0,
        "shap": 0,
    }
    assert record["hardware"]["torch_device"] == "cpu" and record["hardware"]["cpu_count"] == os.cpu_count()
    git = lambda *args: subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True).stdout.strip()  # noqa: E731
    assert record["code"]["commit"] == git("rev-parse", "HEAD") and record["code"]["dirty"] is bool(
        git("status", "--porcelain")
    )
    assert record["analysis"] == json.loads(json.dumps(settings.analysis.section))  # every option, defaults included
    assert {"parse_threshold", "subsample", "bootstrap", "conservative_core", "shap", "shap_seed"} <= set(
        record["analysis"]
    )


def test_grid_card_discloses_the_harness(run):
    results = run / "results"
    card = _json(results / "grid_card.json")
    # the seal is the SHA-256 of the envelope the card carries: anyone can check it
    assert card["seal"] == hashlib.sha256(json.dumps(card["envelope"]["source"], sort_keys=True).encode()).hexdigest()
    used = {axis: set(values) for axis, values in card["envelope"]["axes_used"].items()}
    assert used == {
        "template": {"T1", "T2", "T3", "T4"},
        "decoding": {"greedy", "t0.3"},
        "shots": {"0", "3", "5"},
        "scoring": {"freeform", "logprob"},
    }
    assert card["envelope"]["axes_used"]["template"]["T4"]["tier"] == "stress"
    assert {rule["name"] for rule in card["envelope"]["rules"]} >= {"logprob_only_under_greedy"}
    assert {b: c["n_configs"] for b, c in card["configs"].items()} == {"toxigen": 5, "bbq": 5}
    assert (
        card["missing_cells"] == [] and "- missing cells (partial run): none" in (results / "grid_card.md").read_text()
    )
    assert {m: (info["precision"], len(info["files"])) for m, info in card["models"].items()} == {
        **{f"tiny-{i}": ("fp32", 5) for i in range(3)},
        **{f"tiny-{i}@bf16": ("bf16", 5) for i in range(3)},  # the precision probe's twins
    }
    assert card["precision_probe"]["twins"] == {f"tiny-{i}": f"tiny-{i}@bf16" for i in range(3)}
    rho = pd.read_parquet(results / "rho_flip.parquet")
    for row in rho.itertuples():
        pairs = card["headline"][row.benchmark]["pairs"]
        match = [p for p in pairs if (p["model_a"], p["model_b"]) == (row.model_a, row.model_b)]
        assert len(match) == 1
        assert (match[0]["n_plus"], match[0]["n_minus"], match[0]["n_ties"], match[0]["rho_flip"]) == (
            row.n_plus,
            row.n_minus,
            row.n_ties,
            row.rho_flip,
        )
    markdown = (results / "grid_card.md").read_text()
    assert card["seal"] in markdown and "### bbq" in markdown and "| model A | model B | N+ | N- | N0 |" in markdown
    first_pair = card["headline"]["bbq"]["pairs"][0]
    assert (
        f"| {first_pair['model_a']} | {first_pair['model_b']} | {first_pair['n_plus']} | {first_pair['n_minus']} | "
        f"{first_pair['n_ties']} |"
    ) in markdown
    assert all(item_id in markdown for item_id in card["items"]["toxigen"]["ids"])
    assert f"torch | {metadata.version('torch')}" in markdown
    assert (
        card["code"] == _json(results / "provenance.json")["code"] and f"commit {card['code']['commit']} (" in markdown
    )
    assert card["analysis"]["bootstrap"]["resamples"] > 0 and "## Analysis options" in markdown
    assert f"- parse_threshold: {card['analysis']['parse_threshold']}" in markdown
    assert card["run"]["backend"]["batch_invariant"] is False and "- vLLM batch-invariant kernels: off" in markdown
    # every cell ran on HF at the backend's batch size, and the card counts them under that condition
    size, n_cells = card["run"]["backend"]["batch_size"], len(pd.read_parquet(results / "cells.parquet"))
    assert card["batch_conditions"] == [
        {"backend": "hf", "batch_size": size, "batch_invariant": False, "n_cells": n_cells}
    ]
    assert f"- batch conditions (cells): HF batch size {size} ({n_cells})" in markdown
    assert "| template | built in | T1 | core |" in markdown
    assert "- a model's generation_config: special-token ids only" in markdown


def test_the_precision_probe_stays_out_of_the_headline(run):
    """The probe's cells are in precision_probe.parquet only; the precision analysis pairs them."""
    results = run / "results"
    cells = pd.read_parquet(results / "cells.parquet")
    probe = pd.read_parquet(results / "precision_probe.parquet")
    assert set(cells["model"]) == {f"tiny-{i}" for i in range(3)} and len(cells) == 3 * 2 * len(SELECTED)
    assert sorted(zip(probe["model"], probe["benchmark"], probe["config_id"])) == sorted(
        (f"tiny-{i}@bf16", b, PROBE["configs"][0]) for i in range(3) for b in BENCHMARKS
    )
    assert len(list((results / "precision_probe").glob("*@bf16/*/*.json"))) == len(probe)  # rule probe_cell's folder
    assert not list((results / "cells").glob("*@*"))
    rho_models = pd.read_parquet(results / "rho_flip.parquet")[["model_a", "model_b"]].stack()
    assert not rho_models.str.contains("@").any()
    table = pd.read_parquet(results / "analysis" / "precision.parquet")
    pairs = table[table["table"] == "pairs"]
    assert len(pairs) == 6 and set(pairs["twin_precision"]) == {"bf16"} and set(pairs["precision"]) == {"fp32"}
    merged = pairs.merge(cells, on=["model", "benchmark", "config_id"]).merge(
        probe.rename(columns={"model": "twin", "score": "twin_score"})[
            ["twin", "benchmark", "config_id", "twin_score"]
        ],
        on=["twin", "benchmark", "config_id"],
    )
    assert merged["diff_pp"].to_numpy() == pytest.approx(((merged["twin_score"] - merged["score"]) * 100).to_numpy())
    pooled = table[(table["table"] == "differences") & (table["benchmark"] == "all")].iloc[0]
    assert pooled["n_cells"] == 6
    assert "Precision probe: over 6 paired cells" in (results / "summary.md").read_text()


def test_compare_records_names_each_changed_input(run, tmp_path, data_dir):
    """Change the seal, a package, a model file, a data file and a seed in turn: each is named."""
    # the effective config of the run (the config file with the schema's defaults filled in)
    settings = load_settings(next((run / ".snakemake" / "safetyrepro").glob("run-config-*.yaml")))
    items = pd.read_parquet(run / "results" / "items.parquet", columns=["benchmark", "item_id"])
    models = [describe_model(spec) for spec in settings.run_models()]  # the precision probe's twins too
    base = run_record(settings, models, items)
    assert compare_records(base, _json(run / "results" / "provenance.json")) == []

    raw = copy.deepcopy(settings.document)
    raw["envelope"] = dict(settings.envelope.source, seeds=[0, 1, 2, 3, 9])
    reseeded = run_record(load_settings(raw), models, items)
    assert {line.split(":")[0] for line in compare_records(base, reseeded)} == {"seal", "seeds.generation"}

    raw = copy.deepcopy(settings.document)
    raw["analysis"]["bootstrap"]["seed"] = 7
    assert {line.split(":")[0] for line in compare_records(base, run_record(load_settings(raw), models, items))} == {
        "analysis.bootstrap.seed",  # every analysis option is on the record
        "seeds.bootstrap",
    }

    model_copy = shutil.copytree(settings.models[0].path, tmp_path / "model")
    config = json.loads((model_copy / "config.json").read_text())
    (model_copy / "config.json").write_text(json.dumps({**config, "rms_norm_eps": 1e-5}))
    changed_model = describe_model(dataclasses.replace(settings.models[0], path=str(model_copy)))
    changed = run_record(settings, [changed_model, *models[1:]], items)
    assert {line.split(":")[0] for line in compare_records(base, changed)} == {
        "models.tiny-0.files.config.json",
        "models.tiny-0.path",
    }

    data_copy = tmp_path / "data"
    shutil.copytree(data_dir / "toxigen", data_copy / "toxigen")
    (data_copy / "bbq").symlink_to(data_dir / "bbq")
    target = data_copy / "toxigen" / "race" / "neutral_asian_sentences.txt"
    target.write_text(target.read_text() + "one more line\n")
    settings.data_dir = data_copy
    lines = compare_records(base["data"], data_files(settings))
    assert [line.split(":")[0] for line in lines] == [
        "toxigen/race/neutral_asian_sentences.txt.pinned",
        "toxigen/race/neutral_asian_sentences.txt.sha256",
    ]

    bumped = json.loads(json.dumps(base))
    bumped["packages"]["numpy"] = "0.0.1"
    assert compare_records(base, bumped) == [f'packages.numpy: "{base["packages"]["numpy"]}" -> "0.0.1"']


def test_provenance_diff_names_what_differs_with_exit_status_1(run, tmp_path):
    """(Two records without a difference exit 0: tests/end_to_end/test_faults.py, a resumed run against the reference.)"""
    card = _json(run / "results" / "grid_card.json")
    card["hardware"]["torch_device"] = "cuda"
    (tmp_path / "card.json").write_text(json.dumps(card))
    differ = subprocess.run(
        [
            str(BIN / "safetyrepro"),
            "provenance-diff",
            str(run / "results" / "grid_card.json"),
            str(tmp_path / "card.json"),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"},
    )
    assert differ.returncode == 1 and differ.stdout.strip() == 'hardware.torch_device: "cpu" -> "cuda"'


def test_every_figure_draws_on_the_full_612_cell_grid(tmp_path):
    """The figures at the paper's size (48 configs, 5 benchmarks) draw; flips are the configs off the modal order."""
    from safetyrepro.analysis import attribution, flips, item_stability, significance, variance, verdicts
    from safetyrepro.analysis.grid_model import estimate_grid, search_space
    from safetyrepro.configuration.settings import SignificanceSettings
    from safetyrepro.core.axes import AXES

    cells = synthetic_cells()
    items = synthetic_items(cells, n_items=40)
    tables = {
        "paired_differences": significance.paired_tests(
            cells, items, SignificanceSettings(alpha=0.05, power=0.8, correction="holm", resamples=200, seed=0)
        ),
        "stability": item_stability.item_stability(cells, items),
        "rho_heatmap": flips.rho_flip_table(cells),
        "rho_estimate": estimate_grid(
            cells[cells["config_id"].isin(cells["config_id"].drop_duplicates().iloc[::4])],
            {b: search_space(frame, AXES) for b, frame in cells.groupby("benchmark")},
            draws=200,
        )[0],
        "scores": cells,
        "parse_rate": cells,
        "orderings": verdicts.variant_summary(
            verdicts.envelope_variants(cells, [("template", "T4"), ("decoding", "t0.7")])
        ),
        "anova": variance.variance_shares(cells),
        "shap": attribution.shap_attribution(cells),
        "scorers": stack_named(
            {
                "human": pd.DataFrame(
                    {
                        "benchmark": ["xstest"] * 4,
                        "labelled_model": ["mistralinstruct", "llama2new"] * 2,
                        "scorer_name": ["rules", "rules", "strmatch", "strmatch"],
                        "three_class": [0.86, 0.89, 0.85, 0.86],
                    }
                ),
                "agreement": pd.DataFrame(
                    {"benchmark": ["xstest"], "scorer_a": ["rules"], "scorer_b": ["strmatch"], "agreement": [0.9]}
                ),
            },
            "table",
        ),
    }
    flat = cells.assign(score=0.5)  # every score equal: no variance to share out, no strict ordering
    degenerate = {"anova": variance.variance_shares(flat), "scores": flat, "rho_heatmap": flips.rho_flip_table(flat)}
    degenerate["scorers"] = pd.DataFrame({"note": ["no scorer axis in this run"]})
    only_pairs = tables["scorers"][tables["scorers"]["table"] == "agreement"].dropna(axis="columns", how="all")
    _assert_text_inside(draw("scorers", only_pairs))  # a run without human labels: no human table
    labelled = tables["scorers"][tables["scorers"]["table"] == "human"]
    two = draw("scorers", pd.concat([tables["scorers"], labelled.assign(benchmark="other")], ignore_index=True))
    files = [f"{b}\n{m}" for b in ("xstest", "other") for m in ("mistralinstruct", "llama2new")]
    assert [tick.get_text() for tick in two.axes[0].get_xticklabels()] == files  # two benchmarks' labelled files
    _assert_text_inside(two)
    _assert_text_inside(draw("scorers", pd.DataFrame(columns=["table"])))  # nothing labelled twice
    for name, figure in FIGURES.items():
        benchmark = "bbq" if figure.per_benchmark else None
        for table in (tables[name], degenerate.get(name)):
            if table is not None:
                _assert_text_inside(draw(name, table, benchmark))
        fig = draw(name, tables[name], benchmark)
        assert fig.get_size_inches()[0] >= 6
        save(fig, tmp_path / f"{name}.png")
        assert (tmp_path / f"{name}.png").stat().st_size > 10_000
    wide = draw("scores", cells, "bbq")
    assert wide.get_size_inches()[0] > draw("scores", cells, "crows_pairs").get_size_inches()[0]
    # red configs: the minority side of some pair; as many per pair as rho_flip counts (more when N+ = N-)
    flipped = flipped_configs(cells, "bbq")
    matrix = flips.score_matrix(cells, "bbq")
    for row in tables["rho_heatmap"].query("benchmark == 'bbq'").itertuples():
        diff = matrix[row.model_a] - matrix[row.model_b]
        minority = diff < 0 if row.n_plus > row.n_minus else diff > 0 if row.n_minus > row.n_plus else diff != 0
        assert set(matrix.index[minority]) <= flipped
        assert minority.sum() == min(row.n_plus, row.n_minus) or row.n_plus == row.n_minus
    assert flipped_configs(flat, "bbq") == set()
    with pytest.raises(ValueError, match="needs --benchmark"):
        draw("scores", cells)


def _assert_text_inside(fig) -> None:
    """Everything a drawn figure shows (titles, labels, tick labels, legend) lies inside the figure."""
    fig.canvas.draw()
    drawn = fig.get_tightbbox(fig.canvas.get_renderer())  # inches, the drawn artists only
    width, height = fig.get_size_inches()
    assert drawn.x0 >= -0.01 and drawn.y0 >= -0.01 and drawn.x1 <= width + 0.01 and drawn.y1 <= height + 0.01, (
        drawn,
        width,
        height,
    )


def test_figure_text_does_not_overlap(tmp_path):
    """Drawn, no two tick labels overlap and every title stays inside the figure: on the 48-config
    score plot, a 5-config one (narrow, long title) and the heat map."""
    from safetyrepro.analysis import flips

    cells = synthetic_cells()
    few = cells[cells.config_id.isin(sorted(cells.config_id.unique())[:5])]
    figures = (
        draw("scores", cells, "bbq"),
        draw("scores", few, "bbq"),
        draw("rho_heatmap", flips.rho_flip_table(cells), "bbq"),
    )
    for fig in figures:
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        page = fig.bbox
        ax = fig.axes[0]
        for labels in (ax.get_xticklabels(), ax.get_yticklabels()):
            boxes = [label.get_window_extent(renderer) for label in labels if label.get_text()]
            assert not [(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1 :] if a.overlaps(b)]
        title = ax.title.get_window_extent(renderer)
        assert page.x0 <= title.x0 and title.x1 <= page.x1 and title.y1 <= page.y1, ax.title.get_text()


def _browser():
    """Headless Debian Chromium through chromedriver, with a fresh profile."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tempfile.mkdtemp(prefix='chromium-profile-')}",
        "--window-size=1600,1000",
    ):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


SHOWN_IMAGE = """
const path = arguments[0];
const image = Array.from(document.querySelectorAll('img')).find(img => img.src === results[path].data_uri);
return image ? {complete: image.complete, width: image.naturalWidth, height: image.naturalHeight,
                shown: image.getBoundingClientRect().width} : null;
"""


@pytest.mark.skipif(
    not (CHROMIUM and CHROMEDRIVER) and not os.environ.get("CI"),
    reason="chromium and chromium-driver are not installed (CI installs them; with CI set this fails)",
)
def test_report_renders_every_figure_in_headless_chromium(run):
    from selenium.common.exceptions import ElementClickInterceptedException, StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    assert CHROMIUM and CHROMEDRIVER, "chromium and chromium-driver must be installed in CI (see .ci/run)"
    results_dir = run / "results"
    browser = _browser()
    try:
        browser.get((results_dir / "report.html").as_uri())
        wait = WebDriverWait(browser, 30)
        # a button redrawn under the click, or one another element still covers as the table is laid out
        # afresh (once in a whole `make test` on the 2-core machine), is clicked again on the next poll
        retried = [StaleElementReferenceException, ElementClickInterceptedException]
        clicks = WebDriverWait(browser, 30, poll_frequency=1, ignored_exceptions=retried)
        wait.until(
            lambda b: b.execute_script(
                "return typeof app === 'object' && document.querySelector('#loading-screen').style.display === 'none'"
            )
        )
        images = browser.execute_script(
            "return Object.keys(results).filter(p => results[p].data_uri.startsWith('data:image/png'))"
        )
        assert {Path(p).name for p in images} == FIGURE_FILES
        categories = browser.execute_script("return categories")
        shown = {}
        for category, subcategories in categories.items():
            for subcategory, paths in subcategories.items():
                if not set(paths) & set(images):
                    continue  # the GRID card: a download link, not a figure
                # back to the menu (so the result list is drawn afresh), open the category, then press
                # each result's eye button as a reader would
                browser.execute_script("app.setView({navbarMode: 'menu'})")
                wait.until(lambda b: not b.find_elements(By.CSS_SELECTOR, "nav table a[iconname='eye']"))
                browser.execute_script(
                    "app.setView({navbarMode: 'subcategory', category: arguments[0], subcategory: arguments[1]})",
                    category,
                    subcategory,
                )
                buttons = wait.until(lambda b: b.find_elements(By.CSS_SELECTOR, "nav table a[iconname='eye']"))
                assert len(buttons) == len(paths)
                for index in range(len(paths)):
                    before = browser.execute_script("return app.state.resultPath")
                    # click until the shown result changes: a click on a table still being re-rendered is lost
                    path = clicks.until(
                        lambda b, index=index, before=before: _click_eye(b, index, before),
                        f"pressing result {index}'s eye button never showed another result",
                    )
                    assert path in paths
                    state = wait.until(
                        lambda b, path=path: (lambda s: s if s and s["complete"] and s["width"] > 0 else None)(
                            b.execute_script(SHOWN_IMAGE, path)
                        )
                    )
                    assert state["height"] > 0 and state["shown"] > 0, (path, state)
                    shown[path] = state
        assert set(shown) == set(images)
        # keep one screenshot: the score plot of BBQ, where flips show as crossing lines
        target = next(p for p in images if p.endswith("scores_bbq.png"))
        browser.execute_script("app.setView({navbarMode: 'menu'})")
        wait.until(lambda b: not b.find_elements(By.CSS_SELECTOR, "nav table a[iconname='eye']"))
        category = FIGURES["scores"].category
        browser.execute_script(
            f"app.setView({{navbarMode: 'subcategory', category: '{category}', subcategory: 'bbq'}})"
        )
        clicks.until(
            lambda b: any(
                button.click() is None for button in b.find_elements(By.CSS_SELECTOR, "nav table a[iconname='eye']")[:1]
            ),
            "the first eye button of BBQ's scores could not be pressed",
        )
        wait.until(lambda b: (b.execute_script(SHOWN_IMAGE, target) or {}).get("complete"))
        screenshot = results_dir / "report_screenshot.png"
        assert browser.save_screenshot(str(screenshot))
    finally:
        browser.quit()
    assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    if os.environ.get(ARTEFACTS_ENV):
        Path(os.environ[ARTEFACTS_ENV]).mkdir(parents=True, exist_ok=True)
        shutil.copy(screenshot, Path(os.environ[ARTEFACTS_ENV]) / "report_screenshot.png")


def _headline(results: Path):
    """The headline of a run, from its rho_flip_sig, tiers, parse_clean and scorer_correction tables, cells and
    config."""
    analysis, settings = results / "analysis", load_settings(results.parent / "config.yaml")
    names = ("rho_flip_sig", "tiers", "parse_clean", "scorer_correction")
    tables = (pd.read_parquet(analysis / f"{name}.parquet") for name in names)
    cells = pd.read_parquet(results / "cells.parquet")
    return build_headline(*tables, cells, settings.models, settings.analysis.parse_threshold)


def test_summary_and_grid_card_open_on_the_headline_and_the_run_checked_it(run):
    results = run / "results"
    headline = _headline(results)
    rows = headline.rows
    assert set(rows["benchmark"]) == set(BENCHMARKS)
    markdown = headline_markdown(headline)
    assert (results / "summary.md").read_text().startswith("# Summary\n\n" + markdown)
    assert (results / "grid_card.md").read_text().startswith("# GRID card\n\n" + markdown)
    assert (results / "headline.html").read_text() == headline_html(headline)
    card = _json(results / "grid_card.json")
    assert [row["sentence"] for row in card["most_fragile"]] == list(rows["sentence"])
    assert "matches its tables" in (results / "headline_check.txt").read_text()


@pytest.mark.skipif(
    not (CHROMIUM and CHROMEDRIVER) and not os.environ.get("CI"),
    reason="chromium and chromium-driver are not installed (CI installs them; with CI set this fails)",
)
def test_report_opens_on_the_headline_in_headless_chromium(run):
    """At 1400 x 1000, with no click, the report shows the headline table whole; the job graph is below it."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    assert CHROMIUM and CHROMEDRIVER, "chromium and chromium-driver must be installed in CI (see .ci/run)"
    results_dir = run / "results"
    rows = _headline(results_dir).rows
    browser = _browser()
    try:
        metrics = {"width": 1400, "height": 1000, "deviceScaleFactor": 1, "mobile": False}
        browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)
        browser.get((results_dir / "report.html").as_uri())
        WebDriverWait(browser, 30).until(
            lambda b: b.execute_script(
                "return typeof app === 'object' && document.querySelector('#loading-screen').style.display === 'none'"
                " && document.querySelector('#headline-table') !== null"
            )
        )
        screenshot = results_dir / "report_first_screen.png"
        assert browser.save_screenshot(str(screenshot))
        assert browser.execute_script("return [window.innerWidth, window.innerHeight]") == [1400, 1000]
        table = browser.find_element(By.ID, "headline-table")
        box = browser.execute_script("return arguments[0].getBoundingClientRect().toJSON()", table)
        assert table.is_displayed() and box["width"] > 0 and box["height"] > 0
        assert 0 <= box["left"] and box["right"] <= 1400 and 0 <= box["top"] and box["bottom"] <= 1000, box
        shown = [
            [cell.text for cell in row.find_elements(By.TAG_NAME, "td")]
            for row in table.find_elements(By.CSS_SELECTOR, "tbody tr")
        ]
        assert shown == [[cell(record) for _, cell in COLUMNS] for record in rows.to_dict("records")]
        sentences = [item.text for item in browser.find_elements(By.CSS_SELECTOR, "#headline-sentences li")]
        assert sentences == list(rows["sentence"])
        graph = browser.execute_script("return document.querySelector('#rulegraph').getBoundingClientRect().top")
        assert graph >= 1000  # the job graph is off the first screen
    finally:
        browser.quit()
    assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert struct.unpack(">II", screenshot.read_bytes()[16:24]) == (1400, 1000)  # the PNG's IHDR width, height
    if os.environ.get(ARTEFACTS_ENV):
        Path(os.environ[ARTEFACTS_ENV]).mkdir(parents=True, exist_ok=True)
        shutil.copy(screenshot, Path(os.environ[ARTEFACTS_ENV]) / "report_first_screen.png")


def _click_eye(browser, index: int, before: str | None) -> str | None:
    """The shown result's path once it differs from `before`; until then, click result `index`'s eye button."""
    from selenium.webdriver.common.by import By

    path = browser.execute_script("return app.state.resultPath")
    if path != before:
        return path
    browser.find_elements(By.CSS_SELECTOR, "nav table a[iconname='eye']")[index].click()
    return None


def test_rho_flip_sig_stands_beside_rho_flip_in_the_summary_and_the_grid_card(run):
    results = run / "results"
    rho = pd.read_parquet(results / "rho_flip.parquet")
    sig = pd.read_parquet(results / "analysis" / "rho_flip_sig.parquet")
    keys = ["benchmark", "model_a", "model_b", "n_plus", "n_minus", "n_configs", "rho_flip"]
    pd.testing.assert_frame_equal(sig[keys], rho[keys])  # the same raw counts: one "A beats B" function
    assert (sig["rho_flip_sig"] <= sig["rho_flip"]).all() and (sig["n_plus_sig"] <= sig["n_plus"]).all()
    summary = (results / "summary.md").read_text()
    assert "## Verdicts against item noise" in summary
    for row in sig.itertuples():
        assert (
            f"| {row.benchmark} | {row.model_a} vs {row.model_b} | {row.rho_flip:.3f} ({row.n_plus} / {row.n_minus}) |"
            in summary
        )
    tests = pd.read_parquet(results / "analysis" / "paired_tests.parquet")
    assert len(tests) == len(sig) * len(SELECTED) and set(tests["test"]) <= {"mcnemar_exact", "paired_bootstrap"}
    card = _json(results / "grid_card.json")
    first = next(iter(BENCHMARKS))
    pairs = card["headline"][first]["pairs"]
    assert {p["rho_flip_sig"] for p in pairs} == set(sig.loc[sig["benchmark"] == first, "rho_flip_sig"])
    n_items = int(sig["n_items"].iloc[0])
    assert (
        f"With {n_items} items, differences under {sig['mdd_pp'].iloc[0]:.1f} pp cannot be told from noise"
        in (results / "grid_card.md").read_text()
    )
