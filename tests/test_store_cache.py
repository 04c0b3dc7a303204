"""store_cache (the upstream row scatter) on CPU and CUDA: rows of several dtypes and sizes into
poisoned caches at random slots (untouched slots checked bit for bit), the import paths, and
every bad input with its exact message."""

from __future__ import annotations

import logging

import pytest
import torch

from mllm_kernel import ops
from mllm_kernel.cpu.jit import can_use_store_cache as cpu_can_use
from mllm_kernel.cpu.jit import store_cache as cpu_store_cache
from mllm_kernel.cuda.jit.store_cache import can_use_store_cache, store_cache  # the upstream import path

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"))]


def _random(shape, dtype, g):
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g).to(dtype)
    info = torch.iinfo(dtype)
    low, high = max(info.min, -1 << 30), min(info.max, 1 << 30)
    return torch.randint(low, high, shape, generator=g, dtype=torch.int64).to(dtype)


def _case(batch, row, slots, dtype, device, *, index_dtype=torch.int64, row_stride=None, seed=0):
    g = torch.Generator().manual_seed(seed)
    width = row_stride or row
    k = _random((batch, width), dtype, g).to(device)[:, :row]
    v = _random((batch, width), dtype, g).to(device)[:, :row]
    poison = _random((slots, row), dtype, g)
    k_cache, v_cache = poison.clone().to(device), (poison.flip(0)).clone().to(device)
    indices = torch.randperm(slots, generator=g)[:batch].to(index_dtype).to(device)
    return k, v, k_cache, v_cache, indices


def _expected(k, v, k_cache, v_cache, indices):
    ek, ev = k_cache.cpu().clone(), v_cache.cpu().clone()
    ek[indices.cpu().long()] = k.cpu()
    ev[indices.cpu().long()] = v.cpu()
    return ek, ev


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype,row", [(torch.bfloat16, 1024), (torch.float16, 2), (torch.float32, 1),
                                       (torch.float32, 129), (torch.int8, 12), (torch.uint8, 4100),
                                       (torch.float8_e4m3fn, 576), (torch.int64, 3)])
@pytest.mark.parametrize("batch", [1, 37])
def test_matches_reference(device, dtype, row, batch):
    case = _case(batch, row, 64, dtype, device, seed=row + batch)
    ek, ev = _expected(*case)
    ops.store_cache(*case)
    assert torch.equal(case[2].cpu().view(torch.uint8), ek.view(torch.uint8))
    assert torch.equal(case[3].cpu().view(torch.uint8), ev.view(torch.uint8))


@pytest.mark.parametrize("device", DEVICES)
def test_strided_rows_int32_indices_and_keywords(device):
    case = _case(300, 96, 512, torch.bfloat16, device, index_dtype=torch.int32, row_stride=96 * 3, seed=5)
    assert case[0].stride(0) == 288
    ek, ev = _expected(*case)
    (store_cache if device == "cuda" else ops.store_cache)(*case, row_bytes=192, num_split=2)
    assert torch.equal(case[2].cpu(), ek) and torch.equal(case[3].cpu(), ev)


@pytest.mark.parametrize("device", DEVICES)
def test_empty_batch_writes_nothing(device):
    k, v, k_cache, v_cache, _ = _case(1, 8, 4, torch.float32, device)
    before = k_cache.clone()
    ops.store_cache(k[:0], v[:0], k_cache, v_cache, torch.empty(0, dtype=torch.int64, device=device))
    assert torch.equal(k_cache, before)


def test_can_use_store_cache(caplog):
    assert cpu_can_use(4) and cpu_can_use(4096)
    with caplog.at_level(logging.WARNING, logger="mllm_kernel"):
        assert not cpu_can_use(6) and not cpu_can_use(0) and not cpu_can_use(True)
    assert "rows of 6 bytes are not supported" in caplog.text
    assert can_use_store_cache(2) is False  # no build is tried for an unsupported size


@pytest.mark.parametrize("device", DEVICES)
def test_bad_inputs(device):
    k, v, k_cache, v_cache, indices = _case(4, 8, 16, torch.float16, device)

    def fails(message, *args, **kwargs):
        with pytest.raises(ValueError, match=message):
            ops.store_cache(*args, **kwargs)

    fails(r"store_cache: k and v must be \[batch, row\] of one shape, got \(4, 8\) and \(4, 4\)",
          k, v[:, :4], k_cache, v_cache, indices)
    fails(r"store_cache: k_cache and v_cache must be \[slots, 8\], got \(16, 4\) and \(16, 4\)",
          k, v, k_cache[:, :4], v_cache[:, :4], indices)
    fails(r"store_cache: k, v, k_cache and v_cache must have one dtype, got torch.float16, torch.float16, "
          r"torch.float32 and torch.float16", k, v, k_cache.float(), v_cache, indices)
    fails(r"store_cache: indices must be \[4\] int32 or int64, got \(3,\) torch.int64", k, v, k_cache, v_cache,
          indices[:3])
    fails(r"store_cache: indices must be \[4\] int32 or int64, got \(4,\) torch.float32", k, v, k_cache, v_cache,
          indices.float())
    fails(r"store_cache: row_bytes must be 0 or the row size of k \(16 bytes\), got 32", k, v, k_cache, v_cache,
          indices, row_bytes=32)
    fails(r"store_cache: num_split must be an int >= 0, got -1", k, v, k_cache, v_cache, indices, num_split=-1)
    fails(r"store_cache: rows of 6 bytes are not supported \(a positive multiple of 4 is; see can_use_store_cache\)",
          k[:, :3], v[:, :3], k_cache[:, :3].contiguous(), v_cache[:, :3].contiguous(), indices)
    fails(r"store_cache: k: rows must be dense \(stride 1 along the row\), got strides \(1, 4\)",
          k.t().contiguous().t(), v, k_cache, v_cache, indices)
    with pytest.raises(ValueError, match=r"store_cache: k_cache: must be a torch.Tensor, got list"):
        (store_cache if device == "cuda" else cpu_store_cache)(k, v, [1], v_cache, indices)
    before = (k_cache.clone(), v_cache.clone())
    for bad in (16, -1):
        wrong = indices.clone()
        wrong[2] = bad
        fails(rf"store_cache: indices\[2\] = {bad} is out of range for a cache of 16 slots",
              k, v, k_cache, v_cache, wrong)
    assert torch.equal(k_cache, before[0]) and torch.equal(v_cache, before[1])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_devices_must_match():
    k, v, k_cache, v_cache, indices = _case(4, 8, 16, torch.float16, "cuda")
    with pytest.raises(ValueError, match=r"store_cache: all tensors must be on one device, got k on cuda:0, v on "
                                         r"cuda:0, k_cache on cuda:0, v_cache on cuda:0, indices on cpu"):
        store_cache(k, v, k_cache, v_cache, indices.cpu())


def test_under_torch_compile_with_keywords():
    """The custom op takes the keyword-only arguments through a compiled graph."""
    k, v, k_cache, v_cache, indices = _case(5, 16, 9, torch.float32, "cpu", seed=11)
    ek, ev = _expected(k, v, k_cache, v_cache, indices)

    @torch.compile(fullgraph=True, backend="eager")
    def step(k, v, k_cache, v_cache, indices):
        ops.store_cache(k * 1, v, k_cache, v_cache, indices, row_bytes=64, num_split=1)

    step(k, v, k_cache, v_cache, indices)
    assert torch.equal(k_cache, ek) and torch.equal(v_cache, ev)
