"""The specification's example kernels against PyTorch, on CPU (always) and CUDA (with a GPU)."""

from __future__ import annotations

import pytest
import torch

from conftest import requires_cuda
from mllm_kernel.cpu.jit import add_constant, add_constant_runtime
from mllm_kernel.cpu.jit import add_constant as cpu_module_alias  # noqa: F401 - the README's import
from mllm_kernel.jit_utils import find_module


def _exported(name: str, device: str, *variant: object):
    """The module function itself (destination passing: the tests poison ``dst``)."""
    return getattr(find_module(name, tuple(map(str, variant)), device).module(device), name)


LENGTHS = [1, 2, 7, 8, 15, 16, 17, 31, 33, 1023, 1024, 4097, 65537, 1 << 20]
CONSTANTS = [1, 2, 4, 8, 16]


@pytest.mark.parametrize("n", LENGTHS)
@pytest.mark.parametrize("c", CONSTANTS)
def test_cpu_add_constant_matches_torch(n, c):
    src = torch.randn(n, generator=torch.Generator().manual_seed(n + c))
    dst = torch.full_like(src, float("nan"))  # poisoned: every element must be written
    _exported("add_constant", "cpu", c)(dst, src)
    torch.testing.assert_close(dst, src + c, rtol=0, atol=0)
    torch.testing.assert_close(add_constant(src, c), src + c, rtol=0, atol=0)


@pytest.mark.parametrize("n", LENGTHS)
@pytest.mark.parametrize("value", [3.14159, -2.5, 0.0, 1e30])
def test_cpu_add_constant_runtime_matches_torch(n, value):
    src = torch.randn(n, generator=torch.Generator().manual_seed(n))
    dst = torch.full_like(src, float("nan"))
    _exported("add_constant_runtime", "cpu")(dst, src, value)
    expected = (src.double() + torch.tensor(value, dtype=torch.float32).double()).float()
    torch.testing.assert_close(dst, expected, rtol=0, atol=0)
    torch.testing.assert_close(add_constant_runtime(src, value), expected, rtol=0, atol=0)


def test_readme_example():
    x = torch.randn(1024, dtype=torch.float32)
    torch.testing.assert_close(add_constant(x, 16), x + 16, rtol=0, atol=0)
    torch.testing.assert_close(add_constant_runtime(x, 3.14159), x + torch.tensor(3.14159), rtol=0, atol=0)


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: torch.randn(8, dtype=torch.float64), r"add_constant: src: dtype must be float32, got float64 \[at add_constant.cpp:\d+\]"),
        (lambda: torch.ones(8, dtype=torch.int32), r"add_constant: src: dtype must be float32, got int32"),
        (lambda: torch.randn(4, 4), r"add_constant: src: must have 1 dims \[num_elements\], got 2 dims \[4, 4\]"),
        (lambda: torch.randn(16)[::2], r"add_constant: src: must be contiguous \(strides \[1\]\), got strides \[2\]"),
        (lambda: torch.empty(0), r"add_constant: src must not be empty"),
        (lambda: torch.randn(()), r"add_constant: src: must have 1 dims \[num_elements\], got 0 dims \[\]"),
    ],
)
def test_cpu_add_constant_bad_inputs(make, message):
    with pytest.raises(ValueError, match=message):
        add_constant(make(), 4)


def test_cpu_add_constant_dst_mismatch():
    src = torch.randn(8)
    with pytest.raises(ValueError, match=r"add_constant: dst: dim 0 \(num_elements\) must be 8 as bound by src, got 9"):
        _exported("add_constant", "cpu", 2)(torch.empty(9), src)
    with pytest.raises(ValueError, match=r"add_constant_runtime: dst: dtype must be float32, got float16"):
        _exported("add_constant_runtime", "cpu")(torch.empty(8, dtype=torch.float16), src, 1.0)


@requires_cuda
def test_cpu_add_constant_rejects_cuda_tensor():
    with pytest.raises(ValueError, match=r"add_constant: src: device must be cpu, got cuda:0"):
        add_constant(torch.randn(8, device="cuda"), 4)


@pytest.mark.parametrize("constant", [0, 3, 32, -1, 2.0, True, "4", None])
def test_unsupported_constants(constant):
    with pytest.raises(ValueError, match=r"add_constant: constant must be one of \(1, 2, 4, 8, 16\), got"):
        add_constant(torch.randn(4), constant)


@pytest.mark.parametrize("value", ["1", None, True, [1.0]])
def test_runtime_value_must_be_a_number(value):
    with pytest.raises(TypeError, match="value must be a real number"):
        add_constant_runtime(torch.randn(4), value)


# ----------------------------------------------------------------------------------------- CUDA
@requires_cuda
@pytest.mark.parametrize("n", LENGTHS + [(1 << 24) + 3])
@pytest.mark.parametrize("c", CONSTANTS)
def test_cuda_add_constant_matches_torch(n, c):
    import mllm_kernel.cuda.jit  # noqa: F401 - declares the CUDA modules

    src = torch.randint(-(2**30), 2**30, (n,), dtype=torch.int32, device="cuda")
    dst = torch.full_like(src, -12345)
    _exported("add_constant", "cuda", c)(dst, src)
    torch.testing.assert_close(dst, src + c, rtol=0, atol=0)


@requires_cuda
def test_cuda_readme_example():
    from mllm_kernel.cuda.jit import add_constant as cuda_add_constant

    y = cuda_add_constant(torch.arange(1024, dtype=torch.int32, device="cuda"), 8)
    torch.testing.assert_close(y, torch.arange(8, 1032, dtype=torch.int32, device="cuda"))


@requires_cuda
@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: torch.ones(8, dtype=torch.float32, device="cuda"), r"add_constant: src: dtype must be int32, got float32"),
        (lambda: torch.ones(8, dtype=torch.int32), r"add_constant: src: device must be cuda, got cpu"),
        (lambda: torch.ones(4, 4, dtype=torch.int32, device="cuda"), r"src: must have 1 dims"),
        (lambda: torch.ones(16, dtype=torch.int32, device="cuda")[::2], r"src: must be contiguous"),
        (lambda: torch.ones(0, dtype=torch.int32, device="cuda"), r"add_constant: src must not be empty"),
    ],
)
def test_cuda_add_constant_bad_inputs(make, message):
    from mllm_kernel.cuda.jit import add_constant as cuda_add_constant

    with pytest.raises(ValueError, match=message):
        cuda_add_constant(make(), 4)


@requires_cuda
def test_cuda_add_constant_runs_on_current_stream():
    from mllm_kernel.cuda.jit import add_constant as cuda_add_constant

    side = torch.cuda.Stream()
    x = torch.zeros(1 << 20, dtype=torch.int32, device="cuda")
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        torch.cuda._sleep(50_000_000)  # keeps the side stream busy for tens of milliseconds
        x.fill_(5)
        y = cuda_add_constant(x, 8)  # must queue behind fill_ on the side stream
    side.synchronize()
    assert torch.equal(y, torch.full_like(x, 13)), "the kernel did not run on the current (side) stream"


@requires_cuda
def test_cuda_add_constant_other_device_guard():
    if torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    from mllm_kernel.cuda.jit import add_constant as cuda_add_constant

    x = torch.arange(100, dtype=torch.int32, device="cuda:1")
    torch.testing.assert_close(cuda_add_constant(x, 2), x + 2)
