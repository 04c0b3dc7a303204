"""CPU RMSNorm family (mllm_kernel.cpu.jit): rmsnorm, fused_add_rmsnorm, qknorm,
qknorm_across_heads against float64 PyTorch references."""

import re

import pytest
import torch

from mllm_kernel.cpu.jit import fused_add_rmsnorm, qknorm, qknorm_across_heads, rmsnorm

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
# Hidden sizes: tiny, odd, around vector widths, large.
HIDDEN = [1, 3, 7, 16, 17, 33, 127, 128, 1000, 4096, 4099, 16384]
# Tolerances of a float32 computation rounded once to the dtype.
TOL = {torch.float32: dict(rtol=1e-5, atol=1e-5), torch.float16: dict(rtol=2e-3, atol=2e-3),
       torch.bfloat16: dict(rtol=1.6e-2, atol=1.6e-2)}


def _rand(*shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(dtype)


def _ref_rmsnorm(x, w, eps):
    x64 = x.double()
    return x64 * torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + eps) * w.double()


def _strided_rows(rows, hidden, dtype, pad=5, seed=0):
    """[rows, hidden] whose rows are `hidden + pad` elements apart."""
    return _rand(rows, hidden + pad, dtype=dtype, seed=seed)[:, :hidden]


def _msg(text):
    return "^" + re.escape(text)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("hidden", HIDDEN)
def test_rmsnorm(dtype, hidden):
    x = _rand(3, hidden, dtype=dtype)
    w = _rand(hidden, dtype=dtype, seed=1)
    out = rmsnorm(x, w, eps=1e-6)
    torch.testing.assert_close(out, _ref_rmsnorm(x, w, 1e-6).to(dtype), **TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows,hidden", [(1, 16384), (3000, 96), (257, 4096)])
def test_rmsnorm_rows_strided_and_out(dtype, rows, hidden):
    x = _strided_rows(rows, hidden, dtype)
    w = _rand(hidden, dtype=dtype, seed=1)
    out_buf = torch.full((rows, hidden + 3), float("nan"), dtype=dtype)
    out = out_buf[:, :hidden]
    assert rmsnorm(x, w, eps=1e-5, out=out) is out
    torch.testing.assert_close(out, _ref_rmsnorm(x, w, 1e-5).to(dtype), **TOL[dtype])
    assert torch.isnan(out_buf[:, hidden:]).all()  # padding untouched


def test_rmsnorm_3d_and_in_place():
    x = _rand(4, 5, 300, dtype=torch.float32)
    w = _rand(300, dtype=torch.float32, seed=1)
    ref = _ref_rmsnorm(x, w, 1e-6).float()
    torch.testing.assert_close(rmsnorm(x, w), ref, rtol=1e-5, atol=1e-5)
    assert rmsnorm(x, w, out=x) is x
    torch.testing.assert_close(x, ref, rtol=1e-5, atol=1e-5)


def test_rmsnorm_threads_agree():
    x = _rand(2048, 512, dtype=torch.bfloat16)
    w = _rand(512, dtype=torch.bfloat16, seed=1)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        single = rmsnorm(x, w)
        torch.set_num_threads(max(2, before))
        multi = rmsnorm(x, w)
    finally:
        torch.set_num_threads(before)
    assert torch.equal(single, multi)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows,hidden", [(3, 1), (3, 17), (2, 4099), (1, 16384), (1500, 128)])
def test_fused_add_rmsnorm(dtype, rows, hidden):
    x = _strided_rows(rows, hidden, dtype, seed=2)
    res = _strided_rows(rows, hidden, dtype, pad=2, seed=3)
    w = _rand(hidden, dtype=dtype, seed=4)
    stored = (x.float() + res.float()).to(dtype)  # the residual as stored
    ref = _ref_rmsnorm(stored, w, 1e-6).to(dtype)
    fused_add_rmsnorm(x, res, w, eps=1e-6)
    assert torch.equal(res, stored)
    torch.testing.assert_close(x, ref, **TOL[dtype])


def _ref_heads(x, w, eps):
    return _ref_rmsnorm(x, w, eps)  # over the last dim, per head


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("tokens,hq,hk,d", [(1, 1, 1, 1), (5, 4, 2, 64), (3, 3, 1, 127), (300, 8, 2, 128)])
def test_qknorm(dtype, tokens, hq, hk, d):
    # q and k as views of a fused qkv buffer: strided tokens.
    qkv = _rand(tokens, (hq + 2 * hk) * d, dtype=dtype, seed=5)
    q = qkv[:, : hq * d].view(tokens, hq, d)
    k = qkv[:, hq * d : (hq + hk) * d].view(tokens, hk, d)
    qw, kw = _rand(d, dtype=dtype, seed=6), _rand(d, dtype=dtype, seed=7)
    ref_q, ref_k = _ref_heads(q, qw, 1e-6).to(dtype), _ref_heads(k, kw, 1e-6).to(dtype)
    v_before = qkv[:, (hq + hk) * d :].clone()
    qknorm(q, k, qw, kw, eps=1e-6)
    torch.testing.assert_close(q, ref_q, **TOL[dtype])
    torch.testing.assert_close(k, ref_k, **TOL[dtype])
    assert torch.equal(qkv[:, (hq + hk) * d :], v_before)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("tokens,hq,hk,d", [(1, 1, 1, 3), (4, 4, 2, 64), (200, 16, 4, 128)])
def test_qknorm_across_heads(dtype, tokens, hq, hk, d):
    qkv = _rand(tokens, (hq + 2 * hk) * d, dtype=dtype, seed=8)
    q = qkv[:, : hq * d].view(tokens, hq, d)
    k = qkv[:, hq * d : (hq + hk) * d].view(tokens, hk, d)
    qw, kw = _rand(hq * d, dtype=dtype, seed=9), _rand(hk * d, dtype=dtype, seed=10)
    ref_q = _ref_rmsnorm(q.reshape(tokens, -1), qw, 1e-5).view(tokens, hq, d).to(dtype)
    ref_k = _ref_rmsnorm(k.reshape(tokens, -1), kw, 1e-5).view(tokens, hk, d).to(dtype)
    qknorm_across_heads(q, k, qw, kw, eps=1e-5)
    torch.testing.assert_close(q, ref_q, **TOL[dtype])
    torch.testing.assert_close(k, ref_k, **TOL[dtype])


def test_rmsnorm_bad_inputs():
    x = _rand(4, 64, dtype=torch.float32)
    w = _rand(64, dtype=torch.float32)
    with pytest.raises(ValueError, match=_msg("rmsnorm: weight: dim 0 (hidden) must be 64 as bound by input, got 63")):
        rmsnorm(x, w[:63])
    with pytest.raises(ValueError, match=_msg("rmsnorm: weight: dtype must be float32 as bound by input, got bfloat16")):
        rmsnorm(x, w.bfloat16())
    with pytest.raises(ValueError, match=_msg("rmsnorm: input: dtype must be one of float32, float16, bfloat16, got float64")):
        rmsnorm(x.double(), w.double())
    with pytest.raises(ValueError, match=_msg("rmsnorm: input must not be empty")):
        rmsnorm(x[:0], w)
    with pytest.raises(ValueError, match=_msg("rmsnorm: input: stride 1 must be 1, got 2")):
        rmsnorm(_rand(4, 128, dtype=torch.float32)[:, ::2], w)
    with pytest.raises(ValueError, match=_msg("rmsnorm: out: dim 0 (num_tokens) must be 4 as bound by input, got 3")):
        rmsnorm(x, w, out=torch.empty(3, 64))
    with pytest.raises(ValueError, match=_msg("rmsnorm: input: must have at least 1 dim")):
        rmsnorm(torch.tensor(1.0), w)
    with pytest.raises(ValueError, match=_msg("rmsnorm: input: leading dims of shape [4, 3, 64]")):
        rmsnorm(_rand(3, 4, 64, dtype=torch.float32).transpose(0, 1), w)


def test_fused_add_rmsnorm_bad_inputs():
    x = _rand(4, 64, dtype=torch.float16)
    w = _rand(64, dtype=torch.float16)
    with pytest.raises(ValueError, match=_msg("fused_add_rmsnorm: residual: dim 1 (hidden) must be 64 as bound by input, got 32")):
        fused_add_rmsnorm(x, _rand(4, 32, dtype=torch.float16), w)
    with pytest.raises(ValueError, match=_msg("fused_add_rmsnorm: residual: dtype must be float16 as bound by input, got float32")):
        fused_add_rmsnorm(x, x.float(), w)
    with pytest.raises(ValueError, match=_msg("fused_add_rmsnorm: input must not be empty")):
        fused_add_rmsnorm(x[:0], x[:0].clone(), w)


def test_qknorm_bad_inputs():
    q = _rand(3, 4, 64, dtype=torch.bfloat16)
    k = _rand(3, 2, 64, dtype=torch.bfloat16)
    w = _rand(64, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match=_msg("qknorm: k: dim 0 (num_tokens) must be 3 as bound by q, got 2")):
        qknorm(q, k[:2], w, w)
    with pytest.raises(ValueError, match=_msg("qknorm: k_weight: dim 0 (head_dim) must be 64 as bound by q, got 32")):
        qknorm(q, k, w, w[:32])
    with pytest.raises(ValueError, match=_msg("qknorm: q: must have 3 dims [num_tokens, num_q_heads, head_dim], got 2 dims [3, 256]")):
        qknorm(q.view(3, 256), k, w, w)
    with pytest.raises(ValueError, match=_msg("qknorm: q and k must not be empty")):
        qknorm(q[:0], k[:0], w, w)
    with pytest.raises(ValueError, match=_msg("qknorm_across_heads: q_weight: dim 0 (num_q_heads * head_dim) must be 256 as bound by q, got 64")):
        qknorm_across_heads(q, k, w, _rand(128, dtype=torch.bfloat16))
    with pytest.raises(ValueError, match=_msg("qknorm_across_heads: q: stride 1 (head_dim) must be 64 as bound by q, got 128")):
        qknorm_across_heads(_rand(3, 4, 128, dtype=torch.bfloat16)[:, :, :64], k, w, w)
