"""CPU store_kv_cache (mllm_kernel.cpu.jit.store_kv_cache): exact copies into the slots."""

import re

import pytest
import torch

from mllm_kernel.cpu.jit import store_kv_cache

DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def _gen(seed):
    return torch.Generator().manual_seed(seed)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("tokens,heads,d,strided", [(1, 1, 1, False), (7, 2, 3, True), (5, 8, 128, False),
                                                     (3000, 2, 64, True), (2, 1, 16384, False)])
def test_store_kv_cache(dtype, index_dtype, tokens, heads, d, strided):
    num_slots = 2 * tokens + 3
    slots = torch.randperm(num_slots, generator=_gen(0))[:tokens]
    slots[::3] = -1  # skipped tokens
    slots = slots.to(index_dtype)
    if strided:  # k and v as views of a fused qkv buffer, heads padded
        kv = torch.randn(tokens, 2, heads, d + 2, generator=_gen(1)).to(dtype)
        k, v = kv[:, 0, :, :d], kv[:, 1, :, :d]
    else:
        k = torch.randn(tokens, heads, d, generator=_gen(1)).to(dtype)
        v = torch.randn(tokens, heads, d, generator=_gen(2)).to(dtype)
    k_cache = torch.full((num_slots, heads, d), float("nan"), dtype=dtype)
    v_cache = torch.full((num_slots, heads, d), float("nan"), dtype=dtype)
    ref_k, ref_v = k_cache.clone(), v_cache.clone()
    keep = slots >= 0
    ref_k[slots[keep].long()] = k[keep]
    ref_v[slots[keep].long()] = v[keep]
    store_kv_cache(k, v, k_cache, v_cache, slots)
    assert torch.equal(k_cache.nan_to_num(7.0), ref_k.nan_to_num(7.0))
    assert torch.equal(v_cache.nan_to_num(7.0), ref_v.nan_to_num(7.0))


def _msg(text):
    return "^" + re.escape(text)


def test_bad_inputs():
    k = torch.randn(3, 2, 8)
    v = torch.randn(3, 2, 8)
    kc = torch.zeros(10, 2, 8)
    vc = torch.zeros(10, 2, 8)
    slots = torch.tensor([0, 4, 9])
    with pytest.raises(ValueError, match=_msg("store_kv_cache: slot_mapping[2] = 10 is out of range for a cache of 10 slots")):
        store_kv_cache(k, v, kc, vc, torch.tensor([0, 4, 10]))
    assert not kc.any()  # nothing written before the check
    with pytest.raises(ValueError, match=_msg("store_kv_cache: slot_mapping: dtype must be one of int32, int64, got float32")):
        store_kv_cache(k, v, kc, vc, slots.float())
    with pytest.raises(ValueError, match=_msg("store_kv_cache: slot_mapping: dim 0 (num_tokens) must be 3 as bound by k, got 2")):
        store_kv_cache(k, v, kc, vc, slots[:2])
    with pytest.raises(ValueError, match=_msg("store_kv_cache: v_cache: dim 0 (num_slots) must be 10 as bound by k_cache, got 9")):
        store_kv_cache(k, v, kc, vc[:9], slots)
    with pytest.raises(ValueError, match=_msg("store_kv_cache: k_cache: dtype must be float32 as bound by k, got bfloat16")):
        store_kv_cache(k, v, kc.bfloat16(), vc, slots)
    with pytest.raises(ValueError, match=_msg("store_kv_cache: v: dim 1 (num_kv_heads) must be 2 as bound by k, got 1")):
        store_kv_cache(k, v[:, :1], kc, vc, slots)
    with pytest.raises(ValueError, match=_msg("store_kv_cache: k_cache: must be contiguous")):
        store_kv_cache(k, v, torch.zeros(10, 2, 16)[..., :8], vc, slots)
    with pytest.raises(ValueError, match=_msg("store_kv_cache: k and v must not be empty")):
        store_kv_cache(k[:0], v[:0], kc, vc, slots[:0])
