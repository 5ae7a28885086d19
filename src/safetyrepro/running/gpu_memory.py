"""GPU memory of a model server: one server per GPU at a time, and vLLM sized around the HF copy.

Two facts of vLLM 0.33.0 shape the plan (paths in the vllm-0.33.0 wheel):
- `vllm/v1/worker/utils.py` `request_memory`: at start-up vLLM asks for `gpu_memory_utilization`
  x total memory and refuses to start when less is free, so memory held by another server, or by
  the HF copy loaded after it, makes the start fail or leaves the HF copy nothing.
- `vllm/v1/worker/gpu_worker.py` (`determine_available_memory`): its memory profiling asserts that
  no other process released GPU memory meanwhile ("Error in memory profiling"), so a server that
  exits while another starts on the same GPU breaks that start.

Hence: a server that uses a GPU first claims it (`claim_gpu`), asking the server that holds it to
exit and waiting for it; inside a server the HF copy (log-likelihoods) loads first and vLLM takes
what is left, less room for the HF copy's activations (`vllm_share`).
"""

from __future__ import annotations

import fcntl
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

from safetyrepro.backends.base import ModelLoadError

GIB = 1024**3
MIN_VLLM_SHARE = 0.05  # below this vLLM cannot hold a 7B model's weights on any current card
# vLLM measures free memory after its engine process made its own CUDA context and library handles
# (vllm/v1/worker/gpu_worker.py init_device), so its share leaves that much of the free memory aside
VLLM_CONTEXT_GIB = 1.5


def vllm_share(cap: float, free: int, total: int, keep_free: int) -> float:
    """vLLM's `gpu_memory_utilization`: the configured cap, or less, so that `keep_free` bytes stay
    free for the HF copy's activations once vLLM holds its share (memory measured after the HF load,
    less vLLM's own CUDA context)."""
    share = min(cap, (free - keep_free - VLLM_CONTEXT_GIB * GIB) / total)
    if share < MIN_VLLM_SHARE:
        raise ModelLoadError(
            f"GPU memory: {free / GIB:.1f} of {total / GIB:.1f} GiB free after loading the HF copy, and "
            f"{keep_free / GIB:.1f} GiB must stay free for its activations (backend.hf_activation_gib): "
            f"vLLM would get a share of {share:.3f}; use a smaller precision, a larger GPU, or a smaller "
            "backend.hf_activation_gib"
        )
    return int(share * 1000) / 1000  # rounded down: vLLM asks for share x total, which must stay <= free


def claim_gpu(folder: Path, gpu_id: str, address: Path, ask_to_exit: Callable[[Path], bool], timeout: float) -> IO[str]:
    """Hold the lock of GPU `gpu_id` (its UUID) for this server's life, first asking the server that
    holds it (its socket address is in the `.holder` file) to exit, again until it answers (a holder
    still loading has no socket yet). Returns the open lock file."""
    lock = open(folder / f"gpu-{gpu_id}.lock", "a+", encoding="utf-8")  # noqa: SIM115 (held until exit)
    holder = folder / f"gpu-{gpu_id}.holder"
    deadline = time.monotonic() + timeout
    asked: Path | None = None
    while True:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            current = Path(holder.read_text(encoding="utf-8")) if holder.exists() else None
            if current is not None and current != asked and ask_to_exit(current):
                asked = current  # asked once per holder: another server may take the GPU before this one
            if time.monotonic() > deadline:
                lock.close()
                raise ModelLoadError(
                    f"GPU {gpu_id} is held by another model server ({current}) that did not exit within {timeout:.0f} s"
                ) from None
            time.sleep(0.2)
    holder.write_text(str(address), encoding="utf-8")
    return lock
