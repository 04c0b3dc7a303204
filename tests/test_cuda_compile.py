"""Compile-only checks for the CUDA kernels (no GPU needed; runs in CI where nvcc exists).

Builds every CUDA module variant of the LLM kernels (norm, activation, rope for float32,
float16 and bfloat16) and add_constant's five constants through the normal JIT path, and
compiles each device header on its own for sm_80 and sm_90.
"""

from __future__ import annotations

import subprocess

import pytest
import torch

from mllm_kernel.jit_utils import toolchain
from mllm_kernel.jit_utils.errors import ToolchainNotFoundError
from mllm_kernel.jit_utils.paths import INCLUDE_DIR


def _nvcc_or_none():
    try:
        return toolchain.find_nvcc()
    except ToolchainNotFoundError:
        return None


pytestmark = pytest.mark.skipif(_nvcc_or_none() is None, reason="nvcc not found")

DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def _families():
    from mllm_kernel.cuda.jit import activation, norm, rope

    return {"norm": norm._KERNELS, "activation": activation._KERNELS, "rope": rope._KERNELS}


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).removeprefix("torch."))
@pytest.mark.parametrize("family", ["norm", "activation", "rope"])
def test_llm_kernel_module_builds(family, dtype):
    module = _families()[family][dtype].module("cuda")
    expected = {
        "norm": ["rmsnorm", "fused_add_rmsnorm", "qknorm", "qknorm_across_heads"],
        "activation": ["silu_and_mul", "gelu_and_mul"],
        "rope": ["apply_rope"],
    }[family]
    for name in expected:
        assert callable(getattr(module, name)), f"{family}[{dtype}] does not export {name}"


@pytest.mark.parametrize("constant", [1, 2, 4, 8, 16])
def test_add_constant_module_builds(constant):
    from mllm_kernel.cuda.jit.add_constant import _KERNELS

    assert callable(_KERNELS[constant].module("cuda").add_constant)


def test_cooperative_launch_test_kernel_builds():
    from conftest import grid_sum_module

    assert callable(grid_sum_module().grid_sum)


HEADERS = ["type.cuh", "math.cuh", "vec.cuh", "warp.cuh", "cta.cuh", "atomic.cuh", "tile.cuh", "quantize.cuh", "cache_hint.cuh",
           "impl/norm.cuh", "impl/quant.cuh"]


@pytest.mark.parametrize("header", HEADERS)
def test_device_header_compiles_alone(header, tmp_path):
    """Each header is self-contained: a translation unit that includes only it builds for
    sm_80 and sm_90 (device code is instantiated through a tiny kernel where it is a template)."""
    source = tmp_path / "tu.cu"
    source.write_text(f"#include <mllm_kernel/{header}>\n#include <mllm_kernel/{header}>\n__global__ void probe() {{}}\n")
    includes, _ = toolchain.tvm_ffi_paths()
    command = [toolchain.find_nvcc(), "-std=c++20", "-c", str(source), "-o", str(tmp_path / "tu.o"),
               "--expt-relaxed-constexpr", f"-I{INCLUDE_DIR}", *(f"-I{d}" for d in includes),
               "-gencode=arch=compute_80,code=sm_80", "-gencode=arch=compute_90,code=sm_90"]
    result = subprocess.run(command, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_device_headers_instantiate(tmp_path):
    """The header templates instantiate for every element type on sm_80 and sm_90."""
    source = tmp_path / "inst.cu"
    source.write_text(r'''
#include <mllm_kernel/atomic.cuh>
#include <mllm_kernel/cta.cuh>
#include <mllm_kernel/impl/norm.cuh>
#include <mllm_kernel/math.cuh>
#include <mllm_kernel/tile.cuh>
#include <mllm_kernel/type.cuh>
#include <mllm_kernel/vec.cuh>
#include <mllm_kernel/warp.cuh>
using namespace mllm_kernel::device;
template <typename T>
__global__ void probe(T* out, const T* in, float* amax) {
  __shared__ float scratch[cta::kScratchSize];
  AlignedVector<T, kVecElems<T>> v;
  v.load(in, threadIdx.x);
  float s = warp::reduce_sum(cast<float>(v[0])) + warp::reduce_max(cast<float>(v[1]));
  s += cta::reduce_sum(s, scratch);
  __syncthreads();
  s += cta::reduce_max(s, scratch);
  atomic::max(amax, s);
  v[0] = math::max(v[0], math::exp(v[1]));
  v[1] = math::rsqrt(math::abs(v[1])) + cast<T>(math::sin(1.0f) * math::cos(s));
  const auto p = cast<float2>(packed_t<T>{});
  v[2] = cast<T>(p.x + math::kPi);
  v[3] = cast<T>(static_cast<float>(cast<fp8_e4m3_t>(s)));
  v.store(out, threadIdx.x);
  norm::Row<T> row{out, in, out, in, 1024};
  norm::rms_group_row<T, kVecElems<T>, 16, 1, true>(row, 1e-6f);
  norm::rms_cta_row<T, 1, 4, false>(row, 1e-6f, scratch);
}
template __global__ void probe<float>(float*, const float*, float*);
template __global__ void probe<fp16_t>(fp16_t*, const fp16_t*, float*);
template __global__ void probe<bf16_t>(bf16_t*, const bf16_t*, float*);
''')
    includes, _ = toolchain.tvm_ffi_paths()
    command = [toolchain.find_nvcc(), "-std=c++20", "-c", str(source), "-o", str(tmp_path / "inst.o"),
               "--expt-relaxed-constexpr", f"-I{INCLUDE_DIR}", *(f"-I{d}" for d in includes),
               "-gencode=arch=compute_80,code=sm_80", "-gencode=arch=compute_90,code=sm_90"]
    result = subprocess.run(command, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
