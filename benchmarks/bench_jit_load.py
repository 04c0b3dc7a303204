"""Cached-load cost of a JIT module in a new process.

Each sample is a fresh Python process that imports torch (not counted), then measures:
importing tvm-ffi, importing the CPU kernel package (every wrapper), and the first call of
``add_constant`` with a constant whose module is cached (hashing the sources, checking the
dependency manifest, dlopen, and a 16-element call), then the same for a second module.

    python benchmarks/bench_jit_load.py [--samples 20] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import results

CHILD = """
import json, time
import torch
t0 = time.perf_counter()
import tvm_ffi
t1 = time.perf_counter()
import mllm_kernel.cpu.jit as jit
t2 = time.perf_counter()
x = torch.ones(16)
jit.add_constant(x, 16)
t3 = time.perf_counter()
jit.add_constant(x, 8)
t4 = time.perf_counter()
print(json.dumps({"tvm_ffi_import": t1 - t0, "package_import": t2 - t1, "first_module": t3 - t2,
                  "second_module": t4 - t3}))
"""
STEPS = ("tvm_ffi_import", "package_import", "first_module", "second_module")
OURS = "package import + first module load"
TOTAL = "tvm-ffi import + package import + first module"


def measure(samples: int) -> list[dict]:
    """Rows (step, median ms, min ms) over ``samples`` fresh processes."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parent.parent), env.get("PYTHONPATH", "")])
    # Installed packages have their bytecode compiled; a checkout gets it on first import
    # unless PYTHONDONTWRITEBYTECODE forbids that, which would time the Python compiler instead.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    subprocess.run([sys.executable, "-c", CHILD], env=env, check=True, capture_output=True)  # build + warm
    runs = [json.loads(subprocess.run([sys.executable, "-c", CHILD], env=env, check=True, capture_output=True,
                                      text=True).stdout.strip().splitlines()[-1]) for _ in range(samples)]
    rows = [{"step": key, "median_ms": statistics.median(r[key] * 1e3 for r in runs),
             "min_ms": min(r[key] * 1e3 for r in runs)} for key in STEPS]
    rows.append({"step": OURS, "median_ms": statistics.median(
        (r["package_import"] + r["first_module"]) * 1e3 for r in runs)})
    rows.append({"step": TOTAL, "median_ms": statistics.median(
        (r["tvm_ffi_import"] + r["package_import"] + r["first_module"]) * 1e3 for r in runs)})
    return rows


def section(device_kind: str, device: str, samples: int, rows: list[dict]) -> dict:
    """The results section ``<device_kind>/jit_load`` (the half of the results it belongs to)."""
    return results.section(f"{device_kind}/jit_load", "jit_load", "cached module load in a new process", device,
                           [("step", "step", "{}"), ("median_ms", "median ms", "{:.2f}"), ("min_ms", "min ms", "{:.2f}")],
                           rows, notes=[f"Medians of {samples} fresh processes; the CPU module add_constant."])


def print_rows(samples: int, rows: list[dict]) -> None:
    print(f"cached module load in a new process, median of {samples} processes (ms):")
    for r in rows:
        tail = f"   min {r['min_ms']:6.2f}" if "min_ms" in r else ""
        print(f"  {r['step']:<46} median {r['median_ms']:6.2f}{tail}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=20)
    parser.add_argument("--half", choices=("cpu", "cuda"), default="cpu",
                        help="which half of the results this run belongs to (the GPU box's run: cuda)")
    results.add_json_argument(parser)
    args = parser.parse_args()
    rows = measure(args.samples)
    print_rows(args.samples, rows)
    results.write(args.json, section(args.half, results.cpu_name(), args.samples, rows))


if __name__ == "__main__":
    main()
