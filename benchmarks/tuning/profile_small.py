"""Runs our kernels and torch.compile's for the small-token cases (norms, gated activations,
static, per-token, dynamic per-tensor and group FP8 quantization, the KV-cache stores) once each
inside a CUDA profiler range, for Nsight Compute:

    ncu --profile-from-start off --section SpeedOfLight --section LaunchStats --section Occupancy \\
        --section WarpStateStats -o $OUT/small python benchmarks/tuning/profile_small.py

(add ``--cache-control none --clock-control none`` for the warm caches and boost clock of the
CUDA-graph benchmarks, where the small inputs stay in L2).

Everything is built and warmed up (JIT, Inductor autotuning) before the range opens, so only
the kernels of the cases are profiled: per case and token count, ours first, then compile's.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import bench_fused_add_rmsnorm  # noqa: E402
import bench_gelu_and_mul  # noqa: E402
import bench_kv_cache  # noqa: E402
import bench_quant  # noqa: E402
import bench_rmsnorm  # noqa: E402
import bench_silu_and_mul  # noqa: E402
import harness  # noqa: E402

HIDDEN, D = 4096, 11008
DTYPE = torch.bfloat16


def _cases(t: int):
    from mllm_kernel.cuda.jit import (
        fused_add_rmsnorm,
        gelu_and_mul,
        per_tensor_quant_fp8,
        per_token_group_quant_fp8,
        per_token_quant_fp8,
        rmsnorm,
        silu_and_mul,
        store_kv_cache,
    )

    w = torch.randn(HIDDEN, device="cuda", dtype=DTYPE)
    x = torch.randn(t, HIDDEN, device="cuda", dtype=DTYPE)
    r = torch.randn(t, HIDDEN, device="cuda", dtype=DTYPE)
    o = torch.empty_like(x)
    g = torch.randn(t, 2 * D, device="cuda", dtype=DTYPE)
    go = torch.empty(t, D, device="cuda", dtype=DTYPE)
    rms_ref = harness.compiled(lambda x: bench_rmsnorm.reference(x, w))
    fused_ref = harness.compiled(lambda x, r: bench_fused_add_rmsnorm.reference(x, r, w))
    silu_ref = harness.compiled(bench_silu_and_mul.reference)
    gelu_ref = harness.compiled(bench_gelu_and_mul.reference)
    q = torch.empty(t, HIDDEN, device="cuda", dtype=torch.float8_e4m3fn)
    scale = torch.full((1,), 0.05, device="cuda")
    static_ref = harness.compiled(bench_quant.ref_per_tensor_static)
    token_ref = harness.compiled(bench_quant.ref_per_token_fp8)
    dynamic_ref = harness.compiled(bench_quant.ref_per_tensor_dynamic)
    group_ref = harness.compiled(bench_quant.ref_group_fp8)
    heads, head_dim = bench_kv_cache.HEADS, bench_kv_cache.HEAD_DIM
    k, v = (torch.randn(t, heads, head_dim, device="cuda", dtype=DTYPE) for _ in range(2))
    k_cache, v_cache = (torch.empty(2 * t, heads, head_dim, device="cuda", dtype=DTYPE) for _ in range(2))
    k8, v8 = (torch.empty(2 * t, heads, head_dim, device="cuda", dtype=torch.float8_e4m3fn) for _ in range(2))
    slots = torch.randperm(2 * t, device="cuda")[:t]
    ks, vs = torch.full((1,), 0.02, device="cuda"), torch.full((1,), 0.03, device="cuda")
    kv_ref = harness.compiled(bench_kv_cache.reference)
    kv8_ref = harness.compiled(bench_kv_cache.reference_fp8)
    return [
        (f"rmsnorm [{t}, {HIDDEN}]", lambda: rmsnorm(x, w, 1e-6, out=o), lambda: rms_ref(x)),
        (f"fused_add_rmsnorm [{t}, {HIDDEN}]", lambda: fused_add_rmsnorm(x, r, w, 1e-6), lambda: fused_ref(x, r)),
        (f"silu_and_mul [{t}, 2x{D}]", lambda: silu_and_mul(g, out=go), lambda: silu_ref(g)),
        (f"gelu_and_mul tanh [{t}, 2x{D}]", lambda: gelu_and_mul(g, "tanh", out=go), lambda: gelu_ref(g)),
        (f"per_tensor static fp8 [{t}, {HIDDEN}]", lambda: per_tensor_quant_fp8(x, scale, out=q),
         lambda: static_ref(x, scale)),
        (f"per_token fp8 [{t}, {HIDDEN}]", lambda: per_token_quant_fp8(x, out=q), lambda: token_ref(x)),
        (f"per_tensor dynamic fp8 [{t}, {HIDDEN}]", lambda: per_tensor_quant_fp8(x, out=q), lambda: dynamic_ref(x)),
        (f"group128 fp8 [{t}, {HIDDEN}]", lambda: per_token_group_quant_fp8(x, bench_quant.GROUP, out=q),
         lambda: group_ref(x)),
        (f"store_kv_cache [{t}, {heads}, {head_dim}]",
         lambda: store_kv_cache(k, v, k_cache, v_cache, slots, validate=False),
         lambda: kv_ref(k, v, k_cache, v_cache, slots)),
        (f"store_kv_cache fp8 [{t}, {heads}, {head_dim}]",
         lambda: store_kv_cache(k, v, k8, v8, slots, validate=False, k_scale=ks, v_scale=vs),
         lambda: kv8_ref(k, v, k8, v8, slots, ks, vs)),
    ]


def main() -> None:
    cases = [c for t in harness.tuning_tokens(__doc__, "1,64,1024") for c in _cases(t)]
    harness.profile_range([(f"{name}: ours, then compile", (ours, compiled)) for name, ours, compiled in cases],
                          warmups=3)


if __name__ == "__main__":
    main()
