"""Runs group-128 FP8 and INT8 quantization of bf16 [16384, 4096], the library's kernels and the
minimal kernels of ``quant_variants.cuh``, twice each inside a CUDA profiler range, for Nsight
Compute (why does the library's INT8 kernel trail the minimal one with the same algorithm?):

    ncu --profile-from-start off --metrics ... python benchmarks/tuning/profile_group.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import harness  # noqa: E402
import tune_quant  # noqa: E402


def main() -> None:
    harness.require_cuda()
    from mllm_kernel.cuda.jit import per_token_group_quant_fp8, per_token_group_quant_int8

    module = tune_quant._module()
    t, h = 16384, tune_quant.HIDDEN
    x = torch.randn(t, h, device="cuda", dtype=torch.bfloat16)
    s = torch.empty(t * h // 128, device="cuda")
    q8 = torch.empty(t, h, device="cuda", dtype=torch.float8_e4m3fn)
    i8 = torch.empty(t, h, device="cuda", dtype=torch.int8)
    cases = [
        ("library fp8", [lambda: per_token_group_quant_fp8(x, 128, out=q8)]),
        ("minimal fp8", [lambda: module.group_out_fp8_8_1(q8, s, x)]),
        ("library int8", [lambda: per_token_group_quant_int8(x, 128, out=i8)]),
        ("minimal int8", [lambda: module.group_out_int8_8_1(i8, s, x)]),
    ]
    harness.profile_range(cases, warmups=2, repeats=2)


if __name__ == "__main__":
    main()
