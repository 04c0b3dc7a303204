"""Which W8A8 scaled-GEMM kernels a GPU runs: Hopper's (``scaled_mm_sm90``, warpgroup MMAs and
TMA) on sm_90; Ampere's and Ada's (``scaled_mm_sm80``, warp-level MMAs) on sm_80 to sm_89, FP8
from sm_89 (the first with FP8 MMAs). Other GPUs get a ValueError that names the ones supported.
"""

from __future__ import annotations

import torch

from mllm_kernel.cuda.jit import scaled_mm_sm80, scaled_mm_sm90
from mllm_kernel.cuda.jit.device_info import capability
from mllm_kernel.op_args import resolve_pdl, scaled_mm_operands

#: The GPUs each operand type runs on, as messages name them.
SUPPORTED = {torch.int8: "sm_80, sm_86, sm_87, sm_89 and sm_90", torch.float8_e4m3fn: "sm_89 and sm_90"}


def device_capability(op: str, device: torch.device) -> tuple[int, int]:
    """The compute capability of ``device``; a ValueError when it is not a GPU."""
    if device.type != "cuda":
        raise ValueError(f"{op}: mat_a: must be a CUDA tensor here, got {device}")
    return capability(device.index if device.index is not None else torch.cuda.current_device())


def backend(op: str, operand: torch.dtype, device: torch.device):
    """The kernel module (``scaled_mm_sm90`` or ``scaled_mm_sm80``) for ``operand`` on ``device``."""
    major, minor = device_capability(op, device)
    if (major, minor) == (9, 0):
        return scaled_mm_sm90
    if major == 8 and (operand == torch.int8 or minor == 9):
        return scaled_mm_sm80
    raise ValueError(f"{op}: runs on {SUPPORTED[operand]} GPUs; this GPU is sm_{major}{minor}")


def checked_scaled_mm(op: str, operand: torch.dtype, mat_a, mat_b, scales_a, scales_b, out_dtype, bias,
                      enable_pdl: bool | None = None) -> torch.Tensor:
    """``op``'s public entry: checks the arguments (``op_args.scaled_mm_operands``, operands of
    dtype ``operand``) and the GPU, then runs the GPU's kernels."""
    m, n, k, sa, sb = scaled_mm_operands(op, mat_a, mat_b, scales_a, scales_b, out_dtype, bias, operand,
                                         scaled_mm_sm90.OUT_DTYPES)
    return backend(op, operand, mat_a.device).scaled_mm(mat_a, mat_b, sa, sb, out_dtype, bias, m, n, k,
                                                        enable_pdl=resolve_pdl(enable_pdl))


def modules(op: str, operand: torch.dtype) -> list:
    """The modules of ``operand`` that the current GPU runs (for ``precompile``)."""
    return backend(op, operand, torch.device("cuda", torch.cuda.current_device())).modules(operand)
