"""The run record (results/provenance.json): everything a rerun must match to reproduce a run.

It holds the envelope's hash (the seal), the version of every installed package, what each model
pointed at (file hashes of a local directory, or hub id and revision), the SHA-256 of every data
file read, the evaluated item ids, every random seed, every analysis option, the code's version and
git commit (and whether the tree was dirty) and the hardware. `compare_records` names what
differs between two records, so a rerun with any of these changed is detectable.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import subprocess
import sys
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from safetyrepro import __version__
from safetyrepro.benchmarks import BENCHMARKS
from safetyrepro.running.data import manifest
from safetyrepro.running.hashing import file_sha256
from safetyrepro.scorers import scorer_of

if TYPE_CHECKING:
    from safetyrepro.configuration.settings import Settings

# What of a model's own generation_config applies (safetyrepro.backends.hf, .vllm): its sampling
# defaults never do, on any backend.
GENERATION_CONFIG = (
    "special-token ids only: the envelope's decoding settings are the whole truth (vLLM generation_config='vllm')"
)
# Keys whose values are expected to differ between two runs of the same config.
VOLATILE_KEYS = ("created",)


def package_versions() -> dict[str, str]:
    """Name -> version of every distribution installed in this environment (names normalised)."""
    versions = {}
    for dist in metadata.distributions():
        fields = dist.metadata  # parsed anew on each access (`dist.version` too): once here, in every Snakemake start
        if fields["Name"]:
            versions[fields["Name"].lower().replace("_", "-")] = fields["Version"]
    return dict(sorted(versions.items()))


def server_package_versions(settings: Settings) -> dict[str, str] | None:
    """`package_versions` of the environment the model servers run under (`backend.server_python`),
    None where they run under this one."""
    if settings.backend.server_python is None:
        return None
    python, environment = settings.backend.server_command()
    code = "import json; from safetyrepro.results.provenance import package_versions; print(json.dumps(package_versions()))"
    done = subprocess.run([python, "-c", code], capture_output=True, text=True, env=environment)
    if done.returncode != 0:
        raise RuntimeError(f"backend.server_python ({python}) could not list its packages: {done.stderr[-500:]}")
    return json.loads(done.stdout)


def environment_fingerprint() -> str:
    """SHA-256 of the Python version and the package versions: a rerun trigger for the record."""
    return hashlib.sha256(json.dumps([sys.version, package_versions()]).encode()).hexdigest()


def hardware(device: str = "auto") -> dict[str, Any]:
    """The machine writing the record: CPU, core count, memory, GPUs and the torch device used."""
    import torch

    info: dict[str, Any] = {
        "machine": platform.machine(),
        "system": platform.system(),
        "cpu": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "memory_gb": _memory_gb(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cuda_available": torch.cuda.is_available(),
    }
    info["gpus"] = (
        [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] if info["cuda_available"] else []
    )
    info["torch_device"] = ("cuda" if info["cuda_available"] else "cpu") if device == "auto" else device
    return info


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _memory_gb() -> float | None:
    try:
        return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError, AttributeError):
        return None


def data_files(settings: Settings) -> dict[str, dict[str, Any]]:
    """Every data file of the run's benchmarks: its SHA-256 and whether it matches the pinned one."""
    out = {}
    for entry in manifest(settings.benchmarks):
        path = settings.data_dir / entry.path
        digest = file_sha256(path) if path.is_file() else None
        out[entry.path] = {"sha256": digest, "pinned": digest == entry.sha256, "source": entry.source}
    return out


def scorer_files(settings: Settings) -> dict[str, dict[str, Any]]:
    """The files the run's scorers read besides their code (a fitted head), as `benchmark/scorer/file`: path,
    SHA-256 and whether it is the version its benchmark ships (not: refitted or edited)."""
    out = {}
    for benchmark in settings.benchmarks:
        for scorer in settings.envelope.scorers_of(benchmark):
            for path, shipped in scorer_of(BENCHMARKS[benchmark], scorer).files.items():
                digest = file_sha256(path)
                out[f"{benchmark}/{scorer}/{path.name}"] = {
                    "path": str(path),
                    "sha256": digest,
                    "shipped": digest == shipped,
                }
    return out


def item_subsets(items: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """Per benchmark: the evaluated item ids (sorted), their count and a SHA-256 of the id list."""
    out = {}
    for benchmark, ids in items.groupby("benchmark", sort=True)["item_id"]:
        unique = sorted(map(str, ids.unique()))
        out[benchmark] = {
            "n_items": len(unique),
            "ids": unique,
            "ids_sha256": hashlib.sha256("\n".join(unique).encode()).hexdigest(),
        }
    return out


def code_state() -> dict[str, Any]:
    """The code that runs: the package version and, when it is a file of a git checkout, the commit
    and whether tracked files differ from it (`dirty`; untracked files such as results do not count).
    Otherwise commit and dirty are None and `source` says why."""
    package = Path(__file__).resolve().parents[1]
    state: dict[str, Any] = {"version": __version__, "commit": None, "dirty": None}

    def git(*args: str) -> subprocess.CompletedProcess | None:
        try:
            return subprocess.run(["git", *args], cwd=package, capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.SubprocessError):
            return None

    tracked = git("ls-files", "--error-unmatch", "__init__.py")
    if tracked is None:
        return {**state, "source": "git state unknown (git not found)"}
    if tracked.returncode != 0:  # an installed copy (a wheel, or a venv inside some repository)
        known = "not a git repository" in tracked.stderr or "did not match any file" in tracked.stderr
        return {**state, "source": "not a git checkout" if known else "git state unknown"}
    status = git("status", "--porcelain=v2", "--branch", "--untracked-files=no")
    if status is None or status.returncode != 0:
        return {**state, "source": "git state unknown"}
    lines = status.stdout.splitlines()
    commit = next((line.split()[2] for line in lines if line.startswith("# branch.oid ")), None)
    changed = any(not line.startswith("#") for line in lines)
    return {**state, "commit": commit if commit != "(initial)" else None, "dirty": changed, "source": "git checkout"}


def seeds(settings: Settings) -> dict[str, Any]:
    """Every random seed the run uses: generation, item subset, and the analyses'."""
    return {"generation": list(settings.envelope.seeds), "subset": settings.subset_seed, **settings.analysis.seeds()}


def recorded_settings(settings: Settings) -> dict[str, Any]:
    """The part of the run record that comes from the settings (the provenance job's rerun trigger)."""
    return {
        "seal": settings.envelope.digest(),
        "run": {
            "select_configs": list(settings.select_configs) if settings.select_configs is not None else None,
            "max_new_tokens_cap": settings.envelope.token_cap,
            "n_items": dict(settings.n_items),
            "fewshot_pool": settings.fewshot_pool,
            "backend": settings.backend.result_settings(),  # so `threads` and the like rewrite no record
            "generation_config": GENERATION_CONFIG,
            "judges": [spec.name for spec in settings.judges],  # among the models: what each points at
        },
        "seeds": seeds(settings),
        "analysis": dict(settings.analysis.section),
        "precision_probe": settings.precision_probe.disclosed() if settings.precision_probe else None,
    }


def run_record(settings: Settings, models: Iterable[Mapping[str, Any]], items: pd.DataFrame) -> dict[str, Any]:
    """The run record: seal, run settings, packages, models, data, item subsets, seeds, hardware."""
    recorded = recorded_settings(settings)
    return {
        "seal": recorded["seal"],
        "code": code_state(),
        "run": recorded["run"],
        "analysis": recorded["analysis"],
        "precision_probe": recorded["precision_probe"],
        "packages": package_versions(),
        "server_packages": server_package_versions(settings),
        "models": {model["name"]: dict(model) for model in models},
        "data": data_files(settings),
        "scorer_files": scorer_files(settings),
        "items": item_subsets(items),
        "seeds": recorded["seeds"],
        "hardware": hardware(settings.backend.device),
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def _flatten(value: Any, prefix: tuple[str, ...] = ()) -> dict[tuple[str, ...], Any]:
    """Key path -> leaf value; lists are leaves (compared whole)."""
    if isinstance(value, Mapping) and value:
        out = {}
        for key, item in value.items():
            out.update(_flatten(item, (*prefix, str(key))))
        return out
    return {prefix: value}


def _dotted(path: tuple[str, ...]) -> str:
    """A key path as a.b.c (paths are compared as tuples: {"a.b": 1} and {"a": {"b": 1}} differ)."""
    return ".".join(path)


def compare_records(old: Mapping[str, Any], new: Mapping[str, Any], ignore: Iterable[str] = VOLATILE_KEYS) -> list[str]:
    """One line per difference between two records (dotted key: old -> new), times ignored.
    An empty list means a rerun matches the recorded run in every recorded respect."""
    skip = tuple(ignore)
    before, after = _flatten(old), _flatten(new)
    lines = []
    for path in sorted(before.keys() | after.keys()):
        name = _dotted(path)
        if (path and path[0] in skip) or name in skip:
            continue
        if path not in after:
            lines.append(f"{name}: removed (was {_short(before[path])})")
        elif path not in before:
            lines.append(f"{name}: added ({_short(after[path])})")
        elif before[path] != after[path]:
            lines.append(f"{name}: {_short(before[path])} -> {_short(after[path])}")
    return lines


def _short(value: Any, width: int = 80) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= width else text[: width - 3] + "..."
