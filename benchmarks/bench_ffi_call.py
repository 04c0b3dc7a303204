"""Host cost of passing torch tensors through tvm-ffi, and whether torch-c-dlpack-ext helps.

tvm-ffi converts a torch.Tensor argument fastest through PyTorch's C DLPack exchange API
(``torch.Tensor.__dlpack_c_exchange_api__``). PyTorch versions without it fall back to
``torch.utils.dlpack.to_dlpack`` in Python unless the optional ``torch-c-dlpack-ext`` package
(or tvm-ffi's JIT-built equivalent) supplies the API. This script times a call of an exported
no-op function taking three tensors, in child processes: (a) as installed, (b) with the exchange
API removed and tvm-ffi's own substitute disabled, i.e. the slow fallback that the extension
exists to avoid. Run: ``python benchmarks/bench_ffi_call.py [--device cuda]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    src = Path(tempfile.mkdtemp()) / "noop.cpp"
    src.write_text(NOOP)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parent.parent), env.get("PYTHONPATH", "")])
    rows = []
    for mode in ("installed", "fallback"):
        child_env = dict(env, TVM_FFI_DISABLE_TORCH_C_DLPACK="1") if mode == "fallback" else env
        out = subprocess.run([sys.executable, "-c", CHILD, str(src), mode, args.device], env=child_env,
                             capture_output=True, text=True, check=True).stdout
        rows.append((mode, json.loads(out.strip().splitlines()[-1])))
    print(f"tvm-ffi call of a no-op with 3 {args.device} tensors (best of 5 x 20000 calls):")
    for mode, r in rows:
        path = "C exchange API" if mode == "installed" and r["native_api"] else "Python to_dlpack fallback"
        print(f"  torch {r['torch']:<14} (has the C exchange API: {r['native_api']}), {mode:<9} "
              f"-> {path:<26} {r['us_per_call']:.3f} us/call")


if __name__ == "__main__":
    main()
