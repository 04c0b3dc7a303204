"""Gated DeltaNet (gdn_decode, gdn_extend_chunkwise) on CPU and CUDA against the float64
reference of the formulas (mllm_kernel.reference.gdn): GQA and equal heads, head dims 64 and
128, batches 1..300, pool slots in random order with the untouched ones checked bit for bit,
padding entries, sequences of 1, chunk-1, chunk, chunk+1 and 1000+ tokens, states carried
across calls, CUDA graphs and torch.compile, and every bad input with its message."""

from __future__ import annotations

import pytest
import torch

from mllm_kernel import ops
from mllm_kernel.cuda.jit.gdn_decode import gdn_decode  # the upstream import paths
from mllm_kernel.cuda.jit.gdn_extend_chunkwise import gdn_extend_chunkwise, precompile
from mllm_kernel.reference import gdn as reference

requires_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
DEVICES = ["cpu", pytest.param("cuda", marks=requires_cuda)]
OUT_TOL = {torch.float32: 1e-4, torch.float16: 4e-3, torch.bfloat16: 2e-2}


def _inputs(tokens, seqs, pool_size, hk, hv, dk, dv, device, dtype=torch.bfloat16, seed=0):
    g = torch.Generator().manual_seed(seed)

    def r(*shape, scale=1.0):
        return (torch.randn(*shape, generator=g) * scale).to(dtype).to(device)

    q, k, v = r(tokens, hk, dk), r(tokens, hk, dk), r(tokens, hv, dv)
    a, b = r(tokens, hv), r(tokens, hv, scale=2.0)
    A_log = (torch.rand(hv, generator=g) * 2 - 1).to(device)
    dt_bias = torch.randn(hv, generator=g).to(device)
    pool = torch.randn(pool_size, hv, dv, dk, generator=g).mul(0.3).to(device)
    indices = torch.randperm(pool_size, generator=g)[:seqs].to(device)
    return q, k, v, a, b, A_log, dt_bias, pool, indices


def _check(out, expected, pool, expected_pool, dtype, state_tol=2e-4):
    assert out.dtype == dtype and not torch.isnan(out).any()
    torch.testing.assert_close(out.double().cpu(), expected.double().cpu(), rtol=OUT_TOL[dtype], atol=OUT_TOL[dtype])
    torch.testing.assert_close(pool.double().cpu(), expected_pool.cpu(), rtol=state_tol, atol=state_tol)


def _poison_next_allocation(like):
    """Fills a freed block of like's size with NaN, so that the op's output, allocated next with
    torch.empty (which reuses the caching allocator's freed block of that size on CUDA), shows
    any element the kernel leaves unwritten."""
    torch.full_like(like, float("nan"))


def _untouched(pool, before, indices):
    """The slots no index names are bit for bit what they were."""
    keep = torch.ones(pool.shape[0], dtype=torch.bool)
    keep[indices[indices >= 0].cpu()] = False
    assert torch.equal(pool.cpu()[keep], before.cpu()[keep])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("bs,hk,hv,dk,dv", [(1, 1, 1, 128, 128), (7, 2, 4, 128, 96), (33, 3, 3, 64, 64),
                                             (300, 1, 2, 64, 16), (5, 16, 32, 128, 128)])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_decode_matches_reference(device, bs, hk, hv, dk, dv, dtype):
    q, k, v, a, b, A_log, dt_bias, pool, indices = _inputs(bs, bs, bs + 5, hk, hv, dk, dv, device, dtype, seed=bs)
    before, expected_pool = pool.clone(), pool.double().cpu()
    expected = reference(*(t.cpu() for t in (q, k, v, a, b, A_log, dt_bias)), expected_pool, indices.cpu())
    out = ops.gdn_decode(q, k, v, a, b, A_log, dt_bias, pool, indices)
    _check(out, expected, pool, expected_pool, dtype)
    _untouched(pool, before, indices)


def test_cpu_decode_float32():
    q, k, v, a, b, A_log, dt_bias, pool, indices = _inputs(4, 4, 6, 2, 4, 64, 32, "cpu", torch.float32, seed=3)
    expected_pool = pool.double()
    expected = reference(q, k, v, a, b, A_log, dt_bias, expected_pool, indices)
    _check(ops.gdn_decode(q, k, v, a, b, A_log, dt_bias, pool, indices), expected, pool, expected_pool,
           torch.float32)


@pytest.mark.parametrize("device", DEVICES)
def test_padding_entries_start_from_zero_and_write_nothing(device):
    q, k, v, a, b, A_log, dt_bias, pool, indices = _inputs(3, 3, 4, 2, 2, 64, 32, device, seed=5)
    indices = torch.tensor([2, -1, 0], device=device)
    before, expected_pool = pool.clone(), pool.double().cpu()
    expected = reference(*(t.cpu() for t in (q, k, v, a, b, A_log, dt_bias)), expected_pool, indices.cpu())
    out = ops.gdn_decode(q, k, v, a, b, A_log, dt_bias, pool, indices)
    _check(out, expected, pool, expected_pool, torch.bfloat16)
    _untouched(pool, before, indices)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("lengths,hk,hv,dk,dv", [([1], 1, 1, 128, 64), ([63, 64, 65], 2, 4, 128, 64),
                                                  ([1000], 1, 2, 64, 64), ([5, 0, 130, 1, 64], 2, 2, 64, 64),
                                                  ([130, 3, 200, 0, 127], 2, 4, 128, 96),
                                                  ([64, 129, 70, 300, 65, 64], 1, 1, 128, 128)])
def test_extend_matches_reference(device, lengths, hk, hv, dk, dv):
    """Chunked sequences of every offset from the chunk grid, beside short and empty ones; a
    head_v_dim (96) that is not a multiple of the chunked kernel's taller blocks (64 rows)."""
    tokens, seqs = sum(lengths), len(lengths)
    q, k, v, a, b, A_log, dt_bias, pool, indices = _inputs(tokens, seqs, seqs + 3, hk, hv, dk, dv, device,
                                                           seed=tokens)
    cu = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], device=device)
    before, expected_pool = pool.clone(), pool.double().cpu()
    expected = reference(*(t.cpu() for t in (q, k, v, a, b, A_log, dt_bias)), expected_pool, indices.cpu(),
                         cu.cpu())
    _poison_next_allocation(v)
    out = ops.gdn_extend_chunkwise(q, k, v, a, b, A_log, dt_bias, pool, indices, cu)
    _check(out, expected, pool, expected_pool, torch.bfloat16, state_tol=1e-3)
    _untouched(pool, before, indices)


@pytest.mark.parametrize("device", DEVICES)
def test_extend_of_strided_unaligned_rows(device):
    """q, k and v as views one element into wider rows (as slices of a fused projection can be):
    rows that are not 16-byte aligned take the kernels' element-wise loads."""
    lengths, hk, hv, dk, dv = [130, 64, 3], 2, 2, 64, 64
    tokens, seqs = sum(lengths), len(lengths)
    q, k, v, a, b, A_log, dt_bias, pool, indices = _inputs(tokens, seqs, seqs + 1, hk, hv, dk, dv, device, seed=4)
    wide = [torch.zeros(tokens, x.shape[1], x.shape[2] + 3, dtype=x.dtype, device=device) for x in (q, k, v)]
    for w, x in zip(wide, (q, k, v)):
        w[..., 1:x.shape[2] + 1] = x
    q, k, v = (w[..., 1:x.shape[2] + 1] for w, x in zip(wide, (q, k, v)))
    cu = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], device=device)
    expected_pool = pool.double().cpu()
    expected = reference(*(t.cpu() for t in (q, k, v, a, b, A_log, dt_bias)), expected_pool, indices.cpu(),
                         cu.cpu())
    out = ops.gdn_extend_chunkwise(q, k, v, a, b, A_log, dt_bias, pool, indices, cu)
    _check(out, expected, pool, expected_pool, torch.bfloat16, state_tol=1e-3)


@pytest.mark.parametrize("device", DEVICES)
def test_states_carried_across_calls_equal_one_long_call(device):
    """Prefill in three extend calls, then two decode steps, equals one extend of all tokens: both
    match the reference of the 200 tokens. (The pieces and the whole take different kernels on
    CUDA, chunked and recurrent, so they agree to the kernels' accuracy, not bit for bit.)"""
    q, k, v, a, b, A_log, dt_bias, pool, _ = _inputs(200, 1, 3, 2, 4, 128, 128, device, seed=9)
    index = torch.tensor([1], device=device)
    whole_pool, expected_pool = pool.clone(), pool.double().cpu()
    expected = reference(*(t.cpu() for t in (q, k, v, a, b, A_log, dt_bias)), expected_pool, index.cpu(),
                         torch.tensor([0, 200]))
    whole = ops.gdn_extend_chunkwise(q, k, v, a, b, A_log, dt_bias, whole_pool, index,
                                     torch.tensor([0, 200], device=device))
    pieces = []
    for lo, hi in ((0, 70), (70, 71), (71, 198)):
        part = [t[lo:hi] for t in (q, k, v, a, b)]
        pieces.append(ops.gdn_extend_chunkwise(*part, A_log, dt_bias, pool, index,
                                               torch.tensor([0, hi - lo], device=device)))
    for t in (198, 199):
        pieces.append(ops.gdn_decode(*(x[t:t + 1] for x in (q, k, v, a, b)), A_log, dt_bias, pool, index))
    _check(whole, expected, whole_pool, expected_pool, torch.bfloat16, state_tol=1e-3)
    _check(torch.cat(pieces), expected, pool, expected_pool, torch.bfloat16, state_tol=1e-3)


@requires_cuda
def test_decode_steps_back_to_back_with_pdl_match_plain_launches():
    """Decode steps launched back to back on one pool, each reading the states the step before it
    is still writing when it starts (PDL: it asks L2 for them before its wait), give the outputs
    and states of plain launches bit for bit."""
    steps = 6
    q, k, v, a, b, A_log, dt_bias, pool, indices = _inputs(steps * 5, 5, 9, 2, 4, 128, 128, "cuda", seed=13)
    results = {}
    for pdl in (False, None):
        states, outs = pool.clone(), []
        for t in range(steps):
            rows = slice(5 * t, 5 * t + 5)
            outs.append(gdn_decode(q[rows], k[rows], v[rows], a[rows], b[rows], A_log, dt_bias, states, indices,
                                   enable_pdl=pdl))
        torch.cuda.synchronize()
        results[pdl] = torch.cat(outs), states
    assert torch.equal(results[None][0], results[False][0]) and torch.equal(results[None][1], results[False][1])
    expected_pool = pool.double().cpu()
    expected = [reference(*(t[5 * i:5 * i + 5].cpu() for t in (q, k, v, a, b)), A_log.cpu(), dt_bias.cpu(),
                          expected_pool, indices.cpu()) for i in range(steps)]
    _check(results[None][0], torch.cat(expected), results[None][1], expected_pool, torch.bfloat16)


@requires_cuda
def test_decode_under_cuda_graph_and_torch_compile():
    q, k, v, a, b, A_log, dt_bias, pool, indices = _inputs(8, 8, 10, 2, 4, 128, 128, "cuda", seed=11)
    expected_pool = pool.double().cpu()
    first = reference(*(t.cpu() for t in (q, k, v, a, b, A_log, dt_bias)), expected_pool, indices.cpu())
    second = reference(*(t.cpu() for t in (q, k, v, a, b, A_log, dt_bias)), expected_pool, indices.cpu())
    start = pool.clone()
    gdn_decode(q, k, v, a, b, A_log, dt_bias, pool, indices)  # warm up (loads the module)
    pool.copy_(start)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = gdn_decode(q, k, v, a, b, A_log, dt_bias, pool, indices)
    graph.replay()
    torch.testing.assert_close(out.double().cpu(), first.double(), rtol=2e-2, atol=2e-2)
    graph.replay()  # the second step reads the state the first wrote
    torch.testing.assert_close(out.double().cpu(), second.double(), rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(pool.double().cpu(), expected_pool, rtol=2e-4, atol=2e-4)

    pool.copy_(start)

    @torch.compile(fullgraph=True)
    def step(q, k, v, a, b, pool):
        return ops.gdn_decode(q * 1, k, v, a, b, A_log, dt_bias, pool, indices)

    torch.testing.assert_close(step(q, k, v, a, b, pool).double().cpu(), first.double(), rtol=2e-2, atol=2e-2)


@requires_cuda
def test_precompile_returns_true():
    assert precompile() is True
    assert callable(gdn_extend_chunkwise)


@pytest.mark.parametrize("device", DEVICES)
def test_bad_inputs(device):
    q, k, v, a, b, A_log, dt_bias, pool, indices = _inputs(6, 2, 4, 2, 4, 64, 32, device, seed=1)
    cu = torch.tensor([0, 2, 6], device=device)

    def fails(message, *args, op=ops.gdn_extend_chunkwise):
        with pytest.raises(ValueError, match=message):
            op(*args)

    fails(r"gdn_extend_chunkwise: num_v_heads \(3\) must be a multiple of num_k_heads \(2\)",
          q, k, v[:, :3], a[:, :3], b[:, :3], A_log[:3], dt_bias[:3], pool[:, :3].contiguous(), indices, cu)
    odd = _inputs(6, 2, 4, 2, 4, 96, 32, device)
    fails(r"gdn_extend_chunkwise: head_k_dim must be 64 or 128, got 96", *odd[:-1], indices, cu)
    fails(r"gdn_extend_chunkwise: cu_seqlens must not decrease, got cu_seqlens\[2\] = 1 after 2",
          q, k, v, a, b, A_log, dt_bias, pool, indices, torch.tensor([0, 2, 1], device=device))
    fails(r"gdn_extend_chunkwise: cu_seqlens must end at the number of tokens \(6\), got 5",
          q, k, v, a, b, A_log, dt_bias, pool, indices, torch.tensor([0, 2, 5], device=device))
    fails(r"gdn_extend_chunkwise: cu_seqlens must start at 0, got 1",
          q, k, v, a, b, A_log, dt_bias, pool, indices, torch.tensor([1, 2, 6], device=device))
    fails(r"gdn_extend_chunkwise: cu_seqlens must have num_seqs \+ 1 = 3 entries \(one more than cache_indices\), "
          r"got 4", q, k, v, a, b, A_log, dt_bias, pool, indices, torch.tensor([0, 2, 4, 6], device=device))
    fails(r"gdn_extend_chunkwise: cache_indices\[1\] = 4 is out of range for a state pool of 4 slots",
          q, k, v, a, b, A_log, dt_bias, pool, torch.tensor([0, 4], device=device), cu)
    fails(r"gdn_extend_chunkwise: k: dtype must be bfloat16 as bound by q, got float16",
          q, k.half(), v, a, b, A_log, dt_bias, pool, indices, cu)
    fails(r"gdn_extend_chunkwise: A_log: dtype must be float32, got bfloat16",
          q, k, v, a, b, A_log.bfloat16(), dt_bias, pool, indices, cu)
    fails(r"gdn_extend_chunkwise: state_pool: dim 3 \(head_k_dim\) must be 64 as bound by q, got 32",
          q, k, v, a, b, A_log, dt_bias, pool[..., :32].contiguous(), indices, cu)
    fails(r"gdn_decode: cache_indices: dim 0 \(tokens\) must be 6 as bound by q, got 2",
          q, k, v, a, b, A_log, dt_bias, pool, indices, op=ops.gdn_decode)
    before = pool.clone()
    fails(r"gdn_decode: cache_indices\[3\] = 9 is out of range for a state pool of 4 slots",
          q, k, v, a, b, A_log, dt_bias, pool, torch.tensor([0, 1, 2, 9, -1, 3], device=device), op=ops.gdn_decode)
    assert torch.equal(pool, before)


def test_index_check_reports_the_longest_sequence():
    """The validation's one transfer also brings back the longest sequence, from which the CUDA
    wrapper decides whether the chunked kernels (and their workspace) are needed."""
    from mllm_kernel.op_args import check_gdn_indices

    pool, indices = torch.zeros(4, 1, 8, 64), torch.tensor([0, 3, 1])
    assert check_gdn_indices("op", pool, indices, torch.tensor([0, 7, 70, 71]), 71) == 63
    assert check_gdn_indices("op", pool, indices, torch.tensor([0, 0, 0, 0]), 0) == 0
    assert check_gdn_indices("op", pool, indices) is None  # decode: no sequences to measure


@requires_cuda
@pytest.mark.parametrize("validate", [True, False])
def test_extend_of_short_sequences_only(validate):
    """Sequences all shorter than a chunk, more tokens than a chunk in all: validated, the
    wrapper skips the chunked kernels and their workspace; unvalidated, they run and leave every
    sequence to the recurrent kernel. Both match the reference."""
    lengths = [7] * 12 + [63, 1]
    tokens, seqs = sum(lengths), len(lengths)
    q, k, v, a, b, A_log, dt_bias, pool, indices = _inputs(tokens, seqs, seqs + 2, 2, 4, 128, 64, "cuda", seed=6)
    cu = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], device="cuda")
    before, expected_pool = pool.clone(), pool.double().cpu()
    expected = reference(*(t.cpu() for t in (q, k, v, a, b, A_log, dt_bias)), expected_pool, indices.cpu(),
                         cu.cpu())
    _poison_next_allocation(v)
    out = gdn_extend_chunkwise(q, k, v, a, b, A_log, dt_bias, pool, indices, cu, validate=validate)
    _check(out, expected, pool, expected_pool, torch.bfloat16)
    _untouched(pool, before, indices)


@requires_cuda
def test_unvalidated_decreasing_cu_seqlens_stays_in_its_slots():
    """Without validation, a cu_seqlens that steps back skips that sequence: the call runs, and
    the pool slots no index names are untouched bit for bit (the chunked kernels' workspace
    slots of overlapping sequences may collide, but stay inside the workspace)."""
    q, k, v, a, b, A_log, dt_bias, pool, indices = _inputs(300, 3, 6, 1, 2, 64, 64, "cuda", seed=8)
    before = pool.clone()
    cu = torch.tensor([0, 200, 100, 300], device="cuda")
    gdn_extend_chunkwise(q, k, v, a, b, A_log, dt_bias, pool, indices, cu, validate=False)
    torch.cuda.synchronize()
    _untouched(pool, before, indices)
    assert torch.equal(pool[indices[1]], before[indices[1]])  # the skipped sequence's state


@requires_cuda
def test_bad_workspace_of_the_module_function():
    """The wrapper allocates the chunked kernels' workspace; the module function, called
    directly with a wrong one, names it."""
    from mllm_kernel.cuda.jit.gdn_extend_chunkwise import CHUNK_WORK_FLOATS, CHUNKED_MIN_TOKENS, chunk_workspace
    from mllm_kernel.jit_utils import find_module

    q, k, v, a, b, A_log, dt_bias, pool, indices = _inputs(200, 2, 4, 2, 4, 64, 32, "cuda", seed=2)
    cu = torch.tensor([0, 70, 200], device="cuda")
    module = find_module("gdn_extend_chunkwise", ("bf16_t", "64", "64"), "cuda").load()
    out = torch.empty_like(v)
    args = (q, k, v, a, b, A_log, dt_bias, pool, indices, cu, out)
    short = chunk_workspace(200, 2, 4, "cuda")[:4]  # 200 tokens in 2 sequences need 2 + 3 + 1 slots

    def fails(message, workspace):
        with pytest.raises(ValueError, match=message):
            module.gdn_extend_chunkwise(*args, workspace, CHUNKED_MIN_TOKENS, False)

    fails(r"workspace must have at least 6 slots for these tokens and sequences, got 4", short)
    fails(r"workspace: dtype must be float32, got float16", short.half())
    fails(rf"workspace: dim 2 must be {CHUNK_WORK_FLOATS}, got 8", short[..., :8].contiguous())
    fails(r"workspace: dim 1 must be 4, got 3", chunk_workspace(200, 2, 3, "cuda"))
    fails(r"workspace: device must be cuda, got cpu", short.cpu())
    # A module per head_k_dim: the other refuses these inputs.
    with pytest.raises(ValueError, match=r"this gdn_extend module runs head_k_dim 128, got 64"):
        find_module("gdn_extend_chunkwise", ("bf16_t", "128", "64"), "cuda").load().gdn_extend_chunkwise(
            *args, chunk_workspace(200, 2, 4, "cuda"), CHUNKED_MIN_TOKENS, False)
    # With every sequence left to the recurrent kernel, an empty workspace is enough.
    expected_pool = pool.double().cpu()
    expected = reference(*(t.cpu() for t in (q, k, v, a, b, A_log, dt_bias)), expected_pool, indices.cpu(), cu.cpu())
    out.fill_(float("nan"))
    module.gdn_extend_chunkwise(*args, chunk_workspace(0, 0, 4, "cuda"), 1000, False)
    _check(out, expected, pool, expected_pool, torch.bfloat16, state_tol=1e-3)


@requires_cuda
@pytest.mark.parametrize("dk,dv", [(128, 128), (64, 96), (128, 80)])
def test_chunked_state_pass_rows_agree_bit_for_bit(dk, dv):
    """The chunked state pass in blocks of 32 value rows (few sequences) and of 64: the same
    products in the same order, so the same outputs and final states bit for bit, over
    sequences of chunk + 1 and 3 chunks + 7 tokens and a short one (the recurrent kernel's),
    with a last block of each height only partly in head_v_dim (96, 80); and both against the
    float64 reference."""
    from mllm_kernel.cuda.jit.gdn_extend_chunkwise import CHUNKED_MIN_TOKENS, chunk_workspace
    from mllm_kernel.jit_utils import find_module

    q, k, v, a, b, A_log, dt_bias, pool, indices = _inputs(65 + 199 + 9, 3, 4, 2, 4, dk, dv, "cuda", seed=5)
    cu = torch.tensor([0, 65, 264, 273], device="cuda")
    got = {}
    for rows in (32, 64):
        module = find_module("gdn_extend_chunkwise", ("bf16_t", str(dk), str(rows)), "cuda").load()
        out, states = torch.full_like(v, float("nan")), pool.clone()
        module.gdn_extend_chunkwise(q, k, v, a, b, A_log, dt_bias, states, indices, cu, out,
                                    chunk_workspace(v.shape[0], 3, v.shape[1], "cuda"), CHUNKED_MIN_TOKENS, False)
        got[rows] = out, states
    assert torch.equal(got[32][0], got[64][0]) and torch.equal(got[32][1], got[64][1])
    expected_pool = pool.double().cpu()
    expected = reference(*(t.cpu() for t in (q, k, v, a, b, A_log, dt_bias)), expected_pool, indices.cpu(), cu.cpu())
    _check(got[32][0], expected, got[32][1], expected_pool, torch.bfloat16, state_tol=1e-3)


def test_chunk_rows_rule():
    """The wrapper's block height: 32 rows while blocks of 64 would fill half the SMs or less;
    and, where a block may not take the 64-row state pass's shared memory (an A100 or Jetson Orin,
    163 KB, at head_k_dim 128), 32 rows whatever the SM fill; where it may, or where the limit is
    unknown, the fill rule."""
    from mllm_kernel.cuda.jit.gdn_extend_chunkwise import chunk_rows, chunk_smem_bytes

    assert chunk_rows(1, 32, 128, 132) == 32 and chunk_rows(2, 32, 128, 132) == 64
    assert chunk_rows(8, 4, 96, 132) == 32 and chunk_rows(9, 4, 96, 132) == 64
    a100, h100 = 163 * 1024, 227 * 1024
    assert chunk_smem_bytes(128, 32) <= a100 < chunk_smem_bytes(128, 64) <= h100
    assert chunk_rows(16, 32, 128, 108, 128, a100) == 32
    assert chunk_rows(16, 32, 128, 132, 128, h100) == 64 and chunk_rows(16, 32, 128, 132, 128, None) == 64
    assert chunk_rows(16, 32, 128, 108, 64, a100) == 64 and chunk_rows(1, 16, 128, 108, 64, a100) == 32
    assert chunk_rows(1, 32, 128, 132, 128, h100) == 32
