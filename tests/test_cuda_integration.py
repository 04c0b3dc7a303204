"""PyTorch integration on CUDA: torch.compile, CUDA graphs (including a kernel's first build),
side streams and chained PDL launches. Results are checked against PyTorch references."""

from __future__ import annotations

import subprocess
import textwrap

import pytest
import torch

from conftest import PYTHON, grid_sum_module, requires_cuda, subprocess_env
from mllm_kernel import ops
from test_torch_integration import rope_cache

pytestmark = requires_cuda


def _rms_ref(x, w, eps=1e-6):
    x64 = x.double()
    return (x64 * torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + eps) * w.double()).to(x.dtype)


def _silu_mul_ref(x):
    d = x.shape[-1] // 2
    return (torch.nn.functional.silu(x[..., :d].double()) * x[..., d:].double()).to(x.dtype)


def _block(x, residual, w, q, k, q_w, k_w, positions, cos_sin, gate_up, k_cache, v_cache, slots):
    ops.fused_add_rmsnorm(x, residual, w)
    ops.qknorm(q, k, q_w, k_w)
    ops.apply_rope(positions, q, k, cos_sin)
    ops.store_kv_cache(k, q[:, :2], k_cache, v_cache, slots)
    h = ops.silu_and_mul(gate_up)
    hq, hs = ops.per_token_group_quant_fp8(h, 128)
    return ops.rmsnorm(x, w), h, hq.float(), hs


def _block_inputs(T, dtype=torch.bfloat16, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    r = lambda *s: torch.randn(*s, device="cuda", generator=g).to(dtype)  # noqa: E731
    return dict(x=r(T, 1024), residual=r(T, 1024), w=r(1024), q=r(T, 8, 128), k=r(T, 2, 128), q_w=r(128),
                k_w=r(128), positions=torch.randint(0, 4096, (T,), device="cuda", generator=g),
                cos_sin=rope_cache(4096, 128).cuda(), gate_up=r(T, 2 * 2048),
                k_cache=torch.zeros(1024, 2, 128, device="cuda", dtype=dtype),
                v_cache=torch.zeros(1024, 2, 128, device="cuda", dtype=dtype),
                slots=torch.randperm(1024, device="cuda", generator=g)[:T])


def test_compile_fullgraph_on_cuda_matches_eager_and_handles_dynamic_tokens():
    from torch._dynamo.testing import CompileCounterWithBackend

    torch._dynamo.reset()
    counter = CompileCounterWithBackend("inductor")
    compiled = torch.compile(_block, backend=counter, fullgraph=True, dynamic=True)
    first = None
    with torch.inference_mode():
        for T in (3, 9, 300):  # not 2: duck sizing would tie T to the 2 k heads
            inputs = _block_inputs(T, seed=T)
            eager_in = {k: v.clone() for k, v in inputs.items()}
            comp_in = {k: v.clone() for k, v in inputs.items()}
            for a, b in zip(_block(**eager_in), compiled(**comp_in)):
                torch.testing.assert_close(a, b, rtol=0, atol=0)
            for key in ("x", "residual", "q", "k", "k_cache", "v_cache"):
                torch.testing.assert_close(eager_in[key], comp_in[key], rtol=0, atol=0)
            first = first or counter.frame_count
    assert counter.frame_count == first


def test_cuda_graph_capture_and_replay_with_new_inputs():
    T = 16
    inputs = _block_inputs(T)
    static = {k: v.clone() for k, v in inputs.items()}
    # Warm up (builds the modules) on a side stream, as PyTorch recommends before capture.
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        _block(**{k: v.clone() for k, v in static.items()})
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y, h, hq, hs = _block(**static)
    for seed in (1, 2):
        fresh = _block_inputs(T, seed=seed)
        for key, value in fresh.items():
            static[key].copy_(value)
        graph.replay()
        torch.cuda.synchronize()
        ref = {k: v.clone() for k, v in fresh.items()}
        for got, want in zip((y, h, hq, hs), _block(**ref)):
            torch.testing.assert_close(got, want, rtol=0, atol=0)
        for key in ("q", "k", "k_cache", "v_cache", "x", "residual"):
            torch.testing.assert_close(static[key], ref[key], rtol=0, atol=0)
        torch.testing.assert_close(h, _silu_mul_ref(fresh["gate_up"]), rtol=2e-2, atol=2e-2)


def test_first_build_of_a_kernel_inside_cuda_graph_capture(tmp_path):
    """A kernel never built in this process (empty cache) is compiled and loaded during capture."""
    code = textwrap.dedent("""
        import torch
        from mllm_kernel import ops
        x = torch.randn(8, 2048, device="cuda", dtype=torch.float16)
        w = torch.randn(2048, device="cuda", dtype=torch.float16)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            y = ops.rmsnorm(x, w)
        x.copy_(torch.randn_like(x))
        g.replay()
        torch.cuda.synchronize()
        ref = (x.double() * torch.rsqrt(x.double().pow(2).mean(-1, keepdim=True) + 1e-6) * w.double()).half()
        torch.testing.assert_close(y, ref, rtol=2e-3, atol=2e-3)
        print("OK")
    """)
    out = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, timeout=600,
                         env=subprocess_env(MLLM_KERNEL_CACHE_DIR=str(tmp_path / "cache")))
    assert out.returncode == 0 and "OK" in out.stdout, out.stdout + out.stderr


def test_ops_on_a_side_stream_while_the_default_stream_is_busy():
    x = torch.randn(64, 4096, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
    gate_up = torch.randn(64, 2 * 4096, device="cuda", dtype=torch.bfloat16)
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    torch.cuda._sleep(100_000_000)  # the default stream is busy for a while
    with torch.cuda.stream(side):
        y = ops.rmsnorm(x, w)
        h = ops.silu_and_mul(gate_up)
        done = torch.cuda.Event()
        done.record(side)
    done.synchronize()
    torch.testing.assert_close(y, _rms_ref(x, w), rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(h, _silu_mul_ref(gate_up), rtol=2e-2, atol=2e-2)
    torch.cuda.synchronize()


def test_chained_pdl_launches_are_correct():
    from mllm_kernel.cuda.jit import fused_add_rmsnorm, rmsnorm, silu_and_mul

    x = torch.randn(512, 4096, device="cuda", dtype=torch.bfloat16)
    r = torch.randn_like(x)
    w = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
    x_ref, r_ref = x.clone(), r.clone()
    for _ in range(20):  # each kernel depends on the previous one's output
        fused_add_rmsnorm(x, r, w, enable_pdl=True)
        y = rmsnorm(x, w, enable_pdl=True)
        h = silu_and_mul(torch.cat([y, x], dim=-1), enable_pdl=True)
        x.copy_(h)
        fused_add_rmsnorm(x_ref, r_ref, w)
        y_ref = rmsnorm(x_ref, w)
        x_ref.copy_(silu_and_mul(torch.cat([y_ref, x_ref], dim=-1)))
    torch.cuda.synchronize()
    torch.testing.assert_close(x, x_ref, rtol=0, atol=0)
    torch.testing.assert_close(r, r_ref, rtol=0, atol=0)


def _pdl_chain(inputs, enable_pdl):
    """Every CUDA op once, each reading what the one before it wrote (no PyTorch kernel between
    them), so a PDL launch that touched memory before its wait would read stale data."""
    from mllm_kernel.cuda.jit import (
        apply_rope,
        fused_add_rmsnorm,
        per_tensor_quant_fp8,
        per_token_group_quant_fp8,
        per_token_group_quant_int8,
        per_token_quant_fp8,
        qknorm,
        rmsnorm,
        silu_and_mul,
        store_kv_cache,
    )

    i = inputs
    tokens = i["gate_up"].shape[0]
    h = silu_and_mul(i["gate_up"], enable_pdl=enable_pdl)  # [T, 2048]
    fused_add_rmsnorm(h, i["residual"], i["w"], enable_pdl=enable_pdl)
    y = rmsnorm(h, i["w"], enable_pdl=enable_pdl)
    heads = y.view(tokens, 16, 128)  # q: heads 0-11, k: 12-13, v: 14-15
    qknorm(heads[:, :12], heads[:, 12:14], i["q_w"], i["k_w"], enable_pdl=enable_pdl)
    apply_rope(i["positions"], heads[:, :12], heads[:, 12:14], i["cos_sin"], enable_pdl=enable_pdl)
    store_kv_cache(heads[:, 12:14], heads[:, 14:], i["k_cache"], i["v_cache"], i["slots"], validate=False,
                   enable_pdl=enable_pdl)
    group = per_token_group_quant_fp8(y, 128, enable_pdl=enable_pdl)
    group8 = per_token_group_quant_int8(y, 64, enable_pdl=enable_pdl)
    token = per_token_quant_fp8(y, enable_pdl=enable_pdl)
    dynamic = per_tensor_quant_fp8(y, enable_pdl=enable_pdl)
    static, _ = per_tensor_quant_fp8(y, dynamic[1], enable_pdl=enable_pdl)  # the scale just written
    tensors = [h, i["residual"], y, i["k_cache"], i["v_cache"], *group, *group8, *token, *dynamic, static]
    return [t.view(torch.uint8) if t.dtype == torch.float8_e4m3fn else t for t in tensors]


def _pdl_chain_inputs(tokens):
    g = torch.Generator(device="cuda").manual_seed(tokens)
    r = lambda *s: torch.randn(*s, device="cuda", generator=g).to(torch.bfloat16)  # noqa: E731
    return dict(gate_up=r(tokens, 4096), residual=r(tokens, 2048), w=r(2048), q_w=r(128), k_w=r(128),
                positions=torch.randint(0, 4096, (tokens,), device="cuda", generator=g),
                cos_sin=rope_cache(4096, 128).cuda(),
                k_cache=torch.zeros(tokens + 5, 2, 128, device="cuda", dtype=torch.bfloat16),
                v_cache=torch.zeros(tokens + 5, 2, 128, device="cuda", dtype=torch.bfloat16),
                slots=torch.randperm(tokens + 5, device="cuda", generator=g)[:tokens])


def _fresh(inputs):
    return {k: v.clone() for k, v in inputs.items()}


@pytest.mark.parametrize("tokens", [1, 37, 3000])
def test_default_pdl_chain_of_every_op_matches_plain_launches(tokens):
    inputs = _pdl_chain_inputs(tokens)
    plain = _pdl_chain(_fresh(inputs), enable_pdl=False)
    torch.cuda.synchronize()
    for _ in range(3):  # launches back to back, each waiting on the previous kernel
        chained = _pdl_chain(_fresh(inputs), enable_pdl=None)
        torch.cuda.synchronize()
        for got, want in zip(chained, plain):
            assert torch.equal(got, want)
    # Right, not merely equal (the ops' own tests check every output): the residual after the add.
    residual_ref = _silu_mul_ref(inputs["gate_up"]).double() + inputs["residual"].double()
    torch.testing.assert_close(chained[1], residual_ref.to(torch.bfloat16), rtol=2e-2, atol=2e-2)


def test_default_pdl_chain_replays_in_a_cuda_graph():
    inputs = _pdl_chain_inputs(64)
    plain = _pdl_chain(_fresh(inputs), enable_pdl=False)
    captured_inputs = _fresh(inputs)
    _pdl_chain(_fresh(inputs), enable_pdl=None)  # build every module outside the capture
    torch.cuda.synchronize()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.stream(stream), torch.cuda.graph(graph, stream=stream):
        outputs = _pdl_chain(captured_inputs, enable_pdl=None)
    torch.cuda.current_stream().wait_stream(stream)
    # Capture ran nothing: reset the in-place inputs to their first values, then replay.
    for name in ("residual", "k_cache", "v_cache"):
        captured_inputs[name].copy_(inputs[name])
    graph.replay()
    torch.cuda.synchronize()
    for got, want in zip(outputs, plain):
        assert torch.equal(got, want)


def test_cooperative_launch_runs_every_block_at_once():
    """A grid barrier across every block the device holds: block 0 reads all blocks' partial sums
    after it (partials are NaN until written, so a missed barrier shows)."""
    x = torch.randn(1 << 22, device="cuda")
    partials = torch.full((8192,), float("nan"), device="cuda")
    total = torch.full((1,), float("nan"), device="cuda")
    blocks = grid_sum_module().grid_sum(x, partials, total, 0)
    torch.cuda.synchronize()
    assert blocks >= torch.cuda.get_device_properties(0).multi_processor_count
    assert not torch.isnan(partials[:blocks]).any()
    torch.testing.assert_close(total.double(), x.double().sum().reshape(1), rtol=1e-4, atol=1e-2)


def test_cooperative_launch_larger_than_the_device_raises():
    x = torch.randn(1024, device="cuda")
    partials = torch.empty(8192, device="cuda")
    total = torch.empty(1, device="cuda")
    with pytest.raises(RuntimeError, match="(?i)cooperative"):
        grid_sum_module().grid_sum(x, partials, total, 1)
    # The refused launch left no error behind for the next launch's check to report.
    y = torch.ones(4, device="cuda").add_(1)
    torch.cuda.synchronize()
    assert torch.equal(y, torch.full((4,), 2.0, device="cuda"))


def test_inference_mode_and_grad_rules_on_cuda():
    x = torch.randn(4, 1024, device="cuda", requires_grad=True)
    w = torch.randn(1024, device="cuda")
    with torch.inference_mode():
        torch.testing.assert_close(ops.rmsnorm(x, w), _rms_ref(x.detach(), w), rtol=1e-5, atol=1e-5)
    with pytest.raises(RuntimeError, match="rmsnorm: mllm-kernel ops do not support autograd"):
        ops.rmsnorm(x, w)
