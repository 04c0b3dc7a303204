"""The W8A8 scaled GEMM for decoding (``csrc/scaled_mm_gemv.cuh``): int8 or FP8 operands, up to
GEMV_MAX_ROWS rows of activations, one module per (operand type, output type), no CUTLASS.

At a few rows a scaled GEMM reads its weight once and does little else, so it runs at the
bytes it keeps in flight: each warp loads its weight fragments straight into registers, 4 KB
at a time, and feeds them to warp-level MMAs (exact int32 sums for int8). The Hopper path
(``scaled_mm_sm90``) runs it on ``applies``'s shapes instead of CUTLASS's transposed tile,
which at M <= 16 makes only N / 64 tiles (64 of an H100's 132 SMs busy at N = 4096).
"""

from __future__ import annotations

import torch

from mllm_kernel.cuda.jit.device_info import sm_count
from mllm_kernel.jit_utils import jit_module, make_cpp_args

OUT_DTYPES = (torch.float16, torch.bfloat16)
#: Rows of activations the kernel takes (two 8-row MMA operands).
GEMV_MAX_ROWS = 16
#: Output columns from which the GEMV runs: a block takes 16, so from here a layer makes a block or
#: more an SM of an H100 (the smallest layer measured, 2048 x 4096: 5.9 us against CUTLASS's 7.2
#: at M = 1); narrower layers keep CUTLASS.
GEMV_MIN_N = 2048
#: Output columns a block takes (one MMA tile of weight rows, over all of K).
TILE_COLUMNS = 16
#: The block shapes built, as (warps a block, blocks resident an SM): the default; three an SM
#: (80 registers a thread) for up to 8 rows; blocks of four warps, four an SM, for 9-16 rows.
BLOCK_SHAPES = ((8, 2), (8, 3), (4, 4))


def block_shape(m: int, n: int, sms: int) -> tuple[int, int]:
    """The GEMV's block for M rows and N output columns on ``sms`` SMs, as (warps, blocks an SM).
    A block takes one 16-column tile over all of K, so the N / 16 tiles run in waves; of the
    shapes built, the rule picks the one whose waves ran fastest on the shapes measured (the
    Llama layers: docs/tuning/scaled_mm.md):

    - up to 8 rows, 8 warps and two blocks an SM, or three where the tiles fit in one wave of
      three but not in one of two;
    - 9-16 rows, blocks of 4 warps, four an SM, from two tiles an SM; with fewer tiles they would
      leave half the SMs' warp slots empty."""
    tiles = -(-n // TILE_COLUMNS)
    if m <= 8:
        return (8, 3) if 2 * sms < tiles <= 3 * sms else (8, 2)
    return (4, 4) if tiles >= 2 * sms else (8, 2)


def applies(m: int, n: int, k: int) -> bool:
    """Whether the GEMV runs an M x N x K problem (on Hopper): at most GEMV_MAX_ROWS rows and
    at least GEMV_MIN_N output columns."""
    return 0 < m <= GEMV_MAX_ROWS and n >= GEMV_MIN_N


def _declare(operand: torch.dtype, out: torch.dtype):
    types = make_cpp_args(operand, out)
    return jit_module("scaled_mm_gemv", args=types, device="cuda", cuda_files=["scaled_mm_gemv.cuh"],
                      cuda_wrappers=[("scaled_mm_gemv", f"scaled_mm_gemv<{types}>")])


MODULES = {(operand, out): _declare(operand, out) for operand in (torch.int8, torch.float8_e4m3fn)
           for out in OUT_DTYPES}


def modules(operand: torch.dtype) -> list:
    """The modules of one operand type (both output types), for precompile."""
    return [module for (dtype, _), module in MODULES.items() if dtype == operand]


def scaled_mm_gemv(a: torch.Tensor, b: torch.Tensor, scales_a: torch.Tensor, scales_b: torch.Tensor,
                   out_dtype: torch.dtype, bias: torch.Tensor | None, m: int, n: int,
                   enable_pdl: bool = True, block: tuple[int, int] | None = None) -> torch.Tensor:
    """Runs checked operands (1-D scales) into a new ``[M, N]`` tensor; M <= GEMV_MAX_ROWS.
    ``enable_pdl``: launched with programmatic dependent launch (sm_90+), the weights' first
    batch is asked of L2 while the previous kernel finishes (docs/pdl.md). ``block``: one of
    BLOCK_SHAPES that exists for M (default: ``block_shape``)."""
    warps, per_sm = block or block_shape(m, n, sm_count(a.device.index))
    out = torch.empty((m, n), dtype=out_dtype, device=a.device)
    MODULES[(a.dtype, out_dtype)].load().scaled_mm_gemv(out, a, b, scales_a, scales_b, out if bias is None else bias,
                                                        bias is not None, warps, per_sm, enable_pdl)
    return out
