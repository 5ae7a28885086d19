"""GPU memory of the model servers: vLLM's share around the HF copy (the arithmetic and the table of
docs/models.md for the paper's models), one server per GPU at a time, and one per model."""

from __future__ import annotations

import re
import tempfile
import threading

import pytest
from helpers.envelopes import make_config
from helpers.session import REPO

from safetyrepro.backends import ModelLoadError
from safetyrepro.configuration.build import load_settings
from safetyrepro.running.gpu_memory import GIB, VLLM_CONTEXT_GIB, claim_gpu, vllm_share

# parameters, and embedding + output-layer parameters (kept in bf16 under NF4), from the models' configs
PAPER_MODELS = {
    "qwen2.5-7b-instruct": (7.615e9, 2 * 152064 * 3584),
    "mistral-7b-instruct-v0.3": (7.248e9, 2 * 32768 * 4096),
    "yi-1.5-9b-chat": (8.829e9, 2 * 64000 * 4096),
}
CARDS = {"80 GB": 79.2, "141 GB": 139.8}  # GiB that torch reports
CONTEXT_GIB = 0.6
NF4_BYTES = 0.5 + 1 / 64 + 4 / (64 * 256)  # 4-bit weights, 8-bit absmax per 64, fp32 per 256 absmax


def weights_gib(name: str, precision: str) -> float:
    parameters, embeddings = PAPER_MODELS[name]
    if precision == "bf16":
        return 2 * parameters / GIB
    return ((parameters - embeddings) * NF4_BYTES + 2 * embeddings) / GIB


def page_shares() -> dict[tuple[str, str, str], float]:
    """The GPU memory table of docs/models.md: (card, model, precision) -> vLLM's share."""
    page = (REPO / "docs" / "models.md").read_text(encoding="utf-8")
    table = page.split("\n## GPU memory\n", 1)[1].split("\n| model | precision |", 1)[1].split("\n\n", 1)[0]
    shares = {}
    for row in table.splitlines()[2:]:
        name, precision, _, on_80, on_141 = (cell.strip() for cell in row.strip("|").split("|"))
        for card, cell in (("80 GB", on_80), ("141 GB", on_141)):
            shares[card, name, precision.split()[0]] = float(re.match(r"[0-9.]+", cell).group())
    return shares


PAGE_SHARES = page_shares()


def test_the_page_gives_every_paper_model_on_both_cards():
    assert set(PAGE_SHARES) == {(c, m, p) for c in CARDS for m in PAPER_MODELS for p in ("nf4", "bf16")}


@pytest.mark.parametrize(("card", "name", "precision"), list(PAGE_SHARES))
def test_each_paper_model_fits_alone_with_room_for_the_hf_copy(card, name, precision):
    total, weights = CARDS[card], weights_gib(name, precision)
    free = total - CONTEXT_GIB - weights  # after the HF copy loaded
    share = vllm_share(0.85, int(free * GIB), int(total * GIB), 8 * GIB)
    assert share == PAGE_SHARES[card, name, precision]
    assert share * total <= free - 8 - VLLM_CONTEXT_GIB + 1e-9  # vLLM's request fits beside its context; 8 GiB stay
    assert share * total - weights > 30  # vLLM's own weights leave tens of GiB of key/value cache


def test_three_servers_side_by_side_would_starve_each_engine():
    total = CARDS["80 GB"]
    per_server = total / 3 - CONTEXT_GIB - 8 - max(weights_gib(m, "nf4") for m in PAPER_MODELS)
    assert per_server < 20


def test_too_little_memory_for_vllm_is_a_clear_error():
    with pytest.raises(ModelLoadError, match=r"backend.hf_activation_gib"):
        vllm_share(0.85, free=10 * GIB, total=80 * GIB, keep_free=8 * GIB)
    assert vllm_share(0.85, free=41.5 * GIB, total=80 * GIB, keep_free=0) == 0.5  # 1.5 GiB for vLLM's context


def test_a_server_takes_the_gpu_from_the_server_holding_it(tmp_path):
    first = claim_gpu(tmp_path, "GPU-1", tmp_path / "a.sock", lambda address: pytest.fail("nobody to ask"), 5)
    asked = []

    def ask(address):  # the first ask finds the holder still loading (no socket yet)
        asked.append(address)
        if len(asked) == 2:
            threading.Timer(0.3, first.close).start()  # it exits after the call it is answering
        return len(asked) == 2

    other = claim_gpu(tmp_path, "GPU-2", tmp_path / "c.sock", lambda address: pytest.fail("another GPU"), 5)
    second = claim_gpu(tmp_path, "GPU-1", tmp_path / "b.sock", ask, 5)
    assert asked == [tmp_path / "a.sock"] * 2
    assert (tmp_path / "gpu-GPU-1.holder").read_text() == str(tmp_path / "b.sock")
    second.close(), other.close()


def test_a_holder_that_never_exits_is_a_clear_error(tmp_path):
    first = claim_gpu(tmp_path, "GPU-1", tmp_path / "a.sock", lambda address: True, 5)
    with pytest.raises(ModelLoadError, match=r"GPU GPU-1 is held by another model server .*a\.sock"):
        claim_gpu(tmp_path, "GPU-1", tmp_path / "b.sock", lambda address: True, 0.5)
    first.close()


def test_processes_with_different_temporary_folders_ask_one_server(tmp_path, data_dir, monkeypatch):
    """A run's processes find a model's server (its socket, its start lock, the GPU claims beside them) at one
    address whatever TMPDIR each has (Snakemake sets a job's), and the address fits a socket's 107 bytes."""
    from safetyrepro.running.server import server_address

    settings = load_settings(
        make_config(data_dir, models=[{"name": "m" * 64, "path": "org/m"}, {"name": "n", "path": "org/n"}])
    )
    addresses = set()
    for name in ("a", "b" * 100):
        (tmp_path / name).mkdir()
        monkeypatch.setenv("TMPDIR", str(tmp_path / name))
        monkeypatch.setattr(tempfile, "tempdir", None)  # what a fresh process would find
        assert tempfile.gettempdir() == str(tmp_path / name)
        addresses.add(server_address(settings, settings.models[0]))
    assert len(addresses) == 1 and len(bytes(addresses.pop())) <= 107
