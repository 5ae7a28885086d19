"""Model files: what a model spec points at, hashed (the GRID card and rerun checks use this)."""

from __future__ import annotations

from pathlib import Path

from safetyrepro.running.hashing import file_sha256

# The file Snakemake keeps in a directory() output (the embedded model's folder) for its time: no model file.
SNAKEMAKE_TIMESTAMP = ".snakemake_timestamp"


def model_files(folder: Path) -> dict[str, str]:
    """The SHA-256 of each file of a local model folder (Snakemake's own timestamp file is none of them)."""
    return {f.name: file_sha256(f) for f in sorted(folder.iterdir()) if f.is_file() and f.name != SNAKEMAKE_TIMESTAMP}


def describe_model(spec) -> dict:
    """What exactly a model spec points at: file hashes of a local directory, or the hub id with
    the revision found in the local HF cache (the GRID card and rerun checks use this); for a served model, what
    its server says (host, served name, version) and its tokenizer's files where it has one. Snakemake's own
    timestamp file in the folder is no model file."""
    folder = Path(spec.path) if spec.path else None
    info = {
        "name": spec.name,
        "path": spec.path,
        "precision": spec.precision,
        "revision": spec.revision,
        "trust_remote_code": spec.trust_remote_code,
    }
    if spec.endpoint is not None:  # what its server says of itself (never the key)
        from safetyrepro.backends.openai_server import check_server, seeds_honoured

        info["endpoint"] = check_server(spec.endpoint) | {"seeds_honoured": seeds_honoured(spec.endpoint)}
    if folder is None:
        pass  # a served model without a tokenizer here: no files of its own
    elif folder.is_dir():
        info["files"] = model_files(folder)
    else:
        from huggingface_hub import try_to_load_from_cache

        cached = try_to_load_from_cache(spec.path, "config.json", revision=spec.revision)
        info["cached_snapshot"] = Path(cached).parent.name if isinstance(cached, str) else None
    return info
