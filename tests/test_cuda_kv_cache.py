"""CUDA store_kv_cache against an indexed-assignment reference. Skipped without a GPU
(tests/test_cuda_compile_quant.py builds the module in CI)."""

from __future__ import annotations

import re

import pytest
import torch

from mllm_kernel.cuda.jit.kv_cache import store_kv_cache

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (compile-only tests cover CI)"),
]

DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float8_e4m3fn]
OP = "store_kv_cache"


def _ids(d):
    return str(d).removeprefix("torch.")


def _randn(*shape, dtype, seed=0):
    g = torch.Generator(device="cuda")
    g.manual_seed(seed)
    return torch.randn(*shape, device="cuda", generator=g).to(dtype)


def _caches(num_slots, heads, dim, dtype):
    """Caches filled with a sentinel (NaN bits) so untouched slots are recognisable."""
    k_cache = torch.empty(num_slots, heads, dim, dtype=dtype, device="cuda")
    v_cache = torch.empty_like(k_cache)
    for c in (k_cache, v_cache):
        c.view(torch.uint8).fill_(0x7F)
    return k_cache, v_cache


def _slots(tokens, num_slots, dtype, seed=0, skip_every=0):
    g = torch.Generator(device="cuda")
    g.manual_seed(seed)
    slots = torch.randperm(num_slots, device="cuda", generator=g)[:tokens]
    if skip_every:
        slots[::skip_every] = -1
    return slots.to(dtype)


def _past_wide_threshold(extra):
    """A token count `extra` past the one from which both stores take blocks of up to 512 threads
    (4 tokens an SM: kv_cache.cuh's kKVWideBlocksPerSM)."""
    return 4 * torch.cuda.get_device_properties(0).multi_processor_count + extra


def _expected(k, v, k_cache, v_cache, slots):
    ek, ev = k_cache.clone(), v_cache.clone()
    keep = slots >= 0
    idx = slots[keep].long()
    ek.view(torch.uint8)[idx] = k[keep].contiguous().view(torch.uint8)
    ev.view(torch.uint8)[idx] = v[keep].contiguous().view(torch.uint8)
    return ek, ev


def _assert_bytes_equal(actual, expected):
    assert torch.equal(actual.view(torch.uint8), expected.view(torch.uint8))


@pytest.mark.parametrize("dtype", DTYPES, ids=_ids)
@pytest.mark.parametrize("slot_dtype", [torch.int32, torch.int64], ids=_ids)
@pytest.mark.parametrize("tokens,heads,dim", [(1, 1, 64), (5, 8, 128), (257, 2, 96), (100, 4, 7), (3, 32, 256)])
@pytest.mark.parametrize("skip_every", [0, 3])
def test_store_kv_cache(dtype, slot_dtype, tokens, heads, dim, skip_every):
    num_slots = 2 * tokens + 3
    k = _randn(tokens, heads, dim, dtype=dtype, seed=1)
    v = _randn(tokens, heads, dim, dtype=dtype, seed=2)
    k_cache, v_cache = _caches(num_slots, heads, dim, dtype)
    slots = _slots(tokens, num_slots, slot_dtype, skip_every=skip_every)
    ek, ev = _expected(k, v, k_cache, v_cache, slots)
    store_kv_cache(k, v, k_cache, v_cache, slots)
    _assert_bytes_equal(k_cache, ek)
    _assert_bytes_equal(v_cache, ev)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=_ids)
@pytest.mark.parametrize("head_dim", [128, 5])
def test_store_kv_cache_from_fused_qkv(dtype, head_dim):
    """k and v as slices of a fused QKV output: token stride (Hq + 2 Hkv) * D, offset pointers."""
    tokens, hq, hkv = 33, 8, 2
    qkv = _randn(tokens, (hq + 2 * hkv) * head_dim, dtype=dtype, seed=3)
    _, k, v = qkv.split([hq * head_dim, hkv * head_dim, hkv * head_dim], dim=-1)
    k = k.view(tokens, hkv, head_dim)
    v = v.view(tokens, hkv, head_dim)
    assert not k.is_contiguous()
    k_cache, v_cache = _caches(100, hkv, head_dim, dtype)
    slots = _slots(tokens, 100, torch.int64, seed=4, skip_every=5)
    ek, ev = _expected(k, v, k_cache, v_cache, slots)
    store_kv_cache(k, v, k_cache, v_cache, slots)
    _assert_bytes_equal(k_cache, ek)
    _assert_bytes_equal(v_cache, ev)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32, torch.float8_e4m3fn], ids=_ids)
@pytest.mark.parametrize("heads,dim", [(32, 128), (64, 128), (8, 96), (3, 100)])
@pytest.mark.parametrize("skip_every", [0, 7])
def test_store_kv_cache_many_tokens(dtype, heads, dim, skip_every):
    """From 4 tokens an SM on, the copy takes blocks of up to 512 threads (a whole 32 x 128 bf16
    token of 16-byte units; two blocks for 64 heads; 8-byte units for a bf16 head size of 100)."""
    tokens = _past_wide_threshold(3)
    num_slots = 2 * tokens
    k = _randn(tokens, heads, dim, dtype=dtype, seed=5)
    v = _randn(tokens, heads, dim, dtype=dtype, seed=6)
    k_cache, v_cache = _caches(num_slots, heads, dim, dtype)
    slots = _slots(tokens, num_slots, torch.int64, seed=7, skip_every=skip_every)
    ek, ev = _expected(k, v, k_cache, v_cache, slots)
    store_kv_cache(k, v, k_cache, v_cache, slots)
    _assert_bytes_equal(k_cache, ek)
    _assert_bytes_equal(v_cache, ev)


@pytest.mark.parametrize("heads,head_dim", [(32, 128), (64, 128), (2, 5)])
def test_store_kv_cache_many_tokens_strided(heads, head_dim):
    """Past 4 tokens an SM, k and v as fused-QKV slices (token stride (Hq + 2 Hkv) * D) and k with
    a head stride that is not head_dim: 32 x 128 bf16 heads take one 512-thread block a token,
    64 x 128 two."""
    tokens, hq = _past_wide_threshold(1), 4
    qkv = _randn(tokens, (hq + 2 * heads) * head_dim, dtype=torch.bfloat16, seed=3)
    _, k, v = qkv.split([hq * head_dim, heads * head_dim, heads * head_dim], dim=-1)
    k, v = k.view(tokens, heads, head_dim), v.view(tokens, heads, head_dim)
    k_heads_first = _randn(heads, tokens, head_dim, dtype=torch.bfloat16, seed=8).transpose(0, 1)
    num_slots = 2 * tokens
    for key in (k, k_heads_first):
        k_cache, v_cache = _caches(num_slots, heads, head_dim, torch.bfloat16)
        slots = _slots(tokens, num_slots, torch.int32, seed=4, skip_every=5)
        ek, ev = _expected(key, v, k_cache, v_cache, slots)
        store_kv_cache(key, v, k_cache, v_cache, slots)
        _assert_bytes_equal(k_cache, ek)
        _assert_bytes_equal(v_cache, ev)


def _needs_gpu_memory(gib):
    total = torch.cuda.get_device_properties(0).total_memory if torch.cuda.is_available() else 0
    return pytest.mark.skipif(total < gib << 30, reason=f"needs a GPU with {gib} GiB")


@_needs_gpu_memory(40)
def test_store_kv_cache_token_of_the_most_units():
    """One token of 2^31 - 1 one-byte units, the most a token may hold: a thread's last step would
    pass 2^31 and must end the loop, not wrap to a negative offset (slot 0 stays untouched)."""
    dim = (1 << 31) - 1
    g = torch.Generator(device="cuda")
    g.manual_seed(1)
    k, v = (torch.randint(0, 256, (1, 1, dim), dtype=torch.uint8, device="cuda", generator=g).view(torch.float8_e4m3fn)
            for _ in range(2))
    k_cache, v_cache = _caches(2, 1, dim, torch.float8_e4m3fn)
    store_kv_cache(k, v, k_cache, v_cache, torch.tensor([1], device="cuda", dtype=torch.int32))
    for src, cache in ((k, k_cache), (v, v_cache)):
        assert torch.equal(cache[1].view(torch.uint8), src[0].view(torch.uint8))
        assert torch.all(cache[0].view(torch.uint8) == 0x7F)


def test_store_kv_cache_token_past_a_grid_dimension():
    """One token of 2^24 + 1 one-byte units (an odd head size of float8): more than 65535 blocks of
    256 threads, so blocks loop over the token's units."""
    dim = (1 << 24) + 1
    k = _randn(1, 1, dim, dtype=torch.float8_e4m3fn, seed=1)
    v = _randn(1, 1, dim, dtype=torch.float8_e4m3fn, seed=2)
    k_cache, v_cache = _caches(2, 1, dim, torch.float8_e4m3fn)
    slots = torch.tensor([1], device="cuda", dtype=torch.int32)
    ek, ev = _expected(k, v, k_cache, v_cache, slots)
    store_kv_cache(k, v, k_cache, v_cache, slots)
    _assert_bytes_equal(k_cache, ek)
    _assert_bytes_equal(v_cache, ev)


def test_store_kv_cache_head_strided():
    """A head stride that is not head_dim (k transposed from [H, T, D])."""
    k = _randn(4, 6, 64, dtype=torch.float16, seed=5).transpose(0, 1)  # [6, 4, 64], head stride 6*64
    v = _randn(6, 4, 64, dtype=torch.float16, seed=6)
    k_cache, v_cache = _caches(10, 4, 64, torch.float16)
    slots = torch.tensor([9, 0, -1, 3, 7, 2], dtype=torch.int32, device="cuda")
    ek, ev = _expected(k, v, k_cache, v_cache, slots)
    store_kv_cache(k, v, k_cache, v_cache, slots)
    _assert_bytes_equal(k_cache, ek)
    _assert_bytes_equal(v_cache, ev)


def test_out_of_range_slot_raises_and_writes_nothing():
    k = _randn(4, 2, 64, dtype=torch.bfloat16)
    v = _randn(4, 2, 64, dtype=torch.bfloat16, seed=1)
    k_cache, v_cache = _caches(8, 2, 64, torch.bfloat16)
    before = k_cache.clone()
    slots = torch.tensor([0, 8, -1, 100], dtype=torch.int64, device="cuda")
    with pytest.raises(ValueError, match=re.escape(f"{OP}: slot_mapping[1] = 8 is out of range for a cache of 8 slots")):
        store_kv_cache(k, v, k_cache, v_cache, slots)
    _assert_bytes_equal(k_cache, before)


def test_out_of_range_slot_without_validation_is_skipped():
    """validate=False: no sync, no exception, and the kernel still never writes out of bounds
    (the bad token is skipped; the others are stored)."""
    k = _randn(3, 2, 64, dtype=torch.float16)
    v = _randn(3, 2, 64, dtype=torch.float16, seed=1)
    # One big buffer: the cache is its first 4 slots, the rest is a guard zone that must stay intact.
    k_buf, v_buf = _caches(8, 2, 64, torch.float16)
    k_cache, v_cache = k_buf[:4], v_buf[:4]
    slots = torch.tensor([1, 4, 3], dtype=torch.int32, device="cuda")
    store_kv_cache(k, v, k_cache, v_cache, slots, validate=False)
    torch.cuda.synchronize()
    ek, ev = _expected(k, v, *_caches(4, 2, 64, torch.float16), torch.tensor([1, -1, 3], device="cuda"))
    _assert_bytes_equal(k_cache, ek)
    _assert_bytes_equal(v_cache, ev)
    assert torch.all(k_buf[4:].view(torch.uint8) == 0x7F) and torch.all(v_buf[4:].view(torch.uint8) == 0x7F)


def test_store_kv_cache_under_cuda_graph():
    """Validation is skipped during capture (a sync is illegal there); replays store correctly."""
    k = _randn(16, 2, 128, dtype=torch.bfloat16)
    v = _randn(16, 2, 128, dtype=torch.bfloat16, seed=1)
    k_cache, v_cache = _caches(64, 2, 128, torch.bfloat16)
    slots = _slots(16, 64, torch.int64, seed=2)
    store_kv_cache(k, v, k_cache, v_cache, slots)  # build and warm up outside capture
    k_cache.view(torch.uint8).fill_(0x7F)
    v_cache.view(torch.uint8).fill_(0x7F)
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream), torch.cuda.graph(graph, stream=stream):
        store_kv_cache(k, v, k_cache, v_cache, slots)
    graph.replay()
    torch.cuda.synchronize()
    ek, ev = _expected(k, v, *_caches(64, 2, 128, torch.bfloat16), slots)
    _assert_bytes_equal(k_cache, ek)
    _assert_bytes_equal(v_cache, ev)


def test_bad_inputs():
    k = _randn(4, 2, 64, dtype=torch.bfloat16)
    v = _randn(4, 2, 64, dtype=torch.bfloat16, seed=1)
    kc, vc = _caches(8, 2, 64, torch.bfloat16)
    slots = torch.arange(4, dtype=torch.int64, device="cuda")

    def raises(message, *args, **kwargs):
        with pytest.raises(ValueError, match=re.escape(f"{OP}: {message}")):
            store_kv_cache(*args, **kwargs)

    raises("v: dtype must be bfloat16 as bound by k, got float16", k, v.half(), kc, vc, slots)
    raises("k: dtype must be one of float32, float16, bfloat16, float8_e4m3fn, uint8, got float64", k.double(), v,
           kc, vc, slots)
    raises("k_cache: dtype must be bfloat16 as bound by k, got float32", k, v, kc.float(), vc, slots)
    raises("v: dim 2 (head_dim) must be 64 as bound by k, got 32", k, v[..., :32], kc, vc, slots)
    raises("v_cache: dim 1 (num_kv_heads) must be 2 as bound by k, got 1", k, v, kc, vc[:, :1], slots)
    raises("v_cache: dim 0 (num_slots) must be 8 as bound by k_cache, got 7", k, v, kc, vc[:7], slots)
    raises("slot_mapping: dtype must be one of int32, int64, got float32", k, v, kc, vc, slots.float())
    raises("slot_mapping: dim 0 (num_tokens) must be 4 as bound by k, got 3", k, v, kc, vc, slots[:3])
    raises("k: device must be cuda, got cpu", k.cpu(), v, kc, vc, slots)
    raises("slot_mapping: device must be cuda:0 as bound by k, got cpu", k, v, kc, vc, slots.cpu())
    raises("k: stride 2 must be 1, got 2", _randn(4, 2, 128, dtype=torch.bfloat16)[..., ::2], v, kc, vc, slots)
    raises("k_cache: must be contiguous", k, v, _caches(8, 2, 128, torch.bfloat16)[0][..., ::2], vc, slots)
    raises("k and v must not be empty", k[:0], v[:0], kc, vc, slots[:0])
    raises("k: must have 3 dims", k.reshape(4, 128), v, kc, vc, slots)


@pytest.mark.parametrize("quantized", [False, True], ids=["plain", "fp8"])
def test_token_stride_past_32_bits_raises(quantized):
    # The kernels multiply token x token stride in 32-bit factors: a stride of 2^31 bytes is
    # refused before the launch (2 GiB of uninitialised memory to build the view).
    storage = torch.empty(2**30 + 128, dtype=torch.bfloat16, device="cuda")
    k = storage.as_strided((2, 1, 64), (2**30, 64, 1))
    v = _randn(2, 1, 64, dtype=torch.bfloat16)
    slots = torch.arange(2, dtype=torch.int64, device="cuda")
    scales = dict(zip(("k_scale", "v_scale"), _scales(0.1, 0.1))) if quantized else {}
    kc, vc = _caches(4, 1, 64, FP8 if quantized else torch.bfloat16)
    with pytest.raises(ValueError, match=re.escape(
            f"{OP}: k and v token strides must be below 2^31 bytes, got 1073741824 and 64 elements")):
        store_kv_cache(k, v, kc, vc, slots, **scales)
    del storage


# ---------------------------------------------------------------- the quantizing store (float8 caches)
FP8 = torch.float8_e4m3fn


def _fp8_quantize(x, scale):
    """The quantizers' formula: x / scale in float32, saturated to +-448, rounded to nearest even
    (PyTorch's conversion); a zero scale stores zeros. The division is a true one by the float32
    scale: PyTorch turns division by a Python scalar into a multiplication by its reciprocal,
    which can be an ulp off and, now and then in a few million elements, round to the next FP8
    value."""
    if scale == 0:
        return torch.zeros(x.shape, dtype=FP8, device=x.device)
    xf = x.float()
    return (xf / torch.full_like(xf, scale)).clamp(-448.0, 448.0).to(FP8)


def _fp8_expected(k, v, k_cache, v_cache, slots, k_scale, v_scale):
    """The caches after the quantizing store: _fp8_quantize of k and v at their slots."""
    ek, ev = k_cache.clone(), v_cache.clone()
    keep = slots >= 0
    idx = slots[keep].long()
    ek[idx] = _fp8_quantize(k[keep], k_scale)
    ev[idx] = _fp8_quantize(v[keep], v_scale)
    return ek, ev


def _scales(k_scale, v_scale):
    return (torch.tensor([k_scale], dtype=torch.float32, device="cuda"),
            torch.tensor([v_scale], dtype=torch.float32, device="cuda"))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=_ids)
@pytest.mark.parametrize("slot_dtype", [torch.int32, torch.int64], ids=_ids)
@pytest.mark.parametrize("tokens,heads,dim", [(1, 1, 64), (5, 8, 128), (257, 2, 96), (100, 4, 7), (3, 32, 256)])
@pytest.mark.parametrize("skip_every", [0, 3])
def test_store_kv_cache_fp8(dtype, slot_dtype, tokens, heads, dim, skip_every):
    num_slots = 2 * tokens + 3
    k = _randn(tokens, heads, dim, dtype=dtype, seed=1)
    v = _randn(tokens, heads, dim, dtype=dtype, seed=2)
    k[..., ::5] *= 40.0  # outliers: some saturate at 448 * scale
    k_cache, v_cache = _caches(num_slots, heads, dim, FP8)
    slots = _slots(tokens, num_slots, slot_dtype, skip_every=skip_every)
    ek, ev = _fp8_expected(k, v, k_cache, v_cache, slots, 0.013, 0.0071)
    k_scale, v_scale = _scales(0.013, 0.0071)
    store_kv_cache(k, v, k_cache, v_cache, slots, k_scale=k_scale, v_scale=v_scale)
    _assert_bytes_equal(k_cache, ek)
    _assert_bytes_equal(v_cache, ev)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=_ids)
@pytest.mark.parametrize("heads,dim", [(32, 128), (64, 128), (8, 96), (3, 100)])
@pytest.mark.parametrize("skip_every", [0, 7])
def test_store_kv_cache_fp8_many_tokens(dtype, heads, dim, skip_every):
    """From 4 tokens an SM on, the quantizing store takes blocks of up to 512 threads (a whole
    32 x 128 token; two blocks for 64 heads; element-wise for a head size of 100)."""
    tokens = _past_wide_threshold(3)
    num_slots = 2 * tokens
    k = _randn(tokens, heads, dim, dtype=dtype, seed=5)
    v = _randn(tokens, heads, dim, dtype=dtype, seed=6)
    v[..., ::3] *= 30.0
    k_cache, v_cache = _caches(num_slots, heads, dim, FP8)
    slots = _slots(tokens, num_slots, torch.int64, seed=7, skip_every=skip_every)
    ek, ev = _fp8_expected(k, v, k_cache, v_cache, slots, 0.011, 0.05)
    k_scale, v_scale = _scales(0.011, 0.05)
    store_kv_cache(k, v, k_cache, v_cache, slots, k_scale=k_scale, v_scale=v_scale)
    _assert_bytes_equal(k_cache, ek)
    _assert_bytes_equal(v_cache, ev)


@pytest.mark.parametrize("head_dim", [128, 5])
@pytest.mark.parametrize("many", [False, True], ids=["33_tokens", "4_tokens_an_sm"])
def test_store_kv_cache_fp8_from_fused_qkv(head_dim, many):
    hq, hkv = 8, 2
    tokens = _past_wide_threshold(1) if many else 33
    qkv = _randn(tokens, (hq + 2 * hkv) * head_dim, dtype=torch.bfloat16, seed=3)
    _, k, v = qkv.split([hq * head_dim, hkv * head_dim, hkv * head_dim], dim=-1)
    k, v = k.view(tokens, hkv, head_dim), v.view(tokens, hkv, head_dim)
    num_slots = max(100, 2 * tokens)
    k_cache, v_cache = _caches(num_slots, hkv, head_dim, FP8)
    slots = _slots(tokens, num_slots, torch.int64, seed=4, skip_every=5)
    ek, ev = _fp8_expected(k, v, k_cache, v_cache, slots, 0.02, 0.03)
    store_kv_cache(k, v, k_cache, v_cache, slots, k_scale=_scales(0.02, 0.03)[0], v_scale=_scales(0.02, 0.03)[1])
    _assert_bytes_equal(k_cache, ek)
    _assert_bytes_equal(v_cache, ev)


@pytest.mark.parametrize("heads,head_dim", [(4, 128), (4, 5), (32, 128), (64, 128)])
@pytest.mark.parametrize("many", [False, True], ids=["6_tokens", "4_tokens_an_sm"])
def test_store_kv_cache_fp8_head_strided(heads, head_dim, many):
    """k with a head stride that is not head_dim (transposed from [H, T, D]): the head arithmetic
    path of the quantizing store, in 512-thread blocks past 4 tokens an SM for 32 x 128 heads
    (two a token for 64)."""
    tokens = _past_wide_threshold(2) if many else 6
    k = _randn(heads, tokens, head_dim, dtype=torch.bfloat16, seed=5).transpose(0, 1)
    v = _randn(tokens, heads, head_dim, dtype=torch.bfloat16, seed=6)
    num_slots = 2 * tokens
    k_cache, v_cache = _caches(num_slots, heads, head_dim, FP8)
    slots = _slots(tokens, num_slots, torch.int32, seed=4, skip_every=3)
    ek, ev = _fp8_expected(k, v, k_cache, v_cache, slots, 0.02, 0.03)
    k_scale, v_scale = _scales(0.02, 0.03)
    store_kv_cache(k, v, k_cache, v_cache, slots, k_scale=k_scale, v_scale=v_scale)
    _assert_bytes_equal(k_cache, ek)
    _assert_bytes_equal(v_cache, ev)


@_needs_gpu_memory(40)
def test_store_kv_cache_fp8_token_of_2_31_elements():
    """One float16 token of 2^31 - 2 elements (not a multiple of 8: quantized one element a
    thread; a one-token view with a small token stride, so that the stride check allows it): a
    thread's last step would pass 2^31 and must end the loop, not wrap (slot 0 stays untouched)."""
    dim = (1 << 31) - 2
    k, v = (torch.empty(dim, dtype=torch.float16, device="cuda").uniform_(-b, b).as_strided((1, 1, dim), (1, dim, 1))
            for b in (20.0, 5.0))
    k_cache, v_cache = _caches(2, 1, dim, FP8)
    k_scale, v_scale = _scales(0.02, 0.03)
    store_kv_cache(k, v, k_cache, v_cache, torch.tensor([1], device="cuda"), k_scale=k_scale, v_scale=v_scale)
    chunk = 1 << 28
    for src, cache, scale in ((k, k_cache, 0.02), (v, v_cache, 0.03)):
        for begin in range(0, dim, chunk):
            expected = _fp8_quantize(src[0, 0, begin:begin + chunk], scale)
            assert torch.equal(cache[1, 0, begin:begin + chunk].view(torch.uint8), expected.view(torch.uint8))
        assert torch.all(cache[0].view(torch.uint8) == 0x7F)


def test_store_kv_cache_fp8_saturates_and_zero_scale():
    k = torch.tensor([[[1000.0, -1000.0, 0.5, -3.0, 1e-6, 0.0, 7.0, 449.0]]], device="cuda")
    v = k.clone()
    k_cache, v_cache = _caches(2, 1, 8, FP8)
    store_kv_cache(k, v, k_cache, v_cache, torch.tensor([1], device="cuda"), k_scale=_scales(1.0, 0.0)[0],
                   v_scale=_scales(1.0, 0.0)[1])
    assert k_cache[1, 0].float().tolist() == [448.0, -448.0, 0.5, -3.0, 0.0, 0.0, 7.0, 448.0]
    assert not v_cache[1].float().any()
    assert torch.all(k_cache[0].view(torch.uint8) == 0x7F)


def test_store_kv_cache_fp8_graph_reads_the_scales_on_replay():
    """The kernel reads the scales from device memory: new values copied into the captured scale
    tensors take effect on replay."""
    k = _randn(16, 2, 128, dtype=torch.bfloat16)
    v = _randn(16, 2, 128, dtype=torch.bfloat16, seed=1)
    k_cache, v_cache = _caches(64, 2, 128, FP8)
    slots = _slots(16, 64, torch.int64, seed=2)
    k_scale, v_scale = _scales(0.01, 0.01)
    store_kv_cache(k, v, k_cache, v_cache, slots, k_scale=k_scale, v_scale=v_scale)  # build outside capture
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream), torch.cuda.graph(graph, stream=stream):
        store_kv_cache(k, v, k_cache, v_cache, slots, k_scale=k_scale, v_scale=v_scale)
    k_scale.fill_(0.05)
    v_scale.fill_(0.002)
    for c in (k_cache, v_cache):
        c.view(torch.uint8).fill_(0x7F)
    graph.replay()
    torch.cuda.synchronize()
    ek, ev = _fp8_expected(k, v, *_caches(64, 2, 128, FP8), slots, 0.05, 0.002)
    _assert_bytes_equal(k_cache, ek)
    _assert_bytes_equal(v_cache, ev)


def test_store_kv_cache_fp8_bad_inputs():
    k = _randn(4, 2, 64, dtype=torch.bfloat16)
    v = _randn(4, 2, 64, dtype=torch.bfloat16, seed=1)
    kc, vc = _caches(8, 2, 64, FP8)
    slots = torch.arange(4, dtype=torch.int64, device="cuda")
    ks, vs = _scales(0.1, 0.1)

    def raises(message, *args, **kwargs):
        with pytest.raises(ValueError, match=re.escape(f"{OP}: {message}")):
            store_kv_cache(*args, **kwargs)

    raises("a float8_e4m3fn cache of bfloat16 k and v needs k_scale and v_scale", k, v, kc, vc, slots)
    raises("k_scale and v_scale go together", k, v, kc, vc, slots, k_scale=ks)
    raises("k_cache: dtype must be float8_e4m3fn, got bfloat16", k, v, kc.bfloat16(), vc, slots, k_scale=ks,
           v_scale=vs)
    raises("k: dtype must be one of float32, float16, bfloat16, got float8_e4m3fn", k.to(FP8), v.to(FP8), kc, vc,
           slots, k_scale=ks, v_scale=vs)
    raises("k_scale: dtype must be float32, got float64", k, v, kc, vc, slots, k_scale=ks.double(), v_scale=vs)
    raises("v_scale: dim 0 must be 1, got 2", k, v, kc, vc, slots, k_scale=ks, v_scale=torch.ones(2, device="cuda"))
    raises("k_scale: device must be cuda:0 as bound by k, got cpu", k, v, kc, vc, slots, k_scale=ks.cpu(),
           v_scale=vs)
    raises("slot_mapping[1] = 8 is out of range for a cache of 8 slots", k, v, kc, vc,
           torch.tensor([0, 8, 1, 2], device="cuda"), k_scale=ks, v_scale=vs)
