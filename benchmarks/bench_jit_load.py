"""Cached-load cost of a JIT module in a new process.

Each sample is a fresh Python process that imports torch (not counted), then measures:
importing tvm-ffi, importing the kernel package, and loading the cached module (the first
``.module()`` call, which hashes the sources, checks the dependency manifest and dlopens the
library). Run: ``python benchmarks/bench_jit_load.py [--samples 20]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

CHILD = """
import json, time
import torch
t0 = time.perf_counter()
import tvm_ffi
t1 = time.perf_counter()
import importlib
mod = importlib.import_module("mllm_kernel.cpu.jit.add_constant")
t2 = time.perf_counter()
mod._KERNELS[16].module("cpu")
t3 = time.perf_counter()
mod._KERNELS[8].module("cpu")
t4 = time.perf_counter()
print(json.dumps({"tvm_ffi_import": t1 - t0, "package_import": t2 - t1, "first_module": t3 - t2,
                  "second_module": t4 - t3}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--samples", type=int, default=20)
    args = parser.parse_args()
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parent.parent), env.get("PYTHONPATH", "")])
    # Installed packages have their bytecode compiled; a checkout gets it on first import
    # unless PYTHONDONTWRITEBYTECODE forbids that, which would time the Python compiler instead.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    subprocess.run([sys.executable, "-c", CHILD], env=env, check=True, capture_output=True)  # build + warm
    runs = [json.loads(subprocess.run([sys.executable, "-c", CHILD], env=env, check=True, capture_output=True,
                                      text=True).stdout.strip().splitlines()[-1]) for _ in range(args.samples)]
    print(f"cached module load in a new process, median of {args.samples} processes (ms):")
    for key in ("tvm_ffi_import", "package_import", "first_module", "second_module"):
        values = [r[key] * 1e3 for r in runs]
        print(f"  {key:<16} median {statistics.median(values):6.2f}   min {min(values):6.2f}")
    beyond = [(r["package_import"] + r["first_module"]) * 1e3 for r in runs]
    total = [(r["tvm_ffi_import"] + r["package_import"] + r["first_module"]) * 1e3 for r in runs]
    print(f"  package import + first module load:             median {statistics.median(beyond):6.2f}")
    print(f"  tvm-ffi import + package import + first module: median {statistics.median(total):6.2f}")


if __name__ == "__main__":
    main()
