"""CPU per-token(-group) quantization: ``per_token_quant_int8``, ``per_token_group_quant_int8``,
``per_token_group_quant_fp8``.

Inputs are float32, float16 or bfloat16 ``[..., hidden]`` (leading dims flattened into rows,
rows may be strided); all arithmetic is float32 and rounding is to nearest even, so results
match ``(x / scale).round().clamp(...)`` (int8) or ``(x / scale).clamp(-448, 448).to(float8_e4m3fn)``
computed in float32.
"""

from __future__ import annotations

import torch

from mllm_kernel.cpu.jit._threads import num_threads
from mllm_kernel.jit_utils import KernelTable, jit_module
from mllm_kernel.jit_utils import precompile as jit_precompile
from mllm_kernel.op_args import group_scales, row_shape

FP8_E4M3_MAX = 448.0
INT8_MAX = 127.0


def precompile(*, wait: bool = True):
    """Builds (or loads) every module of the family now; see ``jit_utils.precompile``."""
    return jit_precompile(_PER_TOKEN_INT8, _GROUP_INT8, _GROUP_FP8, wait=wait)


def _table(op: str, entry: str) -> KernelTable:
    # One module per op for every dtype (the kernels check the tensors and pick the element
    # type); the C++ entry of its format is exported under the op's name, so errors name it.
    return KernelTable(op, jit_module(f"cpu_{op}", device="cpu", cpp_files=["quant.cpp"],
                                      cpp_wrappers=[(op, f"mllm_kernel::cpu::{entry}")]))


_PER_TOKEN_INT8 = _table("per_token_quant_int8", "quant_int8")
_GROUP_INT8 = _table("per_token_group_quant_int8", "quant_int8")
_GROUP_FP8 = _table("per_token_group_quant_fp8", "quant_fp8")


def _check_group_size(op: str, group_size: object) -> int:
    if isinstance(group_size, bool) or not isinstance(group_size, int) or group_size <= 0:
        raise ValueError(f"{op}: group_size must be a positive int, got {group_size!r}")
    return group_size


def per_token_quant_int8(input: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric int8 per row: ``scale = amax / 127`` (float32 ``[..., 1]``),
    ``q = round_half_even(x / scale)``; an all-zero row gets scale 0 and zeros."""
    _, hidden = row_shape(input, "per_token_quant_int8")
    out = torch.empty(input.shape, dtype=torch.int8, device=input.device)
    scales = torch.empty((*input.shape[:-1], 1), dtype=torch.float32, device=input.device)
    _PER_TOKEN_INT8[input.dtype](out, scales.view(-1, 1), input, hidden, 0.0, num_threads())
    return out, scales


def per_token_group_quant_int8(
    input: torch.Tensor, group_size: int = 128, eps: float = 1e-10
) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric int8 per group of ``group_size`` elements of each row:
    ``scale = max(amax, eps) / 127`` (float32 ``[..., hidden / group_size]``)."""
    op = "per_token_group_quant_int8"
    group_size = _check_group_size(op, group_size)
    rows, hidden = row_shape(input, op)
    out = torch.empty(input.shape, dtype=torch.int8, device=input.device)
    scales, scales_2d = group_scales(op, input, rows, hidden // group_size, False)
    _GROUP_INT8[input.dtype](out, scales_2d, input, group_size, float(eps), num_threads())
    return out, scales


def per_token_group_quant_fp8(
    input: torch.Tensor,
    group_size: int = 128,
    eps: float = 1e-10,
    column_major_scales: bool = False,
    scale_ue8m0: bool = False,
    *,
    scale_tma_aligned: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """float8_e4m3fn per group: ``scale = max(amax, eps) / 448`` (rounded up to a power of two
    with ``scale_ue8m0``), ``q = e4m3(clamp(x / scale, -448, 448))``.

    Scales are float32 ``[..., hidden / group_size]``; with ``column_major_scales`` they are
    the transpose view of a ``[hidden / group_size, rows]`` buffer (rows = leading dims
    flattened, so the result is 2-D), whose rows ``scale_tma_aligned`` pads to a multiple of 4
    (``op_args.group_scales``).
    """
    op = "per_token_group_quant_fp8"
    group_size = _check_group_size(op, group_size)
    rows, hidden = row_shape(input, op)
    out = torch.empty(input.shape, dtype=torch.float8_e4m3fn, device=input.device)
    scales, scales_2d = group_scales(op, input, rows, hidden // group_size, bool(column_major_scales),
                                      bool(scale_tma_aligned))
    _GROUP_FP8[input.dtype](
        out, scales_2d, input, group_size, float(eps), bool(scale_ue8m0), num_threads()
    )
    return out, scales
