"""Model files: what a model spec points at, hashed (the GRID card and rerun checks use this)."""

from __future__ import annotations

from pathlib import Path

from safetyrepro.running.hashing import file_sha256

# The file Snakemake keeps in a directory() output (the embedded model's folder) for its time: no model file.
SNAKEMAKE_TIMESTAMP = ".snakemake_timestamp"


def describe_model(spec) -> dict:
    """What exactly a model spec points at: file hashes of a local directory, or the hub id with
    the revision found in the local HF cache (the GRID card and rerun checks use this). Snakemake's own
    timestamp file in the folder is no model file."""
    folder = Path(spec.path)
    info = {
        "name": spec.name,
        "path": spec.path,
        "precision": spec.precision,
        "revision": spec.revision,
        "trust_remote_code": spec.trust_remote_code,
    }
    if folder.is_dir():
        info["files"] = {
            f.name: file_sha256(f) for f in sorted(folder.iterdir()) if f.is_file() and f.name != SNAKEMAKE_TIMESTAMP
        }
    else:
        from huggingface_hub import try_to_load_from_cache

        cached = try_to_load_from_cache(spec.path, "config.json", revision=spec.revision)
        info["cached_snapshot"] = Path(cached).parent.name if isinstance(cached, str) else None
    return info
