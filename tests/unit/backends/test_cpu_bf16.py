"""bf16 and NF4 on CPU: float32 products rounded to bf16 once, as a bf16 kernel computes them."""

from __future__ import annotations

import pytest
import torch
from helpers.tiny_model import build_tiny_model

from safetyrepro.backends import load_backend
from safetyrepro.backends.cpu_bf16 import Float32ProductLinear, use_float32_products
from safetyrepro.core.model_spec import ModelSpec


def _inputs(rows: int = 33, inner: int = 640, outer: int = 512):
    generator = torch.Generator().manual_seed(0)
    hidden = torch.randn(2, rows, inner, generator=generator).bfloat16()
    weight = (torch.randn(outer, inner, generator=generator) / inner**0.5).bfloat16()
    return hidden, weight


def _ulps_from_exact(result: torch.Tensor, hidden: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """How many bf16 steps each result lies from the exact product (float64), rounded to bf16."""
    exact = (hidden.double() @ weight.double().T).to(torch.bfloat16)
    step = torch.finfo(torch.bfloat16).eps * exact.float().abs().clamp(min=1e-30)
    return ((result.float() - exact.float()).abs() / step).round()


def test_float32_products_round_once_like_torchs_bf16_kernel():
    hidden, weight = _inputs()
    layer = Float32ProductLinear(weight, None)
    result = layer(hidden)
    native = torch.nn.functional.linear(hidden, weight)
    assert result.dtype == torch.bfloat16 and result.shape == native.shape
    ours, theirs = _ulps_from_exact(result, hidden, weight), _ulps_from_exact(native, hidden, weight)
    # both are the exact sum rounded once, but for the order of float32 sums: one bf16 step at most
    assert ours.max() <= 1 and theirs.max() <= 1
    assert (ours == 0).float().mean() > 0.999 and (result == native).float().mean() > 0.999
    # rounding at every partial sum, as bf16 sums would, is far off: the test tells them apart
    chunked = sum(torch.nn.functional.linear(hidden[..., i : i + 64], weight[:, i : i + 64]) for i in range(0, 640, 64))
    assert (_ulps_from_exact(chunked, hidden, weight) > 1).any()


def test_a_float32_input_is_computed_in_bf16_and_given_back_in_float32():
    hidden, weight = _inputs(outer=64)
    layer = Float32ProductLinear(weight, None)
    result = layer(hidden.float() + 1e-3)  # not bf16 values: rounded to bf16 first
    assert result.dtype == torch.float32
    assert torch.equal(result, layer((hidden.float() + 1e-3).bfloat16()).float())


def test_bias_is_added_before_the_one_rounding():
    hidden, weight = _inputs(outer=64)
    bias = torch.randn(64).bfloat16()
    result = Float32ProductLinear(weight, bias)(hidden)
    exact = (hidden.double() @ weight.double().T + bias.double()).to(torch.bfloat16)
    assert (result == exact).float().mean() > 0.999


def test_an_nf4_layer_dequantised_once_gives_bitsandbytes_own_output():
    bnb = pytest.importorskip("bitsandbytes")
    _, weight = _inputs()
    layer = bnb.nn.Linear4bit(640, 512, bias=False, compute_dtype=torch.bfloat16, quant_type="nf4")
    layer.weight = bnb.nn.Params4bit(weight, requires_grad=False, quant_type="nf4", compress_statistics=True)
    layer = layer.to("cpu")
    model = torch.nn.Sequential(layer)
    hidden, _ = _inputs()
    with torch.inference_mode():
        theirs = model(hidden)
        assert use_float32_products(model) == 1
        ours = model(hidden)
    assert isinstance(model[0], Float32ProductLinear)
    assert (ours == theirs).float().mean() > 0.999
    assert (ours.float() - theirs.float()).abs().max() <= 2 * torch.finfo(torch.bfloat16).eps * theirs.abs().max()
    # 16 NF4 levels times one scale per block of 64 weights
    assert all(len(block.unique()) <= 16 for block in model[0].weight.reshape(-1, 64)[:50])


def test_a_cpu_backend_converts_a_bf16_model_and_leaves_fp32_alone(tmp_path):
    path = build_tiny_model(tmp_path / "tiny")
    counts = {}
    for precision in ("fp32", "bf16"):
        backend = load_backend("hf", ModelSpec("t", str(path), precision), device="cpu")
        counts[precision] = sum(isinstance(m, Float32ProductLinear) for m in backend.model.modules())
        linear = sum(isinstance(m, torch.nn.Linear) for m in backend.model.modules())
        assert backend.model.dtype == {"fp32": torch.float32, "bf16": torch.bfloat16}[precision]
        if precision == "bf16":
            assert linear == 0  # every linear layer, the output layer too
            assert backend.loglikelihood([("Answer:", " yes")])[0] < 0
    assert counts["fp32"] == 0 and counts["bf16"] > 0
