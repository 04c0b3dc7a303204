"""What the CPU and CUDA wrappers of an op share, so both devices behave and speak alike (the
Python side of ``include/mllm_kernel/op_args.hpp``): the dtypes the kernels are built for,
argument checks the kernels cannot make, result allocation in the layouts callers get back, and
the default of ``enable_pdl``. The kernels check every tensor themselves; these run only where a
wrapper needs a value before the kernel does.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable

import torch

#: The element types the LLM kernels are built for, in the order messages list them.
FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)

#: The constants ``add_constant`` is compiled for (one module each).
ADD_CONSTANTS = (1, 2, 4, 8, 16)


def dtype_names(*dtypes: torch.dtype) -> str:
    """``"float16, bfloat16"``: dtypes as messages name them."""
    return ", ".join(str(d).removeprefix("torch.") for d in dtypes)


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


#: float32 scales in a 16-byte unit, the grain of Hopper's TMA: column-major scales whose columns
#: are padded to a multiple of this many rows can be read by TMA in place at any number of rows.
TMA_SCALE_ROWS = 4


def column_major_empty(rows: int, cols: int, device: torch.device, *, tma_aligned: bool = False) -> torch.Tensor:
    """An uninitialised float32 ``[rows, cols]`` tensor, column-major: the transposed view of the
    first ``rows`` columns of a ``[cols, pitch]`` buffer, ``pitch`` being ``rows`` or, with
    ``tma_aligned``, ``rows`` rounded up to ``TMA_SCALE_ROWS``."""
    pitch = -(-rows // TMA_SCALE_ROWS) * TMA_SCALE_ROWS if tma_aligned else rows
    return torch.empty((cols, pitch), dtype=torch.float32, device=device)[:, :rows].t()


def group_scales(op: str, input: torch.Tensor, rows: int, groups: int, column_major: bool,
                 tma_aligned: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """float32 scales for per-group quantization of ``input`` seen as ``[rows, hidden]``: (the
    tensor returned to the caller, its ``[rows, groups]`` view that the kernel writes).

    Row-major scales keep the input's leading dims, ``[..., groups]``; column-major ones are the
    transposed view of a ``[groups, rows]`` buffer, the layout FP8 block-scaled GEMMs read, or
    with ``tma_aligned`` of a ``[groups, rows rounded up to 4]`` buffer's first ``rows`` columns
    (sglang's ``scale_tma_aligned``): each group's scales then start 16 bytes apart, which lets
    Hopper's TMA read them in place at any number of rows.
    """
    if tma_aligned and not column_major:
        raise ValueError(f"{op}: scale_tma_aligned needs column_major_scales")
    if column_major:
        scales = column_major_empty(rows, groups, input.device, tma_aligned=tma_aligned)
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
        raise ValueError(f"{op}: a float8_e4m3fn cache of {dtype_names(k_dtype)} k and v needs "
                         "k_scale and v_scale (float32 [1] tensors: the cache holds k / k_scale)")
    return False


def start_or_empty(kv_start_idx, page_kernel_lens):
    """create_kv_indices' ``kv_start_idx``, or for None an empty view of ``page_kernel_lens``
    (no allocation), which the kernels read as "every request starts at 0"."""
    if kv_start_idx is None and isinstance(page_kernel_lens, torch.Tensor):
        return page_kernel_lens[:0]
    return kv_start_idx


def out_of_range(op: str, name: str, indices: torch.Tensor, bad: torch.Tensor, where: str) -> ValueError:
    """The ValueError naming the first entry of ``indices`` that the mask ``bad`` marks, e.g.
    ``"store_kv_cache: slot_mapping[3] = 70 is out of range for a cache of 64 slots"`` (one more
    device-to-host read: for the error path only)."""
    flat = indices.reshape(-1)
    first = int(torch.nonzero(bad.reshape(-1))[0, 0])
    return ValueError(f"{op}: {name}[{first}] = {int(flat[first])} is out of range for {where}")


def store_cache_row_bytes(row_bytes: object) -> bool:
    """Whether ``store_cache`` supports rows of ``row_bytes`` bytes: a positive multiple of 4
    (an int, not a bool)."""
    return isinstance(row_bytes, int) and not isinstance(row_bytes, bool) and row_bytes > 0 and row_bytes % 4 == 0


def can_use_store_cache_with(row_bytes: object, build: Callable[[], bool]) -> bool:
    """``can_use_store_cache`` of a device whose module ``build`` builds (or loads): never
    raises; an unsupported row size or a failed build is logged as a warning and gives False."""
    if not store_cache_row_bytes(row_bytes):
        logging.getLogger("mllm_kernel").warning(
            "store_cache: rows of %r bytes are not supported (a positive multiple of 4 is)", row_bytes)
        return False
    return bool(build())


def store_cache_views(op: str, k, v, k_cache, v_cache, indices, row_bytes, num_split, validate: bool):
    """``store_cache``'s arguments checked and seen as bytes: (k, v, k_cache, v_cache) as uint8
    ``[rows, 1, row_bytes]`` views for the byte copy of ``store_kv_cache``, or None when the
    batch is empty (nothing to store).

    k, v ``[batch, row]`` with dense rows (row stride free); caches ``[slots, row]`` contiguous;
    all four of one dtype, any dtype; ``indices`` ``[batch]`` int32/int64, every index in
    ``[0, slots)``. ``validate`` reads the smallest and largest index back to the host (one
    sync) to say which is out of range; without it a bad index is skipped by the kernel."""
    for name, t in (("k", k), ("v", v), ("k_cache", k_cache), ("v_cache", v_cache), ("indices", indices)):
        require_tensor(t, op, name)
    if k.dim() != 2 or v.shape != k.shape:
        raise ValueError(f"{op}: k and v must be [batch, row] of one shape, got {tuple(k.shape)} and {tuple(v.shape)}")
    if k_cache.dim() != 2 or v_cache.shape != k_cache.shape or k_cache.shape[1] != k.shape[1]:
        raise ValueError(f"{op}: k_cache and v_cache must be [slots, {k.shape[1]}], got {tuple(k_cache.shape)} "
                         f"and {tuple(v_cache.shape)}")
    if len({k.dtype, v.dtype, k_cache.dtype, v_cache.dtype}) != 1:
        raise ValueError(f"{op}: k, v, k_cache and v_cache must have one dtype, got {k.dtype}, {v.dtype}, "
                         f"{k_cache.dtype} and {v_cache.dtype}")
    if len({k.device, v.device, k_cache.device, v_cache.device, indices.device}) != 1:
        raise ValueError(f"{op}: all tensors must be on one device, got k on {k.device}, v on {v.device}, "
                         f"k_cache on {k_cache.device}, v_cache on {v_cache.device}, indices on {indices.device}")
    if indices.dim() != 1 or indices.shape[0] != k.shape[0] or indices.dtype not in (torch.int32, torch.int64):
        raise ValueError(f"{op}: indices must be [{k.shape[0]}] int32 or int64, got {tuple(indices.shape)} "
                         f"{indices.dtype}")
    actual = k.shape[1] * k.element_size()
    if isinstance(row_bytes, bool) or not isinstance(row_bytes, int) or row_bytes not in (0, actual):
        raise ValueError(f"{op}: row_bytes must be 0 or the row size of k ({actual} bytes), got {row_bytes!r}")
    if isinstance(num_split, bool) or not isinstance(num_split, int) or num_split < 0:
        raise ValueError(f"{op}: num_split must be an int >= 0, got {num_split!r}")
    if not store_cache_row_bytes(actual):
        raise ValueError(f"{op}: rows of {actual} bytes are not supported (a positive multiple of 4 is; "
                         "see can_use_store_cache)")
    for name, t in (("k", k), ("v", v), ("k_cache", k_cache), ("v_cache", v_cache)):
        if t.shape[0] > 0 and t.stride(1) != 1:
            raise ValueError(f"{op}: {name}: rows must be dense (stride 1 along the row), got strides {t.stride()}")
    if k.shape[0] == 0:
        return None
    if validate and not (indices.is_cuda and torch.cuda.is_current_stream_capturing()):
        low, high = torch.stack([indices.min(), indices.max()]).tolist()
        if low < 0 or high >= k_cache.shape[0]:
            raise out_of_range(op, "indices", indices, (indices < 0) | (indices >= k_cache.shape[0]),
                               f"a cache of {k_cache.shape[0]} slots")
    as_rows = lambda t: t.view(torch.uint8).unsqueeze(1)  # noqa: E731
    return as_rows(k), as_rows(v), as_rows(k_cache), as_rows(v_cache)


def check_gdn_indices(op: str, state_pool, cache_indices, cu_seqlens=None, tokens: int | None = None) -> int | None:
    """Gated DeltaNet's index checks that need values: every cache index below the pool size
    (negative ones are padding), and ``cu_seqlens`` starting at 0, never decreasing and ending
    at ``tokens``. A ValueError naming the first bad entry; one device-to-host read on CUDA.
    Tensors the kernel's own checks refuse (types, dtypes, shapes) are left to those checks.
    Returns the longest sequence's length when cu_seqlens was checked (read in the same
    transfer), else None."""
    tensors = (state_pool, cache_indices) + (() if cu_seqlens is None else (cu_seqlens,))
    if not all(isinstance(t, torch.Tensor) for t in tensors) or state_pool.dim() != 4:
        return None
    if cache_indices.dtype != torch.int64 or cache_indices.dim() != 1:
        return None
    pool = state_pool.shape[0]
    checks = [cache_indices.max() if cache_indices.numel() else cache_indices.new_zeros(())]
    if cu_seqlens is not None:
        if cu_seqlens.dtype != torch.int64 or cu_seqlens.dim() != 1 or cu_seqlens.numel() == 0:
            return None
        steps = cu_seqlens.diff()
        none = cu_seqlens.new_zeros(())
        checks += [cu_seqlens[0], cu_seqlens[-1], steps.min() if steps.numel() else none,
                   steps.max() if steps.numel() else none]
    values = torch.stack([c.to(cache_indices.device) for c in checks]).tolist()
    if cache_indices.numel() and values[0] >= pool:
        raise out_of_range(op, "cache_indices", cache_indices, cache_indices >= pool, f"a state pool of {pool} slots")
    if cu_seqlens is None:
        return None
    first_value, last_value, smallest_step, longest = values[1:]
    if first_value != 0:
        raise ValueError(f"{op}: cu_seqlens must start at 0, got {first_value}")
    if smallest_step < 0:
        at = int(torch.nonzero(cu_seqlens.diff() < 0)[0, 0]) + 1
        raise ValueError(f"{op}: cu_seqlens must not decrease, got cu_seqlens[{at}] = {int(cu_seqlens[at])} after "
                         f"{int(cu_seqlens[at - 1])}")
    if last_value != tokens:
        raise ValueError(f"{op}: cu_seqlens must end at the number of tokens ({tokens}), got {last_value}")
    return longest


def _mm_matrices(op: str, mat_a, mat_b, operand_dtype: torch.dtype, out_dtype,
                 out_dtypes: tuple[torch.dtype, ...]) -> tuple[int, int, int]:
    """(M, N, K) of a scaled GEMM's operands: mat_a ``[M, K]`` row-major and mat_b ``[K, N]``
    column-major (``stride(0) == 1``), both of ``operand_dtype``; ``out_dtype`` one of
    ``out_dtypes``."""
    a = require_tensor(mat_a, op, "mat_a")
    b = require_tensor(mat_b, op, "mat_b")
    for name, t in (("mat_a", a), ("mat_b", b)):
        if t.dim() != 2:
            raise ValueError(f"{op}: {name}: must be 2-D, got shape {list(t.shape)}")
        if t.dtype != operand_dtype:
            raise ValueError(f"{op}: {name}: must be {dtype_names(operand_dtype)}, got {dtype_names(t.dtype)}")
    m, k = a.shape
    k_b, n = b.shape
    if k_b != k:
        raise ValueError(f"{op}: mat_a is [{m}, {k}] but mat_b is [{k_b}, {n}]: K differs")
    if a.stride(1) != 1 and k > 1:
        raise ValueError(f"{op}: mat_a: must be row-major (stride(1) == 1), got strides {list(a.stride())}")
    if b.stride(0) != 1 and k > 1:
        raise ValueError(f"{op}: mat_b: must be column-major (stride(0) == 1, the transpose of a row-major "
                         f"[N, K] weight), got strides {list(b.stride())}")
    if out_dtype not in out_dtypes:
        raise ValueError(f"{op}: out_dtype must be one of {dtype_names(*out_dtypes)}, got {out_dtype!r}")
    return m, n, k


def _same_device(op: str, a: torch.Tensor, tensors) -> None:
    for name, t in tensors:
        if t.device != a.device:
            raise ValueError(f"{op}: {name} is on {t.device} but mat_a is on {a.device}")


def scaled_mm_operands(op: str, mat_a, mat_b, scales_a, scales_b, out_dtype, bias, operand_dtype: torch.dtype,
                       out_dtypes: tuple[torch.dtype, ...]) -> tuple[int, int, int, torch.Tensor, torch.Tensor]:
    """Checks the arguments of a W8A8 scaled GEMM (``int8_scaled_mm``, ``fp8_scaled_mm``):
    the matrices as ``_mm_matrices`` checks them; float32 scales of 1 or M values (``[M]``,
    ``[M, 1]``, ``[1]``) and of 1 or N (``[N]``, ``[1, N]``); bias None or ``[N]`` of
    out_dtype; one device. Returns (M, N, K, scales_a, scales_b), the scales as 1-D views."""
    m, n, k = _mm_matrices(op, mat_a, mat_b, operand_dtype, out_dtype, out_dtypes)
    flat = []
    for name, s, length, shapes in (("scales_a", scales_a, m, f"[{m}], [{m}, 1] or [1]"),
                                    ("scales_b", scales_b, n, f"[{n}], [1, {n}] or [1]")):
        s = require_tensor(s, op, name)
        if s.dtype != torch.float32:
            raise ValueError(f"{op}: {name}: must be float32, got {dtype_names(s.dtype)}")
        ok = s.numel() in (1, length) and s.dim() in (1, 2) and (s.dim() == 1 or 1 in s.shape)
        if not ok:
            raise ValueError(f"{op}: {name}: must be {shapes}, got shape {list(s.shape)}")
        flat.append(s.reshape(-1))
    if bias is not None:
        bias = require_tensor(bias, op, "bias")
        if bias.shape != (n,) or bias.dtype != out_dtype:
            raise ValueError(f"{op}: bias: must be [{n}] of {dtype_names(out_dtype)}, got shape "
                             f"{list(bias.shape)} of {dtype_names(bias.dtype)}")
    _same_device(op, mat_a, [("mat_b", mat_b), ("scales_a", flat[0]), ("scales_b", flat[1])]
                 + ([("bias", bias)] if bias is not None else []))
    return m, n, k, flat[0], flat[1]


#: The block of a block-scaled GEMM (DeepSeek-V3's FP8 format): activations scaled per 1 x
#: BLOCK group along K, weights per BLOCK x BLOCK block.
SCALE_BLOCK = 128


def blockwise_scaled_mm_operands(op: str, mat_a, mat_b, scales_a, scales_b, out_dtype, operand_dtype: torch.dtype,
                                 out_dtypes: tuple[torch.dtype, ...]) -> tuple[int, int, int, torch.Tensor,
                                                                                   torch.Tensor]:
    """Checks the arguments of a block-scaled GEMM (``fp8_blockwise_scaled_mm``): the matrices
    as ``_mm_matrices`` checks them; float32 ``scales_a`` ``[M, ceil(K / 128)]`` and
    ``scales_b`` ``[ceil(N / 128), ceil(K / 128)]``; one device. Returns (M, N, K, scales_a,
    scales_b) in layouts the kernels read: ``scales_b`` with its K blocks contiguous
    (``stride(1) == 1``), ``scales_a`` so or column-major where TMA can read it in place
    (``tma_column_major``), each copied into the first layout otherwise."""
    m, n, k = _mm_matrices(op, mat_a, mat_b, operand_dtype, out_dtype, out_dtypes)
    k_blocks, n_blocks = -(-k // SCALE_BLOCK), -(-n // SCALE_BLOCK)
    out = []
    for name, s, shape in (("scales_a", scales_a, (m, k_blocks)), ("scales_b", scales_b, (n_blocks, k_blocks))):
        s = require_tensor(s, op, name)
        if s.dtype != torch.float32:
            raise ValueError(f"{op}: {name}: must be float32, got {dtype_names(s.dtype)}")
        if tuple(s.shape) != shape:
            raise ValueError(f"{op}: {name}: must be [{shape[0]}, {shape[1]}] (blocks of {SCALE_BLOCK} along K"
                             f"{'' if name == 'scales_a' else ' and N'}), got shape {list(s.shape)}")
        out.append(s)
    sa, sb = out
    _same_device(op, mat_a, [("mat_b", mat_b), ("scales_a", sa), ("scales_b", sb)])
    if k_blocks > 1:
        sa = sa if sa.stride(1) == 1 or tma_column_major(sa) else sa.contiguous()
        sb = sb if sb.stride(1) == 1 else sb.contiguous()
    return m, n, k, sa, sb


def tma_column_major(scales: torch.Tensor) -> bool:
    """Whether float32 ``scales`` ``[rows, blocks]`` are column-major in the layout TMA reads in
    place: columns a multiple of 16 bytes apart from a 16-byte aligned start, and each column's
    rows up to the next multiple of 4 inside the tensor's storage (TMA reads them too;
    ``scale_tma_aligned`` scales, sglang's and the package's, pad them; the package's
    ``column_major_scales`` output without it needs a multiple of 4 rows)."""
    rows, blocks = scales.shape
    if scales.stride(0) != 1 or scales.stride(1) % TMA_SCALE_ROWS or scales.data_ptr() % 16:
        return False
    reach = scales.storage_offset() + (blocks - 1) * scales.stride(1) + -(-rows // TMA_SCALE_ROWS) * TMA_SCALE_ROWS
    return reach * scales.element_size() <= scales.untyped_storage().nbytes()


def marlin_sizes(op: str, size_k: object, size_n: object, num_bits: object = 4) -> tuple[int, int, int]:
    """Checks the sizes of a Marlin-format weight (K a multiple of 16, N of 64, 4 or 8 bits)."""
    for name, value in (("size_k", size_k), ("size_n", size_n), ("num_bits", num_bits)):
        if not isinstance(value, int) or isinstance(value, bool):
            raise ValueError(f"{op}: {name} must be an int, got {type(value).__name__}")
    if num_bits not in (4, 8):
        raise ValueError(f"{op}: num_bits must be 4 or 8, got {num_bits}")
    if size_k <= 0 or size_k % 16:
        raise ValueError(f"{op}: size_k = {size_k} must be a positive multiple of 16")
    if size_n <= 0 or size_n % 64:
        raise ValueError(f"{op}: size_n = {size_n} must be a positive multiple of 64")
    return size_k, size_n, num_bits


def marlin_repack_out(op: str, b_q_weight: object, size_k: object, size_n: object,
                      num_bits: object) -> tuple[int, int, int, torch.Tensor]:
    """A repack's sizes, checked as ``marlin_sizes`` does, and its output: int32
    ``[size_k / 16, size_n * 16 * num_bits / 32]`` on b_q_weight's device."""
    size_k, size_n, num_bits = marlin_sizes(op, size_k, size_n, num_bits)
    weight = require_tensor(b_q_weight, op, "b_q_weight")
    out = torch.empty((size_k // 16, size_n * 16 * num_bits // 32), dtype=torch.int32, device=weight.device)
    return size_k, size_n, num_bits, out


def marlin_perm(op: str, perm: object, size_k: int, device: torch.device, validate: bool = True) -> torch.Tensor:
    """A GPTQ act-order row permutation as int32 ``[size_k]`` (None: an empty tensor; an empty
    one is returned as it is).
    With ``validate``, values outside ``[0, size_k)`` raise (one device-to-host sync)."""
    if perm is None:
        return torch.empty(0, dtype=torch.int32, device=device)
    perm = require_tensor(perm, op, "perm")
    if perm.numel() == 0:
        return perm
    if perm.dtype not in (torch.int32, torch.int64) or perm.shape != (size_k,):
        raise ValueError(f"{op}: perm: must be an int32 or int64 tensor [{size_k}] (or empty), got shape "
                         f"{list(perm.shape)} of {dtype_names(perm.dtype)}")
    if validate and not (perm.device.type == "cuda" and torch.cuda.is_current_stream_capturing()):
        low, high = int(perm.min()), int(perm.max())
        if low < 0 or high >= size_k:
            raise ValueError(f"{op}: perm: values must lie in [0, {size_k}), got [{low}, {high}]")
    return perm.to(torch.int32).contiguous()


def marlin_weight_type(op: str, b_q_type_id: object, supported: dict) -> tuple[int, bool]:
    """(bits, whether zero points come with it) of a ``b_q_type_id`` (a ScalarType or its id)
    among ``supported`` (id -> that pair); any other type is a ValueError that names it."""
    from mllm_kernel.scalar_type import ScalarType

    if isinstance(b_q_type_id, ScalarType):
        b_q_type_id = b_q_type_id.id
    if b_q_type_id not in supported:
        try:
            name = str(ScalarType.from_id(b_q_type_id))
        except ValueError:
            name = repr(b_q_type_id)
        names = ", ".join(f"{ScalarType.from_id(i)}{' with zero points' if z else ''}" for i, (_, z) in supported.items())
        raise ValueError(f"{op}: b_q_type_id: weight type {name} is not supported ({names})")
    return supported[b_q_type_id]


def marlin_gemm_operands(op: str, a: object, c: torch.Tensor | None, global_scale: torch.Tensor | None,
                         b_zeros: torch.Tensor | None, perm: torch.Tensor | None, b_q_type_id: object, size_m: object,
                         size_n: object, size_k: object, is_zp_float: bool, dtypes: tuple, device_type: str,
                         weight_types: dict, gather=None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, int]:
    """The checks and preparation ``gptq_marlin_gemm`` shares across devices: returns (a, c,
    zeros, bits) with a's columns gathered in ``perm`` order for act-order (``gather(a, perm)``
    when given, else ``index_select``; and its rows made contiguous and 16-byte aligned
    otherwise), c allocated when None, zeros an empty int32 tensor when absent."""
    from mllm_kernel.scalar_type import ScalarType

    bits, needs_zeros = marlin_weight_type(op, b_q_type_id, weight_types)
    if is_zp_float:
        raise ValueError(f"{op}: is_zp_float (float zero points) is not supported")
    if global_scale is not None and global_scale.numel() > 0:
        raise ValueError(f"{op}: global_scale is for NVFP4 weights, which are not supported")
    a = require_tensor(a, op, "a")
    if a.dtype not in dtypes:
        raise ValueError(f"{op}: a: dtype must be one of {dtype_names(*dtypes)}, got {dtype_names(a.dtype)}")
    if a.device.type != device_type:
        raise ValueError(f"{op}: a: must be a {device_type.upper()} tensor, got {a.device}")
    has_zeros = b_zeros is not None and b_zeros.numel() > 0
    zeros = b_zeros if has_zeros else torch.empty(0, dtype=torch.int32, device=a.device)
    if needs_zeros and not has_zeros:
        raise ValueError(f"{op}: b_zeros: uint4 weights need zero points")
    if not needs_zeros and has_zeros:
        type_id = getattr(b_q_type_id, "id", b_q_type_id)
        raise ValueError(f"{op}: b_zeros: weight type {ScalarType.from_id(type_id)} takes no zero points")
    for name, value in (("size_m", size_m), ("size_n", size_n), ("size_k", size_k)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ValueError(f"{op}: {name} must be a non-negative int, got {value!r}")
    perm = None if perm is None else marlin_perm(op, perm, size_k, a.device, validate=False)
    if perm is not None and perm.numel() > 0:
        if a.dim() != 2 or a.shape[1] != size_k:
            raise ValueError(f"{op}: a: must be [{size_m}, {size_k}], got shape {list(a.shape)}")
        a = gather(a, perm) if gather is not None else a.index_select(1, perm)
    elif a.dim() == 2 and (a.stride(1) != 1 or a.stride(0) % 8 or a.data_ptr() % 16):
        a = a.contiguous() if not a.is_contiguous() else a.clone()
    if c is None:
        c = torch.empty((size_m, size_n), dtype=a.dtype, device=a.device)
    return a, c, zeros, bits
