"""Dynamic per-tensor FP8 quantization across sizes: the library against its two-kernel path and torch.compile (H100 tuning aid).

For rows of 4096 (bf16 from 72 to 32768 tokens, and a few fp16 and fp32 sizes) times under the
harness's CUDA graphs the library op (the one-launch stash kernel from 2^17 16-byte vectors on
sm_90+), the two-kernel path it takes below that (``tensor_variants.cuh``'s ``run_two_pass<1,
1>``, bf16 only) and ``torch.compile`` of the reference, and checks the library's output and
scale bit for bit against the eager reference. Where the stash kernel starts paying is where
``kStashTensorVecs`` in ``cuda/csrc/quant.cuh`` is set.

    python benchmarks/tuning/sweep_dynamic.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import bench_quant  # noqa: E402
import harness  # noqa: E402
import tune_quant  # noqa: E402

HIDDEN = 4096
CASES = ([(torch.bfloat16, t) for t in (72, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768)]
         + [(torch.float16, 16384), (torch.float32, 8192), (torch.float32, 1024)])


def main() -> None:
    from mllm_kernel.cuda.jit import per_tensor_quant_fp8

    harness.require_cuda()
    tensor = tune_quant._tensor_module()
    print(f"device: {torch.cuda.get_device_name()}  copy {harness.copy_bandwidth_gbps():.0f} GB/s")
    print(f"{'dtype':9s} {'tokens':>6s} {'ours us':>8s} {'GB/s':>6s} {'2-kernel':>8s} {'compile':>8s} "
          f"{'vs compile':>10s} {'vs 2-kernel':>11s}  bit-exact")
    for dtype, t in CASES:
        nbytes = t * HIDDEN * (torch.finfo(dtype).bits // 8 + 1)  # read once, written once

        def make(dtype=dtype, t=t):
            return (torch.randn(t, HIDDEN, device="cuda", dtype=dtype),
                    torch.empty(t, HIDDEN, device="cuda", dtype=torch.float8_e4m3fn), torch.empty(1, device="cuda"))

        sets = [make() for _ in range(harness.num_sets(nbytes))]
        comp = harness.time_calls(harness.compiled(lambda x, o, s: bench_quant.ref_per_tensor_dynamic(x)), sets)
        ours = harness.time_calls(lambda x, o, s: per_tensor_quant_fp8(x, out=o), sets)
        two = harness.time_calls(lambda x, o, s: tensor.two_pass_1_1(o, s, x), sets).us if dtype == torch.bfloat16 else None
        x, o, _ = sets[0]
        q, scale = per_tensor_quant_fp8(x, out=o)
        ref_q, ref_s = bench_quant.ref_per_tensor_dynamic(x)
        exact = torch.equal(q.view(torch.uint8), ref_q.view(torch.uint8)) and torch.equal(scale, ref_s)
        two_text = f"{two:8.2f}" if two else f"{'-':>8s}"
        vs_two = f"{two / ours.us:10.2f}x" if two else f"{'-':>11s}"
        print(f"{str(dtype).removeprefix('torch.'):9s} {t:6d} {ours.us:8.2f} {ours.gbps(nbytes):6.0f} {two_text} "
              f"{comp.us:8.2f} {comp.us / ours.us:9.2f}x {vs_two}  {exact}")
        del sets
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
