"""CPU int8_scaled_mm (mllm_kernel.cpu.jit) beside PyTorch on the same machine, at Llama-3-8B's
linear shapes (N x K = 4096 x 4096 and 14336 x 4096) and M = 1, 16, 128 tokens:

    ours        int8_scaled_mm(a, w.t(), scales_a, scales_b, bfloat16)
    int_mm      torch._int_mm(a, w.t()) then (c.float() * sa[:, None] * sb[None, :]).to(bfloat16)
    bf16 mm     torch.mm of the bfloat16 activation and weight (the unquantized layer)

Times: each case's contenders take turns for ROUNDS rounds (so that a slow spell of the machine
falls on all of them), and each gets the median of its rounds' medians of single calls; each
call reads the next of several weight copies, together larger than the last-level cache, as a
decode step reads weights that other layers have evicted.
GOP/s counts 2 * M * N * K; GB/s (M = 1) the int8 weight bytes per call, beside the machine's
copy_ bandwidth (read + write counted). Threads: the core count unless --threads says otherwise.

    python benchmarks/bench_int8_scaled_mm_cpu.py [--quick] [--threads N] [--json PATH]
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout without installing

from mllm_kernel.cpu.jit import int8_scaled_mm  # noqa: E402
import results  # noqa: E402

CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
#: (N, K) of Llama-3-8B's projections: q/o (4096 x 4096) and gate/up (14336 x 4096).
WEIGHTS = [(4096, 4096), (14336, 4096)]
TOKENS = [1, 16, 128]
#: Weight copies per case are enough to exceed this, so the last-level cache cannot hold them.
ROTATE_BYTES = 128 * 2**20
#: Turns each contender of a case takes (--quick and CI: one).
ROUNDS = 5


def median_us(calls, repeats: int) -> float:
    """Median microseconds of one call, going round `calls` (one per weight copy)."""
    time.sleep(0.05)  # the threads of the previous method's pool (OpenMP's or ours) stop spinning
    for call in calls[:2]:
        call()
    samples = []
    for i in range(repeats):
        start = time.perf_counter()
        calls[i % len(calls)]()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1e6


def rounds_us(contenders: dict[str, list], repeats: int, rounds: int) -> dict[str, float]:
    """Median microseconds of one call of each contender (name -> its calls, as for median_us):
    the contenders take turns for `rounds` rounds, and each gets the median of its rounds."""
    samples: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(rounds):
        for name, calls in contenders.items():
            samples[name].append(median_us(calls, repeats))
    return {name: statistics.median(times) for name, times in samples.items()}


def int_mm_works() -> bool:
    """Whether this PyTorch has torch._int_mm for CPU tensors."""
    try:
        a = torch.ones(16, 32, dtype=torch.int8)
        return bool(torch.equal(torch._int_mm(a, a.t()), torch.full((16, 16), 32, dtype=torch.int32)))
    except (AttributeError, RuntimeError):
        return False


def copy_gbps(repeats: int) -> float:
    """GB/s (read + write) of copy_ of 256 MiB into a preallocated buffer."""
    x = torch.empty(64 * 2**20, dtype=torch.float32).normal_()
    y = torch.empty_like(x)
    return 2 * x.nbytes / median_us([lambda: y.copy_(x)], max(3, repeats)) / 1e3


def start_cpu_bench(doc: str, quick_help: str, remark: str = "") -> tuple[argparse.Namespace, bool, int, float]:
    """The start of a CPU GEMM benchmark: parses --quick (``quick_help`` says what it keeps),
    --threads, --repeats and --json, sets the thread count, measures copy_ bandwidth and prints
    it in a header line (followed by ``remark``). Returns (args, quick, repeats, bandwidth); the
    rounds of rounds_us are ``cpu_rounds(quick)``."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=quick_help)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--repeats", type=int, default=None, help="timed calls per case (default 20, --quick 5)")
    results.add_json_argument(parser)
    args = parser.parse_args()
    quick = args.quick or CI
    repeats = args.repeats or (5 if quick else 20)
    torch.set_num_threads(args.threads)
    bandwidth = copy_gbps(repeats)
    print(f"threads={torch.get_num_threads()}  torch {torch.__version__}  repeats={repeats}  "
          f"copy_ 256 MiB: {bandwidth:.1f} GB/s (read + write){remark}")
    return args, quick, repeats, bandwidth


def cpu_rounds(quick: bool) -> int:
    """Rounds of a case's contenders (rounds_us): ROUNDS, or one with --quick or under CI."""
    return 1 if quick else ROUNDS


def run(tokens: list[int], weights: list[tuple[int, int]], repeats: int, with_int_mm: bool,
        rounds: int) -> list[dict]:
    """Times every case, printing its line as it goes; returns the results rows."""
    rows = []
    g = torch.Generator().manual_seed(0)
    for n, k in weights:
        ws = [torch.randint(-128, 128, (n, k), dtype=torch.int8, generator=g)
              for _ in range(max(2, math.ceil(ROTATE_BYTES / (n * k))))]
        wb = [torch.randn(n, k, generator=g).bfloat16() for _ in range(max(2, math.ceil(ROTATE_BYTES / (2 * n * k))))]
        sb = torch.rand(n, generator=g) / 128
        for m in tokens:
            a = torch.randint(-128, 128, (m, k), dtype=torch.int8, generator=g)
            ab = torch.randn(m, k, generator=g).bfloat16()
            sa = torch.rand(m, generator=g) / 128
            ops = 2 * m * n * k
            row = {"shape": f"{m} x {n} x {k}", "m": m, "n": n, "k": k}

            def int_mm(w):
                return (torch._int_mm(a, w.t()).float() * sa[:, None] * sb[None, :]).to(torch.bfloat16)

            contenders = {"ours": [lambda w=w: int8_scaled_mm(a, w.t(), sa, sb, torch.bfloat16) for w in ws]}
            if with_int_mm:
                contenders["int_mm"] = [lambda w=w: int_mm(w) for w in ws]
            contenders["bf16"] = [lambda w=w: torch.mm(ab, w.t()) for w in wb]
            us = rounds_us(contenders, repeats, rounds)
            ours = us["ours"]
            row.update(ours_us=ours, ours_gops=ops / ours / 1e3)
            if m == 1:
                row["ours_gbps"] = n * k / ours / 1e3
            if with_int_mm:
                t = us["int_mm"]
                row.update(int_mm_us=t, int_mm_gops=ops / t / 1e3, vs_int_mm=t / ours)
            t = us["bf16"]
            row.update(bf16_us=t, bf16_gops=ops / t / 1e3, vs_bf16=t / ours)
            rows.append(row)
            print(_line(row), flush=True)
        del ws, wb
    return rows


def _f(row: dict, key: str, spec: str, width: int, suffix: str = "") -> str:
    return f"{row[key]:{width - len(suffix)}{spec}}{suffix}" if key in row else f"{'-':>{width}}"


HEAD = (f"{'M x N x K':<18} | {'ours us':>9} {'GOP/s':>6} {'GB/s':>6} | {'int_mm us':>9} {'GOP/s':>6} | "
        f"{'bf16 us':>9} {'GOP/s':>6} | {'vs int_mm':>9} {'vs bf16':>8}")


def _line(row: dict) -> str:
    return (f"{row['shape']:<18} | {_f(row, 'ours_us', '.1f', 9)} {_f(row, 'ours_gops', '.0f', 6)} "
            f"{_f(row, 'ours_gbps', '.1f', 6)} | {_f(row, 'int_mm_us', '.1f', 9)} {_f(row, 'int_mm_gops', '.0f', 6)} | "
            f"{_f(row, 'bf16_us', '.1f', 9)} {_f(row, 'bf16_gops', '.0f', 6)} | {_f(row, 'vs_int_mm', '.2f', 9, 'x')} "
            f"{_f(row, 'vs_bf16', '.2f', 8, 'x')}")


COLUMNS = [
    ("shape", "M x N x K", "{}"), ("ours_us", "ours µs", "{:.1f}"), ("ours_gops", "GOP/s", "{:.0f}"),
    ("ours_gbps", "weight GB/s", "{:.1f}"), ("int_mm_us", "int_mm + scale µs", "{:.1f}"),
    ("int_mm_gops", "GOP/s", "{:.0f}"), ("bf16_us", "bf16 mm µs", "{:.1f}"), ("bf16_gops", "GOP/s", "{:.0f}"),
    ("vs_int_mm", "vs int_mm", "{:.2f}x"), ("vs_bf16", "vs bf16", "{:.2f}x"),
]


def main() -> None:
    with_int_mm = int_mm_works()
    args, quick, repeats, bandwidth = start_cpu_bench(
        __doc__, "M = 1 and 16 at 4096 x 4096 only, fewer repeats",
        "" if with_int_mm else "  (torch._int_mm does not run on CPU here: no int_mm column)")
    print(HEAD)
    print("-" * len(HEAD))
    rows = run(TOKENS[:2] if quick else TOKENS, WEIGHTS[:1] if quick else WEIGHTS, repeats, with_int_mm,
               cpu_rounds(quick))
    notes = [f"{torch.get_num_threads()} threads, PyTorch {torch.__version__}; bfloat16 output, no bias. Each call "
             f"reads the next of several weight copies (together over {ROTATE_BYTES >> 20} MiB); a case's contenders "
             f"take turns for {cpu_rounds(quick)} rounds, each timed by the median of its rounds. int_mm: "
             "torch._int_mm then the eager scaling; bf16 mm: torch.mm of bfloat16 operands. Weight GB/s (M = 1): "
             "int8 weight bytes per call."]
    title = "W8A8 scaled GEMMs: int8_scaled_mm (Llama-3-8B shapes)"
    results.write(args.json, results.section("cpu/scaled_mm", "scaled_mm", title, results.cpu_name(), COLUMNS, rows,
                                             copy_gbps=bandwidth, notes=notes))


if __name__ == "__main__":
    main()
