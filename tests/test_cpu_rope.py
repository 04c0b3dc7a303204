"""CPU apply_rope (mllm_kernel.cpu.jit.apply_rope): NeoX and GPT-J, partial rotary, against a
float64 PyTorch reference."""

import re

import pytest
import torch

from mllm_kernel.cpu.jit import apply_rope

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
TOL = {torch.float32: dict(rtol=1e-5, atol=1e-5), torch.float16: dict(rtol=2e-3, atol=2e-3),
       torch.bfloat16: dict(rtol=1.6e-2, atol=1.6e-2)}


def _gen(seed):
    return torch.Generator().manual_seed(seed)


def _cache(max_pos, rot, seed=0):
    inv_freq = 1.0 / (10000 ** (torch.arange(0, rot, 2, dtype=torch.float64) / rot))
    freqs = torch.arange(max_pos, dtype=torch.float64)[:, None] * inv_freq[None]
    return torch.cat([freqs.cos(), freqs.sin()], dim=-1).float()


def _ref(x, positions, cache, is_neox):
    rot = cache.shape[1]
    out = x.double().clone()
    c = cache[positions.long()].double()
    cos, sin = c[:, None, : rot // 2], c[:, None, rot // 2 :]
    if is_neox:
        x1, x2 = out[..., : rot // 2].clone(), out[..., rot // 2 : rot].clone()
        out[..., : rot // 2], out[..., rot // 2 : rot] = x1 * cos - x2 * sin, x2 * cos + x1 * sin
    else:
        x1, x2 = out[..., 0:rot:2].clone(), out[..., 1:rot:2].clone()
        out[..., 0:rot:2], out[..., 1:rot:2] = x1 * cos - x2 * sin, x2 * cos + x1 * sin
    return out


CASES = [  # tokens, hq, hk, head_dim, rotary_dim
    (1, 1, 1, 2, 2),
    (3, 2, 1, 64, 64),
    (5, 4, 2, 128, 64),
    (7, 3, 1, 34, 34),
    (4, 2, 2, 130, 98),
    (1, 1, 1, 512, 512),
    (1500, 8, 2, 128, 128),
]


@pytest.mark.parametrize("is_neox", [True, False])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("tokens,hq,hk,d,rot", CASES)
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
def test_apply_rope(is_neox, dtype, tokens, hq, hk, d, rot, index_dtype):
    max_pos = 4096
    cache = _cache(max_pos, rot)
    positions = torch.randint(0, max_pos, (tokens,), generator=_gen(1)).to(index_dtype)
    # q and k as views of a fused qkv buffer (strided tokens).
    qkv = torch.randn(tokens, (hq + 2 * hk) * d, generator=_gen(2)).to(dtype)
    q = qkv[:, : hq * d].view(tokens, hq, d)
    k = qkv[:, hq * d : (hq + hk) * d].view(tokens, hk, d)
    ref_q, ref_k = _ref(q, positions, cache, is_neox).to(dtype), _ref(k, positions, cache, is_neox).to(dtype)
    v_before = qkv[:, (hq + hk) * d :].clone()
    apply_rope(positions, q, k, cache, is_neox=is_neox)
    torch.testing.assert_close(q, ref_q, **TOL[dtype])
    torch.testing.assert_close(k, ref_k, **TOL[dtype])
    assert torch.equal(qkv[:, (hq + hk) * d :], v_before)
    if rot < d:  # the non-rotary tail is bit-identical
        assert torch.equal(q[..., rot:], ref_q[..., rot:])


def _msg(text):
    return "^" + re.escape(text)


def test_bad_inputs():
    cache = _cache(16, 64)
    q = torch.randn(3, 4, 64)
    k = torch.randn(3, 2, 64)
    pos = torch.tensor([0, 5, 15])
    with pytest.raises(ValueError, match=_msg("apply_rope: positions[1] = 16 is out of range for cos_sin_cache with 16 positions")):
        apply_rope(torch.tensor([0, 16, 2]), q, k, cache)
    with pytest.raises(ValueError, match=_msg("apply_rope: positions[2] = -1 is out of range for cos_sin_cache with 16 positions")):
        apply_rope(torch.tensor([0, 1, -1], dtype=torch.int32), q, k, cache)
    with pytest.raises(ValueError, match=_msg("apply_rope: positions: dtype must be one of int32, int64, got float32")):
        apply_rope(pos.float(), q, k, cache)
    with pytest.raises(ValueError, match=_msg("apply_rope: positions: dim 0 (num_tokens) must be 3 as bound by q, got 2")):
        apply_rope(pos[:2], q, k, cache)
    with pytest.raises(ValueError, match=_msg("apply_rope: cos_sin_cache: dtype must be float32, got bfloat16")):
        apply_rope(pos, q, k, cache.bfloat16())
    with pytest.raises(ValueError, match=_msg("apply_rope: cos_sin_cache: rotary_dim (dim 1) must be even and in [2, head_dim = 64], got 66")):
        apply_rope(pos, q, k, torch.randn(16, 66))
    with pytest.raises(ValueError, match=_msg("apply_rope: cos_sin_cache: rotary_dim (dim 1) must be even and in [2, head_dim = 64], got 7")):
        apply_rope(pos, q, k, torch.randn(16, 7))
    with pytest.raises(ValueError, match=_msg("apply_rope: k: dim 2 (head_dim) must be 64 as bound by q, got 32")):
        apply_rope(pos, q, k[..., :32], cache)
    with pytest.raises(ValueError, match=_msg("apply_rope: k: dtype must be float32 as bound by q, got float16")):
        apply_rope(pos, q, k.half(), cache)
    with pytest.raises(ValueError, match=_msg("apply_rope: q and k must not be empty")):
        apply_rope(pos[:0], q[:0], k[:0], cache)
    before = q.clone()
    with pytest.raises(ValueError):
        apply_rope(torch.tensor([0, 1, 99]), q, k, cache)
    assert torch.equal(q, before)  # nothing written before the check
