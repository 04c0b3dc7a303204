"""W8A8 scaled GEMMs: mllm_kernel's int8_scaled_mm, fp8_scaled_mm and fp8_blockwise_scaled_mm
beside cuBLAS(Lt) in the same run, at Llama-3-8B's linear-layer shapes (N x K = 4096x4096, 14336x4096, 4096x14336,
6144x4096) and M = 1, 16, 128, 1024, 8192, bf16 output.

    python benchmarks/bench_scaled_mm.py [--json benchmarks/results/cuda.json]   # H100
    python benchmarks/bench_scaled_mm.py --sweep     # every kernel configuration at every shape

Peers: bf16 ``torch.mm``; ``torch._scaled_mm`` (cuBLASLt FP8) with per-tensor and with row-wise
scales; ``torch._int_mm`` (cuBLAS int8, int32 out; only for M > 16) followed by the scaling in
eager PyTorch. Ours: int8 with per-token x per-channel scales, FP8 per-tensor and row-wise, FP8
with DeepSeek-V3 block scales (next to per-tensor cuBLASLt, the issue's bar, and to
``torch._scaled_mm``'s block-scaled mode where this PyTorch has one).
Times: the median of CUDA-graph replays, each graph calling the op on operand sets rotated so L2
cannot hold them (benchmarks/harness.py). TFLOP/s: 2·M·N·K over the
time (TOPS for int8).
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
MS = [1, 16, 128, 1024, 8192]
FP8 = torch.float8_e4m3fn


def _operand_sets(m: int, n: int, k: int) -> list[tuple]:
    """Enough independent operand sets that the timed graph's calls cannot be served from L2
    (the bf16 weight, the largest operand, rotated through harness.num_sets)."""
    import harness

    g = torch.Generator(device="cuda").manual_seed(m + n + k)
    one = torch.ones(1, device="cuda")
    sets = []
    for _ in range(harness.num_sets(2 * (m * k + n * k))):
        x = torch.randn(m, k, device="cuda", generator=g, dtype=torch.bfloat16)
        w = torch.randn(n, k, device="cuda", generator=g, dtype=torch.bfloat16)
        a8 = torch.randint(-128, 128, (m, k), device="cuda", generator=g, dtype=torch.int8)
        w8 = torch.randint(-128, 128, (n, k), device="cuda", generator=g, dtype=torch.int8)
        af, wf = (x * 4).to(FP8), (w * 4).to(FP8)
        sa = torch.rand(m, 1, device="cuda", generator=g) * 0.01 + 1e-3
        sb = torch.rand(1, n, device="cuda", generator=g) * 0.01 + 1e-3
        # Block scales: per 1 x 128 group of the activations (row-major, as the quantizer writes
        # them by default; and a column-major copy, the layout cuBLASLt takes), per 128 x 128
        # block of the weight.
        sa_block = torch.rand(m, k // 128, device="cuda", generator=g) * 0.01 + 1e-3
        sb_block = torch.rand(n // 128, k // 128, device="cuda", generator=g) * 0.01 + 1e-3
        sets.append((x, w, a8, w8, af, wf, sa, sb, one, sa_block, sb_block, sa_block.t().contiguous().t()))
    return sets


def _cublas_blockwise(sets) -> bool:
    """Whether torch._scaled_mm takes 1 x 128 / 128 x 128 block scales here (cuBLASLt's
    block-scaled FP8, in newer PyTorch builds) and agrees with ours."""
    from mllm_kernel.cuda.jit import fp8_blockwise_scaled_mm

    x, w, a8, w8, af, wf, sa, sb, one, sa_block, sb_block, sa_block_cm = sets[0]
    try:
        theirs = torch._scaled_mm(af, wf.t(), scale_a=sa_block_cm, scale_b=sb_block.t(), out_dtype=torch.bfloat16)
    except Exception:  # noqa: BLE001 - any refusal means this PyTorch has no such mode
        return False
    ours = fp8_blockwise_scaled_mm(af, wf.t(), sa_block, sb_block, torch.bfloat16)
    return bool(((theirs.float() - ours.float()).abs().max() <= 0.02 * ours.float().abs().max()).item())


def run_cuda() -> list[dict]:
    from mllm_kernel.cuda.jit import fp8_blockwise_scaled_mm, fp8_scaled_mm, int8_scaled_mm

    import harness

    rows = []
    for n, k in SHAPES[:1] if CI else SHAPES:
        for m in [1, 1024] if CI else MS:
            sets = _operand_sets(m, n, k)
            flop = 2 * m * n * k
            row = {"shape": f"{n}x{k}", "m": m}
            harness.settle_row(m)
            row["bf16_us"] = _us(lambda x, w, *_: torch.mm(x, w.t()), sets, m)
            row["int8_us"] = _us(lambda x, w, a8, w8, af, wf, sa, sb, one, *_:
                                 int8_scaled_mm(a8, w8.t(), sa, sb, torch.bfloat16), sets, m)
            if m > 16:
                row["int_mm_us"] = _us(lambda x, w, a8, w8, af, wf, sa, sb, one, *_:
                                       (torch._int_mm(a8, w8.t()).float() * sa * sb).to(torch.bfloat16), sets, m)
            row["fp8_us"] = _us(lambda x, w, a8, w8, af, wf, sa, sb, one, *_:
                                fp8_scaled_mm(af, wf.t(), one, one, torch.bfloat16), sets, m)
            row["scaled_mm_us"] = _us(lambda x, w, a8, w8, af, wf, sa, sb, one, *_: torch._scaled_mm(
                af, wf.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16), sets, m)
            row["fp8_row_us"] = _us(lambda x, w, a8, w8, af, wf, sa, sb, one, *_:
                                    fp8_scaled_mm(af, wf.t(), sa, sb, torch.bfloat16), sets, m)
            row["scaled_mm_row_us"] = _us(lambda x, w, a8, w8, af, wf, sa, sb, one, *_: torch._scaled_mm(
                af, wf.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16), sets, m)
            row["block_us"] = _us(lambda *t: fp8_blockwise_scaled_mm(t[4], t[5].t(), t[9], t[10], torch.bfloat16),
                                  sets, m)
            row["block_vs_per_tensor"] = row["scaled_mm_us"] / row["block_us"]
            row["block_tflops"] = flop / row["block_us"] / 1e6
            if _cublas_blockwise(sets):
                row["scaled_mm_block_us"] = _us(lambda *t: torch._scaled_mm(
                    t[4], t[5].t(), scale_a=t[11], scale_b=t[10].t(), out_dtype=torch.bfloat16), sets, m)
            row["int8_vs_bf16"] = row["bf16_us"] / row["int8_us"]
            if "int_mm_us" in row:
                row["int8_vs_int_mm"] = row["int_mm_us"] / row["int8_us"]
            row["fp8_vs_cublas"] = row["scaled_mm_us"] / row["fp8_us"]
            row["fp8_row_vs_cublas"] = row["scaled_mm_row_us"] / row["fp8_row_us"]
            row["int8_tops"] = flop / row["int8_us"] / 1e6
            row["fp8_tflops"] = flop / row["fp8_us"] / 1e6
            rows.append(row)
            print_row(row)
            del sets
            torch.cuda.empty_cache()
    return rows


def sweep() -> None:
    """Every configuration of scaled_mm_sm90 and of the block-scaled GEMM (and, for M >= 1024,
    every tile order of their cooperative kernels) at every shape, for tuning the
    ``pick_config`` heuristics and scaled_mm_sm90's ``pick_order``."""
    from mllm_kernel.cuda.jit import fp8_blockwise_scaled_mm_cutlass as blockwise
    from mllm_kernel.cuda.jit import scaled_mm_sm90

    for n, k in SHAPES:
        for m in sorted({*MS, 64, 256, 512}):
            sets = _operand_sets(m, n, k)
            print(f"{n}x{k} M={m}", flush=True)
            for label, ia, ib in (("int8", 2, 3), ("fp8", 4, 5)):
                times = {}
                orders = [(1, 0)] if m < 1024 else [(sw, r) for sw in (1, 4, 8) for r in (0, 1, 2)]
                for name, config in scaled_mm_sm90.CONFIGS.items():
                    if m >= 1024 and config.swap_ab:
                        continue
                    for sw, r in orders if not config.pingpong else [(1, 0)]:
                        times[(name, sw, r)] = _us(lambda *t: scaled_mm_sm90.scaled_mm(
                            t[ia], t[ib].t(), t[6].view(-1), t[7].view(-1), torch.bfloat16, None, m, n, k,
                            config=config, swizzle=sw, raster=r), sets)
                best = sorted(times, key=times.get)[:4]
                picked = scaled_mm_sm90.pick_config(m, n, k).name
                print(f"  {label}: picked {picked} {times.get((picked, 1, 0), float('nan')):.1f} us; best "
                      + ", ".join(f"{c[0]} sw{c[1]} r{c[2]} {times[c]:.1f}" for c in best), flush=True)
            orders = [(1, 0)] if m < 1024 else [(sw, r) for sw in (1, 4, 8) for r in (0, 1, 2)]
            times = {(name, sw, r): _us(lambda *t: blockwise.blockwise_scaled_mm(
                t[4], t[5].t(), t[9], t[10], torch.bfloat16, m, n, config=config, swizzle=sw, raster=r), sets)
                for name, config in blockwise.CONFIGS.items()
                for sw, r in (orders if not config.pingpong else [(1, 0)])}
            print(f"  fp8 block-scaled: picked {blockwise.pick_config(m, n, k).name}; "
                  + ", ".join(f"{c[0]} sw{c[1]} r{c[2]} {us:.1f}" for c, us in sorted(times.items(), key=lambda i: i[1])),
                  flush=True)
            del sets
            torch.cuda.empty_cache()


COLUMNS = [("shape", "N x K", "{}"), ("m", "M", "{}"), ("bf16_us", "bf16 mm µs", "{:.1f}"),
           ("int8_us", "int8 µs", "{:.1f}"), ("int_mm_us", "_int_mm+scale µs", "{:.1f}"),
           ("int8_vs_bf16", "int8 vs bf16", "{:.2f}x"), ("int8_vs_int_mm", "vs _int_mm", "{:.2f}x"),
           ("int8_tops", "int8 TOPS", "{:.0f}"), ("fp8_us", "fp8 µs", "{:.1f}"),
           ("scaled_mm_us", "_scaled_mm µs", "{:.1f}"), ("fp8_vs_cublas", "fp8 vs cuBLASLt", "{:.2f}x"),
           ("fp8_tflops", "fp8 TFLOP/s", "{:.0f}"), ("fp8_row_us", "fp8 row-wise µs", "{:.1f}"),
           ("scaled_mm_row_us", "_scaled_mm row-wise µs", "{:.1f}"),
           ("fp8_row_vs_cublas", "row-wise vs cuBLASLt", "{:.2f}x"), ("block_us", "fp8 block-scaled µs", "{:.1f}"),
           ("scaled_mm_block_us", "_scaled_mm block-scaled µs", "{:.1f}"), ("block_tflops", "block TFLOP/s", "{:.0f}"),
           ("block_vs_per_tensor", "block vs per-tensor cuBLASLt", "{:.2f}x")]
NOTE = ("bf16 output. int8: per-token x per-channel scales; fp8: per-tensor, and row-wise (per-token x "
        "per-channel); fp8 block-scaled: DeepSeek-V3's 1 x 128 activation groups and 128 x 128 weight blocks "
        "(fp8_blockwise_scaled_mm), against per-tensor cuBLASLt, and against torch._scaled_mm's block-scaled "
        "mode where this PyTorch has it. Peers in the same run: torch.mm (bf16), torch._scaled_mm (cuBLASLt), torch._int_mm "
        "(int32 out, M > 16 only) with the scaling in eager PyTorch. Times: median of CUDA-graph replays over "
        "operand sets rotated so that L2 cannot hold them; each row starts after 1 s idle, so that clocks slowed by "
        "the previous row's large products do not carry over, and from M = 1024 each contender does. Ours run with their defaults: at M <= 16 the "
        "decoding GEMV, launched with PDL (docs/pdl.md), so each call in the timed graph asks for its weights "
        "while the previous call finishes, as it would after the activations' quantizer in an engine; the "
        "CUTLASS kernels and the peers launch without PDL.")


def print_row(r: dict) -> None:
    print(results.format_row(COLUMNS, r), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweep", action="store_true", help="time every kernel configuration at every shape")
    results.add_json_argument(parser)
    args = parser.parse_args()
    if args.sweep:
        sweep()
        return
    import harness

    harness.write_rows_section(args.json, "scaled_mm", "scaled_mm", "W8A8 scaled GEMMs (Llama-3-8B shapes)", COLUMNS,
                               run_cuda(), NOTE)


if __name__ == "__main__":
    main()
