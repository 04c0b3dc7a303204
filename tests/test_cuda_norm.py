"""CUDA RMSNorm family against float64 references: rmsnorm, fused_add_rmsnorm, qknorm,
qknorm_across_heads. Skipped without a GPU (tests/test_cuda_compile.py builds the modules in CI)."""

from __future__ import annotations

import re

import pytest
import torch

from mllm_kernel.cuda.jit import fused_add_rmsnorm, qknorm, qknorm_across_heads, rmsnorm

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (compile-only tests cover CI)"),
]

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
# Output rounding dominates: fp32 ~1e-7 relative, fp16 2^-11, bf16 2^-8 (values are O(1..10)).
TOL = {torch.float32: dict(atol=1e-5, rtol=1e-5), torch.float16: dict(atol=4e-3, rtol=2e-3),
       torch.bfloat16: dict(atol=3e-2, rtol=1.6e-2)}
# Vector width boundaries (8 for 16-bit, 4 for fp32), group/CTA path boundaries (8/16/128 vectors,
# 2048 vectors), odd sizes that force the scalar path, and the maximum.
HIDDEN = [64, 100, 128, 257, 1000, 1024, 1030, 2048, 4096, 4100, 5120, 8192, 16383, 16384]
TOKENS = [1, 7, 300]


def _gen(seed=0):
    g = torch.Generator(device="cuda")
    g.manual_seed(seed)
    return g


def _randn(*shape, dtype, scale=1.0, seed=0):
    return (torch.randn(*shape, device="cuda", generator=_gen(seed), dtype=torch.float32) * scale).to(dtype)


def _weight(n, dtype, seed=1):
    # Around 1 but never constant, never 0.
    return (1.0 + 0.5 * torch.randn(n, device="cuda", generator=_gen(seed))).to(dtype)


def ref_rmsnorm(x, w, eps):
    x64 = x.double()
    return x64 * torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + eps) * w.double()


def _close(actual, expected, dtype):
    assert not torch.isnan(actual).any(), "output has unwritten (NaN-poisoned) elements"
    torch.testing.assert_close(actual.double(), expected.double(), **TOL[dtype])


def _err(text):
    return re.escape(text)


# ---------------------------------------------------------------- rmsnorm


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("hidden", HIDDEN)
@pytest.mark.parametrize("tokens", TOKENS)
def test_rmsnorm(dtype, hidden, tokens):
    x = _randn(tokens, hidden, dtype=dtype, scale=3.0)
    w = _weight(hidden, dtype)
    out = rmsnorm(x, w, 1e-6)
    assert out.shape == x.shape and out.dtype == dtype
    _close(out, ref_rmsnorm(x, w, 1e-6), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_rmsnorm_many_tokens(dtype):
    x = _randn(4096, 4096, dtype=dtype)
    w = _weight(4096, dtype)
    _close(rmsnorm(x, w), ref_rmsnorm(x, w, 1e-6), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("eps", [0.0, 1e-5, 0.5])
def test_rmsnorm_eps(dtype, eps):
    x = _randn(5, 512, dtype=dtype, scale=0.3)
    w = _weight(512, dtype)
    _close(rmsnorm(x, w, eps), ref_rmsnorm(x, w, eps), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_rmsnorm_out_given_is_written_and_returned(dtype):
    x = _randn(9, 1024, dtype=dtype)
    w = _weight(1024, dtype)
    out = torch.full_like(x, float("nan"))
    result = rmsnorm(x, w, 1e-6, out=out)
    assert result is out
    _close(out, ref_rmsnorm(x, w, 1e-6), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(2, 5, 320), (3, 1, 1, 64), (4096,)])
def test_rmsnorm_leading_dims(dtype, shape):
    x = _randn(*shape, dtype=dtype)
    w = _weight(shape[-1], dtype)
    out = rmsnorm(x, w)
    assert out.shape == x.shape
    _close(out, ref_rmsnorm(x, w, 1e-6), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("hidden", [128, 2048, 4096])
@pytest.mark.parametrize("offset", [0, 1, 8])  # 1: misaligned start -> scalar path
@pytest.mark.parametrize("tokens", [1, 33])
def test_rmsnorm_strided_rows(dtype, hidden, offset, tokens):
    # A slice of a fused QKV output: row stride 3 * hidden + 8.
    qkv = _randn(tokens, 3 * hidden + 8, dtype=dtype)
    before = qkv.clone()
    x = qkv[:, offset:offset + hidden]
    assert not x.is_contiguous() or tokens == 1
    w = _weight(hidden, dtype)
    out = rmsnorm(x, w)
    _close(out, ref_rmsnorm(x, w, 1e-6), dtype)
    assert torch.equal(qkv, before), "input was modified"


@pytest.mark.parametrize("dtype", DTYPES)
def test_rmsnorm_strided_out(dtype):
    x = _randn(17, 256, dtype=dtype)
    w = _weight(256, dtype)
    big = torch.full((17, 300), float("nan"), device="cuda", dtype=dtype)
    out = big[:, 20:276]
    rmsnorm(x, w, out=out)
    _close(out, ref_rmsnorm(x, w, 1e-6), dtype)
    assert torch.isnan(big[:, :20]).all() and torch.isnan(big[:, 276:]).all(), "wrote outside out"


def test_rmsnorm_in_place():
    x = _randn(8, 2048, dtype=torch.bfloat16)
    w = _weight(2048, torch.bfloat16)
    expected = ref_rmsnorm(x, w, 1e-6)
    rmsnorm(x, w, out=x)
    _close(x, expected, torch.bfloat16)


@pytest.mark.parametrize("dtype", DTYPES)
def test_rmsnorm_strided_leading_dims(dtype):
    # [2, 5, 320] slices of [2, 5, 448] rows (a fused projection seen 3-D): C++ merges the
    # leading dims into one row stride; out is written through a 3-D view of 2-D rows.
    x = _randn(2, 5, 448, dtype=dtype)[..., 64:384]
    w = _weight(320, dtype)
    out = torch.full((10, 320), float("nan"), device="cuda", dtype=dtype)
    rmsnorm(x, w, out=out.view(2, 5, 320))
    _close(out, ref_rmsnorm(x.reshape(10, 320), w, 1e-6), dtype)


def test_rmsnorm_eps_and_flag_types():
    x = _randn(3, 256, dtype=torch.bfloat16)
    w = _weight(256, torch.bfloat16)
    _close(rmsnorm(x, w, 0, enable_pdl=0), ref_rmsnorm(x, w, 0.0), torch.bfloat16)  # ints convert
    with pytest.raises(TypeError, match=re.escape("Mismatched type on argument #3")):
        rmsnorm(x, w, "1e-6")
    for flag in (None, True, False):  # None: the default, PDL where the GPU has it
        _close(rmsnorm(x, w, enable_pdl=flag), ref_rmsnorm(x, w, 1e-6), torch.bfloat16)
    with pytest.raises(TypeError, match=re.escape("Mismatched type on argument #4")):
        rmsnorm(x, w, enable_pdl="yes")


def test_rmsnorm_3d_non_flattenable_raises():
    x = _randn(4, 6, 128, dtype=torch.float16).transpose(0, 1)
    w = _weight(128, torch.float16)
    with pytest.raises(ValueError, match=_err("rmsnorm: input: leading dims of shape [6, 4, 128]")):
        rmsnorm(x, w)


def test_rmsnorm_errors():
    x = _randn(4, 128, dtype=torch.bfloat16)
    w = _weight(128, torch.bfloat16)
    with pytest.raises(ValueError, match=_err("rmsnorm: input: dtype must be one of float32, float16, bfloat16, got float64")):
        rmsnorm(x.double(), w)
    with pytest.raises(ValueError, match=_err("rmsnorm: weight: dtype must be bfloat16 as bound by input, got float32")):
        rmsnorm(x, w.float())
    with pytest.raises(ValueError, match=_err("rmsnorm: weight: dim 0 (hidden) must be 128 as bound by input, got 64")):
        rmsnorm(x, w[:64])
    with pytest.raises(ValueError, match=_err("rmsnorm: weight: must have 1 dims [hidden], got 2 dims [1, 128]")):
        rmsnorm(x, w[None])
    with pytest.raises(ValueError, match=_err("rmsnorm: weight: device must be cuda:0 as bound by input, got cpu")):
        rmsnorm(x, w.cpu())
    with pytest.raises(ValueError, match=_err("rmsnorm: input: device must be cuda, got cpu")):
        rmsnorm(x.cpu(), w)
    with pytest.raises(ValueError, match=_err("rmsnorm: input: stride 1 must be 1, got 2")):
        rmsnorm(_randn(4, 256, dtype=torch.bfloat16)[:, ::2], w)
    with pytest.raises(ValueError, match=_err("rmsnorm: weight: must be contiguous (strides [1]), got strides [2]")):
        rmsnorm(x, _weight(256, torch.bfloat16)[::2])
    with pytest.raises(ValueError, match=_err("rmsnorm: input must not be empty, got shape [0, 128]")):
        rmsnorm(x[:0], w)
    with pytest.raises(ValueError, match=_err("rmsnorm: hidden must be at most 16384, got 16392")):
        rmsnorm(_randn(2, 16392, dtype=torch.bfloat16), _weight(16392, torch.bfloat16))
    with pytest.raises(ValueError, match=_err("rmsnorm: eps must be finite and >= 0, got -1")):
        rmsnorm(x, w, -1.0)
    with pytest.raises(ValueError, match=_err("rmsnorm: eps must be finite and >= 0, got nan")):
        rmsnorm(x, w, float("nan"))
    with pytest.raises(ValueError, match=_err("rmsnorm: out: dim 1 (hidden) must be 128 as bound by input, got 129")):
        rmsnorm(x, w, out=torch.empty(4, 129, device="cuda", dtype=torch.bfloat16))
    with pytest.raises(ValueError, match=_err("rmsnorm: out: dim 0 (num_tokens) must be 4 as bound by input, got 5")):
        rmsnorm(x, w, out=torch.empty(5, 128, device="cuda", dtype=torch.bfloat16))
    with pytest.raises(ValueError, match=_err("rmsnorm: out: dtype must be bfloat16 as bound by input, got float16")):
        rmsnorm(x, w, out=torch.empty(4, 128, device="cuda", dtype=torch.float16))
    with pytest.raises(ValueError, match=_err("rmsnorm: input: must have at least 1 dim, got a 0-dim tensor")):
        rmsnorm(x[0, 0], w)


# ---------------------------------------------------------------- fused_add_rmsnorm


def _ref_fused(x, r, w, eps):
    # flashinfer/sglang: the sum in fp32, stored in the dtype, normalised after rounding.
    new_r = (x.float() + r.float()).to(x.dtype)
    return ref_rmsnorm(new_r, w, eps), new_r


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("hidden", HIDDEN)
@pytest.mark.parametrize("tokens", [1, 37])
def test_fused_add_rmsnorm(dtype, hidden, tokens):
    x = _randn(tokens, hidden, dtype=dtype, seed=2)
    r = _randn(tokens, hidden, dtype=dtype, scale=2.0, seed=3)
    w = _weight(hidden, dtype)
    expected, expected_r = _ref_fused(x, r, w, 1e-6)
    assert fused_add_rmsnorm(x, r, w, 1e-6) is None
    # The residual is the fp32 sum rounded once: bit-exact.
    torch.testing.assert_close(r, expected_r, atol=0, rtol=0)
    _close(x, expected, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_fused_add_rmsnorm_many_tokens(dtype):
    x = _randn(4096, 4096, dtype=dtype, seed=4)
    r = _randn(4096, 4096, dtype=dtype, seed=5)
    w = _weight(4096, dtype)
    expected, expected_r = _ref_fused(x, r, w, 1e-6)
    fused_add_rmsnorm(x, r, w)
    torch.testing.assert_close(r, expected_r, atol=0, rtol=0)
    _close(x, expected, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("offset", [0, 3])
def test_fused_add_rmsnorm_strided_and_3d(dtype, offset):
    big_x = _randn(2, 6, 1100, dtype=dtype, seed=6)
    big_r = _randn(2, 6, 1200, dtype=dtype, seed=7)
    x = big_x[..., offset:offset + 1024]
    r = big_r[..., 8:1032]
    w = _weight(1024, dtype)
    expected, expected_r = _ref_fused(x, r, w, 1e-5)
    x_rest, r_rest = big_x[..., 1030:].clone(), big_r[..., :8].clone()
    fused_add_rmsnorm(x, r, w, 1e-5)
    torch.testing.assert_close(r, expected_r, atol=0, rtol=0)
    _close(x, expected, dtype)
    assert torch.equal(big_x[..., 1030:], x_rest) and torch.equal(big_r[..., :8], r_rest)


def test_fused_add_rmsnorm_errors():
    x = _randn(4, 256, dtype=torch.float16)
    r = _randn(4, 256, dtype=torch.float16)
    w = _weight(256, torch.float16)
    with pytest.raises(ValueError, match=_err("fused_add_rmsnorm: residual: dtype must be float16 as bound by input, got float32")):
        fused_add_rmsnorm(x, r.float(), w)
    with pytest.raises(ValueError, match=_err("fused_add_rmsnorm: residual: dim 0 (num_tokens) must be 4 as bound by input, got 3")):
        fused_add_rmsnorm(x, r[:3], w)
    with pytest.raises(ValueError, match=_err("fused_add_rmsnorm: residual: dim 1 (hidden) must be 256 as bound by input, got 128")):
        fused_add_rmsnorm(x, r[:, :128], w)
    with pytest.raises(ValueError, match=_err("fused_add_rmsnorm: weight: dim 0 (hidden) must be 256 as bound by input, got 255")):
        fused_add_rmsnorm(x, r, w[:255])
    with pytest.raises(ValueError, match=_err("fused_add_rmsnorm: residual: device must be cuda:0 as bound by input, got cpu")):
        fused_add_rmsnorm(x, r.cpu(), w)
    with pytest.raises(ValueError, match=_err("fused_add_rmsnorm: input must not be empty, got shape [0, 256]")):
        fused_add_rmsnorm(x[:0], r[:0], w)
    with pytest.raises(ValueError, match=_err("fused_add_rmsnorm: residual: row stride must not be 0 (written in place)")):
        fused_add_rmsnorm(x, r[:1].expand(4, 256), w)
    with pytest.raises(ValueError, match=_err("fused_add_rmsnorm: eps must be finite and >= 0, got inf")):
        fused_add_rmsnorm(x, r, w, float("inf"))


# ---------------------------------------------------------------- qknorm


def _qkv(tokens, hq, hk, d, dtype, seed=8):
    """q and k as strided views into one fused QKV buffer [T, (hq + 2 hk) * d]."""
    qkv = _randn(tokens, (hq + 2 * hk) * d, dtype=dtype, scale=2.0, seed=seed)
    q = qkv[:, : hq * d].view(tokens, hq, d)
    k = qkv[:, hq * d : (hq + hk) * d].view(tokens, hk, d)
    v = qkv[:, (hq + hk) * d :]
    return qkv, q, k, v


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("head_dim", [64, 128, 256, 96, 72])
@pytest.mark.parametrize("heads", [(32, 8), (4, 1), (1, 1)])
@pytest.mark.parametrize("tokens", [1, 5, 1000])
def test_qknorm(dtype, head_dim, heads, tokens):
    hq, hk = heads
    qkv, q, k, v = _qkv(tokens, hq, hk, head_dim, dtype)
    v_before = v.clone()
    qw, kw = _weight(head_dim, dtype, seed=9), _weight(head_dim, dtype, seed=10)
    eq, ek = ref_rmsnorm(q, qw, 1e-6), ref_rmsnorm(k, kw, 1e-6)
    assert qknorm(q, k, qw, kw, 1e-6) is None
    _close(q, eq, dtype)
    _close(k, ek, dtype)
    assert torch.equal(v, v_before), "v was modified"


@pytest.mark.parametrize("dtype", DTYPES)
def test_qknorm_contiguous_and_misaligned(dtype):
    q = _randn(3, 4, 128, dtype=dtype, seed=11)
    k = _randn(3, 2, 128, dtype=dtype, seed=12)
    qw, kw = _weight(128, dtype), _weight(128, dtype, seed=13)
    eq, ek = ref_rmsnorm(q, qw, 1e-6), ref_rmsnorm(k, kw, 1e-6)
    qknorm(q, k, qw, kw)
    _close(q, eq, dtype)
    _close(k, ek, dtype)
    # A head stride that is not a vector multiple: scalar path.
    buf = _randn(3, 4, 131, dtype=dtype, seed=14)
    q2 = buf[:, :, 1:129]
    eq2 = ref_rmsnorm(q2, qw, 1e-6)
    k2 = _randn(3, 2, 128, dtype=dtype, seed=15)
    ek2 = ref_rmsnorm(k2, kw, 1e-6)
    qknorm(q2, k2, qw, kw)
    _close(q2, eq2, dtype)
    _close(k2, ek2, dtype)


def test_qknorm_errors():
    _, q, k, _ = _qkv(4, 8, 2, 128, torch.bfloat16)
    qw, kw = _weight(128, torch.bfloat16), _weight(128, torch.bfloat16)
    with pytest.raises(ValueError, match=_err("qknorm: k: dim 2 (head_dim) must be 128 as bound by q, got 64")):
        qknorm(q, k[..., :64], qw, kw)
    with pytest.raises(ValueError, match=_err("qknorm: k: dim 0 (num_tokens) must be 4 as bound by q, got 3")):
        qknorm(q, k[:3], qw, kw)
    with pytest.raises(ValueError, match=_err("qknorm: k: dtype must be bfloat16 as bound by q, got float32")):
        qknorm(q, k.float(), qw, kw)
    with pytest.raises(ValueError, match=_err("qknorm: k_weight: dim 0 (head_dim) must be 128 as bound by q, got 256")):
        qknorm(q, k, qw, _weight(256, torch.bfloat16))
    with pytest.raises(ValueError, match=_err("qknorm: q_weight: dtype must be bfloat16 as bound by q, got float16")):
        qknorm(q, k, qw.half(), kw)
    with pytest.raises(ValueError, match=_err("qknorm: q: must have 3 dims [num_tokens, num_q_heads, head_dim], got 2 dims [4, 1024]")):
        qknorm(q.reshape(4, -1), k, qw, kw)
    with pytest.raises(ValueError, match=_err("qknorm: q: stride 2 must be 1, got 2")):
        qknorm(q[..., ::2], k, qw[:64], kw)
    with pytest.raises(ValueError, match=_err("qknorm: q: dtype must be one of float32, float16, bfloat16, got int32")):
        qknorm(q.int(), k, qw, kw)
    with pytest.raises(ValueError, match=_err("qknorm: q and k must not be empty")):
        qknorm(q[:0], k[:0], qw, kw)
    with pytest.raises(ValueError, match=_err("qknorm: eps must be finite and >= 0, got -0.1")):
        qknorm(q, k, qw, kw, -0.1)


# ---------------------------------------------------------------- qknorm_across_heads


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("head_dim", [64, 128, 256])
@pytest.mark.parametrize("heads", [(32, 8), (16, 16), (1, 1), (3, 1)])
@pytest.mark.parametrize("tokens", [1, 9, 777])
def test_qknorm_across_heads(dtype, head_dim, heads, tokens):
    hq, hk = heads
    qkv, q, k, v = _qkv(tokens, hq, hk, head_dim, dtype, seed=16)
    v_before = v.clone()
    qw, kw = _weight(hq * head_dim, dtype, seed=17), _weight(hk * head_dim, dtype, seed=18)
    eq = ref_rmsnorm(q.reshape(tokens, -1), qw, 1e-6).view(tokens, hq, head_dim)
    ek = ref_rmsnorm(k.reshape(tokens, -1), kw, 1e-6).view(tokens, hk, head_dim)
    assert qknorm_across_heads(q, k, qw, kw, 1e-6) is None
    _close(q, eq, dtype)
    _close(k, ek, dtype)
    assert torch.equal(v, v_before), "v was modified"


def test_qknorm_across_heads_errors():
    _, q, k, _ = _qkv(4, 8, 2, 64, torch.float16)
    qw, kw = _weight(512, torch.float16), _weight(128, torch.float16)
    with pytest.raises(ValueError, match=_err("qknorm_across_heads: q_weight: dim 0 (num_q_heads * head_dim) must be 512 as bound by q, got 64")):
        qknorm_across_heads(q, k, qw[:64], kw)
    with pytest.raises(ValueError, match=_err("qknorm_across_heads: k_weight: dim 0 (num_k_heads * head_dim) must be 128 as bound by k, got 512")):
        qknorm_across_heads(q, k, qw, qw)
    padded = _randn(4, 8, 80, dtype=torch.float16)[..., :64]
    with pytest.raises(ValueError, match=_err("qknorm_across_heads: q: stride 1 (head_dim) must be 64 as bound by q, got 80")):
        qknorm_across_heads(padded, k, qw, kw)
    with pytest.raises(ValueError, match=_err("qknorm_across_heads: num_q_heads * head_dim must be at most 16384, got 32768")):
        qknorm_across_heads(_randn(2, 128, 256, dtype=torch.float16), _randn(2, 1, 256, dtype=torch.float16),
                            _weight(32768, torch.float16), _weight(256, torch.float16))
    with pytest.raises(ValueError, match=_err("qknorm_across_heads: k: device must be cuda:0 as bound by q, got cpu")):
        qknorm_across_heads(q, k.cpu(), qw, kw)
