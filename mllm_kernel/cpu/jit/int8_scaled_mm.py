"""CPU ``int8_scaled_mm``: ``(mat_a @ mat_b) * scales_a * scales_b (+ bias)`` for int8 operands,
the W8A8 linear layer of sgl-kernel's op of that name.

The products are summed exactly in int32 (exact while |sum| < 2**31: any K below 131072), scaled
in float32 and rounded once to ``out_dtype``. The CPU accepts any ``M, K, N >= 1`` (the CUDA
kernel needs K % 16 == 0 and N % 8 == 0) and float32 out too.
"""

from __future__ import annotations

import torch

from mllm_kernel.cpu.jit._threads import num_threads
from mllm_kernel.jit_utils import KernelTable, jit_module
from mllm_kernel.jit_utils import precompile as jit_precompile
from mllm_kernel.op_args import scaled_mm_operands

_OP = "int8_scaled_mm"
#: The output dtypes, in the order messages list them.
OUT_DTYPES = (torch.float16, torch.bfloat16, torch.float32)

# One module for every output dtype (the kernel checks the tensors and picks the type); the bias
# is a second entry point of it.
_MODULE = jit_module("cpu_int8_scaled_mm", device="cpu", cpp_files=["int8_scaled_mm.cpp"],
                     cpp_wrappers=[(_OP, "mllm_kernel::cpu::int8_scaled_mm"),
                                   ("int8_scaled_mm__bias", "mllm_kernel::cpu::int8_scaled_mm_bias")])
_MM = KernelTable(_OP, _MODULE, arg="out_dtype")
_MM_BIAS = KernelTable(_OP, _MODULE, arg="out_dtype", export="int8_scaled_mm__bias")


def precompile(*, wait: bool = True):
    """Builds (or loads) the module now; see ``jit_utils.precompile``."""
    return jit_precompile(_MM, _MM_BIAS, wait=wait)


def int8_scaled_mm(
    mat_a: torch.Tensor,
    mat_b: torch.Tensor,
    scales_a: torch.Tensor,
    scales_b: torch.Tensor,
    out_dtype: torch.dtype,
    bias: torch.Tensor | None = None,
) -> torch.Tensor:
    """``out[m, n] = float(sum_k mat_a[m, k] * mat_b[k, n]) * scales_a[m] * scales_b[n] (+ bias[n])``.

    ``mat_a``: int8 ``[M, K]`` with contiguous rows (any row stride). ``mat_b``: int8 ``[K, N]``
    column-major, i.e. ``w.t()`` of a row-major ``[N, K]`` weight (any column stride).
    ``scales_a``: float32 ``[M]``, ``[M, 1]`` or ``[1]``; ``scales_b``: float32 ``[N]``,
    ``[1, N]`` or ``[1]`` (one scale for all; contiguous). ``out_dtype``: float16, bfloat16 or
    float32; ``bias``: ``[N]`` of ``out_dtype``. Any ``M, K, N >= 1``. Returns a new ``[M, N]``
    tensor of ``out_dtype``. The arguments are checked as for CUDA (``op_args.scaled_mm_operands``).
    """
    m, n, _, sa, sb = scaled_mm_operands(_OP, mat_a, mat_b, scales_a, scales_b, out_dtype, bias, torch.int8,
                                         OUT_DTYPES)
    out = torch.empty((m, n), dtype=out_dtype, device=mat_a.device)
    if bias is None:
        _MM[out_dtype](out, mat_a, mat_b, sa, sb, num_threads())
    else:
        _MM_BIAS[out_dtype](out, mat_a, mat_b, sa, sb, bias, num_threads())
    return out
