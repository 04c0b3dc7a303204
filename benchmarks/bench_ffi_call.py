"""Host cost of passing torch tensors through tvm-ffi, and whether torch-c-dlpack-ext helps.

tvm-ffi converts a torch.Tensor argument fastest through PyTorch's C DLPack exchange API
(``torch.Tensor.__dlpack_c_exchange_api__``). PyTorch versions without it fall back to
``torch.utils.dlpack.to_dlpack`` in Python unless the optional ``torch-c-dlpack-ext`` package
(or tvm-ffi's JIT-built equivalent) supplies the API. This script times a call of an exported
no-op function taking three tensors, in child processes: (a) as installed, (b) with the exchange
API removed and tvm-ffi's own substitute disabled, i.e. the slow fallback that the extension
exists to avoid.

    python benchmarks/bench_ffi_call.py [--device cuda] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import results

NOOP = """
#include <tvm/ffi/container/tensor.h>
namespace bench { inline void noop3(tvm::ffi::TensorView, tvm::ffi::TensorView, tvm::ffi::TensorView) {} }
"""

CHILD = """
import json, sys, time, torch
native = hasattr(torch.Tensor, "__dlpack_c_exchange_api__")
if sys.argv[2] == "fallback" and native:
    del torch.Tensor.__dlpack_c_exchange_api__
from mllm_kernel.jit_utils import load_cpu_jit
m = load_cpu_jit("bench_noop", cpp_files=[sys.argv[1]], cpp_wrappers=[("noop3", "bench::noop3")])
f = m.noop3
device = sys.argv[3]
a, b, c = (torch.empty(4096, device=device) for _ in range(3))
for _ in range(2000):
    f(a, b, c)
best = float("inf")
for _ in range(5):
    t = time.perf_counter()
    for _ in range(20000):
        f(a, b, c)
    best = min(best, (time.perf_counter() - t) / 20000 * 1e6)
print(json.dumps({"torch": torch.__version__, "native_api": native, "us_per_call": best}))
"""


def measure(device: str) -> list[dict]:
    """One row per mode: ``installed`` (as the environment has it) and ``fallback``."""
    src = Path(tempfile.mkdtemp()) / "noop.cpp"
    src.write_text(NOOP)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parent.parent), env.get("PYTHONPATH", "")])
    rows = []
    for mode in ("installed", "fallback"):
        child_env = dict(env, TVM_FFI_DISABLE_TORCH_C_DLPACK="1") if mode == "fallback" else env
        out = subprocess.run([sys.executable, "-c", CHILD, str(src), mode, device], env=child_env,
                             capture_output=True, text=True, check=True).stdout
        r = json.loads(out.strip().splitlines()[-1])
        path = "C exchange API" if mode == "installed" and r["native_api"] else "Python to_dlpack fallback"
        rows.append({"mode": mode, "path": path, "torch": r["torch"], "us": r["us_per_call"]})
    return rows


def section(device_kind: str, device: str, rows: list[dict]) -> dict:
    """The results section ``<device_kind>/ffi_call``."""
    return results.section(f"{device_kind}/ffi_call", "ffi_call",
                           f"tvm-ffi call of a no-op with 3 {device_kind} tensors", device,
                           [("mode", "mode", "{}"), ("path", "tensor conversion", "{}"), ("torch", "PyTorch", "{}"),
                            ("us", "µs per call", "{:.3f}")],
                           rows, notes=["Best of 5 x 20000 calls."])


def print_rows(device: str, rows: list[dict]) -> None:
    print(f"tvm-ffi call of a no-op with 3 {device} tensors (best of 5 x 20000 calls):")
    for r in rows:
        print(f"  torch {r['torch']:<14} {r['mode']:<9} -> {r['path']:<26} {r['us']:.3f} us/call")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    results.add_json_argument(parser)
    args = parser.parse_args()
    rows = measure(args.device)
    print_rows(args.device, rows)
    device = results.cpu_name() if args.device == "cpu" else _gpu_name()
    results.write(args.json, section(args.device, device, rows))


def _gpu_name() -> str:
    import torch

    return torch.cuda.get_device_name()


if __name__ == "__main__":
    main()
