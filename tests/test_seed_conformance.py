"""A user kernel that follows the seed guide literally compiles: a template in an anonymous
namespace exported as ``SeedCopy<T>::run``, T spelled by ``make_cpp_args`` for every dtype it
knows. CUDA is compiled (and loaded) everywhere and run where a GPU is."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from conftest import requires_cuda
from mllm_kernel.jit_utils import load_cpu_jit, load_cuda_jit, make_cpp_args
from mllm_kernel.jit_utils.cpp_args import _TORCH_DTYPE_NAMES

KERNELS = Path(__file__).resolve().parent / "user_kernels"
DTYPES = [getattr(torch, name) for name in _TORCH_DTYPE_NAMES]


def _wrappers() -> list[tuple[str, str]]:
    return [(f"copy_{str(d).removeprefix('torch.')}", f"SeedCopy<{make_cpp_args(d)}>::run") for d in DTYPES]


def _sample(dtype: torch.dtype, n: int, device: str) -> torch.Tensor:
    """Random, non-zero values of ``dtype`` (made through int64 or float32, which every dtype
    converts from)."""
    gen = torch.Generator().manual_seed(0)
    if dtype.is_floating_point:
        base = torch.randn(n, generator=gen) * 4 + 0.5
    elif dtype == torch.bool:
        base = torch.randint(0, 2, (n,), generator=gen)
    else:
        base = torch.randint(1, 100, (n,), generator=gen)
    return base.to(dtype).to(device)


def _bytes(t: torch.Tensor) -> torch.Tensor:
    return t.cpu().view(torch.uint8) if t.dtype != torch.bool else t.cpu()


def test_every_dtype_name_is_the_one_make_cpp_args_spells():
    assert len(DTYPES) == len(_TORCH_DTYPE_NAMES) >= 15
    assert {str(make_cpp_args(torch.bfloat16)), str(make_cpp_args(torch.float64))} == {"bf16_t", "fp64_t"}


def test_seed_style_cpu_kernel_compiles_and_runs_for_every_dtype(isolated_cache):
    module = load_cpu_jit("seed_copy", cpp_files=[KERNELS / "seed_copy.cpp"], cpp_wrappers=_wrappers())
    for dtype in DTYPES:
        x = _sample(dtype, 37, "cpu")
        out = torch.empty_like(x)
        out.view(torch.uint8).fill_(0xA5) if dtype != torch.bool else out.fill_(False)
        getattr(module, f"copy_{str(dtype).removeprefix('torch.')}")(x, out)
        assert torch.equal(_bytes(out), _bytes(x)), dtype
    with pytest.raises(ValueError, match=r"^copy_float32: output: dtype must be float32, got int32 \[at seed_copy\.cpp:\d+\]$"):
        module.copy_float32(torch.randn(4), torch.zeros(4, dtype=torch.int32))


@pytest.fixture(scope="module")
def cuda_module():
    return load_cuda_jit("seed_copy", cuda_files=[KERNELS / "seed_copy.cuh"], cuda_wrappers=_wrappers())


def test_seed_style_cuda_kernel_compiles_for_every_dtype(cuda_module):
    for dtype in DTYPES:
        assert callable(getattr(cuda_module, f"copy_{str(dtype).removeprefix('torch.')}"))


@requires_cuda
@pytest.mark.parametrize("n", [1, 255, 4097])
def test_seed_style_cuda_kernel_runs_for_every_dtype(cuda_module, n):
    for dtype in DTYPES:
        x = _sample(dtype, n, "cuda")
        out = torch.empty_like(x)
        out.view(torch.uint8).fill_(0xA5) if dtype != torch.bool else out.fill_(False)
        getattr(cuda_module, f"copy_{str(dtype).removeprefix('torch.')}")(x, out)
        torch.cuda.synchronize()
        assert torch.equal(_bytes(out), _bytes(x)), dtype
