"""CPU row softmax (mllm_kernel.cpu.jit.softmax) against a float64 PyTorch reference."""

import re

import pytest
import torch

from mllm_kernel.cpu.jit import softmax

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
HIDDEN = [1, 2, 3, 7, 16, 17, 33, 127, 1000, 4096, 4099, 16384]
TOL = {torch.float32: dict(rtol=1e-5, atol=1e-6), torch.float16: dict(rtol=2e-3, atol=1e-5),
       torch.bfloat16: dict(rtol=1.6e-2, atol=1e-4)}


def _rand(*shape, dtype, seed=0, scale=4.0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=g) * scale).to(dtype)


def _ref(x):
    return torch.softmax(x.double(), dim=-1)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("cols", HIDDEN)
def test_softmax(dtype, cols):
    x = _rand(3, cols, dtype=dtype)
    out = softmax(x)
    torch.testing.assert_close(out, _ref(x).to(dtype), **TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows,cols", [(1, 16384), (3000, 100), (64, 4096)])
def test_softmax_rows_strided_out(dtype, rows, cols):
    x = _rand(rows, cols + 7, dtype=dtype, seed=1)[:, :cols]
    out_buf = torch.full((rows, cols + 2), float("nan"), dtype=dtype)
    out = out_buf[:, :cols]
    assert softmax(x, out=out) is out
    torch.testing.assert_close(out, _ref(x).to(dtype), **TOL[dtype])
    assert torch.isnan(out_buf[:, cols:]).all()


def test_softmax_negative_rows_3d_in_place_and_large_range():
    x = -1000.0 + _rand(2, 3, 37, dtype=torch.float32)  # all very negative: the max shift matters
    x[0, 0, 5] = 1e4
    ref = _ref(x).float()
    torch.testing.assert_close(softmax(x, dim=2), ref, rtol=1e-5, atol=1e-6)
    assert softmax(x, out=x) is x
    torch.testing.assert_close(x, ref, rtol=1e-5, atol=1e-6)


def _msg(text):
    return "^" + re.escape(text)


def test_bad_inputs():
    x = _rand(4, 64, dtype=torch.float32)
    with pytest.raises(ValueError, match=_msg("softmax: only the last dim is supported (dim=-1 or 1), got dim=0")):
        softmax(x, dim=0)
    with pytest.raises(ValueError, match=_msg("softmax: out: dtype must be float32 as bound by input, got bfloat16")):
        softmax(x, out=torch.empty(4, 64, dtype=torch.bfloat16))
    with pytest.raises(ValueError, match=_msg("softmax: out: dim 1 (hidden) must be 64 as bound by input, got 65")):
        softmax(x, out=torch.empty(4, 65))
    with pytest.raises(ValueError, match=_msg("softmax: input must not be empty, got shape [4, 0]")):
        softmax(x[:, :0])
    with pytest.raises(ValueError, match=_msg("softmax: input: dtype must be one of float32, float16, bfloat16, got float64")):
        softmax(x.double())
