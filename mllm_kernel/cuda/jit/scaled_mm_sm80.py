"""Ampere and Ada (sm_80, sm_86, sm_87, sm_89) W8A8 scaled GEMM modules: CUTLASS 2.x kernels
on warp-level MMAs (int8 from sm_80, FP8 from sm_89), one module per (operand type, output
type, kernel configuration), built for the running GPU's architecture (or the prebuild list).

``pick_config(m, n, k)`` is the heuristic, by M bucket (chosen from the tiles' shared-memory
needs and the usual CUTLASS 2.x shapes; not yet timed on an Ampere or Ada GPU):

==========  ==========================================  =====================================
M           configuration                               why
==========  ==========================================  =====================================
<= 16       tile 16 x 64 x 128, 2 warps splitting K,    a decode step: the weight streams
            6 stages                                    through many small tiles
<= 128      tile 64 x 128 x 128, 4 warps, 3 stages      fits the 100 KB of shared memory of
                                                        sm_86, sm_87 and sm_89
> 128       tile 128 x 128 x 64, 4 warps, 4 stages      compute-bound: the largest tile that
                                                        fits there
==========  ==========================================  =====================================
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from mllm_kernel.cuda.jit.scaled_mm_sm90 import workspace
from mllm_kernel.jit_utils import jit_module, make_cpp_args

OUT_DTYPES = (torch.float16, torch.bfloat16)
#: The GPUs these kernels are for: precompile and prebuild build them only for these (a call
#: builds them for any GPU, which is how the tests run them on a Hopper one).
ARCHS = ("8.0", "8.6", "8.7", "8.9")


@dataclass(frozen=True)
class Sm80Config:
    """One CUTLASS 2.x kernel configuration (csrc/scaled_mm_sm80.cuh's template arguments)."""

    tile: tuple[int, int, int]
    warp: tuple[int, int, int]
    stages: int

    @property
    def name(self) -> str:
        return "x".join(map(str, self.tile)) + "_w" + "x".join(map(str, self.warp)) + f"_s{self.stages}"

    def cpp_args(self) -> str:
        return ", ".join(str(v) for v in (*self.tile, *self.warp, self.stages))


CONFIGS = {
    c.name: c
    for c in (
        Sm80Config((16, 64, 128), (16, 64, 64), 6),
        Sm80Config((64, 128, 128), (64, 64, 64), 3),
        Sm80Config((128, 128, 64), (64, 64, 64), 4),
    )
}


def pick_config(m: int, n: int, k: int) -> Sm80Config:
    """The configuration for an M x N x K problem (the table in the module docstring)."""
    if m <= 16:
        return CONFIGS["16x64x128_w16x64x64_s6"]
    if m <= 128:
        return CONFIGS["64x128x128_w64x64x64_s3"]
    return CONFIGS["128x128x64_w64x64x64_s4"]


def _declare(operand: torch.dtype, out: torch.dtype, config: Sm80Config):
    types = make_cpp_args(operand, out)
    return jit_module(f"scaled_mm_sm80_{config.name}", args=types, device="cuda", cuda_files=["scaled_mm_sm80.cuh"],
                      cuda_wrappers=[("scaled_mm", f"scaled_mm_sm80<{types}, {config.cpp_args()}>")], cutlass=True,
                      meant_for_archs=ARCHS)


MODULES = {(operand, out, name): _declare(operand, out, config)
           for operand in (torch.int8, torch.float8_e4m3fn) for out in OUT_DTYPES for name, config in CONFIGS.items()}


def modules(operand: torch.dtype) -> list:
    """The modules of one operand type (every output type and configuration), for precompile."""
    return [module for (dtype, _, _), module in MODULES.items() if dtype == operand]


def scaled_mm(a: torch.Tensor, b: torch.Tensor, scales_a: torch.Tensor, scales_b: torch.Tensor,
              out_dtype: torch.dtype, bias: torch.Tensor | None, m: int, n: int, k: int,
              config: Sm80Config | None = None, enable_pdl: bool = True) -> torch.Tensor:
    """Runs the checked operands (1-D scales) through the kernel of ``config`` (default:
    ``pick_config``) into a new ``[M, N]`` tensor. A single scales_b value is expanded to N (the
    kernel reads the per-column scales as vectors). ``enable_pdl`` is ignored: these GPUs have
    no programmatic dependent launch."""
    config = config or pick_config(m, n, k)
    function = MODULES[(a.dtype, out_dtype, config.name)].load().scaled_mm
    if scales_b.numel() == 1 and n != 1:
        scales_b = scales_b.expand(n).contiguous()
    out = torch.empty((m, n), dtype=out_dtype, device=a.device)
    function(out, a, b, scales_a, scales_b, out if bias is None else bias, bias is not None, workspace(a.device))
    return out
