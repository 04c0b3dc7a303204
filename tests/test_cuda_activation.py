"""CUDA gated activations (silu_and_mul, gelu_and_mul) against float64 references. Skipped
without a GPU (tests/test_cuda_compile.py builds the modules in CI)."""

from __future__ import annotations

import re

import pytest
import torch
import torch.nn.functional as F

from mllm_kernel.cuda.jit import gelu_and_mul, silu_and_mul

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (compile-only tests cover CI)"),
]

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
# The kernel rounds once (fp32 inside); fp32 differs from float64 by expf/erff/tanhf ulps.
TOL = {torch.float32: dict(atol=1e-5, rtol=1e-5), torch.float16: dict(atol=2e-3, rtol=2e-3),
       torch.bfloat16: dict(atol=1.6e-2, rtol=1.6e-2)}
# d: vector multiples, odd sizes (scalar path), LLM sizes.
D_SIZES = [1, 8, 37, 64, 100, 1376, 11008]
TOKENS = [1, 5, 257]


def _randn(*shape, dtype, scale=2.0, seed=0):
    g = torch.Generator(device="cuda")
    g.manual_seed(seed)
    return (torch.randn(*shape, device="cuda", generator=g) * scale).to(dtype)


def _ref(x, act):
    d = x.shape[-1] // 2
    x64 = x.double()
    return act(x64[..., :d]) * x64[..., d:]


ACTS = {
    "silu": (lambda x, out=None: silu_and_mul(x, out=out), F.silu),
    "gelu": (lambda x, out=None: gelu_and_mul(x, out=out), lambda t: F.gelu(t)),
    "gelu_tanh": (lambda x, out=None: gelu_and_mul(x, "tanh", out=out), lambda t: F.gelu(t, approximate="tanh")),
}


def _close(actual, expected, dtype):
    assert not torch.isnan(actual).any(), "output has unwritten (NaN-poisoned) elements"
    torch.testing.assert_close(actual.double(), expected, **TOL[dtype])


@pytest.mark.parametrize("act", list(ACTS))
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("d", D_SIZES)
@pytest.mark.parametrize("tokens", TOKENS)
def test_act_and_mul(act, dtype, d, tokens):
    fn, ref = ACTS[act]
    x = _randn(tokens, 2 * d, dtype=dtype)
    out = torch.full((tokens, d), float("nan"), device="cuda", dtype=dtype)
    result = fn(x, out=out)
    assert result is out
    _close(out, _ref(x, ref), dtype)


@pytest.mark.parametrize("act", list(ACTS))
@pytest.mark.parametrize("dtype", DTYPES)
def test_act_and_mul_many_tokens(act, dtype):
    fn, ref = ACTS[act]
    x = _randn(4096, 2 * 4096, dtype=dtype, seed=1)
    out = fn(x)
    assert out.shape == (4096, 4096) and out.dtype == dtype
    _close(out, _ref(x, ref), dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_act_and_mul_more_rows_than_a_grid_dimension(dtype):
    """70000 rows: past the 65535 blocks of a grid's y dimension, so blocks loop over rows."""
    fn, ref = ACTS["silu"]
    x = _randn(70000, 2 * 24, dtype=dtype, seed=3)
    out = torch.full((70000, 24), float("nan"), device="cuda", dtype=dtype)
    fn(x, out=out)
    _close(out, _ref(x, ref), dtype)


@pytest.mark.parametrize("act", list(ACTS))
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("offset", [0, 1, 8])  # 1: misaligned start -> scalar path
def test_act_and_mul_strided_3d(act, dtype, offset):
    fn, ref = ACTS[act]
    big = _randn(2, 3, 2 * 512 + 16, dtype=dtype, seed=2)
    before = big.clone()
    x = big[..., offset:offset + 1024]
    out = fn(x)
    assert out.shape == (2, 3, 512)
    _close(out, _ref(x, ref), dtype)
    assert torch.equal(big, before), "input was modified"


@pytest.mark.parametrize("dtype", DTYPES)
def test_act_and_mul_strided_out(dtype):
    x = _randn(6, 256, dtype=dtype, seed=3)
    big = torch.full((6, 200), float("nan"), device="cuda", dtype=dtype)
    out = big[:, 40:168]
    silu_and_mul(x, out=out)
    _close(out, _ref(x, F.silu), dtype)
    assert torch.isnan(big[:, :40]).all() and torch.isnan(big[:, 168:]).all(), "wrote outside out"


def test_1d_input():
    x = _randn(128, dtype=torch.float16, seed=4)
    out = silu_and_mul(x)
    assert out.shape == (64,)
    _close(out, _ref(x, F.silu), torch.float16)


def test_errors():
    x = _randn(4, 128, dtype=torch.bfloat16)
    e = re.escape
    with pytest.raises(ValueError, match=e("silu_and_mul: input: last dim must be even (gate and up halves), got 7")):
        silu_and_mul(_randn(4, 7, dtype=torch.bfloat16))
    with pytest.raises(ValueError, match=e("silu_and_mul: input: last dim must be even (gate and up halves), got 7")):
        silu_and_mul(_randn(4, 7, dtype=torch.bfloat16), out=torch.empty(4, 3, device="cuda", dtype=torch.bfloat16))
    with pytest.raises(ValueError, match=e("silu_and_mul: out: dim 1 (d) must be 64 as bound by input (half its last dim), got 128")):
        silu_and_mul(x, out=torch.empty(4, 128, device="cuda", dtype=torch.bfloat16))
    with pytest.raises(ValueError, match=e("silu_and_mul: out: dim 0 (num_tokens) must be 4 as bound by input, got 2")):
        silu_and_mul(x, out=torch.empty(2, 64, device="cuda", dtype=torch.bfloat16))
    with pytest.raises(ValueError, match=e("silu_and_mul: out: dtype must be bfloat16 as bound by input, got float32")):
        silu_and_mul(x, out=torch.empty(4, 64, device="cuda", dtype=torch.float32))
    with pytest.raises(ValueError, match=e("silu_and_mul: out: device must be cuda:0 as bound by input, got cpu")):
        silu_and_mul(x, out=torch.empty(4, 64, dtype=torch.bfloat16))
    with pytest.raises(ValueError, match=e("silu_and_mul: input: device must be cuda, got cpu")):
        silu_and_mul(x.cpu())
    with pytest.raises(ValueError, match=e("silu_and_mul: input: dtype must be one of float32, float16, bfloat16, got float64")):
        silu_and_mul(x.double())
    with pytest.raises(ValueError, match=e("silu_and_mul: input: stride 1 must be 1, got 2")):
        silu_and_mul(_randn(4, 256, dtype=torch.bfloat16)[:, ::2])
    with pytest.raises(ValueError, match=e("silu_and_mul: input must not be empty, got shape [0, 128]")):
        silu_and_mul(x[:0])
    with pytest.raises(ValueError, match=e("gelu_and_mul: approximate must be 'none' or 'tanh', got 'fast'")):
        gelu_and_mul(x, "fast")
    with pytest.raises(ValueError, match=e("gelu_and_mul: out: dim 1 (d) must be 64 as bound by input (half its last dim), got 65")):
        gelu_and_mul(x, "tanh", out=torch.empty(4, 65, device="cuda", dtype=torch.bfloat16))
