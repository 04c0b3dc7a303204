"""CUDA ``fp8_blockwise_scaled_mm`` (sgl-kernel's name), DeepSeek-V3's block-scaled FP8 GEMM on
CUTLASS's Hopper kernels (``csrc/scaled_mm_blockwise_sm90.cuh``).

``out[m, n] = sum over K blocks kb of scales_a[m, kb] * scales_b[n // 128, kb] *
(mat_a @ mat_b over block kb)``: float8_e4m3fn operands, activations scaled per 1 x 128 group
along K (``per_token_group_quant_fp8(x, 128)``), weights per 128 x 128 block. Each block's
partial product is accumulated in float32 and scaled in registers into the sum while the next
block's MMAs run (``csrc/scaled_mm_blockwise_sm90_mainloop.cuh``). Runs on Hopper (sm_90).

The kernel configuration (``pick_config``; from sweeps on an H100 at Llama-3-8B's shapes, M from
16 to 8192, and an interleaved A/B of the two cooperative kernels at M = 1024 and 8192;
``benchmarks/bench_scaled_mm.py --sweep`` repeats the sweep):

=============================================  ===============================================
configuration                                  when
=============================================  ===============================================
tile 64 x 128 x 128, ping-pong                 its tiles fit one wave (at most ONE_WAVE_TILES):
                                               small M, 64-row tiles waste less padding
tile 128 x 128 x 128, cooperative              up to CLUSTER_TILES tiles (about 8 waves): the
                                               larger tile reads each operand fewer times (each
                                               thread holds three accumulators, two blocks'
                                               partial sums and the total, which leaves no
                                               registers for a wider tile); 0-7% faster at M = 1024 than
                                               in clusters
the same in clusters of 1 x 2                  more tiles: the pair shares its A tile through
                                               TMA multicast; 1-9% faster at M = 8192
=============================================  ===============================================

No tile order (``blockwise_scaled_mm``'s swizzle and raster) beat CUTLASS's default at every
shape, so the default is kept.
"""

from __future__ import annotations

import torch

from mllm_kernel.cuda.jit import scaled_mm_sm90
from mllm_kernel.cuda.jit.scaled_mm_sm90 import ARCH, OUT_DTYPES, Sm90Config
from mllm_kernel.jit_utils import jit_module, make_cpp_args
from mllm_kernel.jit_utils import precompile as jit_precompile
from mllm_kernel.op_args import blockwise_scaled_mm_operands, column_major_empty

OP = "fp8_blockwise_scaled_mm"

CONFIGS = {c.name: c for c in (Sm90Config((64, 128, 128)),
                               Sm90Config((128, 128, 128), pingpong=False),
                               Sm90Config((128, 128, 128), cluster=(1, 2), pingpong=False))}


#: Tiles an H100 runs in one wave (its SMs): up to this many 64 x 128 tiles, the ping-pong kernel.
ONE_WAVE_TILES = 132
#: 128 x 128 tiles from which the cooperative kernel runs in clusters of two.
CLUSTER_TILES = 1024
#: Rows from which the cooperative kernel takes scales_a column-major, copied so when they come
#: by rows: its producer warp then loads them by TMA instead of 128 cp.async copies a stage.
COLUMN_SCALES_MIN_M = 1024


def column_major_scales(scales_a: torch.Tensor) -> torch.Tensor:
    """float32 ``scales_a`` ``[M, blocks]`` copied column-major, its columns padded to a multiple
    of 4 rows (the layout ``op_args.tma_column_major`` accepts)."""
    out = column_major_empty(*scales_a.shape, scales_a.device, tma_aligned=True)
    out.copy_(scales_a)
    return out


def pick_config(m: int, n: int, k: int) -> Sm90Config:
    """The configuration for an M x N x K problem (the table in the module docstring)."""
    if -(-m // 64) * -(-n // 128) <= ONE_WAVE_TILES:
        return CONFIGS["64x128x128_c1x1_pingpong"]
    if -(-m // 128) * -(-n // 128) < CLUSTER_TILES:
        return CONFIGS["128x128x128_c1x1_coop"]
    return CONFIGS["128x128x128_c1x2_coop"]


def _declare(out: torch.dtype, config: Sm90Config, scale_a_major_m: bool):
    types = make_cpp_args(out)
    m, n, k = config.tile
    flag = lambda b: str(b).lower()  # noqa: E731
    cpp = (f"{types}, {m}, {n}, {k}, {config.cluster[0]}, {config.cluster[1]}, {flag(config.pingpong)}, "
           f"{flag(scale_a_major_m)}")
    suffix = "_sa_m_major" if scale_a_major_m else ""
    return jit_module(f"scaled_mm_blockwise_sm90_{config.name}{suffix}", args=types, device="cuda",
                      cuda_files=["scaled_mm_blockwise_sm90.cuh"],
                      cuda_wrappers=[("blockwise_scaled_mm", f"blockwise_scaled_mm_sm90<{cpp}>")],
                      extra_cuda_cflags=["-diag-suppress=2908"], cuda_archs=[ARCH], cutlass=True)


#: The modules by (out dtype, configuration name, whether scales_a is M-major: read by TMA).
MODULES = {(out, name, major_m): _declare(out, config, major_m)
           for out in OUT_DTYPES for name, config in CONFIGS.items() for major_m in (False, True)}


def precompile(*, wait: bool = True):
    """Builds (or loads) every block-scaled GEMM module now; see ``jit_utils.precompile``."""
    return jit_precompile(*MODULES.values(), wait=wait)


def blockwise_scaled_mm(a: torch.Tensor, b: torch.Tensor, scales_a: torch.Tensor, scales_b: torch.Tensor,
                        out_dtype: torch.dtype, m: int, n: int, config: Sm90Config | None = None,
                        swizzle: int = 1, raster: int = 0) -> torch.Tensor:
    """Runs checked operands (scales in the kernel's layouts: ``op_args.blockwise_scaled_mm_operands``)
    through the kernel of ``config`` (default: ``pick_config``; row-major ``scales_a`` copied
    column-major for a cooperative kernel from ``COLUMN_SCALES_MIN_M`` rows) into a new ``[M, N]`` tensor, its
    tiles in the order of ``swizzle`` and ``raster`` (csrc/scaled_mm_blockwise_sm90.cuh; by
    default CUTLASS's own, which no other order beat at every shape)."""
    config = config or pick_config(m, n, a.shape[1])
    if scales_a.shape[1] > 1 and scales_a.stride(1) == 1 and not config.pingpong and m >= COLUMN_SCALES_MIN_M:
        scales_a = column_major_scales(scales_a)
    major_m = scales_a.shape[1] > 1 and scales_a.stride(1) != 1
    function = MODULES[(out_dtype, config.name, major_m)].load().blockwise_scaled_mm
    out = torch.empty((m, n), dtype=out_dtype, device=a.device)
    function(out, a, b, scales_a, scales_b, scaled_mm_sm90.workspace(a.device), swizzle, raster)
    return out


def fp8_blockwise_scaled_mm(
    mat_a: torch.Tensor,
    mat_b: torch.Tensor,
    scales_a: torch.Tensor,
    scales_b: torch.Tensor,
    out_dtype: torch.dtype,
) -> torch.Tensor:
    """``[M, N]`` of ``out_dtype`` (float16 or bfloat16) from float8_e4m3fn ``mat_a`` ``[M, K]``
    row-major and ``mat_b`` ``[K, N]`` column-major (``weight.t()`` of a row-major ``[N, K]``
    weight), float32 ``scales_a`` ``[M, ceil(K / 128)]`` (per token and 128-wide K group) and
    ``scales_b`` ``[ceil(N / 128), ceil(K / 128)]`` (per 128 x 128 weight block). Scales with
    contiguous rows (``per_token_group_quant_fp8``'s default output, a checkpoint's
    ``weight_scale_inv``) are read in place, and so are column-major ``scales_a`` whose columns
    start 16 bytes apart, 16-byte aligned, with their rows readable up to a multiple of 4
    (``per_token_group_quant_fp8(..., column_major_scales=True, scale_tma_aligned=True)``, or
    without the padding at a multiple of 4 rows: ``op_args.tma_column_major``); others are
    copied first. K must be a multiple of 16 and N of 8."""
    m, n, _, sa, sb = blockwise_scaled_mm_operands(OP, mat_a, mat_b, scales_a, scales_b, out_dtype,
                                                   torch.float8_e4m3fn, OUT_DTYPES)
    scaled_mm_sm90.require_sm90(OP, mat_a.device)
    return blockwise_scaled_mm(mat_a, mat_b, sa, sb, out_dtype, m, n)
