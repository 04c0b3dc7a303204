"""create_kv_indices on CPU and CUDA against a plain Python reference: random page tables,
poisoned outputs (untouched entries checked), every bad input with its exact message."""

from __future__ import annotations

import pytest
import torch

from mllm_kernel import ops

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"))]
POISON = -7


def _case(batch: int, pool: int, context: int, device: str, *, with_start: bool, seed: int = 0, gap: int = 3,
          strided: bool = False):
    """A random page table and requests in random pool rows; kv_indptr leaves ``gap`` unused
    entries between requests so writes outside a request's run are caught."""
    g = torch.Generator().manual_seed(seed)
    width = context + 5 if strided else context
    table = torch.randint(0, 1 << 30, (pool, width), generator=g, dtype=torch.int32).to(device)[:, :context]
    rows = torch.randperm(pool, generator=g)[:batch].to(torch.int32) if batch <= pool else \
        torch.randint(0, pool, (batch,), generator=g, dtype=torch.int32)
    lens = torch.randint(0, context + 1, (batch,), generator=g, dtype=torch.int32)
    if batch:
        lens[0] = context  # one full row
    start = None
    if with_start:
        start = (torch.rand(batch, generator=g) * (context - lens + 1).float()).floor().to(torch.int32)
    indptr = torch.zeros(batch + 1, dtype=torch.int32)
    indptr[1:] = torch.cumsum(lens + gap, 0).to(torch.int32)
    out = torch.full((int(indptr[-1]) + 4,), POISON, dtype=torch.int32)
    move = lambda t: None if t is None else t.to(device)  # noqa: E731
    return move(table), move(rows), move(lens), move(indptr), move(start), move(out)


def _reference(table, rows, lens, indptr, start, out):
    expected = out.cpu().clone()
    for i in range(rows.numel()):
        s = 0 if start is None or start.numel() == 0 else int(start[i])
        n, at = int(lens[i]), int(indptr[i])
        expected[at:at + n] = table.cpu()[int(rows[i]), s:s + n]
    return expected


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("batch,pool,context", [(1, 1, 1), (1, 4, 4099), (7, 16, 33), (300, 512, 257), (64, 8, 1000)])
@pytest.mark.parametrize("with_start", [False, True])
def test_matches_reference(device, batch, pool, context, with_start):
    case = _case(batch, pool, context, device, with_start=with_start, seed=batch + context)
    expected = _reference(*case)
    ops.create_kv_indices(*case)
    assert torch.equal(case[-1].cpu(), expected)


@pytest.mark.parametrize("device", DEVICES)
def test_strided_table_empty_start_and_zero_batch(device):
    case = list(_case(5, 9, 130, device, with_start=False, strided=True, seed=3))
    assert case[0].stride(0) == 135
    case[4] = torch.empty(0, dtype=torch.int32, device=device)  # empty kv_start_idx: start at 0
    expected = _reference(*case)
    ops.create_kv_indices(*case)
    assert torch.equal(case[-1].cpu(), expected)
    table, _, _, _, _, out = case
    empty = torch.empty(0, dtype=torch.int32, device=device)
    before = out.clone()
    ops.create_kv_indices(table, empty, empty, torch.zeros(1, dtype=torch.int32, device=device), None, out)
    assert torch.equal(out, before)


@pytest.mark.parametrize("device", DEVICES)
def test_every_alignment_of_source_and_destination(device):
    """Starts and offsets 0..4 apart, so the CUDA kernel's vector and scalar paths both run."""
    for s in range(5):
        for a in range(5):
            table = torch.arange(40 * 3, dtype=torch.int32).reshape(3, 40).to(device)
            out = torch.full((64,), POISON, dtype=torch.int32, device=device)
            args = (table, torch.tensor([2], dtype=torch.int32, device=device),
                    torch.tensor([29], dtype=torch.int32, device=device),
                    torch.tensor([a, 64], dtype=torch.int32, device=device),
                    torch.tensor([s], dtype=torch.int32, device=device), out)
            expected = _reference(*args)
            ops.create_kv_indices(*args)
            assert torch.equal(out.cpu(), expected), (s, a)


def _bad(device):
    return _case(4, 6, 20, device, with_start=True, seed=11)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("edit,message", [
    (lambda c: c[1].__setitem__(2, 6), r"req_pool_indices\[2\] = 6 is out of range for req_to_token with 6 rows"),
    (lambda c: c[1].__setitem__(0, -1), r"req_pool_indices\[0\] = -1 is out of range for req_to_token with 6 rows"),
    (lambda c: c[2].__setitem__(1, -2), r"page_kernel_lens\[1\] = -2 is negative"),
    (lambda c: (c[2].__setitem__(3, 20), c[4].__setitem__(3, 1)),
     r"request 3 reads columns \[1, 21\) of req_to_token, which has 20"),
    (lambda c: c[3].__setitem__(1, 10_000), r"request 1 writes kv_indices\[10000, \d+\), which has \d+ entries"),
])
def test_out_of_bounds_requests_raise_and_write_nothing(device, edit, message):
    case = list(_bad(device))
    edit(case)
    before = case[-1].clone()
    with pytest.raises(ValueError, match=rf"^create_kv_indices: {message}( \[at kv_indices\.hpp:\d+\])?$"):
        ops.create_kv_indices(*case)
    assert torch.equal(case[-1], before)


@pytest.mark.parametrize("device", DEVICES)
def test_bad_tensors_raise(device):
    table, rows, lens, indptr, start, out = _bad(device)
    with pytest.raises(ValueError, match=r"^create_kv_indices: req_pool_indices: dtype must be int32, got int64"):
        ops.create_kv_indices(table, rows.long(), lens, indptr, start, out)
    with pytest.raises(ValueError, match=r"^create_kv_indices: page_kernel_lens: dim 0 \(batch\) must be 4 as bound "
                                         r"by req_pool_indices, got 3"):
        ops.create_kv_indices(table, rows, lens[:3], indptr, start, out)
    with pytest.raises(ValueError, match=r"^create_kv_indices: kv_indptr must have at least batch \(4\) entries, got 3"):
        ops.create_kv_indices(table, rows, lens, indptr[:3], start, out)
    with pytest.raises(ValueError, match=r"^create_kv_indices: kv_start_idx must be empty or have batch \(4\) "
                                         r"entries, got 2"):
        ops.create_kv_indices(table, rows, lens, indptr, start[:2], out)
    with pytest.raises(ValueError, match=r"^create_kv_indices: req_to_token: "):
        ops.create_kv_indices(table.t(), rows, lens, indptr, start, out)
    with pytest.raises(ValueError, match=r"^create_kv_indices: kv_indices: dtype must be int32, got float32"):
        ops.create_kv_indices(table, rows, lens, indptr, start, out.float())


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_mixed_devices_and_graph_capture():
    table, rows, lens, indptr, start, out = _case(32, 40, 600, "cuda", with_start=True, seed=5)
    with pytest.raises(ValueError, match=r"^create_kv_indices: .*device"):
        ops.create_kv_indices(table, rows.cpu(), lens, indptr, start, out)
    expected = _reference(table, rows, lens, indptr, start, out)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        ops.create_kv_indices(table, rows, lens, indptr, start, out)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(out.cpu(), expected)


def test_under_torch_compile_matches_eager():
    table, rows, lens, indptr, start, out = _case(9, 12, 70, "cpu", with_start=True, seed=8)
    expected = _reference(table, rows, lens, indptr, start, out)

    @torch.compile(fullgraph=True)
    def step(table, rows, lens, indptr, start, out):
        ops.create_kv_indices(table, rows, lens, indptr, start, out)
        return out + 0

    assert torch.equal(step(table, rows, lens, indptr, start, out), expected)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_unchecked_bad_requests_are_skipped():
    """validate=False: the kernel skips a request that would leave its buffers (compute-sanitizer
    runs this one) and writes the others."""
    from mllm_kernel.cuda.jit import create_kv_indices

    table, rows, lens, indptr, start, out = _case(6, 10, 50, "cuda", with_start=False, seed=21)
    good = _reference(table, rows, lens, indptr, start, out)
    bad = rows.clone()
    bad[1] = 10  # past the pool
    lens_bad = lens.clone()
    lens_bad[4] = 51  # past the context
    expected = out.cpu().clone()
    for i in (0, 2, 3, 5):
        at, n = int(indptr[i]), int(lens[i])
        expected[at:at + n] = good[at:at + n]
    create_kv_indices(table, bad, lens_bad, indptr, None, out, validate=False)
    torch.cuda.synchronize()
    assert torch.equal(out.cpu(), expected)
