"""Runs dynamic per-tensor FP8 quantization of a [16384, 4096] bf16 tensor twice inside a CUDA
profiler range, through the library and through the named variants of tune_quant.py's
``tensor_variants.cuh``, for Nsight Compute: each pass's time and DRAM bytes.

    ncu --profile-from-start off --cache-control none --clock-control none \\
        --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum \\
        python benchmarks/tuning/profile_dynamic.py resident_1024x1_u2_keep32 amax_only

(``--cache-control none`` keeps L2 between the two passes, as in the CUDA-graph benchmarks.)
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import harness  # noqa: E402
import tune_quant  # noqa: E402


def main() -> None:
    harness.require_cuda()
    from mllm_kernel.cuda.jit import per_tensor_quant_fp8

    tensor = tune_quant._tensor_module()
    x = torch.randn(16384, tune_quant.HIDDEN, device="cuda", dtype=torch.bfloat16)
    out = torch.empty(x.shape, device="cuda", dtype=tune_quant.FP8)
    scale = torch.empty(1, device="cuda")
    cases = [("library", [lambda: per_tensor_quant_fp8(x, out=out)])]
    cases += [(name, [lambda fn=getattr(tensor, name): fn(out, scale, x)]) for name in sys.argv[1:]]
    harness.profile_range(cases, warmups=1, repeats=2)


if __name__ == "__main__":
    main()
