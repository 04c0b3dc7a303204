"""CUDA activation quantization to float8_e4m3fn and int8.

``per_tensor_quant_fp8``, ``per_token_quant_fp8``, ``per_token_quant_int8``,
``per_token_group_quant_fp8`` and ``per_token_group_quant_int8``. Inputs are float32, float16 or
bfloat16 ``[..., hidden]`` (leading dims flattened into rows; rows may be strided). One compiled
module per family and input dtype holds the family's ops (``mllm_kernel/cuda/csrc/quant_per_group.cuh``,
``quant_per_token.cuh``, ``quant_per_tensor.cuh``).

The formula, in float32, is the same as the CPU kernels'::

    scale = max(amax, eps) / qmax          # qmax = 448 (e4m3) or 127 (int8)
    scale = 2 ** ceil(log2(scale))         # only with scale_ue8m0
    q     = x / scale                      # a true division, not x * (1 / scale)
    fp8:  q.clamp(-448, 448).to(torch.float8_e4m3fn)       (round to nearest even)
    int8: q.clamp(-128, 127).round().to(torch.int8)         (round half to even)

A zero scale (an all-zero row with eps = 0, or a static scale of 0) gives zeros.

``enable_pdl``: programmatic dependent launch, on by default (``None``) where the GPU has it
(sm_90+; docs/pdl.md).
"""

from __future__ import annotations

import functools

import torch

from mllm_kernel.cuda.jit._common import per_dtype, pick
from mllm_kernel.jit_utils import jit, make_cpp_args
from mllm_kernel.rows import group_scales, require_tensor, row_shape

FP8_E4M3_MAX = 448.0
INT8_MAX = 127.0
#: Partial maxima room for dynamic per-tensor quantization's one-launch kernel (two blocks an SM;
#: a GPU with more blocks than this takes the two-kernel path).
_PARTIALS = 511
#: Group sizes the per-token-group kernels are built for.
GROUP_SIZES = (32, 64, 128)

#: The ops of each family's module (``cuda/csrc/quant_<family>.cuh``).
_FAMILIES = {
    "per_group": ("per_token_group_quant_fp8", "per_token_group_quant_int8"),
    "per_token": ("per_token_quant_fp8", "per_token_quant_int8"),
    "per_tensor": ("per_tensor_quant_fp8",),
}


def _make_kernel(family: str, dtype: torch.dtype):
    args = make_cpp_args(dtype)

    @jit(
        args=args,
        device="cuda",
        cuda_files=[f"quant_{family}.cuh"],
        cuda_wrappers=[(op, f"{op}<{args}>") for op in _FAMILIES[family]],
        func_name=f"quant_{family}",
    )
    def _kernel(compiled_module):
        return compiled_module

    return _kernel


#: ``_KERNELS[family][dtype]``: the family's module for that input dtype.
_KERNELS = {family: per_dtype(functools.partial(_make_kernel, family)) for family in _FAMILIES}


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
    op = "per_tensor_quant_fp8"
    module = pick(_KERNELS["per_tensor"], op, "input", input)()
    out = _out(op, input, out, torch.float8_e4m3fn)
    is_static = scale is not None
    if is_static:
        workspace = scale  # not read when static
    else:
        # One allocation: the scale, then the one-launch kernel's per-block partial maxima.
        buffer = torch.empty(1 + _PARTIALS, dtype=torch.float32, device=input.device)
        scale, workspace = buffer[:1], buffer[1:]
    module.per_tensor_quant_fp8(out, scale, workspace, input, is_static, True if enable_pdl is None else enable_pdl)
    return out, scale


def _per_token(op: str, dtype: torch.dtype, input: torch.Tensor, out: torch.Tensor | None, enable_pdl: bool | None):
    module = pick(_KERNELS["per_token"], op, "input", input)()
    out = _out(op, input, out, dtype)
    scales = torch.empty((*input.shape[:-1], 1), dtype=torch.float32, device=input.device)
    getattr(module, op)(out, scales.view(-1, 1), input, True if enable_pdl is None else enable_pdl)
    return out, scales


def per_token_quant_fp8(
    input: torch.Tensor, out: torch.Tensor | None = None, *, enable_pdl: bool | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """float8_e4m3fn quantization with one scale per row: ``scales = amax / 448`` (float32
    ``[..., 1]``). Returns ``(out, scales)``."""
    return _per_token("per_token_quant_fp8", torch.float8_e4m3fn, input, out, enable_pdl)


def per_token_quant_int8(
    input: torch.Tensor, out: torch.Tensor | None = None, *, enable_pdl: bool | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric int8 quantization with one scale per row: ``scales = amax / 127`` (float32
    ``[..., 1]``). Returns ``(out, scales)``."""
    return _per_token("per_token_quant_int8", torch.int8, input, out, enable_pdl)


def per_token_group_quant_fp8(
    input: torch.Tensor,
    group_size: int = 128,
    eps: float = 1e-10,
    column_major_scales: bool = False,
    scale_ue8m0: bool = False,
    out: torch.Tensor | None = None,
    *,
    enable_pdl: bool | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """float8_e4m3fn quantization per group of ``group_size`` (32, 64 or 128) elements of each
    row: ``scale = max(amax, eps) / 448``, rounded up to a power of two with ``scale_ue8m0``.

    Scales are float32 ``[..., hidden / group_size]``; with ``column_major_scales`` they are the
    transposed view of a ``[hidden / group_size, rows]`` buffer (rows = leading dims flattened,
    so the result is 2-D). Returns ``(out, scales)``.
    """
    op = "per_token_group_quant_fp8"
    module = pick(_KERNELS["per_group"], op, "input", input)()
    rows, hidden = row_shape(input, op)
    group_size = _check_group_size(op, group_size, hidden)
    out = _out(op, input, out, torch.float8_e4m3fn)
    scales, scales_2d = group_scales(input, rows, hidden // group_size, bool(column_major_scales))
    pdl = True if enable_pdl is None else enable_pdl
    module.per_token_group_quant_fp8(out, scales_2d, input, group_size, float(eps), bool(scale_ue8m0), pdl)
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
    module = pick(_KERNELS["per_group"], op, "input", input)()
    rows, hidden = row_shape(input, op)
    group_size = _check_group_size(op, group_size, hidden)
    out = _out(op, input, out, torch.int8)
    scales, scales_2d = group_scales(input, rows, hidden // group_size, False)
    pdl = True if enable_pdl is None else enable_pdl
    module.per_token_group_quant_int8(out, scales_2d, input, group_size, float(eps), pdl)
    return out, scales
