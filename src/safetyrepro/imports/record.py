"""The record of an import (results/provenance.json in a config with `imports`): which files were read, with
their hashes, what could not be mapped, and the fields the GRID card takes from a run record."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from safetyrepro.results.provenance import code_state, item_subsets, package_versions
from safetyrepro.running.hashing import file_sha256

if TYPE_CHECKING:
    from safetyrepro.configuration.settings import Settings
    from safetyrepro.imports.runs import Imported


def import_record(settings: Settings, imported: Imported) -> dict[str, Any]:
    """The record: every file read (and each mapping) with its SHA-256, the notes, per model its sources and
    harness settings, the item sets, packages."""
    mappings = [source.mapping for source in settings.imports if source.mapping]
    data = {
        str(file): {"sha256": file_sha256(Path(file)), "bytes": Path(file).stat().st_size}
        for file in [*imported.files, *mappings]
    }
    return {
        "seal": hashlib.sha256(json.dumps(sorted((k, v["sha256"]) for k, v in data.items())).encode()).hexdigest(),
        "code": code_state(),
        "run": {
            "imports": [
                {"kind": s.kind, "path": str(s.path), "mapping": str(s.mapping) if s.mapping else None}
                for s in settings.imports
            ],
            "design": imported.design,
            "notes": list(imported.notes),
        },
        "analysis": dict(settings.analysis.section),
        "precision_probe": None,
        "packages": package_versions(),
        "models": imported.models,
        "data": data,
        "items": item_subsets(imported.items) if len(imported.items) else {},
        "seeds": settings.analysis.seeds(),
        "hardware": None,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
    }
