"""CPU store_kv_cache (mllm_kernel.cpu.jit.store_kv_cache): exact copies into the slots, and the
quantizing store into float8_e4m3fn caches bit-exact against PyTorch's conversion."""

import re

import pytest
import torch

from mllm_kernel.cpu.jit import store_kv_cache

DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def _gen(seed):
    return torch.Generator().manual_seed(seed)


def _slots(tokens, num_slots, index_dtype):
    """Distinct random slots for `tokens` tokens, every third token skipped (-1)."""
    slots = torch.randperm(num_slots, generator=_gen(0))[:tokens]
    slots[::3] = -1
    return slots.to(index_dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("tokens,heads,d,strided", [(1, 1, 1, False), (7, 2, 3, True), (5, 8, 128, False),
                                                     (3000, 2, 64, True), (2, 1, 16384, False)])
def test_store_kv_cache(dtype, index_dtype, tokens, heads, d, strided):
    num_slots = 2 * tokens + 3
    slots = _slots(tokens, num_slots, index_dtype)
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


FP8 = torch.float8_e4m3fn


def _fp8_reference(x, scale):
    """The quantizers' formula: x / scale in float32, saturated to +-448, rounded to nearest even
    (PyTorch's conversion); a zero scale stores zeros."""
    if scale == 0:
        return torch.zeros(x.shape, dtype=FP8)
    return (x.float() / scale).clamp(-448.0, 448.0).to(FP8)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("tokens,heads,d,strided", [(1, 1, 1, False), (7, 2, 3, True), (5, 8, 128, False),
                                                     (300, 2, 72, True), (2, 1, 4100, False)])
def test_store_kv_cache_fp8(dtype, index_dtype, tokens, heads, d, strided):
    num_slots = 2 * tokens + 3
    slots = _slots(tokens, num_slots, index_dtype)
    if strided:
        kv = torch.randn(tokens, 2, heads, d + 2, generator=_gen(1)).to(dtype)
        k, v = kv[:, 0, :, :d], kv[:, 1, :, :d]
    else:
        k = torch.randn(tokens, heads, d, generator=_gen(1)).to(dtype)
        v = torch.randn(tokens, heads, d, generator=_gen(2)).to(dtype)
    k[..., ::5] *= 40.0  # outliers: some saturate at 448 * scale
    k_scale, v_scale = torch.tensor([0.013]), torch.tensor([0.0071])
    # Sentinel bytes (NaN codes) in every slot, so a slot written when it should not be shows.
    k_cache = torch.full((num_slots, heads, d), 0x7F, dtype=torch.uint8).view(FP8)
    v_cache = k_cache.clone()
    ref_k, ref_v = k_cache.clone(), v_cache.clone()
    keep = slots >= 0
    ref_k[slots[keep].long()] = _fp8_reference(k[keep], 0.013)
    ref_v[slots[keep].long()] = _fp8_reference(v[keep], 0.0071)
    store_kv_cache(k, v, k_cache, v_cache, slots, k_scale=k_scale, v_scale=v_scale)
    assert torch.equal(k_cache.view(torch.uint8), ref_k.view(torch.uint8))
    assert torch.equal(v_cache.view(torch.uint8), ref_v.view(torch.uint8))


def test_store_kv_cache_fp8_saturates_and_zero_scale():
    """Values past 448 * scale saturate to +-448 (PyTorch's cast alone would give NaN); a zero
    scale stores zeros."""
    k = torch.tensor([[[1000.0, -1000.0, 0.5, -3.0, 1e-6, 0.0, 7.0, 449.0]]])
    v = k.clone()
    k_cache = torch.full((2, 1, 8), 0x7F, dtype=torch.uint8).view(FP8)
    v_cache = k_cache.clone()
    store_kv_cache(k, v, k_cache, v_cache, torch.tensor([1]), k_scale=torch.tensor([1.0]),
                   v_scale=torch.tensor([0.0]))
    assert k_cache[1, 0].float().tolist() == [448.0, -448.0, 0.5, -3.0, 0.0, 0.0, 7.0, 448.0]
    assert not v_cache[1].float().any()
    assert torch.equal(k_cache[0].view(torch.uint8), torch.full((1, 8), 0x7F, dtype=torch.uint8))


def test_store_kv_cache_fp8_bad_inputs():
    k = torch.randn(3, 2, 8, dtype=torch.bfloat16)
    v = torch.randn(3, 2, 8, dtype=torch.bfloat16)
    kc = torch.zeros(10, 2, 8, dtype=FP8)
    vc = torch.zeros(10, 2, 8, dtype=FP8)
    slots = torch.tensor([0, 4, 9])
    ks, vs = torch.tensor([0.1]), torch.tensor([0.1])
    with pytest.raises(ValueError, match=_msg("store_kv_cache: a float8_e4m3fn cache of bfloat16 k and v needs "
                                              "k_scale and v_scale")):
        store_kv_cache(k, v, kc, vc, slots)
    with pytest.raises(ValueError, match=_msg("store_kv_cache: k_scale and v_scale go together")):
        store_kv_cache(k, v, kc, vc, slots, k_scale=ks)
    with pytest.raises(ValueError, match=_msg("store_kv_cache: k_cache: dtype must be float8_e4m3fn, got bfloat16")):
        store_kv_cache(k, v, kc.bfloat16(), vc, slots, k_scale=ks, v_scale=vs)
    with pytest.raises(ValueError, match=_msg("store_kv_cache: k: dtype must be one of float32, float16, bfloat16, "
                                              "got float8_e4m3fn")):
        store_kv_cache(k.to(FP8), v.to(FP8), kc, vc, slots, k_scale=ks, v_scale=vs)
    with pytest.raises(ValueError, match=_msg("store_kv_cache: k_scale: dtype must be float32, got float64")):
        store_kv_cache(k, v, kc, vc, slots, k_scale=ks.double(), v_scale=vs)
    with pytest.raises(ValueError, match=_msg("store_kv_cache: v_scale: dim 0 must be 1, got 2")):
        store_kv_cache(k, v, kc, vc, slots, k_scale=ks, v_scale=torch.ones(2))
    with pytest.raises(ValueError, match=_msg("store_kv_cache: slot_mapping[1] = 10 is out of range for a cache of "
                                              "10 slots")):
        store_kv_cache(k, v, kc, vc, torch.tensor([0, 10, 1]), k_scale=ks, v_scale=vs)
    assert not kc.float().any()  # nothing written before the check
