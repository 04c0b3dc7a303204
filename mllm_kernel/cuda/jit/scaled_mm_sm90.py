"""Hopper (sm_90a) W8A8 scaled GEMM modules: CUTLASS kernels, one module per (operand type,
output type, kernel configuration), shared by every shape that picks the configuration.

``pick_config(m, n, k)`` is the heuristic, by M bucket (chosen from
``benchmarks/bench_scaled_mm.py --sweep`` on an H100, at Llama-3-8B's shapes):

==========  ============================================  ======================================
M           configuration                                 why
==========  ============================================  ======================================
<= 16       transposed, tile 64 x 16 x 256, ping-pong     the weight fills the 64-row MMA tiles
<= 32       transposed, tile 64 x 32 x 256, ping-pong     as above, more activation columns
<= 128      tile 64 x 128 x 128, ping-pong, when that      enough tiles to fill most SMs, else
            gives FILL_TILES tiles (64 x 96 x 128 when     the transposed kernel's smaller tiles;
            those fill the SMs' waves WAVE_MARGIN better); 96 columns where 128 leave much of
            else transposed 64 x 64 x 256                  a wave idle (6144 x 4096: 96 of 132
                                                           SMs, or 128 with 96 columns)
<= 256      tile 64 x 128 x 128, ping-pong
<= 1024     tile 64 x 256 x 128, ping-pong, when it makes  the two consumer warpgroups alternate
            at least PINGPONG_WAVES tiles an SM (and       tiles, one's epilogue under the
            M > 512)                                       other's MMAs; with fewer tiles an SM
                                                           (or larger M) it lost, at times by 2x
> 256       tile 128 x 128 x 128, cooperative, when its     compute-bound: the largest tile,
            tiles fill the SMs' waves WAVE_MARGIN better    unless it leaves much of its last
            than 128 x 256 ones; else 128 x 256 x 128,     wave idle (4096 x 4096 at M = 512)
            cluster 2x1, cooperative
==========  ============================================  ======================================

"Transposed" runs Dᵀ = Bᵀ Aᵀ (``csrc/scaled_mm_sm90.cuh``), so a small M needs no 64-row tile
of mostly padding. Before this table, ``scaled_mm`` sends the decoding shapes that
``scaled_mm_gemv.applies`` names (M <= 16 on wide layers) to the GEMV, not to CUTLASS.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch

from mllm_kernel.cuda.jit import scaled_mm_gemv
from mllm_kernel.jit_utils import jit_module, make_cpp_args

#: The architecture these kernels are written for (warpgroup MMAs and TMA: sm_90a only).
ARCH = "9.0a"
OUT_DTYPES = (torch.float16, torch.bfloat16)
#: Bytes of the per-device workspace (the persistent scheduler needs none today; the kernel
#: checks what it needs against this).
WORKSPACE_BYTES = 1 << 20
#: Tiles of a problem from which the untransposed 64 x 128 kernel is picked at M <= 128 (about
#: three quarters of an H100's 132 SMs).
FILL_TILES = 96
#: SMs the wave rule counts (an H100 SXM's).
SMS = 132
#: How much better 128 x 128 tiles must fill the waves than 128 x 256 ones to be picked at
#: M > 256 (and 64 x 96 ones than 64 x 128 at M <= 128): the larger tile does more work per
#: byte, so it wins ties.
WAVE_MARGIN = 0.15
#: 64 x 256 tiles an SM from which the ping-pong kernel of that tile is picked at 512 < M <= 1024
#: (H100, M = 1024: 14336 x 4096 at 6.8 tiles an SM, int8 107 -> 86 us, fp8 106 -> 89; 6144 x 4096
#: at 2.9, 39 -> 37 and 41 -> 39; at 1.9, 4096 x 4096 and 4096 x 14336, it took 1.7x as long).
PINGPONG_WAVES = 2.5
#: Output tiles from which the tiles are swizzled (pick_order).
SWIZZLE_TILES = 2048


@dataclass(frozen=True)
class Sm90Config:
    """One CUTLASS kernel configuration (csrc/scaled_mm_sm90.cuh's template arguments)."""

    tile: tuple[int, int, int]
    cluster: tuple[int, int] = (1, 1)
    pingpong: bool = True
    swap_ab: bool = False

    @property
    def name(self) -> str:
        m, n, k = self.tile
        kind = "pingpong" if self.pingpong else "coop"
        return f"{'swap_' if self.swap_ab else ''}{m}x{n}x{k}_c{self.cluster[0]}x{self.cluster[1]}_{kind}"

    def cpp_args(self) -> str:
        flag = lambda b: "true" if b else "false"  # noqa: E731
        return ", ".join([*(str(v) for v in self.tile), *(str(v) for v in self.cluster), flag(self.pingpong),
                          flag(self.swap_ab)])


CONFIGS = {
    c.name: c
    for c in (
        Sm90Config((64, 16, 256), swap_ab=True),
        Sm90Config((64, 32, 256), swap_ab=True),
        Sm90Config((64, 64, 256), swap_ab=True),
        Sm90Config((64, 128, 128)),
        Sm90Config((128, 256, 128), cluster=(2, 1), pingpong=False),
        Sm90Config((128, 128, 128), pingpong=False),
        Sm90Config((64, 256, 128)),
        Sm90Config((64, 96, 128)),
    )
}


def pick_config(m: int, n: int, k: int) -> Sm90Config:
    """The configuration for an M x N x K problem (the table in the module docstring)."""
    if m <= 16:
        return CONFIGS["swap_64x16x256_c1x1_pingpong"]
    if m <= 32:
        return CONFIGS["swap_64x32x256_c1x1_pingpong"]
    if m <= 128:
        # 64 x 128 tiles once they are enough to fill most SMs; the transposed 64 x 64 before.
        if output_tiles(m, n, 64, 128) >= FILL_TILES:
            if wave_fill(m, n, 96, tile_m=64) > wave_fill(m, n, 128, tile_m=64) + WAVE_MARGIN:
                return CONFIGS["64x96x128_c1x1_pingpong"]
            return CONFIGS["64x128x128_c1x1_pingpong"]
        return CONFIGS["swap_64x64x256_c1x1_pingpong"]
    if m <= 256:
        return CONFIGS["64x128x128_c1x1_pingpong"]
    if 512 < m <= 1024 and output_tiles(m, n, 64, 256) >= PINGPONG_WAVES * SMS:
        return CONFIGS["64x256x128_c1x1_pingpong"]
    if wave_fill(m, n, 128) > wave_fill(m, n, 256) + WAVE_MARGIN:
        return CONFIGS["128x128x128_c1x1_coop"]
    return CONFIGS["128x256x128_c2x1_coop"]


def pick_order(m: int, n: int, config: Sm90Config) -> tuple[int, int]:
    """The tile order (swizzle, raster): on outputs of at least SWIZZLE_TILES tiles, groups of 4
    tiles along N, so that the tiles running at once share operand rows in L2 (H100, 14336 x
    4096 at M = 8192: fp8 834 against 920 us, int8 718 against 835); CUTLASS's default order
    otherwise, which was as fast or faster on the smaller outputs of the sweep."""
    return (4, 2) if output_tiles(m, n, config.tile[0], config.tile[1]) >= SWIZZLE_TILES else (1, 0)


def output_tiles(m: int, n: int, tile_m: int, tile_n: int) -> int:
    """Tiles of tile_m x tile_n that cover an M x N output."""
    return -(-m // tile_m) * -(-n // tile_n)


def wave_fill(m: int, n: int, tile_n: int, sms: int = SMS, tile_m: int = 128) -> float:
    """The share of the SMs' tile slots that tile_m x tile_n tiles of an M x N output fill, over
    every wave the persistent kernel runs (1.0: the last wave is full)."""
    tiles = output_tiles(m, n, tile_m, tile_n)
    return tiles / (-(-tiles // sms) * sms)


def _declare(operand: torch.dtype, out: torch.dtype, config: Sm90Config):
    types = make_cpp_args(operand, out)
    return jit_module(f"scaled_mm_sm90_{config.name}", args=types, device="cuda",
                      cuda_files=["scaled_mm_sm90.cuh"],
                      cuda_wrappers=[("scaled_mm", f"scaled_mm_sm90<{types}, {config.cpp_args()}>")],
                      extra_cuda_cflags=["-diag-suppress=2908"], cuda_archs=[ARCH], cutlass=True)


MODULES = {(operand, out, name): _declare(operand, out, config)
           for operand in (torch.int8, torch.float8_e4m3fn) for out in OUT_DTYPES for name, config in CONFIGS.items()}


@functools.lru_cache(maxsize=None)
def workspace(device: torch.device) -> torch.Tensor:
    return torch.empty(WORKSPACE_BYTES, dtype=torch.uint8, device=device)


def modules(operand: torch.dtype) -> list:
    """The modules of one operand type (every output type and configuration, and the GEMV's),
    for precompile."""
    return [module for (dtype, _, _), module in MODULES.items() if dtype == operand] + scaled_mm_gemv.modules(operand)


def require_sm90(op: str, device: torch.device) -> None:
    """A ValueError unless ``device`` is a GPU these kernels run on (compute capability 9.0)."""
    from mllm_kernel.cuda.jit.scaled_mm_dispatch import device_capability

    major, minor = device_capability(op, device)
    if (major, minor) != (9, 0):
        raise ValueError(f"{op}: runs on sm_90 (Hopper) GPUs; this GPU is sm_{major}{minor}")


def scaled_mm(a: torch.Tensor, b: torch.Tensor, scales_a: torch.Tensor, scales_b: torch.Tensor,
              out_dtype: torch.dtype, bias: torch.Tensor | None, m: int, n: int, k: int,
              config: Sm90Config | None = None, swizzle: int | None = None, raster: int | None = None,
              enable_pdl: bool = True) -> torch.Tensor:
    """Runs the checked operands (1-D scales) through the kernel of ``config`` (default: the
    GEMV where ``scaled_mm_gemv.applies``, else ``pick_config``) into a new ``[M, N]`` tensor;
    ``swizzle`` and ``raster`` order the tiles (csrc/scaled_mm_sm90.cuh; default: ``pick_order``).
    ``enable_pdl`` launches the GEMV with programmatic dependent launch; CUTLASS's kernels launch
    without it."""
    if config is None and scaled_mm_gemv.applies(m, n, k):
        return scaled_mm_gemv.scaled_mm_gemv(a, b, scales_a, scales_b, out_dtype, bias, m, n, enable_pdl)
    config = config or pick_config(m, n, k)
    picked_swizzle, picked_raster = pick_order(m, n, config)
    swizzle = picked_swizzle if swizzle is None else swizzle
    raster = picked_raster if raster is None else raster
    function = MODULES[(a.dtype, out_dtype, config.name)].load().scaled_mm
    out = torch.empty((m, n), dtype=out_dtype, device=a.device)
    function(out, a, b, scales_a, scales_b, out if bias is None else bias, bias is not None, workspace(a.device),
             swizzle, raster)
    return out
