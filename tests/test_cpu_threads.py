"""Threading of the CPU kernels: the thread count's source, and identical results whatever the
thread count (each row is computed by one thread, so results must be bit-identical)."""

import pytest
import torch

import mllm_kernel.cpu.jit as K
from mllm_kernel.cpu.jit import _threads


def test_parse_env():
    assert _threads._parse_env(None) is None
    assert _threads._parse_env("  ") is None
    assert _threads._parse_env("3") == 3
    for bad in ("0", "-2", "two"):
        with pytest.raises(ValueError, match=f"^MLLM_KERNEL_NUM_THREADS must be a positive integer, got '{bad}'$"):
            _threads._parse_env(bad)


def test_num_threads_follows_torch_and_env(monkeypatch):
    monkeypatch.setattr(_threads, "_ENV_THREADS", None)
    assert _threads.num_threads() == torch.get_num_threads()
    monkeypatch.setattr(_threads, "_ENV_THREADS", 5)
    assert _threads.num_threads() == 5


CASES = {
    "rmsnorm": lambda x: K.rmsnorm(x, torch.linspace(0.5, 1.5, x.shape[1], dtype=x.dtype)),
    "silu_and_mul": lambda x: K.silu_and_mul(x),
    "softmax": lambda x: K.softmax(x),
    "fp8": lambda x: K.per_token_group_quant_fp8(x)[0].view(torch.uint8),
    "int8": lambda x: K.per_token_quant_int8(x)[0],
}


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("threads", [1, 3, 8])
def test_same_result_any_thread_count(monkeypatch, name, threads):
    # 1999 rows (prime): uneven slices across threads; more threads than cores is allowed.
    x = torch.randn(1999, 512, generator=torch.Generator().manual_seed(0)).bfloat16()
    monkeypatch.setattr(_threads, "_ENV_THREADS", 1)
    single = CASES[name](x)
    monkeypatch.setattr(_threads, "_ENV_THREADS", threads)
    for _ in range(3):  # reuse of the pool across calls
        assert torch.equal(CASES[name](x), single)
