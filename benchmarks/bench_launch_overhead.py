"""Host time per eager call from Python, on a 1-token input (loops of calls, synchronised once;
the cases interleaved over 5 rounds, each reporting its best: ``harness.host_us_per_call``):

- ``mllm_kernel rmsnorm``: our op through the Python wrapper and tvm-ffi;
- ``  bound tvm-ffi function``: the compiled ``rmsnorm<bf16_t>`` called directly (tvm-ffi
  argument conversion + C++ checks + launch, no Python wrapper);
- ``  tvm-ffi no-op (same args)``: an exported C++ function that does nothing, called with the
  same argument types (3 CUDA tensors, a float, a bool): the fixed cost of a tvm-ffi call;
- ``torch.mul(out=)``: a one-kernel PyTorch eager op;
- ``ctypes launch floor``: a ctypes call into an nvcc-built shared library that launches a
  trivial kernel with raw pointers (built in a temporary folder by this script);
- ``  ctypes no-op``: the same library's function that returns at once (ctypes' own cost).

The breakdown printed after the table: Python wrapper = op - bound function; C++ checks and
launch = bound function - tvm-ffi no-op; launch = floor - ctypes no-op.
"""

from __future__ import annotations

import ctypes
import subprocess
import tempfile
from pathlib import Path

import torch

import harness

_FLOOR_SOURCE = r"""
#include <cuda_runtime.h>
__global__ void touch(float* p, int n) { if (threadIdx.x < n) p[threadIdx.x] += 1.0f; }
extern "C" int launch_floor(void* ptr, int n, void* stream) {
  touch<<<1, 32, 0, static_cast<cudaStream_t>(stream)>>>(static_cast<float*>(ptr), n);
  return static_cast<int>(cudaGetLastError());
}
extern "C" int noop(void* ptr, int n, void* stream) { return n; }
"""

_NOOP_SOURCE = r"""
#include <tvm/ffi/container/tensor.h>
namespace bench {
inline void noop(tvm::ffi::TensorView, tvm::ffi::TensorView, tvm::ffi::TensorView, double, bool) {}
}
"""


def _build_floor(folder: Path) -> ctypes.CDLL:
    from mllm_kernel.jit_utils import toolchain

    src = folder / "floor.cu"
    lib = folder / "libfloor.so"
    src.write_text(_FLOOR_SOURCE)
    arch = toolchain.cuda_arch_list()[-1].replace(".", "").rstrip("af")
    subprocess.run([toolchain.find_nvcc(), "-O2", "-shared", "-Xcompiler", "-fPIC", f"-arch=sm_{arch}",
                    "-o", str(lib), str(src), "-lcudart"], check=True, capture_output=True, text=True)
    dll = ctypes.CDLL(str(lib))
    dll.launch_floor.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
    dll.launch_floor.restype = ctypes.c_int
    dll.noop.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
    dll.noop.restype = ctypes.c_int
    return dll


def _build_noop(folder: Path):
    """A tvm-ffi function taking rmsnorm's argument types and doing nothing."""
    from mllm_kernel.jit_utils import load_cpu_jit

    src = folder / "noop.cpp"
    src.write_text(_NOOP_SOURCE)
    return load_cpu_jit("bench_launch_noop", cpp_files=[str(src)], cpp_wrappers=[("noop", "bench::noop")]).noop


def run() -> list[tuple[str, float]]:
    from mllm_kernel.cuda.jit import norm, rmsnorm

    iters = 2000 if harness.ci() else 20000
    x = torch.randn(1, 4096, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
    out = torch.empty_like(x)
    y = torch.empty_like(x)
    buf = torch.zeros(32, device="cuda")
    bound = norm._FUNCTIONS.get("rmsnorm", "input", x)
    with tempfile.TemporaryDirectory() as tmp:
        noop = _build_noop(Path(tmp))
        dll = _build_floor(Path(tmp))
        ptr = buf.data_ptr()
        stream = torch.cuda.current_stream().cuda_stream
        cases = [
            ("mllm_kernel rmsnorm", lambda: rmsnorm(x, w, 1e-6, out=out)),
            ("  bound tvm-ffi function", lambda: bound(out, x, w, 1e-6, False)),
            ("  tvm-ffi no-op (same args)", lambda: noop(out, x, w, 1e-6, False)),
            ("torch.mul(out=)", lambda: torch.mul(x, 2, out=y)),
            ("ctypes launch floor", lambda: dll.launch_floor(ptr, 32, stream)),
            ("  ctypes no-op", lambda: dll.noop(ptr, 32, stream)),
        ]
        return harness.host_us_per_call(cases, iters, sync=torch.cuda.synchronize)


def print_results(results) -> None:
    print("\n== host time per eager call (1 token, bf16 [1, 4096])")
    for name, us in results:
        print(f"{name:<28} {us:7.2f} us")
    t = dict((name.strip(), us) for name, us in results)
    keys = ("mllm_kernel rmsnorm", "bound tvm-ffi function", "tvm-ffi no-op (same args)", "ctypes launch floor",
            "ctypes no-op")
    if all(k in t for k in keys):
        op, bound, noop, floor, cnoop = (t[k] for k in keys)
        print(f"breakdown: Python wrapper {op - bound:.2f} us, C++ checks + launch {bound - noop:.2f} us, "
              f"tvm-ffi call {noop:.2f} us; raw launch {floor - cnoop:.2f} us; op / floor = {op / floor:.2f}x")


def main() -> None:
    harness.require_cuda()
    print_results(run())


if __name__ == "__main__":
    main()
