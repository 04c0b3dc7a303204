"""CUDA ``gptq_marlin_gemm``: the weight-only quantized GEMM (W4A16 / W8A16, GPTQ and AWQ) on
Marlin-format weights, with vLLM's and sglang's signature (format:
``mllm_kernel/include/mllm_kernel/marlin.hpp``; kernel: ``mllm_kernel/cuda/csrc/marlin_gemm.cuh``).
Modules per activation dtype (float16, bfloat16) and weight type (4-bit, 8-bit integers,
float8_e4m3fn: FP8 checkpoints on GPUs without FP8 tensor cores), one kernel each (the general
kernel's variants: ``GEMM_KERNELS``), so that a first call compiles only the kernel it runs;
sm_80 and newer. Decoding
(up to ``GEMV_MAX_ROWS`` rows) runs ``csrc/marlin_gemv.cuh``, whose warps stream the weights
through rings of shared memory. On Hopper, 17 to 1024 rows (4-bit GPTQ, act-order too, or AWQ;
8-bit GPTQ or float8 weights) run ``csrc/marlin_wgmma.cuh`` (the weights as wgmma's register
operand).
From ``DENSE_MIN_M`` rows of activations on (beyond that on Hopper, for what its kernel takes),
where the product is compute-bound, the weights are
dequantized into a temporary ``[N, K]`` matrix (``csrc/marlin_dequant.cuh``) and multiplied by
cuBLAS (``torch.mm``), as serving engines do for large batches.

Weights come from ``gptq_marlin_repack`` / ``awq_marlin_repack``, scales and zero points
permuted as serving code does (``mllm_kernel.marlin`` has the helpers)::

    from mllm_kernel.scalar_type import scalar_types
    c = gptq_marlin_gemm(a, None, q_weight, scales, None, zeros, g_idx, perm, workspace,
                         scalar_types.uint4b8.id, m, n, k)
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NamedTuple

import torch

from mllm_kernel.cuda.jit.device_info import capability as _capability
from mllm_kernel.cuda.jit.device_info import sm_count as _sm_count
from mllm_kernel.jit_utils import KernelTable, jit_module, make_cpp_args
from mllm_kernel.jit_utils import precompile as jit_precompile
from mllm_kernel.op_args import marlin_gemm_operands
from mllm_kernel.scalar_type import scalar_types

_OP = "gptq_marlin_gemm"
HALF_DTYPES = (torch.float16, torch.bfloat16)
#: Weight types this GEMM takes: type id -> (bits, whether zero points come with it).
WEIGHT_TYPES = {scalar_types.uint4b8.id: (4, False), scalar_types.uint4.id: (4, True),
                scalar_types.uint8b128.id: (8, False), scalar_types.float8_e4m3fn.id: (8, False)}
#: The module of each weight type: its bits, or FP8 for float8_e4m3fn.
FP8 = "fp8"


def _weights(type_id: int, bits: int):
    """The modules' key for a weight type: 4, 8 or FP8."""
    return FP8 if type_id == scalar_types.float8_e4m3fn.id else bits


class GemmKernel(NamedTuple):
    """One of the general kernel's variants, each its own module so that a first call compiles
    only the kernel it runs: 16-row tiles a block (1, 2 or 4), GPTQ act-order or not, and the
    MMA operands swapped (up to SWAP_ROWS rows on one tile, no act-order) or not."""
    m_tiles: int
    act_order: bool
    swapped: bool


#: Every variant of the general kernel.
GEMM_KERNELS = (*(GemmKernel(t, False, False) for t in (1, 2, 4)), GemmKernel(1, False, True),
                *(GemmKernel(t, True, False) for t in (1, 2, 4)))


def gemm_kernel(m: int, m_tiles: int, act_order: bool) -> GemmKernel:
    """The general kernel a call of m rows runs on ``m_tiles``-tile blocks."""
    return GemmKernel(m_tiles, act_order, m_tiles == 1 and m <= SWAP_ROWS and not act_order)


def _weight_args(dtype: torch.dtype, weights) -> tuple:
    """The template arguments T, kBits, kFp8 of a module for a's dtype and ``weights``."""
    return (dtype, 8, True) if weights == FP8 else (dtype, weights, False)


def _declare(dtype: torch.dtype, weights, kernel: GemmKernel):
    """One general kernel (csrc/marlin_gemm.cuh) and its occupancy query."""
    args = make_cpp_args(*_weight_args(dtype, weights), *kernel)
    return jit_module("marlin_gemm", args=args, device="cuda", cuda_files=["marlin_gemm.cuh"],
                      cuda_wrappers=[("marlin_gemm", f"marlin_gemm<{args}>"),
                                     ("marlin_blocks_per_sm", f"marlin_blocks_per_sm<{args}>")])


def _declare_gemv(dtype: torch.dtype, weights, act_order: bool):
    """The decoding GEMV (csrc/marlin_gemv.cuh), with act-order or without."""
    args = make_cpp_args(*_weight_args(dtype, weights), act_order)
    return jit_module("marlin_gemv", args=args, device="cuda", cuda_files=["marlin_gemv.cuh"],
                      cuda_wrappers=[("marlin_gemv", f"marlin_gemv<{args}>")])


def _declare_dequant(dtype: torch.dtype, weights):
    """The large-M path's dequantization (csrc/marlin_dequant.cuh)."""
    args = make_cpp_args(*_weight_args(dtype, weights))
    return jit_module("marlin_dequant", args=args, device="cuda", cuda_files=["marlin_dequant.cuh"],
                      cuda_wrappers=[("marlin_dequant", f"marlin_dequant<{args}>")])


def _declare_gather(dtype: torch.dtype):
    """GPTQ act-order's gather of the activations' columns: its own module, which only
    act-order calls build."""
    args = make_cpp_args(dtype)
    return jit_module("column_gather", args=args, device="cuda", cuda_files=["column_gather.cuh"],
                      cuda_wrappers=[("column_gather", f"column_gather<{args}>")])


def _declare_wgmma(dtype: torch.dtype, weights, act_order: bool):
    """The Hopper kernel (csrc/marlin_wgmma.cuh; any rows, routed 17 to 1024), for a weight type,
    with act-order or without: sm_90a only. The plain 4-bit module also answers how many clusters
    the GPU runs at once (every module's blocks take one SM each)."""
    args = make_cpp_args(*_weight_args(dtype, weights), act_order)
    wrappers = [("marlin_wgmma_gemm", f"marlin_wgmma_gemm<{args}>")]
    if weights == 4 and not act_order:
        wrappers.append(("marlin_wgmma_clusters_at_once", f"marlin_wgmma_clusters_at_once<{make_cpp_args(dtype)}>"))
    return jit_module("marlin_wgmma", args=args, device="cuda", cuda_files=["marlin_wgmma.cuh"],
                      cuda_wrappers=wrappers, cuda_archs=["9.0a"])


_WEIGHTS = (4, 8, FP8)
#: The general kernel's modules by (dtype, weights, GemmKernel).
_GEMM_MODULES = {(dtype, weights, kernel): _declare(dtype, weights, kernel)
                 for dtype in HALF_DTYPES for weights in _WEIGHTS for kernel in GEMM_KERNELS}
_GATHER = KernelTable(_OP, {dtype: _declare_gather(dtype) for dtype in HALF_DTYPES}, arg="a", export="column_gather")
_GEMM = KernelTable(_OP, _GEMM_MODULES, arg="a", export="marlin_gemm")
_BLOCKS_PER_SM = KernelTable(_OP, _GEMM_MODULES, arg="a", export="marlin_blocks_per_sm")
#: The GEMV's by (dtype, weights, act-order), the dequantization's by (dtype, weights).
_GEMV = KernelTable(_OP, {(dtype, weights, act_order): _declare_gemv(dtype, weights, act_order)
                          for dtype in HALF_DTYPES for weights in _WEIGHTS for act_order in (False, True)},
                    arg="a", export="marlin_gemv")
_DEQUANT = KernelTable(_OP, {(dtype, weights): _declare_dequant(dtype, weights)
                             for dtype in HALF_DTYPES for weights in _WEIGHTS}, arg="a", export="marlin_dequant")
#: The Hopper kernel's by (dtype, weights, act-order: GPTQ's integer weights only).
_WGMMA_MODULES = {(dtype, weights, act_order): _declare_wgmma(dtype, weights, act_order)
                  for dtype in HALF_DTYPES for weights in _WEIGHTS for act_order in (False, True)
                  if weights != FP8 or not act_order}
_WGMMA = KernelTable(_OP, _WGMMA_MODULES, arg="a", export="marlin_wgmma_gemm")
_WGMMA_CLUSTERS = KernelTable(_OP, {dtype: _WGMMA_MODULES[(dtype, 4, False)] for dtype in HALF_DTYPES}, arg="a",
                              export="marlin_wgmma_clusters_at_once")


def precompile(*, wait: bool = True):
    """Builds (or loads) the modules now; see ``jit_utils.precompile``."""
    return jit_precompile(_GEMM, _GEMV, _DEQUANT, _GATHER, _WGMMA, wait=wait)


@functools.lru_cache(maxsize=None)
def _locks(device: torch.device, sm_count: int) -> torch.Tensor:
    """Split-K arrival counters for calls whose workspace is too small (the split output blocks
    number at most two an SM: the wgmma kernel splits at most half the SMs' worth of tiles, the
    others only while they fit one wave); kernels leave them zero."""
    return torch.zeros(2 * sm_count, dtype=torch.int32, device=device)


@functools.lru_cache(maxsize=None)
def _empty(device: torch.device) -> torch.Tensor:
    """The empty int32 tensor that stands for an absent optional argument."""
    return torch.empty(0, dtype=torch.int32, device=device)


#: Output columns a block computes (kBlockN in csrc/marlin_gemm.cuh).
BLOCK_N = 256
#: 16-row steps of K in one pipeline stage (kStageRows there).
STAGE_STEPS = 8
#: Rows up to which the kernel swaps its MMA operands (kSwapRows there; not with act-order).
SWAP_ROWS = 8

#: Rows up to which layers take the GEMV kernel (kGemvMaxRows in csrc/marlin_gemv.cuh). H100,
#: M = 9, 12 and 16, one process against the general kernel: faster at every Llama-3-8B shape
#: (14336 x 4096 M = 16: 20.0 against 23.9 µs) and at 28672 x 4096 (37.1 against 39.8) and
#: 8960 x 1536; at 11008 x 4096 (172 blocks for 132 SMs) 8-bit weights were 6% slower.
GEMV_MAX_ROWS = 16
#: Weights (N x K) from which the GEMV kernel runs, the smallest layer measured (below, the
#: general kernel). H100, M = 1, 8 and 16, one process, over 18 shapes from 512 x 1024 to
#: 28672 x 4096: the GEMV was faster at every one up to 8 rows (896 x 896 M = 1: 2.9 against
#: 4.6 µs; 512 x 1024: 3.7 against 4.6).
GEMV_MIN_WEIGHTS = 1 << 19
#: Blocks of the GEMV kernel an SM holds (its __launch_bounds__).
GEMV_BLOCKS_PER_SM = 2
#: 16-row steps of K a GEMV split takes at least (a 4-bit stage for each of its 8 warps).
GEMV_MIN_SPLIT_STEPS = 32


def gemv_group_rows(bits: int) -> int:
    """Rows of K in a stage of a GEMV warp's ring (gemv_stage_steps there, 16 rows a step): its
    groups must be a multiple of them."""
    return 16 * 16 // bits


def gemv_applies(a: torch.Tensor, m: int, n: int, k: int, bits: int, scales, act_order: bool,
                 zeros: torch.Tensor) -> bool:
    """Whether a call runs the GEMV kernel: up to GEMV_MAX_ROWS rows on a layer of
    GEMV_MIN_WEIGHTS weights or more, with channel-wise scales or groups of a multiple of
    ``gemv_group_rows(bits)`` rows (with act-order: as many rows a group on average, and no zero
    points), on sm_90+ (where it was measured)."""
    if m > GEMV_MAX_ROWS or n * k < GEMV_MIN_WEIGHTS or (act_order and zeros.numel() > 0):
        return False
    if not (isinstance(scales, torch.Tensor) and scales.dim() == 2 and scales.size(0) >= 1):
        return False
    groups = scales.size(0)
    if groups > 1 and (k % groups or (k // groups) % gemv_group_rows(bits)):
        return False
    return _capability(a.device.index) >= (9, 0)


#: Rows of a the Hopper kernel takes (WGMMA_MIN_ROWS to WGMMA_MAX_ROWS). Measured with blocks of
#: 128 rows only (before those of 256), H100, group 128, bf16, graph replays, one process, the
#: kernel forced against the route each size had, at the four Llama-3-8B shapes: M = 48
#: 1.11-1.44x GPTQ and 1.06-1.41x AWQ over the general kernel; M = 512 1.22-1.62x over
#: dequantization and cuBLAS, M = 1024 0.97-1.17x (14336 x 4096 GPTQ the one below 1), M = 768
#: 0.94-1.09x (the blocks in 1.5 waves). Not beyond 1024, where the dense path catches up (M =
#: 1536: 0.86-1.05x, M = 2048: 0.78-0.96x). From 17 rows (the GEMV's end) since a last block
#: copies only its rows (csrc/marlin_wgmma.cuh): M = 17-47 1.08-2.29x the general kernel, GPTQ
#: and AWQ, bf16 and fp16, at every Llama shape (at M = 32 it had been 0.76-1.07x).
WGMMA_MIN_ROWS = 17
WGMMA_MAX_ROWS = 1024
#: Blocks of fewer rows for calls of up to 64 rows (the fewest of these that holds them): wgmma's
#: N is the block's rows, so a block runs no products for rows past M. H100, bf16 GPTQ group 128,
#: graph replays, one process, against blocks of 128 rows at the four Llama-3-8B shapes (outputs
#: bit-identical): M = 24 and 32 in blocks of 32 rows 1.18-1.22x (14336 x 4096 M = 32: 28.1 ->
#: 23.0 µs), M = 48 and 64 in blocks of 64 rows 1.11-1.19x (4096 x 14336 M = 64: 32.3 -> 27.2).
#: Up to 16 rows the GEMV stays faster (blocks of 16 rows 0.83-0.92x of it at M = 16), and 65-128
#: rows in two blocks of 64 took 1.04-1.70x the time of one block of 128.
WGMMA_FEW_ROWS = (32, 64)
#: Output columns of its blocks, and K its splits take in multiples of (two 64-row stages).
WGMMA_BLOCK_N = 128
WGMMA_SPLIT_K = 128
#: The Hopper kernel's cost model, in waves of blocks of 128 rows (H100, one process, forced
#: plans at the four Llama shapes, M = 128-1024): a wave of blocks of 256 rows takes 1.65 of them
#: (each weight dequantized once for twice the products), and a split tail wave 1 / splits plus
#: its fix-up and pipeline fill: 0.25 of a wave for blocks of 128 rows, 0.4 for 256, and 0.045
#: more for each split past 4, whose partial sums the last split reads alone (M = 128, K = 4096:
#: 8 splits 0.49-0.53, 16 splits 0.83). Split in clusters, 0.1 + 0.02 a split (2 splits 0.12,
#: 4 splits 0.17-0.2, 8 splits 0.25; 256 rows, 0.1-0.15).
WGMMA_WAVE_TIME = {128: 1.0, 256: 1.65}
WGMMA_SPLIT_COST = {128: 0.25, 256: 0.4}
WGMMA_SPLIT_COST_PAST_4 = 0.045
WGMMA_CLUSTER_SPLIT_COST = (0.1, 0.02)
#: Splits of every tile the Hopper kernel may run as clusters (up to WGMMA_MAX_CLUSTER).
WGMMA_CLUSTER_SPLITS = (2, 3, 4, 8)
#: Where every tile is split, the fix-up in 64-row stages of K (0.395 µs each), for choosing among
#: such plans, which differ in K per split: with the partial sums in global memory 8 + 5 a split
#: (its 128 rows of partial sums; in proportion for fewer), in clusters 10 + 1.2 a split (H100,
#: M = 128, forced plans at K = 4096 and 14336: the former 16-19 stages at 2 splits, 29 at 4, 37
#: at 8, 62 at 16; the latter 10-14 at 2, 15-16 at 4, 19 at 8; at M = 64 the former 24 at 4).
WGMMA_FIXUP_STAGES = {False: (8.0, 5.0), True: (10.0, 1.2)}


def wgmma_applies(a: torch.Tensor, m: int, n: int, k: int, weights, scales, act_order: bool,
                  zeros: torch.Tensor) -> bool:
    """Whether a call runs the Hopper kernel: WGMMA_MIN_ROWS to WGMMA_MAX_ROWS rows of a with
    16-byte aligned rows that do not overlap (TMA reads them), 4-bit weights (GPTQ, or AWQ with
    zero points), 8-bit GPTQ or float8 ones, N and K multiples of 128, channel-wise scales or
    groups of a multiple of 64 rows (with act-order, 4- or 8-bit GPTQ without zero points: as
    many rows a group on average, so that the stages of a sorted g_idx lie in one group each),
    on sm_90."""
    if not WGMMA_MIN_ROWS <= m <= WGMMA_MAX_ROWS or (act_order and (weights == FP8 or zeros.numel())):
        return False
    if n % WGMMA_BLOCK_N or k % WGMMA_SPLIT_K or a.dim() != 2 or a.stride(1) != 1 or a.stride(0) % 8 \
            or a.stride(0) < k or a.data_ptr() % 16:
        return False
    if not (isinstance(scales, torch.Tensor) and scales.dim() == 2 and scales.size(0) >= 1):
        return False
    groups = scales.size(0)
    if groups > 1 and (k % groups or (k // groups) % 64):
        return False
    return _capability(a.device.index) == (9, 0)


def wgmma_block_rows(m: int) -> tuple[int, ...]:
    """The Hopper kernel's candidate rows a block for M rows of a: the fewest of WGMMA_FEW_ROWS
    that holds them, else 128 and 256 (wgmma_plan weighs those two)."""
    few = [rows for rows in WGMMA_FEW_ROWS if rows >= m]
    return (few[0],) if few else (128, 256)


def wgmma_tiles(m: int, n: int, block_rows: int) -> int:
    """Output tiles of the Hopper kernel: 128 columns by up to block_rows rows each."""
    return n // WGMMA_BLOCK_N * -(-m // block_rows)


class WgmmaPlan(NamedTuple):
    """How the Hopper kernel covers a call: blocks of block_rows rows of a (32 to 256), the
    first `whole` output tiles computed whole, the rest in `splits` splits of K each; with
    `cluster`, each tile's splits run as a thread block cluster (wgmma_clusters)."""
    block_rows: int
    whole: int
    splits: int
    cluster: bool = False


#: The most splits of a tile the Hopper kernel runs as one cluster (every sm_90 GPU's limit).
WGMMA_MAX_CLUSTER = 8


def wgmma_clusters(tiles: int, whole: int, splits: int, clusters_at_once: int) -> bool:
    """Whether a plan's splits run as clusters: where every tile is split (whole 0), in at most
    WGMMA_MAX_CLUSTER splits, and the GPU runs a cluster for every tile at once
    (``clusters_at_once``, fewer than the SMs / splits: a cluster's blocks share a GPC, and an
    H100 runs 66 clusters of 2 blocks of this kernel, 39 of 3, 30 of 4, 15 of 8). A tile's splits then add
    their sums through each other's shared memory, all at once, instead of the last to finish
    reading the others' from global memory. H100, M = 128, K = 4096, one process, against the
    same plans without clusters: 4 splits 1.31-1.34x at N = 2048-3584 (16-28 tiles; 3584: 17.5
    -> 13.0 µs), 8 splits 1.63-1.66x at N = 1024 and 1536, 2 splits 1.12x at N = 4096 and 6144;
    at N = 4096 in 4 splits, 32 clusters, 0.73x (a second wave)."""
    return whole == 0 and 2 <= splits <= WGMMA_MAX_CLUSTER and tiles <= clusters_at_once


def wgmma_split(tiles: int, k: int, sm_count: int, tail: bool = True) -> tuple[int, int]:
    """(whole, splits) for `tiles` output tiles: every tile split, doubling while they fit one
    wave, where they fill half the SMs or less; else, with `tail`, the tiles past the last full
    wave split likewise where they fill half the SMs or less; else none split. K splits in
    multiples of WGMMA_SPLIT_K."""
    split_tiles = tiles if tiles * 2 <= sm_count else tiles % sm_count if tail else 0
    if split_tiles == 0 or split_tiles * 2 > sm_count:
        return tiles, 1
    splits = 1
    while split_tiles * splits * 2 <= sm_count and k % (WGMMA_SPLIT_K * splits * 2) == 0:
        splits *= 2
    return (tiles - split_tiles, splits) if splits > 1 else (tiles, 1)


def wgmma_plan(m: int, n: int, k: int, sm_count: int, block_rows: int | None = None, tail: bool = True,
               clusters_at_once: Callable[[int, int], int] | None = None) -> WgmmaPlan:
    """The Hopper kernel's plan for an M x N x K call: blocks of wgmma_block_rows(m) rows (of 128
    and 256, whichever wgmma_cost finds shorter, 128 on a tie), or `block_rows`; `tail` False
    splits no tail (for measuring). ``clusters_at_once(splits, block_rows)``: clusters of that
    many blocks the GPU runs at once; with it, where every tile is split, the plan may instead run
    up to as many splits (WGMMA_CLUSTER_SPLITS, 128 rows of K each at least) as clusters
    (wgmma_clusters), whichever wgmma_split_stages finds shortest; without it no plan runs
    clusters."""
    plans = []
    for rows in wgmma_block_rows(m) if block_rows is None else (block_rows,):
        tiles = wgmma_tiles(m, n, rows)
        whole, splits = wgmma_split(tiles, k, sm_count, tail)
        plan = WgmmaPlan(rows, whole, splits)
        if clusters_at_once is not None and whole == 0:
            candidates = [plan] + [WgmmaPlan(rows, 0, s, True) for s in WGMMA_CLUSTER_SPLITS
                                   if s <= splits and k // WGMMA_SPLIT_K >= s
                                   and wgmma_clusters(tiles, 0, s, clusters_at_once(s, rows))]
            plan = min(candidates, key=lambda p: wgmma_split_stages(p, m, k))
        plans.append((plan, tiles))
    if len(plans) == 1:
        return plans[0][0]
    return min(plans, key=lambda plan_tiles: wgmma_cost(plan_tiles[0], plan_tiles[1], sm_count))[0]


def wgmma_split_stages(plan: WgmmaPlan, m: int, k: int) -> float:
    """A plan that splits every tile of an M x N x K call, in 64-row stages of K: its longest
    split's stages (the kernel splits K in pairs of stages) and its fix-up (WGMMA_FIXUP_STAGES)."""
    fixed, per_split = WGMMA_FIXUP_STAGES[plan.cluster]
    if not plan.cluster:
        per_split *= min(m, plan.block_rows) / 128
    return 2 * -(-(k // WGMMA_SPLIT_K) // plan.splits) + fixed + per_split * plan.splits


def wgmma_cost(plan: WgmmaPlan, tiles: int, sm_count: int) -> float:
    """A plan's time (blocks of 128 or 256 rows: the two wgmma_plan weighs against each other) in
    waves of blocks of 128 rows (WGMMA_WAVE_TIME, WGMMA_SPLIT_COST): its full
    waves of whole tiles, and a last wave, whole (however few its tiles) or split. On the H100 at
    the Llama shapes (M = 128-1024 in steps of 128) it picks the fastest of the forced plans or
    one within 7% of it (27 of 32 points within 3%). 256 rows: 4096 x 4096 and 4096 x 14336 from
    641 rows of a, 14336 x 4096 at 129-256, 385-512, 641-768 and 897-1024, 6144 x 4096 at
    385-512."""
    waves = -(-plan.whole // sm_count)
    if plan.whole < tiles:
        if plan.cluster:
            fixed, per_split = WGMMA_CLUSTER_SPLIT_COST
            waves += 1 / plan.splits + fixed + per_split * plan.splits
        else:
            waves += (1 / plan.splits + WGMMA_SPLIT_COST[plan.block_rows]
                      + WGMMA_SPLIT_COST_PAST_4 * max(plan.splits - 4, 0))
    return WGMMA_WAVE_TIME[plan.block_rows] * waves


#: Output columns a GEMV block computes (a repacked tile's).
GEMV_BLOCK_N = 64


def gemv_blocks(n: int) -> int:
    """Output blocks of the GEMV kernel on N columns (one split-K counter each)."""
    return -(-n // GEMV_BLOCK_N)


def gemv_splits(n: int, k: int, sm_count: int) -> int:
    """K splits of the GEMV kernel: none unless the output blocks leave half the SMs idle
    (each split's partial sums cost a fix-up); then doubled while the blocks still fit one wave
    of GEMV_BLOCKS_PER_SM an SM and each split keeps GEMV_MIN_SPLIT_STEPS steps. H100, bf16,
    M = 1, 8 and 16, splits 1-8 at each Llama-3-8B shape: 4096 x 4096 (64 blocks) and
    4096 x 14336 ran fastest in 4 splits (7.4 µs against 8.1 unsplit, 16.1 against 22.9),
    6144 x 4096 (96 blocks) and 14336 x 4096 unsplit (8.8 µs against 10.5 in 2 splits; 16.4
    against 18.6)."""
    blocks, steps = gemv_blocks(n), k // 16
    splits = 1
    if 2 * blocks > sm_count:
        return splits
    while (2 * splits * blocks <= GEMV_BLOCKS_PER_SM * sm_count
           and steps // (2 * splits) >= GEMV_MIN_SPLIT_STEPS):
        splits *= 2
    return splits


def m_tiles_for(m: int) -> int:
    """16-row MMA tiles a block takes: 1 up to 16 rows, 2 up to 32, else 4."""
    return 1 if m <= 16 else 2 if m <= 32 else 4


def output_blocks(m: int, n: int, m_tiles: int | None = None) -> int:
    """Blocks that cover the [m, n] output on ``m_tiles``-tile blocks (``m_tiles_for(m)`` by
    default); each needs one split-K counter when K is split."""
    return -(-n // BLOCK_N) * -(-m // (16 * (m_tiles or m_tiles_for(m))))


def splits_for(m: int, n: int, k: int, sm_count: int, blocks_per_sm: int, m_tiles: int | None = None) -> int:
    """K splits: enough blocks for one wave (``blocks_per_sm``: what the kernel's registers and
    shared memory let an SM hold, ``kernel_blocks_per_sm``), each split keeping at least four
    pipeline stages: below that, the pipeline's fill and the fix-up outweigh the parallelism
    (measured on the H100). A second wave costs more than it gains: 8-bit weights at M = 1,
    which an H100 SM holds one block of, split for two blocks an SM ran 12-23% slower.

    Small layers (few output blocks, short K) would leave most SMs idle under the four-stage
    floor, so there K is split further, down to one stage a split, until half the SMs have a
    block: at M = 1 on the H100, 896 x 896 ran in 10.0 µs unsplit and 4.6 in 8 splits,
    4864 x 896 10.4 against 5.9, 1024 x 4096 8.2 in 8 splits against 6.7 in 16."""
    blocks = output_blocks(m, n, m_tiles)
    steps = k // 16
    splits = max(1, min(sm_count * max(1, blocks_per_sm) // blocks, steps // (4 * STAGE_STEPS)))
    half = sm_count // 2
    if blocks * splits < half:
        splits = max(splits, min(-(-half // blocks), steps // STAGE_STEPS))
    return splits


@functools.lru_cache(maxsize=None)
def _kernel_blocks_per_sm(device: torch.device, dtype: torch.dtype, weights, m_tiles: int, act_order: bool,
                          swapped: bool) -> int:
    return int(_BLOCKS_PER_SM[(dtype, weights, GemmKernel(m_tiles, act_order, swapped))](device.index))


def kernel_blocks_per_sm(a: torch.Tensor, weights, m: int, act_order: bool, m_tiles: int | None = None) -> int:
    """Blocks of the kernel for ``weights`` (4, 8 or FP8) a call of m rows launches on ``m_tiles``-tile blocks
    (``m_tiles_for(m)`` by default) that an SM of a's GPU holds at once: the module asks the
    CUDA occupancy calculator (cached per kernel and GPU); 0 when the GPU's blocks lack the
    kernel's shared memory."""
    return _kernel_blocks_per_sm(a.device, a.dtype, weights, *gemm_kernel(m, m_tiles or m_tiles_for(m), act_order))


def fitting_m_tiles(a: torch.Tensor, weights, m: int, act_order: bool) -> tuple[int, int]:
    """(m_tiles, blocks an SM) of the kernel a call of m rows runs: ``m_tiles_for(m)``, or the
    largest smaller tile whose kernel's shared memory a block of a's GPU has (8-bit weights take
    16-row tiles on sm_80 and sm_87, 4-bit ones 32-row tiles on sm_86 and sm_89, whose blocks
    have 99 KB); (0, 0) when none fits (8-bit weights there: the call then dequantizes and
    multiplies with cuBLAS)."""
    m_tiles = m_tiles_for(m)
    while m_tiles >= 1:
        per_sm = kernel_blocks_per_sm(a, weights, m, act_order, m_tiles)
        if per_sm > 0:
            return m_tiles, per_sm
        m_tiles //= 2
    return 0, 0


#: Rows of a from which the weights are dequantized into a dense matrix for cuBLAS (an N x K
#: buffer of a's dtype for the call) instead of running the Marlin kernel: beyond two 64-row
#: tiles, where a third row of blocks costs the kernel nearly as much again (H100, M = 129-255:
#: 4-bit 6-13% faster dense at three of the four Llama-3-8B shapes, 5-10% slower at 4096 x 14336,
#: act-order 27-39% faster at all four).
DENSE_MIN_M = 129


def _dense_ok(a: torch.Tensor, c: torch.Tensor, m: int, n: int, k: int) -> bool:
    """Whether torch.mm can take a and c as they are (else the kernel's checks report them)."""
    return (a.dim() == 2 and tuple(a.shape) == (m, k) and isinstance(c, torch.Tensor) and tuple(c.shape) == (m, n)
            and c.dtype == a.dtype and c.device == a.device and c.is_contiguous())


def _empty_or(t: torch.Tensor | None, device: torch.device) -> torch.Tensor:
    return t if t is not None and t.numel() > 0 else _empty(device)


#: The longest K whose rows column_gather takes (a row of a's dtype in a block's shared memory, 64 KB:
#: every sm_80+ GPU's block has that); index_select beyond.
GATHER_MAX_K = 32768


def gather_columns(a: torch.Tensor, perm: torch.Tensor, *, enable_pdl: bool | None = None) -> torch.Tensor:
    """``a[:, perm]`` (act-order's gather, ``perm`` int32): one block a row, which reads the row
    into shared memory and writes it out in ``perm`` order, both coalesced (``index_select``
    reads a 32-byte sector for each element); ``index_select`` where the row does not fit."""
    k = a.shape[1] if a.dim() == 2 else 0
    if (a.dim() != 2 or a.stride(1) != 1 or a.stride(0) % 8 or a.data_ptr() % 16 or k % 8 or k > GATHER_MAX_K
            or perm.dtype != torch.int32 or not perm.is_contiguous()):
        return a.index_select(1, perm)
    out = torch.empty(a.shape, dtype=a.dtype, device=a.device)
    _GATHER[a.dtype](a, _aligned16(perm), out, True if enable_pdl is None else enable_pdl)
    return out


def _aligned16(t: torch.Tensor) -> torch.Tensor:
    """t, or a copy when it does not start 16-byte aligned (the kernel reads 16 bytes at once)."""
    return t.clone(memory_format=torch.contiguous_format) if t.data_ptr() % 16 else t


def gptq_marlin_gemm(a: torch.Tensor, c: torch.Tensor | None, b_q_weight: torch.Tensor, b_scales: torch.Tensor,
                     global_scale: torch.Tensor | None, b_zeros: torch.Tensor | None, g_idx: torch.Tensor | None,
                     perm: torch.Tensor | None, workspace: torch.Tensor | None, b_q_type_id: int, size_m: int,
                     size_n: int, size_k: int, is_k_full: bool = True, use_atomic_add: bool = False,
                     use_fp32_reduce: bool = False, is_zp_float: bool = False, *,
                     enable_pdl: bool | None = None) -> torch.Tensor:
    """``c[size_m, size_n] = a @ dequant(b_q_weight)``; returns c (allocated when None).

    ``a``: float16/bfloat16 ``[size_m, size_k]`` (any row stride); ``b_q_weight``: the
    repacked weights; ``b_scales``: ``[groups, size_n]`` of a's dtype, permuted as
    ``mllm_kernel.marlin.marlin_permute_scales`` does (one row: channel-wise); ``b_zeros``:
    ``[groups, size_n * bits / 32]`` int32 from ``awq_to_marlin_zero_points`` for ``uint4``
    weights, else None or empty; ``g_idx`` (int32 ``[size_k]``, sorted) and ``perm`` (its
    argsort, int32/int64) for GPTQ act-order, else None or empty: a's columns are then taken
    in ``perm`` order (one gather). ``b_q_type_id``: ``scalar_types.uint4b8.id`` (GPTQ 4-bit),
    ``uint4.id`` (AWQ, with zero points), ``uint8b128.id`` (GPTQ 8-bit) or ``float8_e4m3fn.id``
    (an FP8 checkpoint's weights through ``marlin.pack_fp8_to_int32`` and the 8-bit repack, their
    scales, channel-wise or per group of K, permuted and passed through
    ``marlin.fp8_fused_exponent_bias_into_scales``, as vLLM and sglang prepare them).

    A ``c`` that does not start 16-byte aligned is filled through a copy.

    ``workspace`` (int32, zero) holds the split-K counters when it is large enough
    (``mllm_kernel.marlin.marlin_make_workspace`` gives one), else the module's own are used;
    it is left zero. ``is_k_full`` and ``use_atomic_add`` are accepted for compatibility (the
    groups come from g_idx either way; partial sums always go through a float32 buffer, so
    ``use_fp32_reduce`` is always in effect). ``global_scale`` (NVFP4) and ``is_zp_float``
    (HQQ) are not supported. ``enable_pdl``: programmatic dependent launch, on by default where
    the GPU has it (docs/pdl.md); the kernel then prefetches its first weights into L2 while the
    previous kernel finishes.

    CPU tensors go to ``mllm_kernel.cpu.jit.gptq_marlin_gemm`` (the same integer weight types;
    float32 activations too), so one call serves a layer on either device.
    """
    if isinstance(a, torch.Tensor) and a.device.type == "cpu":
        from mllm_kernel.cpu.jit.gptq_marlin import gptq_marlin_gemm as cpu_gemm

        return cpu_gemm(a, c, b_q_weight, b_scales, global_scale, b_zeros, g_idx, perm, workspace, b_q_type_id,
                        size_m, size_n, size_k, is_k_full, use_atomic_add, use_fp32_reduce, is_zp_float)
    if isinstance(a, torch.Tensor) and isinstance(c, torch.Tensor) and c.data_ptr() % 16 and c.is_contiguous() \
            and c.shape == (size_m, size_n) and c.dtype == a.dtype and c.device == a.device:
        # The kernels store c in 16-byte chunks: a c that starts off a 16-byte boundary is computed
        # aside and copied in (any other wrong c is left for the checks to name).
        return c.copy_(gptq_marlin_gemm(a, None, b_q_weight, b_scales, global_scale, b_zeros, g_idx, perm, workspace,
                                        b_q_type_id, size_m, size_n, size_k, is_k_full, use_atomic_add,
                                        use_fp32_reduce, is_zp_float, enable_pdl=enable_pdl))
    a, c, zeros, bits = marlin_gemm_operands(
        _OP, a, c, global_scale, b_zeros, perm, b_q_type_id, size_m, size_n, size_k, is_zp_float, HALF_DTYPES, "cuda",
        WEIGHT_TYPES, gather=lambda x, p: gather_columns(x, p, enable_pdl=enable_pdl))
    weights = _weights(getattr(b_q_type_id, "id", b_q_type_id), bits)
    if isinstance(b_scales, torch.Tensor):  # anything else is left for the kernel's checks to name
        b_scales = _aligned16(b_scales)
    zeros, g_idx = _aligned16(zeros), _aligned16(_empty_or(g_idx, a.device))
    m_tiles, splits = m_tiles_for(size_m), 1
    dense_ok = _dense_ok(a, c, size_m, size_n, size_k)
    fits = True
    pdl = True if enable_pdl is None else enable_pdl
    # The kernel's act-order test: g_idx given, and more than one group of scales.
    act_order = (g_idx.numel() > 0 and isinstance(b_scales, torch.Tensor) and b_scales.dim() == 2
                 and b_scales.size(0) > 1)
    if size_m > 0 and wgmma_applies(a, size_m, size_n, size_k, weights, b_scales, act_order, zeros):
        plan = _wgmma_route(a.device, a.dtype, size_m, size_n, size_k, _sm_count(a.device.index))
        # The split tiles' partial sums, [splits, min(block_rows, M), 128] each (none in clusters).
        split_tiles = 0 if plan.cluster else wgmma_tiles(size_m, size_n, plan.block_rows) - plan.whole
        partials, locks = _split_buffers(a, workspace, plan.splits, split_tiles,
                                         split_tiles * plan.splits * min(plan.block_rows, size_m) * WGMMA_BLOCK_N)
        _WGMMA[(a.dtype, weights, act_order)](a, c, b_q_weight, b_scales, zeros, g_idx, partials, locks, size_m,
                                              size_n, size_k, plan.splits, plan.block_rows, plan.whole, plan.cluster,
                                              pdl)
        return c
    if size_m > 0 and (size_m < DENSE_MIN_M or not dense_ok):
        if gemv_applies(a, size_m, size_n, size_k, bits, b_scales, act_order, zeros):
            splits = gemv_splits(size_n, size_k, _sm_count(a.device.index))
            partials, locks = _split_buffers(a, workspace, splits, gemv_blocks(size_n), splits * size_m * size_n)
            _GEMV[(a.dtype, weights, act_order)](a, c, b_q_weight, b_scales, zeros, g_idx, partials, locks, size_m,
                                                 size_n, size_k, splits, pdl)
            return c
        tiles, per_sm = fitting_m_tiles(a, weights, size_m, act_order)
        fits = tiles > 0
        if fits:
            m_tiles = tiles
            splits = splits_for(size_m, size_n, size_k, _sm_count(a.device.index), per_sm, m_tiles)
    if (size_m >= DENSE_MIN_M or not fits) and dense_ok:
        # Compute-bound (or no Marlin kernel fits this GPU): the weights dequantized once into an
        # [N, K] matrix of a's dtype (with group scales the values the kernel below feeds its
        # tensor cores above 8 rows), then cuBLAS as for a bf16 layer.
        weight = torch.empty((size_n, size_k), dtype=a.dtype, device=a.device)
        _DEQUANT[(a.dtype, weights)](b_q_weight, b_scales, zeros, g_idx, weight, size_n, size_k)
        return torch.mm(a, weight.t(), out=c)
    partials, locks = _split_buffers(a, workspace, splits, output_blocks(size_m, size_n, m_tiles),
                                     splits * size_m * size_n)
    _GEMM[(a.dtype, weights, gemm_kernel(size_m, m_tiles, act_order))](
        a, c, b_q_weight, b_scales, zeros, g_idx, partials, locks, size_m, size_n, size_k, m_tiles, splits, pdl)
    return c


@functools.lru_cache(maxsize=4096)
def _wgmma_route(device: torch.device, dtype: torch.dtype, m: int, n: int, k: int, sm_count: int) -> WgmmaPlan:
    """wgmma_plan for a call on a's GPU, kept per shape: the plan weighs several candidates and
    costs microseconds of host time, a lookup a fraction of one."""
    return wgmma_plan(m, n, k, sm_count, clusters_at_once=functools.partial(_wgmma_clusters_at_once, device, dtype))


@functools.lru_cache(maxsize=None)
def _wgmma_clusters_at_once(device: torch.device, dtype: torch.dtype, splits: int, block_rows: int) -> int:
    """Clusters of `splits` blocks of the Hopper kernel a's GPU runs at once (the module asks the
    CUDA occupancy calculator)."""
    return int(_WGMMA_CLUSTERS[dtype](device.index, splits, block_rows))


def _split_buffers(a: torch.Tensor, workspace: torch.Tensor | None, splits: int, blocks: int,
                   partial_count: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The float32 partial sums (partial_count) and the arrival counters of a call that splits K
    over `blocks` output blocks (both empty when it does not): the caller's workspace when it
    holds a counter for each, else the module's own."""
    if splits == 1 or blocks == 0:
        return _empty(a.device), _empty(a.device)
    partials = torch.empty(partial_count, dtype=torch.float32, device=a.device)
    usable = (workspace is not None and workspace.dtype == torch.int32 and workspace.device == a.device
              and workspace.is_contiguous() and workspace.numel() >= blocks)
    return partials, workspace.reshape(-1) if usable else _locks(a.device, _sm_count(a.device.index))
