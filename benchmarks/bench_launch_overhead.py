"""Host time per eager call from Python on CUDA, on a 1-token input (loops of calls,
synchronised once; the cases interleaved over 5 rounds, each reporting its best:
``harness.host_us_per_call``):

- ``mllm_kernel.cuda.jit.rmsnorm``: our op through the Python wrapper and tvm-ffi (the direct
  path that eager calls take), with its default launch (PDL on sm_90+);
- ``  ... enable_pdl=False``: the same with a plain launch;
- ``  tvm-ffi no-op (same args)``: an exported C++ function that does nothing, called with the
  same argument types (3 CUDA tensors, a float, a bool): the fixed cost of a tvm-ffi call;
- ``  ... + LaunchKernel``: the same function launching the floor's trivial kernel through the
  library's public ``LaunchKernel`` (``mllm_kernel/utils.cuh``; no checks, no PDL, like the floor);
- ``  ... + <<<>>> launch``: the same, with a plain ``<<<>>>`` (runtime) launch on tvm-ffi's stream;
- ``mllm_kernel.ops.rmsnorm``: the device-dispatching op in eager mode (a direct call underneath);
- ``torch.ops.mllm_kernel.rmsnorm``: the same kernel through PyTorch's custom-op dispatcher (the
  path ``torch.compile`` graphs hold);
- ``torch.mul(out=) (eager op)``: a one-kernel PyTorch eager op;
- ``ctypes launch floor``: a ctypes call into an nvcc-built shared library that launches a
  trivial kernel with raw pointers (built in a temporary folder by this script);
- ``  ctypes no-op``: the same library's function that returns at once (ctypes' own cost).

The breakdown printed after the table: tvm-ffi call = the no-op; LaunchKernel and ``<<<>>>`` =
their variant - the no-op; the rest of the direct path (Python wrapper, argument checks, PDL
attribute) = direct - the LaunchKernel variant; raw launch = floor - ctypes no-op; then the
direct path and ``mllm_kernel.ops`` over the floor. Everything here goes through public entry
points (the ops, ``mllm_kernel.jit_utils.load_cpu_jit`` / ``load_cuda_jit`` for this script's own
sources). ``bench_call_overhead.py --device cuda`` prints this too, and writes it as a results
section with ``--json``.
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

# Functions with rmsnorm's signature that launch the floor's kernel (writing out's first 32
# floats) by the library's LaunchKernel and by <<<>>>.
_PARTS_SOURCE = r"""
#include <mllm_kernel/utils.cuh>
#include <tvm/ffi/container/tensor.h>
namespace bench {
using tvm::ffi::TensorView;
__global__ void touch(float* p, int n) { if (threadIdx.x < n) p[threadIdx.x] += 1.0f; }
inline cudaStream_t stream_of(TensorView t) {
  return static_cast<cudaStream_t>(TVMFFIEnvGetStream(t.device().device_type, t.device().device_id));
}
inline void launch(TensorView out, TensorView, TensorView, double, bool) {
  mllm_kernel::host::LaunchKernel(1, 32, out.device())(touch, static_cast<float*>(out.data_ptr()), 32);
}
inline void launch_plain(TensorView out, TensorView, TensorView, double, bool) {
  touch<<<1, 32, 0, stream_of(out)>>>(static_cast<float*>(out.data_ptr()), 32);
  mllm_kernel::host::RuntimeDeviceCheck(cudaGetLastError());
}
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


def _build_parts(folder: Path):
    """The functions of _PARTS_SOURCE (a CUDA module)."""
    from mllm_kernel.jit_utils import load_cuda_jit

    src = folder / "parts.cuh"
    src.write_text(_PARTS_SOURCE)
    names = ("launch", "launch_plain")
    return load_cuda_jit("bench_launch_parts", cuda_files=[str(src)],
                         cuda_wrappers=[(n, f"bench::{n}") for n in names])


DIRECT, NOOP = "mllm_kernel.cuda.jit.rmsnorm", "  tvm-ffi no-op (same args)"
DIRECT_NO_PDL = "  ... enable_pdl=False"
OPS, CUSTOM_OP, EAGER = "mllm_kernel.ops.rmsnorm", "torch.ops.mllm_kernel.rmsnorm", "torch.mul(out=) (eager op)"
FLOOR, CTYPES_NOOP = "ctypes launch floor", "  ctypes no-op"
LAUNCH = "  ... + LaunchKernel"
PLAIN = "  ... + <<<>>> launch"


def run(iters: int | None = None) -> list[tuple[str, float]]:
    from mllm_kernel import ops
    from mllm_kernel.cuda.jit import rmsnorm

    iters = iters or (2000 if harness.ci() else 20000)
    x = torch.randn(1, 4096, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
    out = torch.empty_like(x)
    y = torch.empty_like(x)
    buf = torch.zeros(32, device="cuda")
    custom = torch.ops.mllm_kernel.rmsnorm
    with tempfile.TemporaryDirectory() as tmp:
        noop = _build_noop(Path(tmp))
        parts = _build_parts(Path(tmp))
        dll = _build_floor(Path(tmp))
        ptr = buf.data_ptr()
        stream = torch.cuda.current_stream().cuda_stream
        cases = [
            (DIRECT, lambda: rmsnorm(x, w, 1e-6, out=out)),
            (DIRECT_NO_PDL, lambda: rmsnorm(x, w, 1e-6, out=out, enable_pdl=False)),
            (NOOP, lambda: noop(out, x, w, 1e-6, False)),
            (LAUNCH, lambda: parts.launch(y, x, w, 1e-6, False)),
            (PLAIN, lambda: parts.launch_plain(y, x, w, 1e-6, False)),
            (OPS, lambda: ops.rmsnorm(x, w, 1e-6, out=out)),
            (CUSTOM_OP, lambda: custom(x, w, 1e-6)),
            (EAGER, lambda: torch.mul(x, 2, out=y)),
            (FLOOR, lambda: dll.launch_floor(ptr, 32, stream)),
            (CTYPES_NOOP, lambda: dll.noop(ptr, 32, stream)),
        ]
        return harness.host_us_per_call(cases, iters, sync=torch.cuda.synchronize)


def breakdown(results) -> list[str]:
    """The lines printed after the table: the direct path split into its parts, and the ratios."""
    t = dict(results)
    return [
        f"breakdown: tvm-ffi call {t[NOOP]:.2f} us, LaunchKernel {t[LAUNCH] - t[NOOP]:.2f} us (<<<>>> "
        f"{t[PLAIN] - t[NOOP]:.2f} us), Python wrapper + checks {t[DIRECT] - t[LAUNCH]:.2f} us; "
        f"raw launch {t[FLOOR] - t[CTYPES_NOOP]:.2f} us",
        f"direct / floor = {t[DIRECT] / t[FLOOR]:.2f}x (enable_pdl=False: {t[DIRECT_NO_PDL] / t[FLOOR]:.2f}x), "
        f"ops / floor = {t[OPS] / t[FLOOR]:.2f}x, direct / eager op = {t[DIRECT] / t[EAGER]:.2f}x",
    ]


def print_results(results) -> None:
    print("\n== host time per eager call, 1-token rmsnorm on cuda (bf16 [1, 4096])")
    for name, us in results:
        print(f"{name:<34} {us:7.2f} us")
    print("\n".join(breakdown(results)))


def main() -> None:
    harness.require_cuda()
    print_results(run())


if __name__ == "__main__":
    main()
