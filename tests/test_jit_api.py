"""make_cpp_args, cache_once and the @jit decorator."""

from __future__ import annotations

import struct
import threading
import time

import pytest
import torch

from mllm_kernel.jit_utils import cache_once, jit, make_cpp_args, registered_kernels


@pytest.mark.parametrize(
    "value, text",
    [
        (16, "16"), (-3, "-3"), (0, "0"), (True, "true"), (False, "false"),
        (2**40, "1099511627776LL"), (-(2**63), "(-9223372036854775807LL - 1)"),
        (1.0, "1.0"), (-0.5, "-0.5"), (-0.0, "-0.0"), (3.14159, "3.14159"), (1e-300, "1e-300"),
        (float("inf"), "__builtin_huge_val()"), (float("-inf"), "(-__builtin_huge_val())"),
        (torch.float32, "fp32_t"), (torch.float16, "fp16_t"), (torch.bfloat16, "bf16_t"),
        (torch.float64, "fp64_t"), (torch.int8, "int8_t"), (torch.int16, "int16_t"), (torch.int32, "int32_t"),
        (torch.int64, "int64_t"), (torch.uint8, "uint8_t"), (torch.bool, "bool"),
        (torch.float8_e4m3fn, "fp8_e4m3_t"), (torch.float8_e5m2, "fp8_e5m2_t"),
    ],
)
def test_make_cpp_args_values(value, text):
    assert make_cpp_args(value) == (text,)


def test_make_cpp_args_floats_round_trip():
    gen = torch.Generator().manual_seed(0)
    for x in (torch.randn(1000, dtype=torch.float64, generator=gen) * 1e6).tolist() + [0.1, 1 / 3, 2**-1074]:
        (text,) = make_cpp_args(x)
        assert struct.pack("d", float(text)) == struct.pack("d", x)


def test_make_cpp_args_joins_for_templates():
    args = make_cpp_args(256, True, torch.bfloat16)
    assert str(args) == "256, true, bf16_t"
    assert f"Kernel<{args}>::run" == "Kernel<256, true, bf16_t>::run"
    assert list(args) == ["256", "true", "bf16_t"]


@pytest.mark.parametrize("value", ["16", None, [1], 1 + 2j, object()])
def test_make_cpp_args_rejects_other_types(value):
    with pytest.raises(TypeError, match="cannot turn .* into a C\\+\\+ template argument"):
        make_cpp_args(value)


def test_make_cpp_args_rejects_unsupported_dtype_and_huge_ints():
    with pytest.raises(TypeError, match="complex64"):
        make_cpp_args(torch.complex64)
    with pytest.raises(ValueError, match="does not fit in int64"):
        make_cpp_args(2**63)


def test_cache_once_memoises_per_argument_tuple():
    calls = []

    @cache_once
    def factory(a, b=0):
        calls.append((a, b))
        return object()

    assert factory(1) is factory(1)
    assert factory(1, b=2) is factory(1, b=2)
    assert factory(1) is not factory(2)
    assert calls == [(1, 0), (1, 2), (2, 0)]
    factory.cache_clear()
    factory(1)
    assert calls[-1] == (1, 0) and len(calls) == 4


def test_cache_once_is_thread_safe():
    calls = []

    @cache_once
    def slow(key):
        calls.append(key)
        time.sleep(0.2)
        return [key]

    results = []
    threads = [threading.Thread(target=lambda: results.append(slow("k"))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert calls == ["k"]
    assert all(r is results[0] for r in results)


def test_cache_once_does_not_cache_failures_and_rejects_unhashable():
    attempts = []

    @cache_once
    def flaky(x):
        attempts.append(x)
        if len(attempts) == 1:
            raise RuntimeError("first call fails")
        return x

    with pytest.raises(RuntimeError):
        flaky(1)
    assert flaky(1) == 1 and len(attempts) == 2
    with pytest.raises(TypeError, match="hashable"):
        flaky([1, 2])


def test_jit_decorator_records_and_compiles(isolated_cache):
    @jit(args=[4], device="cpu", cpp_files=["add_constant.cpp"],
         cpp_wrappers=[("add_constant", "mllm_kernel::cpu::add_constant<4>")], func_name="jit_api_probe")
    def probe(compiled_module, dst, src):
        compiled_module.add_constant(dst, src)
        return "called"

    assert any(k.name == "jit_api_probe" and k.args == ("4",) for k in registered_kernels())
    src = torch.randn(33)
    dst = torch.full_like(src, float("nan"))
    assert probe(dst, src) == "called"
    torch.testing.assert_close(dst, src + 4, rtol=0, atol=0)
    assert probe.module("cpu") is probe.module("cpu")
    assert [k for k in registered_kernels() if k.name == "jit_api_probe"][0].cache_folders("cpu")


def test_jit_auto_device_rules():
    @jit(device="auto", cpp_files=["add_constant.cpp"], cpp_wrappers=[("f", "mllm_kernel::cpu::add_constant<1>")],
         func_name="jit_auto_probe")
    def probe(compiled_module, *tensors):
        return compiled_module

    with pytest.raises(ValueError, match="tensors must be on one device, got cpu, meta"):
        probe(torch.empty(1), torch.empty(1, device="meta"))
    with pytest.raises(ValueError, match="needs at least one tensor"):
        probe(1, 2)
    with pytest.raises(ValueError, match="no cuda sources"):
        probe.module("cuda")
    assert probe.devices == ("cpu",)


def test_jit_rejects_bad_device():
    with pytest.raises(ValueError, match="device must be one of"):
        jit(device="gpu", cpp_files=["add_constant.cpp"], cpp_wrappers=[])(lambda m: None)
    with pytest.raises(ValueError, match="no sources for device 'cuda'"):
        jit(device="cuda", cpp_files=["add_constant.cpp"], cpp_wrappers=[])(lambda m: None)


def test_meant_for_archs_leaves_other_gpus_out_of_precompile_and_prebuild(monkeypatch):
    """A module meant for some architectures is built for those (and, called, for any GPU), but
    precompile and prebuild skip it for a list that has none of them; a pinned one likewise."""
    from mllm_kernel.jit_utils import jit_module, registry
    from mllm_kernel.jit_utils.paths import CUDA_CSRC_DIR

    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))  # these declarations stay here
    source = [str(CUDA_CSRC_DIR / "add_constant.cuh")]

    ampere = jit_module("t_meant_for", device="cuda", cuda_files=source, cuda_wrappers=[("f", "f")],
                        meant_for_archs=["8.0", "8.7"])
    hopper = jit_module("t_pinned", device="cuda", cuda_files=source, cuda_wrappers=[("f", "f")],
                        cuda_archs=["9.0a"])
    anywhere = jit_module("t_anywhere", device="cuda", cuda_files=source, cuda_wrappers=[("f", "f")])
    assert ampere.builds_for("cuda", ["8.7"]) and ampere.builds_for("cuda", ["8.0", "9.0"])
    assert not ampere.builds_for("cuda", ["9.0"]) and not ampere.builds_for("cuda", ["8.9"])
    assert hopper.builds_for("cuda", ["9.0"]) and not hopper.builds_for("cuda", ["8.7"])
    assert anywhere.builds_for("cuda", ["7.5"])
    # Not pinned: a call on a Hopper GPU builds it for that GPU.
    assert ampere.spec("cuda", cuda_archs=["9.0"]).cuda_archs == ("9.0",)
    assert hopper.spec("cuda", cuda_archs=["8.7"]).cuda_archs == ("9.0a",)
