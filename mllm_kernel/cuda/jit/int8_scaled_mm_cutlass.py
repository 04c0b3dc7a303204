"""CUDA ``int8_scaled_mm`` (sgl-kernel's name and conventions), on CUTLASS kernels.

``out = (mat_a @ mat_b) * scales_a[:, None] * scales_b[None, :] + bias``, the product
accumulated exactly in int32, the scaling and bias in float32, rounded once to ``out_dtype``.
Runs on Hopper (sm_90) through ``scaled_mm_sm90``'s kernels and on Ampere and Ada (sm_80,
sm_86, sm_87, sm_89) through ``scaled_mm_sm80``'s (``scaled_mm_dispatch``); other GPUs get a
ValueError that says so.
"""

from __future__ import annotations

import torch

from mllm_kernel.cuda.jit import scaled_mm_dispatch
from mllm_kernel.jit_utils import precompile as jit_precompile

OP = "int8_scaled_mm"


def precompile(*, wait: bool = True):
    """Builds (or loads) this GPU's int8 modules now; see ``jit_utils.precompile``."""
    return jit_precompile(*scaled_mm_dispatch.modules(OP, torch.int8), wait=wait)


def int8_scaled_mm(
    mat_a: torch.Tensor,
    mat_b: torch.Tensor,
    scales_a: torch.Tensor,
    scales_b: torch.Tensor,
    out_dtype: torch.dtype,
    bias: torch.Tensor | None = None,
    *,
    enable_pdl: bool | None = None,
) -> torch.Tensor:
    """``[M, N]`` of ``out_dtype`` (float16 or bfloat16) from int8 ``mat_a`` ``[M, K]`` row-major
    and int8 ``mat_b`` ``[K, N]`` column-major (``weight.t()`` of a row-major ``[N, K]`` weight),
    float32 ``scales_a`` (``[M]``, ``[M, 1]`` or ``[1]``) and ``scales_b`` (``[N]``, ``[1, N]``
    or ``[1]``), optional ``bias`` ``[N]`` of ``out_dtype``. K must be a multiple of 16 and N of
    8 (16-byte rows for the tensor-memory accelerator). ``enable_pdl``: programmatic dependent
    launch, on by default (``None``) where the GPU has it, for the decoding GEMV (docs/pdl.md);
    the CUTLASS kernels launch without it."""
    return scaled_mm_dispatch.checked_scaled_mm(OP, torch.int8, mat_a, mat_b, scales_a, scales_b, out_dtype, bias,
                                                enable_pdl)
