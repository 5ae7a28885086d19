"""A copy of the working tree as a user's clone, and the commands of the README and docs/ run in it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from helpers.session import REPO

VENV_BIN = Path(sys.executable).parent


def make_clone(root: Path, data_dir: Path) -> Path:
    """The working tree as `git clone` would give it (tracked and new, non-ignored files) under root/repo,
    with shared/data beside it as on a developer's machine and in CI."""
    files = (
        subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=REPO,
            capture_output=True,
            check=True,
        )
        .stdout.decode()
        .split("\0")
    )
    for name in filter(None, files):
        source = REPO / name
        if source.is_file():
            (root / "repo" / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, root / "repo" / name, follow_symlinks=False)
    (root / "shared").mkdir()
    (root / "shared" / "data").symlink_to(data_dir)
    return root / "repo"


def user_env() -> dict[str, str]:
    """A user's environment: the venv's bin first on PATH and no data-dir override."""
    env = {key: value for key, value in os.environ.items() if key != "SAFETYREPRO_DATA_DIR"}
    return env | {"PATH": f"{VENV_BIN}{os.pathsep}{env['PATH']}"}


def run(clone: Path, *command: str) -> subprocess.CompletedProcess:
    """A command in the clone's root, in `user_env`."""
    return subprocess.run(command, cwd=clone, capture_output=True, text=True, env=user_env(), timeout=600)
