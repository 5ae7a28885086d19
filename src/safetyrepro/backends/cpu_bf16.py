"""bf16 and NF4 models on CPU: their matrix products in float32, rounded to bf16 once.

A bf16 matrix product on a GPU multiplies bf16 values, sums the products in float32 and rounds the
sum to bf16 once. CPUs without native bf16 arithmetic (no AVX512-BF16 or AMX) make torch 2.13 emulate
it about 100x slower than float32, which made the bf16 and NF4 copies of the default run take three
times the fp32 model's time. Here each linear layer holds its weight in float32 (bf16 values are
exact in float32, and so are the products of two of them), sums in float32 and rounds once: the same
arithmetic, at float32 speed, and the same numbers on every CPU. Only the order of the float32 sums
differs from torch's own bf16 kernel, as it differs between any two kernels (tests/unit/backends/test_cpu_bf16.py).

NF4 on CPU: bitsandbytes 0.50.2 (backends/default/ops.py, `_gemm_4bit_default_impl`) dequantises
each weight to bf16 at every product and then multiplies in bf16; the weight dequantised once at
load is the same tensor, bit for bit, so it is computed once and multiplied as above. Attention's
own products and everything outside linear layers stay in bf16.
"""

from __future__ import annotations

import torch
from torch import nn


class Float32ProductLinear(nn.Module):
    """A bf16 linear layer computed as float32 products and sums, rounded to bf16 once. Its input is
    taken in bf16 and its output given in the input's dtype, as bitsandbytes' 4-bit layer does."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None):
        super().__init__()
        self.register_buffer("weight", weight.detach().float(), persistent=False)
        self.register_buffer("bias", None if bias is None else bias.detach().float(), persistent=False)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        product = nn.functional.linear(hidden.to(torch.bfloat16).float(), self.weight, self.bias)
        return product.to(torch.bfloat16).to(hidden.dtype)


def _bf16_weight(module: nn.Module) -> torch.Tensor | None:
    """The bf16 weight a linear layer multiplies by (an NF4 layer's dequantised); None otherwise."""
    if isinstance(module, nn.Linear) and module.weight.dtype == torch.bfloat16:
        return module.weight
    state = getattr(getattr(module, "weight", None), "quant_state", None)
    if state is not None and state.dtype == torch.bfloat16:  # bitsandbytes Linear4bit
        from bitsandbytes.functional import dequantize_4bit

        return dequantize_4bit(module.weight.data, state)
    return None


def use_float32_products(model: nn.Module) -> int:
    """Replaces every bf16 (or NF4) linear layer of a CPU model with a Float32ProductLinear;
    returns how many were replaced."""
    replaced = 0
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            weight = _bf16_weight(child)
            if weight is not None:
                setattr(parent, name, Float32ProductLinear(weight, child.bias))
                replaced += 1
    return replaced
