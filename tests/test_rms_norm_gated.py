"""rms_norm_gated (gated DeltaNet's output norm) on CPU and CUDA against a float64 reference:
random rows of several lengths (strided, odd, the largest), poisoned outputs, without the gate,
under torch.compile, and the bad inputs with their exact messages."""

from __future__ import annotations

import pytest
import torch

from mllm_kernel import ops
from mllm_kernel.cuda.jit.rms_norm_gated import rms_norm_gated  # the upstream import path

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"))]
TOLERANCE = {torch.float32: 2e-5, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}


def _reference(x, weight, z, eps):
    xd = x.double()
    y = xd * torch.rsqrt(xd.pow(2).mean(-1, keepdim=True) + eps) * weight.double()
    return y if z is None else y * torch.nn.functional.silu(z.double())


def _rows(shape, dtype, device, g, *, stride_pad=0):
    """Random [..., N] rows (row stride N + stride_pad), values of a few units."""
    *lead, n = shape
    full = torch.randn((*lead, n + stride_pad), generator=g).mul(2).to(dtype).to(device)
    return full[..., :n]


def _check(y, expected, dtype):
    assert not torch.isnan(y).any()
    torch.testing.assert_close(y.double().cpu(), expected.cpu(), rtol=TOLERANCE[dtype], atol=TOLERANCE[dtype])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("shape,pad", [((1, 1), 0), ((3, 7), 5), ((64, 128), 8), ((2, 16, 128), 0), ((5, 4096), 0),
                                       ((3, 1000), 3), ((2, 16384), 0)])
def test_matches_reference(device, dtype, shape, pad):
    g = torch.Generator().manual_seed(sum(shape) + pad)
    x = _rows(shape, dtype, device, g, stride_pad=pad)
    z = _rows(shape, dtype, device, g, stride_pad=2 * pad)
    weight = torch.randn(shape[-1], generator=g).to(dtype).to(device)
    out = torch.full(shape, float("nan"), dtype=dtype, device=device)
    y = ops.rms_norm_gated(x, weight, z, 1e-6, out=out)
    assert y is out
    _check(y, _reference(x, weight, z, 1e-6), dtype)
    y = ops.rms_norm_gated(x, weight, eps=1e-5)  # no gate: rmsnorm
    _check(y, _reference(x, weight, None, 1e-5), dtype)


@pytest.mark.parametrize("device", DEVICES)
def test_in_place_and_under_torch_compile(device):
    g = torch.Generator().manual_seed(7)
    x = _rows((9, 256), torch.bfloat16, device, g)
    z = _rows((9, 256), torch.bfloat16, device, g)
    weight = torch.randn(256, generator=g).to(torch.bfloat16).to(device)
    expected = _reference(x, weight, z, 1e-6)

    @torch.compile(fullgraph=True, backend="eager")
    def norm(x, weight, z):
        return ops.rms_norm_gated(x + 0, weight, z)

    _check(norm(x, weight, z), expected, torch.bfloat16)
    (rms_norm_gated if device == "cuda" else ops.rms_norm_gated)(x, weight, z, out=x)
    _check(x, expected, torch.bfloat16)


@pytest.mark.parametrize("device", DEVICES)
def test_bad_inputs(device):
    x = torch.randn(4, 64, device=device)
    z = torch.randn(4, 64, device=device)
    weight = torch.randn(64, device=device)

    def fails(message, *args, **kwargs):
        with pytest.raises(ValueError, match=message):
            ops.rms_norm_gated(*args, **kwargs)

    fails(r"rms_norm_gated: z: dim 0 \(num_tokens\) must be 4 as bound by input, got 3", x, weight, z[:3])
    fails(r"rms_norm_gated: z: dtype must be float32 as bound by input, got float16", x, weight, z.half())
    fails(r"rms_norm_gated: weight: dim 0 \(hidden\) must be 64 as bound by input, got 63", x, weight[:63], z)
    fails(r"rms_norm_gated: out: dim 1 \(hidden\) must be 64 as bound by input, got 32", x, weight, z,
          out=torch.empty(4, 32, device=device))
    fails(r"rms_norm_gated: input: dtype must be one of float32, float16, bfloat16, got int32", x.int(), weight, z)
