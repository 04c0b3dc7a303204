"""Runs every CUDA benchmark in one process: prints each table and a summary, and with --json
writes the CUDA half of the results that report.py renders into BENCHMARKS.md.

    python benchmarks/run_all_cuda.py --json benchmarks/results/cuda.json   # all (a few minutes on an H100)
    python benchmarks/run_all_cuda.py --only quant,kv_cache --json benchmarks/results/cuda.json
    CI=true python benchmarks/run_all_cuda.py                                # reduced shapes and repetitions

Parts: the comparison tables (norms, gated activations, rotary embedding, quantization, the
KV-cache store), the host time per eager call, the cached JIT module load and tvm-ffi's tensor
passing on this machine. Each part's section is written as soon as it is measured, so a part
that fails leaves the others' results (and the file's older sections) in place.
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402

import bench_call_overhead  # noqa: E402
import bench_ffi_call  # noqa: E402
import bench_fused_add_rmsnorm  # noqa: E402
import bench_gelu_and_mul  # noqa: E402
import bench_create_kv_indices  # noqa: E402
import bench_jit_load  # noqa: E402
import bench_kv_cache  # noqa: E402
import bench_launch_overhead  # noqa: E402
import bench_qknorm  # noqa: E402
import bench_quant  # noqa: E402
import bench_rms_norm_gated  # noqa: E402
import bench_rmsnorm  # noqa: E402
import bench_rope  # noqa: E402
import bench_silu_and_mul  # noqa: E402
import bench_store_cache  # noqa: E402
import harness  # noqa: E402
import results  # noqa: E402

#: The comparison tables: part name -> module with run() and section(rows, copy_gbps).
TABLES = {
    "rmsnorm": bench_rmsnorm,
    "rms_norm_gated": bench_rms_norm_gated,
    "fused_add_rmsnorm": bench_fused_add_rmsnorm,
    "qknorm": bench_qknorm,
    "silu_and_mul": bench_silu_and_mul,
    "gelu_and_mul": bench_gelu_and_mul,
    "rope": bench_rope,
    "quant": bench_quant,
    "kv_cache": bench_kv_cache,
    "create_kv_indices": bench_create_kv_indices,
    "store_cache": bench_store_cache,
}
JIT_LOAD_SAMPLES = 3 if harness.ci() else 10


def host_time() -> dict:
    measured = bench_launch_overhead.run()
    bench_launch_overhead.print_results(measured)
    return bench_call_overhead.cuda_section(measured)


def jit_load() -> dict:
    rows = bench_jit_load.measure(JIT_LOAD_SAMPLES)
    print()
    bench_jit_load.print_rows(JIT_LOAD_SAMPLES, rows)
    device = f"{harness.device_name()} box: {results.cpu_name()}"
    return bench_jit_load.section("cuda", device, JIT_LOAD_SAMPLES, rows)


def ffi_call() -> dict:
    rows = bench_ffi_call.measure("cuda")
    print()
    bench_ffi_call.print_rows("cuda", rows)
    return bench_ffi_call.section("cuda", harness.device_name(), rows)


#: The other parts: name -> function that measures, prints and returns its section.
OTHERS = {"host_time": host_time, "jit_load": jit_load, "ffi_call": ffi_call}


def print_summary(rows: list, copy: float) -> None:
    print(f"\n== summary (copy {copy:.0f} GB/s; GB/s = bytes read once + written once)")
    print(f"{'op':<18} {'shape':<26} {'ours us':>8} {'GB/s':>6} {'compile us':>10} {'GB/s':>6} {'speedup':>8} "
          f"{'no-PDL us':>9} {'speedup':>8}")
    nan = float("nan")
    for r in rows:
        c, plain = r.compiled, r.ours_no_pdl
        print(f"{r.op:<18} {r.shape:<26} {r.ours.us:8.2f} {r.ours.gbps(r.nbytes):6.0f} "
              f"{(c.us if c else nan):10.2f} {(c.gbps(r.nbytes) if c else nan):6.0f} "
              f"{(c.us / r.ours.us if c else nan):7.2f}x {(plain.us if plain else nan):9.2f} "
              f"{(c.us / plain.us if c and plain else nan):7.2f}x")


def main() -> None:
    parts = [*TABLES, *OTHERS]
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=",".join(parts), help=f"comma-separated, from: {', '.join(parts)}")
    results.add_json_argument(parser)
    args = parser.parse_args()
    chosen = args.only.split(",")
    unknown = sorted(set(chosen) - set(parts))
    if unknown:
        parser.error(f"unknown parts: {', '.join(unknown)}")
    harness.require_cuda()
    t0 = time.time()
    print(f"device: {harness.device_name()}  torch {torch.__version__}  CI={harness.ci()}")
    copy = harness.copy_bandwidth_gbps()
    print(f"device-to-device copy bandwidth: {copy:.0f} GB/s")
    all_rows = []
    for name in chosen:
        t = time.time()
        try:
            if name in TABLES:
                rows = TABLES[name].run()
                section = TABLES[name].section(rows, copy)
                harness.print_table(section["title"], rows, copy)
                all_rows += rows
            else:
                section = OTHERS[name]()
        except Exception:  # noqa: BLE001 - keep going: one broken part should not hide the others
            print(f"\n== {name}: FAILED")
            traceback.print_exc()
            continue
        print(f"  ({time.time() - t:.0f} s including JIT builds and torch.compile)")
        results.write(args.json, section)
    if all_rows:
        print_summary(all_rows, copy)
    print(f"\ntotal {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
