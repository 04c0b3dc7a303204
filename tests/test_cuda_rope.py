"""CUDA rotary embedding (apply_rope) against a float64 reference: NeoX and GPT-J layouts,
partial rotary, strided q/k, int32/int64 positions, out-of-range positions. Skipped without a
GPU (tests/test_cuda_compile.py builds the modules in CI)."""

from __future__ import annotations

import re

import pytest
import torch

from mllm_kernel.cuda.jit import apply_rope

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (compile-only tests cover CI)"),
]

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
TOL = {torch.float32: dict(atol=1e-5, rtol=1e-5), torch.float16: dict(atol=2e-3, rtol=2e-3),
       torch.bfloat16: dict(atol=1.6e-2, rtol=1.6e-2)}
MAX_POS = 4096


def _randn(*shape, dtype, seed=0):
    g = torch.Generator(device="cuda")
    g.manual_seed(seed)
    return (torch.randn(*shape, device="cuda", generator=g) * 2.0).to(dtype)


def _cache(rotary_dim, max_pos=MAX_POS, base=10000.0):
    inv_freq = 1.0 / base ** (torch.arange(0, rotary_dim, 2, dtype=torch.float64) / rotary_dim)
    freqs = torch.outer(torch.arange(max_pos, dtype=torch.float64), inv_freq)
    return torch.cat([freqs.cos(), freqs.sin()], dim=-1).float().cuda()


def _positions(tokens, dtype, seed=1):
    g = torch.Generator()
    g.manual_seed(seed)
    return torch.randint(0, MAX_POS, (tokens,), generator=g).to(dtype).cuda()


def ref_rope(positions, x, cache, is_neox):
    rot = cache.shape[1]
    cos, sin = cache[positions.long()].double().chunk(2, dim=-1)  # [T, rot/2]
    cos, sin = cos[:, None, :], sin[:, None, :]
    out = x.double().clone()
    xr = out[..., :rot]
    if is_neox:
        a, b = xr[..., : rot // 2], xr[..., rot // 2:]
        rotated = torch.cat([a * cos - b * sin, b * cos + a * sin], dim=-1)
    else:
        a, b = xr[..., 0::2], xr[..., 1::2]
        rotated = torch.stack([a * cos - b * sin, b * cos + a * sin], dim=-1).flatten(-2)
    out[..., :rot] = rotated
    return out


def _qkv(tokens, hq, hk, d, dtype, seed=2):
    qkv = _randn(tokens, (hq + 2 * hk) * d, dtype=dtype, seed=seed)
    q = qkv[:, : hq * d].view(tokens, hq, d)
    k = qkv[:, hq * d : (hq + hk) * d].view(tokens, hk, d)
    v = qkv[:, (hq + hk) * d :]
    return q, k, v


def _check(q, k, eq, ek, rot, q_before, k_before, dtype):
    torch.testing.assert_close(q.double(), eq, **TOL[dtype])
    torch.testing.assert_close(k.double(), ek, **TOL[dtype])
    # Features past rotary_dim are not touched at all.
    assert torch.equal(q[..., rot:], q_before[..., rot:]) and torch.equal(k[..., rot:], k_before[..., rot:])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("is_neox", [True, False])
@pytest.mark.parametrize("head_dim,rot", [(64, 64), (128, 128), (256, 256), (128, 64), (128, 24), (80, 80), (96, 32)])
@pytest.mark.parametrize("heads", [(32, 8), (8, 8), (1, 1)])
@pytest.mark.parametrize("tokens", [1, 3, 1000])
def test_apply_rope(dtype, is_neox, head_dim, rot, heads, tokens):
    hq, hk = heads
    q, k, v = _qkv(tokens, hq, hk, head_dim, dtype)
    qb, kb, vb = q.clone(), k.clone(), v.clone()
    cache = _cache(rot)
    pos = _positions(tokens, torch.int64)
    eq, ek = ref_rope(pos, q, cache, is_neox), ref_rope(pos, k, cache, is_neox)
    assert apply_rope(pos, q, k, cache, is_neox) is None
    _check(q, k, eq, ek, rot, qb, kb, dtype)
    assert torch.equal(v, vb), "v was modified"


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("is_neox", [True, False])
@pytest.mark.parametrize("pos_dtype", [torch.int32, torch.int64])
def test_apply_rope_contiguous_many_tokens(dtype, is_neox, pos_dtype):
    tokens = 8192
    q = _randn(tokens, 32, 128, dtype=dtype, seed=3)
    k = _randn(tokens, 8, 128, dtype=dtype, seed=4)
    qb, kb = q.clone(), k.clone()
    cache = _cache(128)
    pos = _positions(tokens, pos_dtype, seed=5)
    eq, ek = ref_rope(pos, q, cache, is_neox), ref_rope(pos, k, cache, is_neox)
    apply_rope(pos, q, k, cache, is_neox)
    _check(q, k, eq, ek, 128, qb, kb, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("is_neox", [True, False])
def test_apply_rope_misaligned_heads(dtype, is_neox):
    # Head stride 129: only the scalar path can serve it.
    buf = _randn(5, 4, 129, dtype=dtype, seed=6)
    q = buf[:, :, 1:]
    k = _randn(5, 2, 128, dtype=dtype, seed=7)
    qb, kb, pad = q.clone(), k.clone(), buf[:, :, 0].clone()
    cache = _cache(128)
    pos = _positions(5, torch.int32)
    eq, ek = ref_rope(pos, q, cache, is_neox), ref_rope(pos, k, cache, is_neox)
    apply_rope(pos, q, k, cache, is_neox)
    _check(q, k, eq, ek, 128, qb, kb, dtype)
    assert torch.equal(buf[:, :, 0], pad), "wrote outside q"


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("is_neox", [True, False])
def test_apply_rope_out_of_range_positions_give_nan(dtype, is_neox):
    q = _randn(4, 2, 64, dtype=dtype, seed=8)
    k = _randn(4, 1, 64, dtype=dtype, seed=9)
    qb, kb = q.clone(), k.clone()
    cache = _cache(32, max_pos=16)  # partial rotary: features 32.. stay
    pos = torch.tensor([3, 16, -1, 15], device="cuda", dtype=torch.int64)
    apply_rope(pos, q, k, cache, is_neox)
    for t in (1, 2):
        assert torch.isnan(q[t, :, :32]).all() and torch.isnan(k[t, :, :32]).all()
    assert torch.equal(q[..., 32:], qb[..., 32:]) and torch.equal(k[..., 32:], kb[..., 32:])
    ok = torch.tensor([0, 3])
    eq = ref_rope(pos[ok], qb[ok], cache, is_neox)
    ek = ref_rope(pos[ok], kb[ok], cache, is_neox)
    torch.testing.assert_close(q[ok].double(), eq, **TOL[dtype])
    torch.testing.assert_close(k[ok].double(), ek, **TOL[dtype])


def test_apply_rope_errors():
    e = re.escape
    q, k, _ = _qkv(4, 8, 2, 64, torch.bfloat16)
    cache = _cache(64)
    pos = _positions(4, torch.int64)
    with pytest.raises(ValueError, match=e("apply_rope: cos_sin_cache: dtype must be float32, got float16")):
        apply_rope(pos, q, k, cache.half())
    with pytest.raises(ValueError, match=e("apply_rope: positions: dtype must be one of int32, int64, got float32")):
        apply_rope(pos.float(), q, k, cache)
    with pytest.raises(ValueError, match=e("apply_rope: positions: dim 0 (num_tokens) must be 4 as bound by q, got 3")):
        apply_rope(pos[:3], q, k, cache)
    with pytest.raises(ValueError, match=e("apply_rope: positions: device must be cuda:0 as bound by q, got cpu")):
        apply_rope(pos.cpu(), q, k, cache)
    with pytest.raises(ValueError, match=e("apply_rope: cos_sin_cache: rotary_dim (dim 1) must be even and in [2, head_dim = 64], got 63")):
        apply_rope(pos, q, k, cache[:, :63].contiguous())
    with pytest.raises(ValueError, match=e("apply_rope: cos_sin_cache: rotary_dim (dim 1) must be even and in [2, head_dim = 64], got 128")):
        apply_rope(pos, q, k, _cache(128))
    with pytest.raises(ValueError, match=e("apply_rope: cos_sin_cache: must be contiguous (strides [64, 1]), got strides [128, 1]")):
        apply_rope(pos, q, k, _cache(128)[:, :64])
    with pytest.raises(ValueError, match=e("apply_rope: cos_sin_cache must not be empty, got shape [0, 64]")):
        apply_rope(pos, q, k, cache[:0])
    with pytest.raises(ValueError, match=e("apply_rope: k: dtype must be bfloat16 as bound by q, got float16")):
        apply_rope(pos, q, k.half(), cache)
    with pytest.raises(ValueError, match=e("apply_rope: k: dim 2 (head_dim) must be 64 as bound by q, got 32")):
        apply_rope(pos, q, k[..., :32], cache)
    with pytest.raises(ValueError, match=e("apply_rope: q: stride 2 must be 1, got 2")):
        apply_rope(pos, q[..., ::2], k, cache)
    with pytest.raises(ValueError, match=e("apply_rope: q: dtype must be one of float32, float16, bfloat16, got float64")):
        apply_rope(pos, q.double(), k, cache)
    with pytest.raises(ValueError, match=e("apply_rope: q and k must not be empty")):
        apply_rope(pos[:0], q[:0], k[:0], cache)
    with pytest.raises(ValueError, match=e("apply_rope: cos_sin_cache: device must be cuda:0 as bound by q, got cpu")):
        apply_rope(pos, q, k, cache.cpu())
