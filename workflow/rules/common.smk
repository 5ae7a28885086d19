# Shared setup: the checked settings, the cell list, and per-cell parameters.
import sys
from pathlib import Path

from safetyrepro.benchmarks import DataError
from safetyrepro.config import ConfigError, load_settings
from safetyrepro.fetch import MANIFEST
from safetyrepro.scoring import cell_fingerprint, check_item_sets
from safetyrepro.server import stop_servers
from safetyrepro.tables import write_text
import yaml

# Every input problem (config, data, model paths, subset sizes) stops the run here, before any job.
try:
    SETTINGS = load_settings(config)
    check_item_sets(SETTINGS)
except (ConfigError, DataError) as error:
    sys.exit(f"safetyrepro: error: {error}")
PARTIAL = bool(config.get("partial_results", False))

RESULTS = str(SETTINGS.results_dir)
CELLS = [(m.name, b, c.config_id) for m, b, c in SETTINGS.cells()]
MODELS = {m.name: m for m in SETTINGS.models}

# The effective config (config files plus --config overrides) for the jobs' command lines. Its
# path is fixed and it is no input, so only the per-cell fingerprint decides what reruns.
RUN_CONFIG = Path(".snakemake/safetyrepro/run_config.yaml")
_effective = yaml.safe_dump(dict(config), sort_keys=True)
if not RUN_CONFIG.is_file() or RUN_CONFIG.read_text() != _effective:
    write_text(_effective, RUN_CONFIG)


wildcard_constraints:
    model="|".join(MODELS),
    benchmark="|".join(SETTINGS.benchmarks),
    config_id=r"[A-Za-z0-9.]+-[A-Za-z0-9.]+-[A-Za-z0-9.]+shot-(freeform|logprob)",


def cell_paths(kind):
    """Output paths of every cell: kind is 'items' (Parquet) or 'summary' (JSON)."""
    suffix = "parquet" if kind == "items" else "json"
    return [f"{RESULTS}/cells/{m}/{b}/{c}.{suffix}" for m, b, c in CELLS]


def data_files(benchmark):
    """The benchmark's data files (never fetched during a run: `safetyrepro fetch-data` does that)."""
    return [str(SETTINGS.data_dir / entry.path) for entry in MANIFEST if entry.path.split("/")[0] == benchmark]


def finished_cell_paths(kind):
    """Output paths of the cells to aggregate: all of them, or in a partial run those already finished."""
    if not PARTIAL:
        return cell_paths(kind)
    pairs = zip(cell_paths("items"), cell_paths("summary"))
    done = [(rows, summary) for rows, summary in pairs if Path(rows).is_file() and Path(summary).is_file()]
    return [rows if kind == "items" else summary for rows, summary in done]


def model_input(wildcards):
    """An embedded model's built directory; nothing for hub ids and local models."""
    spec = MODELS[wildcards.model]
    return [spec.path] if spec.embedded else []


def uses_gpu(wildcards):
    """1 when the cells of this model need the accelerator."""
    return int(SETTINGS.backend.get("device", "auto") == "cuda")
