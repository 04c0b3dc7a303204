"""PyTorch integration on CPU: custom ops, opcheck, torch.compile(fullgraph) with dynamic shapes,
grad modes. (CUDA graphs and streams: tests/test_cuda_integration.py.)"""

from __future__ import annotations

import subprocess
import textwrap

import pytest
import torch
from torch._dynamo.testing import CompileCounterWithBackend

from conftest import PYTHON, subprocess_env
from mllm_kernel import ops

OPS = ["rmsnorm", "fused_add_rmsnorm", "qknorm", "qknorm_across_heads", "silu_and_mul", "gelu_and_mul",
       "apply_rope", "softmax", "per_token_quant_int8", "per_token_group_quant_int8", "per_token_group_quant_fp8",
       "per_token_quant_fp8", "per_tensor_quant_fp8", "store_kv_cache"]


def rope_cache(max_pos: int, rotary_dim: int) -> torch.Tensor:
    inv_freq = 1.0 / (10000 ** (torch.arange(0, rotary_dim, 2, dtype=torch.float64) / rotary_dim))
    freqs = torch.outer(torch.arange(max_pos, dtype=torch.float64), inv_freq)
    return torch.cat([freqs.cos(), freqs.sin()], dim=-1).float()


def test_every_op_is_a_registered_custom_op():
    for name in OPS:
        assert hasattr(torch.ops.mllm_kernel, name), name
        assert name in dir(ops)


def _opcheck_cases():
    g = torch.Generator().manual_seed(0)
    r = lambda *s, dtype=torch.float32: torch.randn(*s, generator=g).to(dtype)  # noqa: E731
    T, H, D = 5, 4, 64
    positions = torch.randint(0, 64, (T,), generator=g)
    return [
        ("rmsnorm", (r(T, 256), r(256), 1e-6)),
        ("fused_add_rmsnorm", (r(T, 256), r(T, 256), r(256), 1e-6)),
        ("qknorm", (r(T, H, D), r(T, 2, D), r(D), r(D), 1e-6)),
        ("qknorm_across_heads", (r(T, H, D), r(T, 2, D), r(H * D), r(2 * D), 1e-6)),
        ("silu_and_mul", (r(T, 2 * 96),)),
        ("gelu_and_mul", (r(T, 2 * 96), "tanh")),
        ("apply_rope", (positions, r(T, H, D), r(T, 2, D), rope_cache(64, D), True)),
        ("softmax", (r(T, 100), -1)),
        ("per_token_quant_int8", (r(T, 256),)),
        ("per_token_group_quant_int8", (r(T, 256), 128, 1e-10)),
        ("per_token_group_quant_fp8", (r(T, 256), 64, 1e-10, True, False)),
        ("store_kv_cache", (r(T, 2, D), r(T, 2, D), r(16, 2, D), r(16, 2, D), torch.tensor([3, -1, 0, 15, 7]))),
        ("store_kv_cache", (r(T, 2, D, dtype=torch.bfloat16), r(T, 2, D, dtype=torch.bfloat16),
                            torch.zeros(16, 2, D, dtype=torch.float8_e4m3fn),
                            torch.zeros(16, 2, D, dtype=torch.float8_e4m3fn), torch.tensor([3, -1, 0, 15, 7]),
                            torch.tensor([0.02]), torch.tensor([0.03]))),
    ]


@pytest.mark.parametrize("name, args", _opcheck_cases(), ids=lambda v: v if isinstance(v, str) else "")
def test_opcheck(name, args):
    """Schema, fake implementation, mutation annotations and dispatch all agree (torch.library.opcheck)."""
    utils = ("test_schema", "test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic")
    if any(isinstance(a, torch.Tensor) and a.dtype == torch.float8_e4m3fn for a in args):
        # opcheck's schema check compares tensors with arithmetic PyTorch has no float8 kernels for
        # ("mul_cpu_reduced_float" not implemented for 'Float8_e4m3fn'); the other checks run.
        utils = tuple(u for u in utils if u != "test_schema")
    torch.library.opcheck(getattr(torch.ops.mllm_kernel, name), args, test_utils=utils)


def test_opcheck_keyword_only_argument():
    """A keyword-only argument (per_token_group_quant_fp8's scale_tma_aligned) reaches the kernel
    and the fake implementation alike: the padded scales' strides agree."""
    x = torch.randn(5, 256, generator=torch.Generator().manual_seed(4))
    torch.library.opcheck(torch.ops.mllm_kernel.per_token_group_quant_fp8, (x, 64, 1e-10, True, False),
                          {"scale_tma_aligned": True},
                          test_utils=("test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic"))
    assert ops.per_token_group_quant_fp8(x, 64, 1e-10, True, False, scale_tma_aligned=True)[1].stride() == (1, 8)


def decoder_block(x, residual, norm_w, q, k, q_w, k_w, positions, cos_sin, gate_up, k_cache, v_cache, slots):
    """A model-like chain: norm, qk-norm, rope, cache store, activation, quantization."""
    ops.fused_add_rmsnorm(x, residual, norm_w)
    ops.qknorm(q, k, q_w, k_w)
    ops.apply_rope(positions, q, k, cos_sin, is_neox=True)
    ops.store_kv_cache(k, k * 2, k_cache, v_cache, slots)
    h = ops.silu_and_mul(gate_up)
    hq, hs = ops.per_token_group_quant_fp8(h, 64)
    y = ops.rmsnorm(x, norm_w) + 1
    return y, hq.float() * hs.repeat_interleave(64, dim=-1), ops.softmax(y)


def _block_inputs(T: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=g)  # noqa: E731
    return dict(x=r(T, 256), residual=r(T, 256), norm_w=r(256), q=r(T, 4, 64), k=r(T, 2, 64), q_w=r(64),
                k_w=r(64), positions=torch.randint(0, 128, (T,), generator=g), cos_sin=rope_cache(128, 64),
                gate_up=r(T, 2 * 128), k_cache=torch.zeros(2048, 2, 64), v_cache=torch.zeros(2048, 2, 64),
                slots=torch.randperm(2048, generator=g)[:T])


def _clone(inputs):
    return {k: v.clone() for k, v in inputs.items()}


def _assert_same(eager_in, eager_out, comp_in, comp_out):
    for a, b in zip(eager_out, comp_out):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    for key in ("x", "residual", "q", "k", "k_cache", "v_cache"):
        torch.testing.assert_close(eager_in[key], comp_in[key], rtol=1e-5, atol=1e-5, msg=key)


def test_compile_fullgraph_matches_eager_without_recompiling_per_token_count():
    torch._dynamo.reset()
    counter = CompileCounterWithBackend("inductor")
    compiled = torch.compile(decoder_block, backend=counter, fullgraph=True, dynamic=True)
    frames_after_first = None
    with torch.inference_mode():
        for T in (3, 7, 16, 1000):
            inputs = _block_inputs(T, seed=T)
            eager_in, comp_in = _clone(inputs), _clone(inputs)
            _assert_same(eager_in, decoder_block(**eager_in), comp_in, compiled(**comp_in))
            frames_after_first = frames_after_first or counter.frame_count
    assert counter.frame_count == frames_after_first, "recompiled for a new token count"
    custom = [n for n in counter.graphs[-1].graph.nodes if "mllm_kernel" in str(n.target)]
    assert len(custom) == 8, [str(n.target) for n in counter.graphs[0].graph.nodes]


def test_first_kernel_compile_inside_a_compiled_region(tmp_path):
    """A kernel never built before (empty cache, new process) compiles while the compiled graph runs."""
    code = textwrap.dedent("""
        import torch
        from mllm_kernel import ops
        f = torch.compile(lambda x, w: ops.rmsnorm(x, w) * 2, fullgraph=True)
        x, w = torch.randn(4, 512), torch.randn(512)
        ref = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w * 2
        torch.testing.assert_close(f(x, w), ref, rtol=1e-5, atol=1e-5)
        print("OK")
    """)
    out = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, timeout=600,
                         env=subprocess_env(MLLM_KERNEL_CACHE_DIR=str(tmp_path / "cache")))
    assert out.returncode == 0 and "OK" in out.stdout, out.stdout + out.stderr
    assert list((tmp_path / "cache").glob("cpu_cpu_rmsnorm_*/manifest.json"))


def test_fp8_kv_store_under_compile_matches_eager():
    """The quantizing cache store (optional scale arguments) traces with no graph break."""

    def store(k, v, k_cache, v_cache, slots, k_scale, v_scale):
        ops.store_kv_cache(k, v, k_cache, v_cache, slots, k_scale, v_scale)
        return k_cache.float().sum()

    g = torch.Generator().manual_seed(0)
    k, v = torch.randn(9, 2, 64, generator=g).bfloat16(), torch.randn(9, 2, 64, generator=g).bfloat16()
    slots = torch.randperm(32, generator=g)[:9]
    scales = torch.tensor([0.01]), torch.tensor([0.02])
    caches = [torch.zeros(32, 2, 64, dtype=torch.float8_e4m3fn) for _ in range(4)]
    store(k, v, caches[0], caches[1], slots, *scales)
    torch.compile(store, fullgraph=True)(k, v, caches[2], caches[3], slots, *scales)
    assert caches[0].float().any()
    for eager, compiled in ((caches[0], caches[2]), (caches[1], caches[3])):
        assert torch.equal(eager.view(torch.uint8), compiled.view(torch.uint8))


def test_grad_modes():
    x, w = torch.randn(2, 64), torch.randn(64)
    with torch.no_grad():
        ops.rmsnorm(x.requires_grad_(), w)
    with torch.inference_mode():
        ops.silu_and_mul(torch.randn(2, 64))
    with pytest.raises(RuntimeError, match=r"rmsnorm: mllm-kernel ops do not support autograd, and an input "
                                           r"requires grad; run under torch.no_grad\(\)"):
        ops.rmsnorm(x, w)
    compiled = torch.compile(lambda a, b: ops.rmsnorm(a, b).sum(), fullgraph=True)
    with pytest.raises(RuntimeError, match=r"rmsnorm: mllm-kernel ops have no backward"):
        compiled(torch.randn(2, 64, requires_grad=True), w).backward()


def test_out_argument_under_compile():
    x, w = torch.randn(3, 128), torch.randn(128)
    out = torch.full_like(x, float("nan"))
    compiled = torch.compile(lambda a, b, o: ops.rmsnorm(a, b, out=o), fullgraph=True)
    result = compiled(x, w, out)
    torch.testing.assert_close(out, ops.rmsnorm(x, w), rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(result, out)
