"""Shared pytest fixtures: an isolated cache and a user kernel folder for JIT-layer tests."""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
#: Kernel bodies with their own checks, built for one CPU (build_cross_check).
CROSS_CHECKS = REPO_ROOT / "tests" / "cross"

# Seed-style CUDA kernels would leave a precompiled host prefix (about 100 MB) in each test's
# cache and compile differently once one is there; test_cuda_pch.py turns it on where it tests it.
os.environ.setdefault("MLLM_KERNEL_CUDA_PCH", "0")

requires_cuda = pytest.mark.skipif(
    not __import__("torch").cuda.is_available(), reason="needs a CUDA GPU (compile-only tests cover CI)"
)

USER_KERNEL = """
// A user's kernel outside the package: dst = src * kScale + offset (header constant).
#include <mllm_kernel/tensor.hpp>
#include <mllm_kernel/utils.hpp>
#include <tvm/ffi/container/tensor.h>
#include "scale_params.h"

namespace user {
template <int kScale>
void scale(tvm::ffi::TensorView dst, tvm::ffi::TensorView src) {
  using namespace mllm_kernel::host;
  SymbolicSize n{"n"};
  (void)TensorMatcher({n}).with_dtype<float>().with_device<kDLCPU>().verify(src, "src").verify(dst, "dst");
  auto* d = static_cast<float*>(dst.data_ptr());
  const auto* s = static_cast<const float*>(src.data_ptr());
  for (int64_t i = 0; i < n.unwrap(); ++i) d[i] = s[i] * kScale + kOffset + EXTRA_OFFSET;
}
}  // namespace user
"""


@pytest.fixture
def isolated_cache(tmp_path, monkeypatch):
    """A fresh cache root for this test only."""
    root = tmp_path / "cache"
    monkeypatch.setenv("MLLM_KERNEL_CACHE_DIR", str(root))
    return root


@pytest.fixture
def user_kernel(tmp_path):
    """A kernel folder of a user's own: scale.cpp and include/scale_params.h."""
    folder = tmp_path / "my_kernels"
    (folder / "include").mkdir(parents=True)
    (folder / "scale.cpp").write_text(textwrap.dedent(USER_KERNEL))
    (folder / "include" / "scale_params.h").write_text(
        "#pragma once\n#ifndef EXTRA_OFFSET\n#define EXTRA_OFFSET 0\n#endif\nconstexpr float kOffset = 1.0f;\n"
    )
    return folder


def subprocess_env(**extra: str) -> dict:
    """The environment for a child Python that imports this checkout."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.update(extra)
    return env


PYTHON = sys.executable


def has_nvcc() -> bool:
    """Whether the CUDA toolkit's nvcc is found (the compile-only CUDA tests need it, no GPU)."""
    from mllm_kernel.jit_utils import toolchain
    from mllm_kernel.jit_utils.errors import ToolchainNotFoundError

    try:
        toolchain.find_nvcc()
    except ToolchainNotFoundError:
        return False
    return True


#: Marks a module's tests as needing nvcc.
needs_nvcc = pytest.mark.skipif(not has_nvcc(), reason="nvcc not found")


def grid_sum_module():
    """tests/user_kernels/grid_sum.cuh built through the JIT (a cooperative launch with a grid
    barrier; used by the CUDA compile and integration tests)."""
    from mllm_kernel.jit_utils import load_cuda_jit

    return load_cuda_jit("test_grid_sum", cuda_files=[Path(__file__).resolve().parent / "user_kernels" / "grid_sum.cuh"],
                         cuda_wrappers=[("grid_sum", "grid_sum")])


def build_cross_check(cxx: str, check: str, march: str, program: Path, libs=()) -> None:
    """Builds tests/cross/<check>.cpp with `cxx` into `program` the way the JIT builds a CPU
    kernel for one CPU (`-march`, Highway's static target only), asserting that it compiles."""
    import subprocess

    from mllm_kernel.jit_utils import toolchain
    from mllm_kernel.jit_utils.paths import CPU_INCLUDE_DIR, INCLUDE_DIR

    includes, _ = toolchain.tvm_ffi_paths()  # (dlpack)
    build = subprocess.run([cxx, "-std=c++20", "-O2", f"-march={march}", "-DHWY_COMPILE_ONLY_STATIC=1",
                            f"-I{INCLUDE_DIR}", f"-I{CPU_INCLUDE_DIR}", *(f"-I{d}" for d in includes),
                            str(CROSS_CHECKS / f"{check}.cpp"), "-o", str(program), *libs],
                           capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
