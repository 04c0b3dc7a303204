"""Runs every CUDA benchmark in one process and prints each table plus a final compact one.

    python benchmarks/run_all_cuda.py            # full (about a minute on an H100)
    CI=true python benchmarks/run_all_cuda.py    # reduced shapes and repetitions
"""

from __future__ import annotations

import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402

import bench_fused_add_rmsnorm  # noqa: E402
import bench_gelu_and_mul  # noqa: E402
import bench_launch_overhead  # noqa: E402
import bench_qknorm  # noqa: E402
import bench_rmsnorm  # noqa: E402
import bench_rope  # noqa: E402
import bench_silu_and_mul  # noqa: E402
import harness  # noqa: E402

BENCHES = [
    ("rmsnorm bf16 [T, 4096]", bench_rmsnorm),
    ("fused_add_rmsnorm bf16 [T, 4096]", bench_fused_add_rmsnorm),
    ("qknorm bf16 [T, 32+8, 128]", bench_qknorm),
    ("silu_and_mul bf16 [T, 2x11008]", bench_silu_and_mul),
    ("gelu_and_mul tanh bf16 [T, 2x11008]", bench_gelu_and_mul),
    ("apply_rope neox bf16 [T, 32+8, 128]", bench_rope),
]


def main() -> None:
    harness.require_cuda()
    t0 = time.time()
    print(f"device: {torch.cuda.get_device_name()}  torch {torch.__version__}  CI={harness.ci()}")
    copy = harness.copy_bandwidth_gbps()
    print(f"device-to-device copy bandwidth: {copy:.0f} GB/s")
    all_rows = []
    for title, module in BENCHES:
        t = time.time()
        try:
            rows = module.run()
        except Exception:  # noqa: BLE001 - keep going: one broken op should not hide the others
            print(f"\n== {title}: FAILED")
            traceback.print_exc()
            continue
        harness.print_table(title, rows)
        print(f"  ({time.time() - t:.0f} s including JIT builds and torch.compile)")
        all_rows += rows
    try:
        launch = bench_launch_overhead.run()
        bench_launch_overhead.print_results(launch)
    except Exception:  # noqa: BLE001
        print("\n== launch overhead: FAILED")
        traceback.print_exc()

    print(f"\n== summary (copy {copy:.0f} GB/s; GB/s = bytes read once + written once)")
    print(f"{'op':<18} {'shape':<26} {'ours us':>8} {'GB/s':>6} {'compile us':>10} {'GB/s':>6} {'speedup':>8} "
          f"{'no-PDL us':>9} {'speedup':>8}")
    nan = float("nan")
    for r in all_rows:
        c, plain = r.compiled, r.ours_no_pdl
        print(f"{r.op:<18} {r.shape:<26} {r.ours.us:8.2f} {r.ours.gbps(r.nbytes):6.0f} "
              f"{(c.us if c else nan):10.2f} {(c.gbps(r.nbytes) if c else nan):6.0f} "
              f"{(c.us / r.ours.us if c else nan):7.2f}x {(plain.us if plain else nan):9.2f} "
              f"{(c.us / plain.us if c and plain else nan):7.2f}x")
    print(f"\ntotal {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
