"""CPU gated activations (mllm_kernel.cpu.jit): silu_and_mul and gelu_and_mul (erf and tanh)
against float64 PyTorch references."""

import re

import pytest
import torch
import torch.nn.functional as F

from mllm_kernel.cpu.jit import gelu_and_mul, silu_and_mul

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
HIDDEN = [1, 3, 7, 16, 17, 33, 127, 1000, 4096, 4099, 16384]
TOL = {torch.float32: dict(rtol=2e-5, atol=2e-5), torch.float16: dict(rtol=2e-3, atol=2e-3),
       torch.bfloat16: dict(rtol=1.6e-2, atol=1.6e-2)}

OPS = {
    "silu": (lambda x, out=None: silu_and_mul(x, out=out), lambda g: F.silu(g)),
    "gelu": (lambda x, out=None: gelu_and_mul(x, out=out), lambda g: F.gelu(g)),
    "gelu_tanh": (lambda x, out=None: gelu_and_mul(x, "tanh", out=out), lambda g: F.gelu(g, approximate="tanh")),
}


def _rand(*shape, dtype, seed=0, scale=3.0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=g) * scale).to(dtype)


def _ref(name, x):
    d = x.shape[-1] // 2
    x64 = x.double()
    return OPS[name][1](x64[..., :d]) * x64[..., d:]


@pytest.mark.parametrize("name", list(OPS))
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("d", HIDDEN)
def test_act_and_mul(name, dtype, d):
    x = _rand(3, 2 * d, dtype=dtype)
    out = OPS[name][0](x)
    assert out.shape == (3, d) and out.dtype == dtype
    torch.testing.assert_close(out, _ref(name, x).to(dtype), **TOL[dtype])


@pytest.mark.parametrize("name", list(OPS))
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows,d", [(1, 16384), (2500, 64), (64, 4096)])
def test_act_and_mul_rows_strided_out(name, dtype, rows, d):
    x = _rand(rows, 2 * d + 6, dtype=dtype, seed=1)[:, : 2 * d]
    out_buf = torch.full((rows, d + 3), float("nan"), dtype=dtype)
    out = out_buf[:, :d]
    assert OPS[name][0](x, out=out) is out
    torch.testing.assert_close(out, _ref(name, x).to(dtype), **TOL[dtype])
    assert torch.isnan(out_buf[:, d:]).all()


def test_extreme_values():
    # exp overflow/underflow ranges: silu(-200) = -0, silu(200) = 200, gelu tails.
    g = torch.tensor([-200.0, -90.0, -20.0, -1e-30, 0.0, 1e-30, 20.0, 90.0, 200.0])
    x = torch.cat([g, torch.ones_like(g)]).view(1, -1)
    for name in OPS:
        out = OPS[name][0](x)
        torch.testing.assert_close(out, _ref(name, x).float(), rtol=1e-6, atol=1e-6)


def test_3d_input():
    x = _rand(2, 3, 40, dtype=torch.float32)
    out = silu_and_mul(x)
    assert out.shape == (2, 3, 20)
    torch.testing.assert_close(out, _ref("silu", x).float(), rtol=2e-5, atol=2e-5)


def _msg(text):
    return "^" + re.escape(text)


def test_bad_inputs():
    x = _rand(4, 64, dtype=torch.float32)
    with pytest.raises(ValueError, match=_msg("silu_and_mul: input: last dim must be even (gate and up halves), got 63")):
        silu_and_mul(x[:, :63])
    with pytest.raises(ValueError, match=_msg("silu_and_mul: out: dim 1 (d) must be 32 as bound by input (half its last dim), got 64")):
        silu_and_mul(x, out=torch.empty(4, 64))
    with pytest.raises(ValueError, match=_msg("silu_and_mul: out: dtype must be float32 as bound by input, got float16")):
        silu_and_mul(x, out=torch.empty(4, 32, dtype=torch.float16))
    with pytest.raises(ValueError, match=_msg("gelu_and_mul: input: dtype must be one of float32, float16, bfloat16, got int32")):
        gelu_and_mul(x.int())
    with pytest.raises(ValueError, match=_msg("gelu_and_mul: input must not be empty, got shape [0, 64]")):
        gelu_and_mul(x[:0])
    with pytest.raises(ValueError, match=_msg("gelu_and_mul: approximate must be 'none' or 'tanh', got 'erf'")):
        gelu_and_mul(x, approximate="erf")
    with pytest.raises(ValueError, match=_msg("silu_and_mul: input: stride 1 must be 1, got 2")):
        silu_and_mul(_rand(4, 128, dtype=torch.float32)[:, ::2])
