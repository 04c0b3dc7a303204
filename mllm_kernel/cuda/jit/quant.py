"""CUDA activation quantization to float8_e4m3fn and int8.

``per_tensor_quant_fp8``, ``per_token_quant_fp8``, ``per_token_quant_int8``,
``per_token_group_quant_fp8`` and ``per_token_group_quant_int8``. Inputs are float32, float16 or
bfloat16 ``[..., hidden]`` (leading dims flattened into rows; rows may be strided). Each algorithm
family is one source (``mllm_kernel/cuda/csrc/quant_per_{tensor,token,group}.cuh``); each op is one
compiled module per input dtype.

The formula, in float32, is the same as the CPU kernels'::

    scale = max(amax, eps) / qmax          # qmax = 448 (e4m3) or 127 (int8)
    scale = 2 ** ceil(log2(scale))         # only with scale_ue8m0
    q     = x / scale                      # a true division, not x * (1 / scale)
    fp8:  q.clamp(-448, 448).to(torch.float8_e4m3fn)       (round to nearest even)
    int8: q.clamp(-128, 127).round().to(torch.int8)         (round half to even)

A zero scale (an all-zero row with eps = 0, or a static scale of 0) gives zeros.

``enable_pdl``: programmatic dependent launch, on by default (``None``; see
``mllm_kernel.op_args.resolve_pdl``).
"""

from __future__ import annotations

import torch

from mllm_kernel.jit_utils import KernelTable, jit_module, make_cpp_args
from mllm_kernel.jit_utils import precompile as jit_precompile
from mllm_kernel.op_args import FLOAT_DTYPES, group_scales, require_tensor, resolve_pdl, row_shape

FP8_E4M3_MAX = 448.0
INT8_MAX = 127.0
#: Partial maxima room for dynamic per-tensor quantization's one-launch kernel (two blocks an SM;
#: a GPU with more blocks than this takes the two-kernel path).
_PARTIALS = 511
#: Group sizes the per-token-group kernels are built for.
GROUP_SIZES = (32, 64, 128)

#: The source of each op. An op is its own module (per input dtype): a first call compiles only
#: the kernels of that op, fp8 or int8 (a module's build time is mostly its kernels').
_SOURCES = {
    "per_tensor_quant_fp8": "quant_per_tensor.cuh",
    "per_token_quant_fp8": "quant_per_token.cuh",
    "per_token_quant_int8": "quant_per_token.cuh",
    "per_token_group_quant_fp8": "quant_per_group.cuh",
    "per_token_group_quant_int8": "quant_per_group.cuh",
}


def _table(op: str, *variant: object) -> KernelTable:
    """The op's module per input dtype; ``variant``: template arguments after the dtype."""
    def module(dtype: torch.dtype):
        args = make_cpp_args(dtype, *variant)
        return jit_module(op, args=args, device="cuda", cuda_files=[_SOURCES[op]], cuda_wrappers=[(op, f"{op}<{args}>")])

    return KernelTable(op, {dtype: module(dtype) for dtype in FLOAT_DTYPES})


# Static and dynamic per-tensor quantization are separate modules: a first call compiles only its
# mode's kernels.
_PER_TENSOR_FP8 = _table("per_tensor_quant_fp8", False)
_PER_TENSOR_FP8_STATIC = _table("per_tensor_quant_fp8", True)
_PER_TOKEN_FP8 = _table("per_token_quant_fp8")
_PER_TOKEN_INT8 = _table("per_token_quant_int8")
_GROUP_FP8 = _table("per_token_group_quant_fp8")
_GROUP_INT8 = _table("per_token_group_quant_int8")


def precompile(*, wait: bool = True):
    """Builds (or loads) every module of the family now; see ``jit_utils.precompile``."""
    return jit_precompile(_PER_TENSOR_FP8, _PER_TENSOR_FP8_STATIC, _PER_TOKEN_FP8, _PER_TOKEN_INT8, _GROUP_FP8,
                          _GROUP_INT8, wait=wait)


def _check_group_size(op: str, group_size: object, hidden: int) -> int:
    if isinstance(group_size, bool) or not isinstance(group_size, int) or group_size not in GROUP_SIZES:
        raise ValueError(f"{op}: group_size must be 32, 64 or 128, got {group_size!r}")
    if hidden % group_size != 0:
        raise ValueError(f"{op}: hidden size {hidden} is not divisible by group_size {group_size}")
    return group_size


def _out(op: str, input: torch.Tensor, out: torch.Tensor | None, dtype: torch.dtype) -> torch.Tensor:
    if out is None:
        return torch.empty(input.shape, dtype=dtype, device=input.device)
    return require_tensor(out, op, "out")


def per_tensor_quant_fp8(
    input: torch.Tensor,
    scale: torch.Tensor | None = None,
    out: torch.Tensor | None = None,
    *,
    enable_pdl: bool | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """float8_e4m3fn quantization with one scale for the whole tensor.

    ``scale=None`` (dynamic): the scale is ``amax / 448`` over the tensor, computed on the device
    into a new float32 ``[1]`` tensor (large contiguous inputs on sm_90+: one cooperative launch
    that keeps part of the input in shared memory between its amax and quantization passes;
    otherwise an amax kernel, then the quantization).
    A given ``scale`` (float32 ``[1]`` on the input's device) is used as is (static). Returns
    ``(out, scale)``; ``out`` has the input's shape (allocated when None).
    """
    is_static = scale is not None
    function = (_PER_TENSOR_FP8_STATIC if is_static else _PER_TENSOR_FP8)[input.dtype]
    out = _out(_PER_TENSOR_FP8.op, input, out, torch.float8_e4m3fn)
    if is_static:
        workspace = scale  # not read when static
    else:
        # One allocation: the scale, then the one-launch kernel's per-block partial maxima.
        buffer = torch.empty(1 + _PARTIALS, dtype=torch.float32, device=input.device)
        scale, workspace = buffer[:1], buffer[1:]
    function(out, scale, workspace, input, resolve_pdl(enable_pdl))
    return out, scale


def _per_token(table: KernelTable, dtype: torch.dtype, input: torch.Tensor, out: torch.Tensor | None,
               enable_pdl: bool | None):
    function = table[input.dtype]
    out = _out(table.op, input, out, dtype)
    scales = torch.empty((*input.shape[:-1], 1), dtype=torch.float32, device=input.device)
    function(out, scales.view(-1, 1), input, resolve_pdl(enable_pdl))
    return out, scales


def per_token_quant_fp8(
    input: torch.Tensor, out: torch.Tensor | None = None, *, enable_pdl: bool | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """float8_e4m3fn quantization with one scale per row: ``scales = amax / 448`` (float32
    ``[..., 1]``). Returns ``(out, scales)``."""
    return _per_token(_PER_TOKEN_FP8, torch.float8_e4m3fn, input, out, enable_pdl)


def per_token_quant_int8(
    input: torch.Tensor, out: torch.Tensor | None = None, *, enable_pdl: bool | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric int8 quantization with one scale per row: ``scales = amax / 127`` (float32
    ``[..., 1]``). Returns ``(out, scales)``."""
    return _per_token(_PER_TOKEN_INT8, torch.int8, input, out, enable_pdl)


def per_token_group_quant_fp8(
    input: torch.Tensor,
    group_size: int = 128,
    eps: float = 1e-10,
    column_major_scales: bool = False,
    scale_ue8m0: bool = False,
    out: torch.Tensor | None = None,
    *,
    enable_pdl: bool | None = None,
    scale_tma_aligned: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """float8_e4m3fn quantization per group of ``group_size`` (32, 64 or 128) elements of each
    row: ``scale = max(amax, eps) / 448``, rounded up to a power of two with ``scale_ue8m0``.

    Scales are float32 ``[..., hidden / group_size]``; with ``column_major_scales`` they are the
    transposed view of a ``[hidden / group_size, rows]`` buffer (rows = leading dims flattened,
    so the result is 2-D), whose rows ``scale_tma_aligned`` pads to a multiple of 4: the layout
    ``fp8_blockwise_scaled_mm`` reads in place at any number of rows (``op_args.group_scales``).
    Returns ``(out, scales)``.
    """
    op = "per_token_group_quant_fp8"
    function = _GROUP_FP8[input.dtype]
    rows, hidden = row_shape(input, op)
    group_size = _check_group_size(op, group_size, hidden)
    out = _out(op, input, out, torch.float8_e4m3fn)
    scales, scales_2d = group_scales(op, input, rows, hidden // group_size, bool(column_major_scales),
                                      bool(scale_tma_aligned))
    function(out, scales_2d, input, group_size, float(eps), bool(scale_ue8m0), resolve_pdl(enable_pdl))
    return out, scales


def per_token_group_quant_int8(
    input: torch.Tensor,
    group_size: int = 128,
    eps: float = 1e-10,
    out: torch.Tensor | None = None,
    *,
    enable_pdl: bool | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric int8 quantization per group of ``group_size`` (32, 64 or 128) elements of each
    row: ``scale = max(amax, eps) / 127`` (float32 ``[..., hidden / group_size]``). Returns
    ``(out, scales)``."""
    op = "per_token_group_quant_int8"
    function = _GROUP_INT8[input.dtype]
    rows, hidden = row_shape(input, op)
    group_size = _check_group_size(op, group_size, hidden)
    out = _out(op, input, out, torch.int8)
    scales, scales_2d = group_scales(op, input, rows, hidden // group_size, False)
    function(out, scales_2d, input, group_size, float(eps), resolve_pdl(enable_pdl))
    return out, scales
