"""Preparing GPTQ / AWQ checkpoints for ``gptq_marlin_gemm``, the way serving engines do.

The weights go through ``gptq_marlin_repack`` / ``awq_marlin_repack`` (kernels); scales and
zero points are permuted here, on any device (the layout: ``include/mllm_kernel/marlin.hpp``)::

    from mllm_kernel import marlin
    from mllm_kernel.cuda.jit import awq_marlin_repack, gptq_marlin_gemm
    from mllm_kernel.scalar_type import scalar_types

    q = awq_marlin_repack(qweight, k, n, 4)                       # AWQ [K, N / 8] int32
    s = marlin.marlin_permute_scales(scales, k, n, group_size)    # [K / group_size, N]
    z = marlin.awq_to_marlin_zero_points(qzeros, k // group_size, n, 4)
    y = gptq_marlin_gemm(x, None, q, s, None, z, None, None, marlin.marlin_make_workspace(x.device),
                         scalar_types.uint4.id, x.shape[0], n, k)

float8_e4m3fn weights (an FP8 checkpoint on a GPU without FP8 tensor cores) go through
``gptq_marlin_repack(pack_fp8_to_int32(weight), None, k, n, 8)``; their scales, permuted, then
take the exponent bias the kernel leaves in (``fp8_fused_exponent_bias_into_scales``).
"""

from __future__ import annotations

import torch

__all__ = ["awq_to_marlin_zero_points", "fp8_fused_exponent_bias_into_scales", "marlin_make_empty_g_idx",
           "marlin_make_workspace", "marlin_permute_scales", "marlin_sort_g_idx", "marlin_zero_points", "pack_columns",
           "pack_fp8_to_int32", "scale_perm", "scale_perm_single", "to_int32_bits"]

#: Slot q of a packed word holds value INTERLEAVE[bits][q] of its run (the dequantizer's order).
INTERLEAVE = {4: (0, 2, 4, 6, 1, 3, 5, 7), 8: (0, 2, 1, 3)}


def scale_perm() -> list[int]:
    """Order of the 64 columns of a run in a permuted scale row (several groups)."""
    return [i + 8 * j for i in range(8) for j in range(8)]


def scale_perm_single() -> list[int]:
    """Order of the 32 columns of a run in a permuted scale row (channel-wise)."""
    return [2 * i + j for i in range(4) for j in (0, 1, 8, 9, 16, 17, 24, 25)]


def _take_columns(x: torch.Tensor, order: list[int]) -> torch.Tensor:
    index = torch.tensor(order, device=x.device)
    return x.reshape(-1, len(order))[:, index]


def _bits(num_bits: int) -> int:
    if num_bits not in INTERLEAVE:
        raise ValueError(f"num_bits must be 4 or 8, got {num_bits}")
    return num_bits


def marlin_permute_scales(s: torch.Tensor, size_k: int, size_n: int, group_size: int) -> torch.Tensor:
    """Scales ``[groups, size_n]`` in Marlin's order (group_size -1 or size_k: channel-wise)."""
    several = group_size != -1 and group_size < size_k
    return _take_columns(s, scale_perm() if several else scale_perm_single()).reshape(-1, size_n).contiguous()


def pack_columns(q: torch.Tensor, num_bits: int) -> torch.Tensor:
    """Values [rows, N] (0 .. 2^bits - 1) packed along N, value i of each run at bits i * num_bits."""
    per_word = 32 // num_bits
    q = q.to(torch.int64).reshape(q.shape[0], -1, per_word)
    words = (q << (torch.arange(per_word, device=q.device) * num_bits)).sum(-1)
    return to_int32_bits(words)


def to_int32_bits(words: torch.Tensor) -> torch.Tensor:
    """32-bit patterns held in int64 (0 .. 2^32 - 1) as int32 with the same bits."""
    return ((words + (1 << 31)) % (1 << 32) - (1 << 31)).to(torch.int32)


def _unpack_columns(packed: torch.Tensor, num_bits: int) -> torch.Tensor:
    per_word = 32 // num_bits
    shifts = torch.arange(per_word, device=packed.device) * num_bits
    values = (packed.to(torch.int64)[..., None] >> shifts) & ((1 << num_bits) - 1)
    return values.reshape(packed.shape[0], -1)


def marlin_zero_points(zp: torch.Tensor, size_k: int, size_n: int, num_bits: int) -> torch.Tensor:
    """Zero points ``[groups, size_n]`` (plain integers; ``size_k`` is the number of groups)
    permuted like grouped scales, interleaved, packed: ``[groups, size_n * num_bits / 32]`` int32."""
    num_bits = _bits(num_bits)
    zp = _take_columns(zp, scale_perm())
    zp = _take_columns(zp, list(INTERLEAVE[num_bits])).reshape(-1, size_n)
    return pack_columns(zp, num_bits)


def awq_to_marlin_zero_points(q_zp_packed: torch.Tensor, size_k: int, size_n: int, num_bits: int) -> torch.Tensor:
    """AWQ's packed zero points ``[groups, size_n * num_bits / 32]`` (``size_k`` is the number of
    groups) to Marlin's."""
    num_bits = _bits(num_bits)
    zp = _unpack_columns(q_zp_packed, num_bits)
    undo = sorted(range(len(INTERLEAVE[num_bits])), key=INTERLEAVE[num_bits].__getitem__)
    zp = _take_columns(zp, undo).reshape(-1, size_n)
    return marlin_zero_points(zp, size_k, size_n, num_bits)


def marlin_sort_g_idx(g_idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """GPTQ act-order: (g_idx sorted, the permutation that sorts it), both int32; pass the
    permutation to ``gptq_marlin_repack`` and both to ``gptq_marlin_gemm``."""
    order = torch.argsort(g_idx, stable=True).to(torch.int32)
    return g_idx[order.long()].to(torch.int32).contiguous(), order


def marlin_make_workspace(device: torch.device | str, max_blocks_per_sm: int = 1) -> torch.Tensor:
    """A zeroed int32 workspace of one counter per SM (times max_blocks_per_sm)."""
    device = torch.device(device)
    sms = torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 1
    return torch.zeros(sms * max_blocks_per_sm, dtype=torch.int32, device=device)


def marlin_make_empty_g_idx(device: torch.device | str) -> torch.Tensor:
    return torch.empty(0, dtype=torch.int32, device=device)


def pack_fp8_to_int32(weight: torch.Tensor, size_k_first: bool = True) -> torch.Tensor:
    """A float8_e4m3fn weight (``[K, N]``, or ``[N, K]`` with ``size_k_first=False``) packed as
    GPTQ packs 8-bit values: ``[K / 4, N]`` int32 (or ``[N, K / 4]``), four consecutive rows of
    K a word, the lowest first; ``gptq_marlin_repack(..., num_bits=8)`` takes the ``[K / 4, N]``
    form."""
    if weight.dtype != torch.float8_e4m3fn or weight.dim() != 2:
        raise ValueError(f"pack_fp8_to_int32: weight must be a 2-D float8_e4m3fn tensor, got {weight.dtype} "
                         f"of shape {list(weight.shape)}")
    rows_n = (weight.t() if size_k_first else weight).contiguous()  # [N, K]: K contiguous
    if rows_n.shape[1] % 4:
        raise ValueError(f"pack_fp8_to_int32: K must be a multiple of 4, got {rows_n.shape[1]}")
    words = rows_n.view(torch.uint8).view(torch.int32)  # little-endian: row 4 j + i in byte i
    return words.t().contiguous() if size_k_first else words


def fp8_fused_exponent_bias_into_scales(scales: torch.Tensor) -> torch.Tensor:
    """Scales for float8_e4m3fn weights times the power of two the GEMM leaves out: it moves a
    float8 value's bits under a 16-bit float's sign without rebiasing the exponent, which is the
    value times 2^-(2^(e-1) - 2^3) for a target exponent of e bits: 2^-8 for float16 scales,
    2^-120 for bfloat16. The scales must already be in the activations' dtype (the power differs
    between the two), so other dtypes are a ValueError."""
    exponent_bits = {torch.float16: 5, torch.bfloat16: 8}.get(scales.dtype)
    if exponent_bits is None:
        raise ValueError("fp8_fused_exponent_bias_into_scales: scales must be float16 or bfloat16 (the "
                         f"activations' dtype), got {str(scales.dtype).removeprefix('torch.')}")
    return scales * 2.0 ** (2 ** (exponent_bits - 1) - 2 ** 3)
