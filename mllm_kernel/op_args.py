"""What the CPU and CUDA wrappers of an op share, so both devices behave and speak alike (the
Python side of ``include/mllm_kernel/op_args.hpp``): the dtypes the kernels are built for,
argument checks the kernels cannot make, result allocation in the layouts callers get back, and
the default of ``enable_pdl``. The kernels check every tensor themselves; these run only where a
wrapper needs a value before the kernel does.
"""

from __future__ import annotations

import math

import torch

#: The element types the LLM kernels are built for, in the order messages list them.
FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)

#: The constants ``add_constant`` is compiled for (one module each).
ADD_CONSTANTS = (1, 2, 4, 8, 16)


def resolve_pdl(enable_pdl: bool | None) -> bool:
    """``enable_pdl`` of a CUDA op: programmatic dependent launch is on by default (``None``), as
    in flashinfer and sglang; the launch leaves it off below sm_90 (docs/pdl.md)."""
    return True if enable_pdl is None else enable_pdl


def require_tensor(value: object, op: str, name: str) -> torch.Tensor:
    """``value`` if it is a tensor, else a ValueError naming the op and the argument (for the
    wrappers that read a shape before the kernel checks the rest)."""
    if not isinstance(value, torch.Tensor):
        raise ValueError(f"{op}: {name}: must be a torch.Tensor, got {type(value).__name__}")
    return value


def row_shape(input: object, op: str) -> tuple[int, int]:
    """(rows, last dim) of ``input`` [..., last] as the kernels see it, leading dims merged; a
    ValueError for a non-tensor or a 0-dim tensor (the kernel checks the rest)."""
    shape = require_tensor(input, op, "input").shape
    if not shape:
        raise ValueError(f"{op}: input: must have at least 1 dim, got a 0-dim tensor")
    return math.prod(shape[:-1]), shape[-1]


def group_scales(input: torch.Tensor, rows: int, groups: int, column_major: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """float32 scales for per-group quantization of ``input`` seen as ``[rows, hidden]``: (the
    tensor returned to the caller, its ``[rows, groups]`` view that the kernel writes).

    Row-major scales keep the input's leading dims, ``[..., groups]``; column-major ones are the
    transposed view of a ``[groups, rows]`` buffer, the layout FP8 block-scaled GEMMs read.
    """
    if column_major:
        scales = torch.empty((groups, rows), dtype=torch.float32, device=input.device).t()
        return scales, scales
    scales = torch.empty((*input.shape[:-1], groups), dtype=torch.float32, device=input.device)
    return scales, scales.view(-1, groups)


def check_add_constant(constant: object) -> int:
    """``add_constant``'s constant when it is one of ADD_CONSTANTS (a bool is not), else a ValueError."""
    if isinstance(constant, bool) or not isinstance(constant, int) or constant not in ADD_CONSTANTS:
        raise ValueError(f"add_constant: constant must be one of {ADD_CONSTANTS}, got {constant!r}")
    return constant


def wants_fp8_store(op: str, k: torch.Tensor, k_cache: torch.Tensor, k_scale, v_scale) -> bool:
    """Which KV-cache store a call asks for: True for the quantizing store into float8_e4m3fn
    caches (both scales given), False for the copy (neither given).

    Raises ValueError when only one scale is given, or when the caches are float8_e4m3fn, k is
    not, and the scales are missing: a message that says what to pass."""
    if (k_scale is None) != (v_scale is None):
        raise ValueError(f"{op}: k_scale and v_scale go together: pass both (float8 cache) or neither")
    if k_scale is not None:
        return True
    cache_dtype = getattr(k_cache, "dtype", None)
    k_dtype = getattr(k, "dtype", None)
    if cache_dtype == torch.float8_e4m3fn and k_dtype not in (None, torch.float8_e4m3fn):
        raise ValueError(f"{op}: a float8_e4m3fn cache of {str(k_dtype).removeprefix('torch.')} k and v needs "
                         "k_scale and v_scale (float32 [1] tensors: the cache holds k / k_scale)")
    return False


def start_or_empty(kv_start_idx, page_kernel_lens):
    """create_kv_indices' ``kv_start_idx``, or for None an empty view of ``page_kernel_lens``
    (no allocation), which the kernels read as "every request starts at 0"."""
    if kv_start_idx is None and isinstance(page_kernel_lens, torch.Tensor):
        return page_kernel_lens[:0]
    return kv_start_idx
