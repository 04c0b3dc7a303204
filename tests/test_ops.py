"""mllm_kernel.ops picks the kernel of the tensors' device."""

from __future__ import annotations

import pytest
import torch

from conftest import requires_cuda
from mllm_kernel import ops


def _reference_rmsnorm(x, w, eps=1e-6):
    x64 = x.double()
    return (x64 * torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + eps) * w.double()).to(x.dtype)


def test_cpu_dispatch_runs_the_cpu_kernel():
    x = torch.randn(3, 257)
    w = torch.randn(257)
    torch.testing.assert_close(ops.rmsnorm(x, w), _reference_rmsnorm(x, w), rtol=1e-5, atol=1e-5)
    out = torch.full_like(x, float("nan"))
    assert ops.rmsnorm(x, w, out=out) is out
    torch.testing.assert_close(out, _reference_rmsnorm(x, w), rtol=1e-5, atol=1e-5)


def test_unsupported_device_and_argument_types():
    with pytest.raises(ValueError, match=r"rmsnorm: no kernels for device meta"):
        ops.rmsnorm(torch.empty(2, 4, device="meta"), torch.empty(4, device="meta"))
    with pytest.raises(TypeError, match=r"silu_and_mul: expected a torch.Tensor or a DLPack array \(NumPy, CuPy, JAX\), got list"):
        ops.silu_and_mul([1.0, 2.0])


def test_op_without_a_cpu_kernel_says_so():
    with pytest.raises(NotImplementedError, match=r"per_tensor_quant_fp8: mllm-kernel has no cpu kernel"):
        ops.per_tensor_quant_fp8(torch.randn(4, 128))


@requires_cuda
def test_cuda_dispatch_runs_the_cuda_kernel():
    x = torch.randn(3, 4096, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
    torch.testing.assert_close(ops.rmsnorm(x, w), _reference_rmsnorm(x, w), rtol=2e-2, atol=2e-2)
    gate_up = torch.randn(5, 2 * 1024, device="cuda", dtype=torch.float16)
    expected = torch.nn.functional.silu(gate_up[:, :1024].float()) * gate_up[:, 1024:].float()
    torch.testing.assert_close(ops.silu_and_mul(gate_up).float(), expected, rtol=2e-3, atol=2e-3)
