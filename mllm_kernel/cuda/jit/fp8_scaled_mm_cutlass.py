"""CUDA ``fp8_scaled_mm`` (sgl-kernel's name and conventions), on CUTLASS kernels.

``out = (mat_a @ mat_b) * scales_a * scales_b + bias`` with float8_e4m3fn operands, the
product accumulated in float32, scales per tensor (one value) or per token ``[M, 1]`` and per
channel ``[1, N]`` in any mix, the scaling and bias fused into the epilogue. Runs on Hopper
(sm_90) through ``scaled_mm_sm90``'s kernels and on Ada (sm_89) through ``scaled_mm_sm80``'s
(``scaled_mm_dispatch``); other GPUs get a ValueError that says so.
"""

from __future__ import annotations

import torch

from mllm_kernel.cuda.jit import scaled_mm_dispatch
from mllm_kernel.jit_utils import precompile as jit_precompile

OP = "fp8_scaled_mm"


def precompile(*, wait: bool = True):
    """Builds (or loads) this GPU's FP8 modules now; see ``jit_utils.precompile``."""
    return jit_precompile(*scaled_mm_dispatch.modules(OP, torch.float8_e4m3fn), wait=wait)


def fp8_scaled_mm(
    mat_a: torch.Tensor,
    mat_b: torch.Tensor,
    scales_a: torch.Tensor,
    scales_b: torch.Tensor,
    out_dtype: torch.dtype,
    bias: torch.Tensor | None = None,
    *,
    enable_pdl: bool | None = None,
) -> torch.Tensor:
    """``[M, N]`` of ``out_dtype`` (float16 or bfloat16) from float8_e4m3fn ``mat_a`` ``[M, K]``
    row-major and ``mat_b`` ``[K, N]`` column-major, float32 scales (``scales_a`` ``[1]``,
    ``[M]`` or ``[M, 1]``; ``scales_b`` ``[1]``, ``[N]`` or ``[1, N]``), optional ``bias``
    ``[N]`` of ``out_dtype``. K must be a multiple of 16 and N of 8. ``enable_pdl``: as for
    ``int8_scaled_mm``."""
    return scaled_mm_dispatch.checked_scaled_mm(OP, torch.float8_e4m3fn, mat_a, mat_b, scales_a, scales_b, out_dtype,
                                            bias, enable_pdl)
