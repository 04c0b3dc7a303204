"""Adding an op through the documented path (docs/adding_a_kernel.md): a C++ kernel, a
``jit_module`` + ``KernelTable`` wrapper, one ``register_op`` declaration, and the op works
eagerly, under ``torch.compile``, with NumPy arrays, and refuses grad, like the package's ops."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import Tensor

from mllm_kernel.jit_utils import KernelTable, jit_module
from mllm_kernel.op_registration import REGISTERED_OPS, _into_exact, register_op

KERNEL = r"""
#include <mllm_kernel/tensor.hpp>
#include <mllm_kernel/utils.hpp>
#include <tvm/ffi/container/tensor.h>
namespace {
void twice(tvm::ffi::TensorView out, tvm::ffi::TensorView input) {
  using namespace mllm_kernel::host;
  SymbolicSize n{"num_elements"};
  (void)TensorMatcher({n}).with_dtype<float>().with_device<kDLCPU>().verify(input, "input").verify(out, "out");
  auto* o = static_cast<float*>(out.data_ptr());
  const auto* x = static_cast<const float*>(input.data_ptr());
  for (int64_t i = 0; i < n.unwrap(); ++i) o[i] = 2.0f * x[i];
}
}  // namespace
"""


@pytest.fixture(scope="module")
def twice(tmp_path_factory):
    source = tmp_path_factory.mktemp("twice") / "twice.cpp"
    source.write_text(KERNEL)

    # The whole op: a wrapper in the package's shape, then its one declaration.
    table = KernelTable("twice", jit_module("test_twice", device="cpu", cpp_files=[str(source)],
                                            cpp_wrappers=[("twice", "twice")]))

    def cpu_twice(input: Tensor, out: Tensor | None = None) -> Tensor:
        function = table[input.dtype]
        out = torch.empty_like(input) if out is None else out
        function(out, input)
        return out

    @register_op(kernels={"cpu": cpu_twice}, fake=lambda input: torch.empty_like(input), out=True)
    def twice(input: Tensor) -> Tensor:
        """2 * input."""

    return twice


def _data(n=1000):
    return torch.randn(n, generator=torch.Generator().manual_seed(n))


def test_eager_and_out(twice):
    x = _data()
    torch.testing.assert_close(twice(x), 2 * x, rtol=0, atol=0)
    out = torch.full_like(x, float("nan"))
    assert twice(x, out=out) is out
    torch.testing.assert_close(out, 2 * x, rtol=0, atol=0)
    assert twice.__doc__ == "2 * input." and "twice" in REGISTERED_OPS


def test_custom_op_and_torch_compile(twice):
    x = _data(37)
    torch.testing.assert_close(torch.ops.mllm_kernel.twice(x), 2 * x, rtol=0, atol=0)
    compiled = torch.compile(lambda a: twice(a) + 1, fullgraph=True)
    torch.testing.assert_close(compiled(x), 2 * x + 1, rtol=0, atol=0)


def test_numpy_arrays_come_back_as_arrays(twice):
    x = _data(9).numpy()
    result = twice(x)
    assert isinstance(result, np.ndarray)
    np.testing.assert_array_equal(result, 2 * x)


def test_grad_is_refused(twice):
    with pytest.raises(RuntimeError, match="^twice: mllm-kernel ops do not support autograd"):
        twice(_data().requires_grad_())
    with torch.no_grad():
        twice(_data().requires_grad_())


def test_devices_without_a_kernel(twice):
    with pytest.raises(ValueError, match=r"^twice: no kernels for device meta \(supported: cpu, cuda\)"):
        twice(torch.empty(4, device="meta"))
    if torch.cuda.is_available():
        with pytest.raises(NotImplementedError, match="^twice: mllm-kernel has no cuda kernel for this op yet"):
            twice(torch.ones(4, device="cuda"))


def test_kernel_checks_reach_the_caller(twice):
    with pytest.raises(ValueError, match="^twice: input: dtype must be float32, got float64"):
        twice(_data().double())


def test_declaration_errors(twice):
    def again(input: Tensor) -> Tensor: ...

    again.__name__ = "twice"
    with pytest.raises(ValueError, match="an op named 'twice' is registered already"):
        register_op(kernels={})(again)
    with pytest.raises(ValueError, match=r"kernels for unknown devices \['tpu'\]"):
        register_op(kernels={"tpu": None})

    def other(scale: float) -> None: ...

    with pytest.raises(ValueError, match="dispatch must name a tensor parameter"):
        register_op(kernels={})(other)


def test_an_optional_parameter_as_the_output(twice):
    """out="c": the op's own optional c is filled and returned; torch.compile passes None to the custom op and
    copies into c after."""
    inner = REGISTERED_OPS["twice"].kernels["cpu"]

    def cpu_scaled(input: Tensor, c: Tensor | None, scale: float) -> Tensor:
        result = inner(input)
        result.mul_(scale / 2)
        return result if c is None else c.copy_(result)

    @register_op(kernels={"cpu": cpu_scaled}, fake=lambda input, c, scale: torch.empty_like(input), out="c")
    def scaled_with_c(input: Tensor, c: Tensor | None, scale: float) -> Tensor:
        """scale * input, into c when given."""

    x = _data(64)
    c = torch.full_like(x, float("nan"))
    assert scaled_with_c(x, c, 3.0).data_ptr() == c.data_ptr()
    torch.testing.assert_close(c, 3 * x, rtol=0, atol=0)
    compiled = torch.compile(scaled_with_c, fullgraph=True)
    c.fill_(float("nan"))
    out = compiled(x, c, 5.0)
    torch.testing.assert_close(c, 5 * x, rtol=0, atol=0)
    torch.testing.assert_close(out, 5 * x, rtol=0, atol=0)
    torch.testing.assert_close(compiled(x, None, 0.5), 0.5 * x, rtol=0, atol=0)
    # The custom op itself ignores c (it may not write an undeclared input) and returns a new tensor.
    c.fill_(float("nan"))
    direct = torch.ops.mllm_kernel.scaled_with_c(x, c, 2.0)
    assert direct.data_ptr() != c.data_ptr() and bool(c.isnan().all())
    torch.testing.assert_close(direct, 2 * x, rtol=0, atol=0)
    with pytest.raises(ValueError, match=r"scaled_with_c: c: must be \[64\] of torch.float32 on cpu, got \[64\] of "
                                         r"torch.float64 on cpu"):
        _into_exact("scaled_with_c", "c", c.double(), direct)  # what a traced call does with a mismatched c

    def no_c(input: Tensor, scale: float) -> Tensor: ...

    no_c.__name__ = "scaled_without_c"
    with pytest.raises(ValueError, match="out names 'scale', which is not an optional tensor parameter"):
        register_op(kernels={}, out="scale")(no_c)
