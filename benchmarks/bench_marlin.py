"""Weight-only quantized GEMM: mllm_kernel's gptq_marlin_gemm beside bf16 cuBLAS and PyTorch's
own int4 weight-only kernel in the same run, at Llama-3-8B's linear-layer shapes (N x K =
4096x4096, 14336x4096, 4096x14336, 6144x4096) and M = 1, 16, 32, 64, 128, 256, 1024, 8192, bf16
activations.

    python benchmarks/bench_marlin.py [--json benchmarks/results/cuda.json]   # H100

Peers: bf16 ``torch.mm``; ``torch._weight_int4pack_mm`` (group 128). Ours: GPTQ 4-bit
(uint4b8) group 128, AWQ 4-bit (uint4 with zero points) group 128, GPTQ 8-bit (uint8b128)
group 128, float8_e4m3fn weights (an FP8 checkpoint run without FP8 tensor cores) group 128.
Times: the median of CUDA-graph replays over weight sets rotated so that L2 cannot hold them
(benchmarks/harness.py). GB/s: the quantized weight bytes over the time.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import results  # noqa: E402
from harness import contender_us as _us  # noqa: E402

CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
SHAPES = [(4096, 4096), (14336, 4096), (4096, 14336), (6144, 4096)]
MS = [1, 16, 32, 64, 128, 256, 1024, 8192]
GROUP = 128


def _weight_sets(m: int, n: int, k: int) -> list[tuple]:
    """Independent weight sets (random repacked words: the values do not change the speed)."""
    import harness

    g = torch.Generator(device="cuda").manual_seed(m + n + k)
    x = torch.randn(m, k, device="cuda", generator=g, dtype=torch.bfloat16)
    sets = []
    for _ in range(harness.num_sets(2 * n * k)):
        w = torch.randn(n, k, device="cuda", generator=g, dtype=torch.bfloat16)
        q4 = torch.randint(-2**31, 2**31 - 1, (k // 16, n * 2), device="cuda", generator=g, dtype=torch.int32)
        q8 = torch.randint(-2**31, 2**31 - 1, (k // 16, n * 4), device="cuda", generator=g, dtype=torch.int32)
        s = torch.rand(k // GROUP, n, device="cuda", generator=g).to(torch.bfloat16) * 0.01
        z = torch.randint(-2**31, 2**31 - 1, (k // GROUP, n // 8), device="cuda", generator=g, dtype=torch.int32)
        sets.append((x, w, q4, q8, s, z))
    return sets


def _int4pack_sets(m: int, n: int, k: int) -> list[tuple] | None:
    """PyTorch's int4 weight-only layout (None where this build lacks the kernel)."""
    import harness

    g = torch.Generator(device="cuda").manual_seed(m + n + k + 1)
    x = torch.randn(m, k, device="cuda", generator=g, dtype=torch.bfloat16)
    sets = []
    try:
        for _ in range(harness.num_sets(n * k // 2)):
            raw = torch.randint(0, 256, (n, k // 2), device="cuda", generator=g, dtype=torch.uint8)
            packed = torch.ops.aten._convert_weight_to_int4pack(raw, 8)
            sz = torch.rand(k // GROUP, n, 2, device="cuda", generator=g).to(torch.bfloat16)
            sets.append((x, packed, sz))
        torch.ops.aten._weight_int4pack_mm(x, sets[0][1], GROUP, sets[0][2])
    except (RuntimeError, AttributeError) as error:
        print(f"  _weight_int4pack_mm unavailable: {error}", file=sys.stderr)
        return None
    return sets


def run_cuda() -> list[dict]:
    from mllm_kernel import marlin
    from mllm_kernel.cuda.jit import gptq_marlin_gemm
    from mllm_kernel.scalar_type import scalar_types

    import harness

    workspace = marlin.marlin_make_workspace("cuda")
    rows = []
    for n, k in SHAPES[:1] if CI else SHAPES:
        for m in [1, 1024] if CI else MS:
            sets = _weight_sets(m, n, k)
            row = {"shape": f"{n}x{k}", "m": m}
            harness.settle_row(m)
            row["bf16_us"] = _us(lambda x, w, *_: torch.mm(x, w.t()), sets, m)
            row["w4_us"] = _us(lambda x, w, q4, q8, s, z: gptq_marlin_gemm(
                x, None, q4, s, None, None, None, None, workspace, scalar_types.uint4b8.id, m, n, k), sets, m)
            row["awq_us"] = _us(lambda x, w, q4, q8, s, z: gptq_marlin_gemm(
                x, None, q4, s, None, z, None, None, workspace, scalar_types.uint4.id, m, n, k), sets, m)
            row["w8_us"] = _us(lambda x, w, q4, q8, s, z: gptq_marlin_gemm(
                x, None, q8, s, None, None, None, None, workspace, scalar_types.uint8b128.id, m, n, k), sets, m)
            row["fp8_us"] = _us(lambda x, w, q4, q8, s, z: gptq_marlin_gemm(
                x, None, q8, s, None, None, None, None, workspace, scalar_types.float8_e4m3fn.id, m, n, k), sets, m)
            # GPTQ act-order: g_idx sorted by the perm the repack took, a's columns gathered by it.
            g_idx = (torch.arange(k, device="cuda") // GROUP).to(torch.int32)
            perm = torch.randperm(k, device="cuda", generator=torch.Generator(device="cuda").manual_seed(k)).int()
            row["act_us"] = _us(lambda x, w, q4, q8, s, z: gptq_marlin_gemm(
                x, None, q4, s, None, None, g_idx, perm, workspace, scalar_types.uint4b8.id, m, n, k), sets, m)
            row["act8_us"] = _us(lambda x, w, q4, q8, s, z: gptq_marlin_gemm(
                x, None, q8, s, None, None, g_idx, perm, workspace, scalar_types.uint8b128.id, m, n, k), sets, m)
            del sets
            packed = _int4pack_sets(m, n, k) if m <= 1024 else None
            if packed is not None:
                row["int4pack_us"] = _us(lambda x, p, sz: torch.ops.aten._weight_int4pack_mm(x, p, GROUP, sz), packed, m)
                row["w4_vs_int4pack"] = row["int4pack_us"] / row["w4_us"]
            del packed
            row["w4_vs_bf16"] = row["bf16_us"] / row["w4_us"]
            row["awq_vs_bf16"] = row["bf16_us"] / row["awq_us"]
            row["w8_vs_bf16"] = row["bf16_us"] / row["w8_us"]
            row["fp8_vs_bf16"] = row["bf16_us"] / row["fp8_us"]
            row["act_vs_bf16"] = row["bf16_us"] / row["act_us"]
            row["act8_vs_bf16"] = row["bf16_us"] / row["act8_us"]
            row["w4_gbps"] = n * k / 2 / row["w4_us"] / 1e3
            row["w4_tflops"] = 2 * m * n * k / row["w4_us"] / 1e6
            rows.append(row)
            print_row(row)
            torch.cuda.empty_cache()
    return rows


COLUMNS = [("shape", "N x K", "{}"), ("m", "M", "{}"), ("bf16_us", "bf16 mm µs", "{:.1f}"),
           ("int4pack_us", "_weight_int4pack_mm µs", "{:.1f}"), ("w4_us", "GPTQ W4 µs", "{:.1f}"),
           ("w4_vs_bf16", "W4 vs bf16", "{:.2f}x"), ("w4_vs_int4pack", "W4 vs int4pack", "{:.2f}x"),
           ("w4_gbps", "W4 weight GB/s", "{:.0f}"), ("w4_tflops", "W4 TFLOP/s", "{:.0f}"),
           ("awq_us", "AWQ W4 µs", "{:.1f}"), ("awq_vs_bf16", "AWQ vs bf16", "{:.2f}x"),
           ("w8_us", "GPTQ W8 µs", "{:.1f}"), ("w8_vs_bf16", "W8 vs bf16", "{:.2f}x"),
           ("fp8_us", "FP8 W8 µs", "{:.1f}"), ("fp8_vs_bf16", "FP8 vs bf16", "{:.2f}x"),
           ("act_us", "GPTQ W4 act-order µs", "{:.1f}"), ("act_vs_bf16", "act-order vs bf16", "{:.2f}x"),
           ("act8_us", "GPTQ W8 act-order µs", "{:.1f}"), ("act8_vs_bf16", "W8 act-order vs bf16", "{:.2f}x")]
NOTE = ("bf16 activations and output, group size 128; act-order: GPTQ desc_act weights, g_idx sorted by the "
        "repack's perm and the activations' columns gathered by it in the call. Peers in the same run: torch.mm (bf16 weights) and "
        "torch._weight_int4pack_mm (PyTorch's int4 weight-only kernel, M <= 1024). Times: median of CUDA-graph "
        "replays over weight sets rotated so that L2 cannot hold them; each row starts after 1 s idle, so that clocks "
        "slowed by the previous row's large products do not carry over, and from M = 1024 each contender does.")


def print_row(r: dict) -> None:
    print(results.format_row(COLUMNS, r), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    results.add_json_argument(parser)
    args = parser.parse_args()
    import harness

    harness.write_rows_section(args.json, "marlin", "marlin", "Weight-only quantized GEMM (Llama-3-8B shapes)", COLUMNS,
                               run_cuda(), NOTE)


if __name__ == "__main__":
    main()
