"""Deployment without a compiler: ``prebuild --output DIR`` on a build machine, then
``MLLM_KERNEL_PREBUILT_PATH=DIR`` and ``MLLM_KERNEL_DISABLE_JIT=1`` where no compiler exists."""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
from pathlib import Path

import pytest

from conftest import PYTHON, requires_cuda, subprocess_env

KERNELS = Path(__file__).resolve().parent / "user_kernels"


USER_MODULE = f"""
from mllm_kernel.jit_utils import jit_module
COPY = jit_module("my_copy", device="cpu", cpp_files=[{str(KERNELS / 'seed_copy.cpp')!r}],
                  cpp_wrappers=[("copy_int16", "SeedCopy<int16_t>::run")])
"""


@pytest.fixture(scope="module")
def prebuilt_cpu(tmp_path_factory) -> Path:
    """Every CPU module, and a user's module (``--import``), prebuilt into a folder by the CLI
    in a scratch cache of its own. The user's module is importable as ``my_kernels`` from
    the folder's parent."""
    root = tmp_path_factory.mktemp("deploy")
    (root / "my_kernels.py").write_text(USER_MODULE)
    env = subprocess_env(MLLM_KERNEL_CACHE_DIR=str(root / "build-cache"))
    env["PYTHONPATH"] += f"{os.pathsep}{root}"
    out = subprocess.run([PYTHON, "-m", "mllm_kernel", "prebuild", "--import", "my_kernels", "--output",
                          str(root / "prebuilt"), "--device", "cpu", "--jobs", "2"], capture_output=True, text=True,
                         timeout=1800, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "modules ready in" in out.stdout
    assert any(line.startswith("cpu   my_copy[]") for line in out.stdout.splitlines()), out.stdout
    return root / "prebuilt"


def _no_compiler_env(tmp_path: Path, prebuilt: Path, **extra: str) -> dict:
    """A child with nothing on PATH, CXX naming a missing file, an empty cache and JIT off."""
    empty_bin = tmp_path / "empty-bin"
    empty_bin.mkdir(exist_ok=True)
    return subprocess_env(PATH=str(empty_bin), CXX=str(tmp_path / "no-such-compiler"),
                          MLLM_KERNEL_DISABLE_JIT="1", MLLM_KERNEL_PREBUILT_PATH=str(prebuilt),
                          MLLM_KERNEL_CACHE_DIR=str(tmp_path / "empty-cache"), **extra)


EVERY_CPU_OP = textwrap.dedent("""
    import torch
    from mllm_kernel import ops
    from mllm_kernel.cpu.jit import add_constant, add_constant_runtime
    from mllm_kernel.jit_utils import registered_kernels

    g = torch.Generator().manual_seed(0)
    def r(*shape, dtype=torch.float32):
        return torch.randn(*shape, generator=g).to(dtype)
    x, w = r(3, 64), r(64)
    ref = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w
    torch.testing.assert_close(ops.rmsnorm(x, w), ref, rtol=1e-5, atol=1e-5)
    res = r(3, 64); ops.fused_add_rmsnorm(x.clone(), res, w)
    q, k = r(2, 4, 64), r(2, 2, 64)
    ops.qknorm(q, k, r(64), r(64)); ops.qknorm_across_heads(q, k, r(256), r(128))
    gu = r(3, 128)
    torch.testing.assert_close(ops.silu_and_mul(gu), torch.nn.functional.silu(gu[:, :64]) * gu[:, 64:])
    ops.gelu_and_mul(gu); ops.gelu_and_mul(gu, approximate="tanh")
    cos_sin = r(16, 64)
    ops.apply_rope(torch.tensor([1, 5]), q, k, cos_sin)
    torch.testing.assert_close(ops.softmax(x), torch.softmax(x, -1))
    ops.per_token_quant_int8(x); ops.per_token_group_quant_int8(x, 32); ops.per_token_group_quant_fp8(x, 32)
    kc, vc = r(8, 2, 64, dtype=torch.bfloat16), r(8, 2, 64, dtype=torch.bfloat16)
    ops.store_kv_cache(k.bfloat16(), k.bfloat16(), kc, vc, torch.tensor([3, 6]))
    k8, v8 = torch.zeros(8, 2, 64, dtype=torch.float8_e4m3fn), torch.zeros(8, 2, 64, dtype=torch.float8_e4m3fn)
    ops.store_kv_cache(k, k, k8, v8, torch.tensor([3, 6]), torch.tensor([0.5]), torch.tensor([0.5]))
    table = torch.arange(40, dtype=torch.int32).reshape(4, 10)
    kv = torch.full((8,), -1, dtype=torch.int32)
    ops.create_kv_indices(table, torch.tensor([2], dtype=torch.int32), torch.tensor([3], dtype=torch.int32),
                          torch.tensor([1, 4], dtype=torch.int32), None, kv)
    assert kv.tolist() == [-1, 20, 21, 22, -1, -1, -1, -1]
    ops.rms_norm_gated(x, w, r(3, 64))
    ops.store_cache(r(2, 16), r(2, 16), r(4, 16), r(4, 16), torch.tensor([0, 3]))
    gq, gv, gab = r(3, 1, 64, dtype=torch.bfloat16), r(3, 2, 16, dtype=torch.bfloat16), r(3, 2, dtype=torch.bfloat16)
    pool = r(4, 2, 16, 64)
    ops.gdn_decode(gq, gq, gv, gab, gab, r(2), r(2), pool, torch.tensor([0, 3, -1]))
    ops.gdn_extend_chunkwise(gq, gq, gv, gab, gab, r(2), r(2), pool, torch.tensor([1]), torch.tensor([0, 3]))
    a8, w8 = torch.randint(-128, 128, (3, 64), dtype=torch.int8), torch.randint(-128, 128, (16, 64), dtype=torch.int8)
    torch.testing.assert_close(ops.int8_scaled_mm(a8, w8.t(), torch.ones(3), torch.ones(16), torch.float32),
                               (a8.double() @ w8.double().t()).float())
    from mllm_kernel.cpu.jit import awq_marlin_repack, gptq_marlin_gemm, gptq_marlin_repack
    from mllm_kernel.scalar_type import scalar_types
    qw = gptq_marlin_repack(torch.randint(-2**31, 2**31 - 1, (4, 64), dtype=torch.int32), None, 32, 64, 4)
    assert awq_marlin_repack(torch.zeros(32, 8, dtype=torch.int32), 32, 64, 4).shape == qw.shape
    gptq_marlin_gemm(r(2, 32), None, qw, r(1, 64), None, None, None, None, None, scalar_types.uint4b8.id, 2, 64, 32)
    v = r(1000)
    for c in (1, 2, 4, 8, 16):
        torch.testing.assert_close(add_constant(v, c), v + c)
    torch.testing.assert_close(add_constant_runtime(v, 0.25), v + 0.25)
    missing = [k.name for k in registered_kernels() if "cpu" in k.devices and "cpu" not in k.kernel._modules]
    assert not missing, f"CPU modules never loaded: {missing}"
    print("EVERY CPU OP RAN")
""")


def test_every_cpu_op_runs_from_prebuilt_without_a_compiler(prebuilt_cpu, tmp_path):
    out = subprocess.run([PYTHON, "-c", EVERY_CPU_OP], capture_output=True, text=True, timeout=600,
                         env=_no_compiler_env(tmp_path, prebuilt_cpu))
    assert out.returncode == 0 and "EVERY CPU OP RAN" in out.stdout, out.stdout + out.stderr
    cache = tmp_path / "empty-cache"
    assert not cache.exists() or not any(cache.iterdir()), "nothing may be built or cached"


def test_user_kernel_not_prebuilt_raises_jit_disabled(prebuilt_cpu, tmp_path):
    code = textwrap.dedent(f"""
        from mllm_kernel.jit_utils import JitDisabledError, load_cpu_jit
        try:
            load_cpu_jit("seed_copy", cpp_files=[{str(KERNELS / 'seed_copy.cpp')!r}],
                         cpp_wrappers=[("copy_float32", "SeedCopy<fp32_t>::run")])
        except JitDisabledError as error:
            print("RAISED", error)
    """)
    out = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, timeout=600,
                         env=_no_compiler_env(tmp_path, prebuilt_cpu))
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.startswith("RAISED JIT module 'seed_copy', variant [] for cpu, is neither prebuilt nor "
                                 "cached, and MLLM_KERNEL_DISABLE_JIT is set, so it is not compiled. Build it ahead "
                                 "of time with `python -m mllm_kernel prebuild --output DIR --device cpu`"), out.stdout
    assert str(prebuilt_cpu) in out.stdout


def test_prebuilt_folder_is_self_contained(prebuilt_cpu):
    manifests = list(prebuilt_cpu.glob("*/manifest.json"))
    assert len(manifests) >= 20
    for path in manifests:
        manifest = json.loads(path.read_text())
        assert manifest["cpu_target"] == "portable"
        own = [d for d in manifest["dependencies"] if d[0].startswith("mllm_kernel:")]
        assert own, "the package's own headers are recorded relative to the package"
    assert list((prebuilt_cpu / "lib").glob("libhwy.so*")), "Highway travels with the modules"


def test_jit_disabled_uses_the_user_cache_built_earlier(tmp_path, isolated_cache, monkeypatch):
    """A module cached by an earlier JIT run loads with JIT off and no compiler."""
    from mllm_kernel.jit_utils import load_cpu_jit, toolchain

    wrappers = [("copy_int32", "SeedCopy<int32_t>::run")]
    load_cpu_jit("seed_copy", cpp_files=[KERNELS / "seed_copy.cpp"], cpp_wrappers=wrappers)
    monkeypatch.setenv("MLLM_KERNEL_DISABLE_JIT", "1")
    monkeypatch.setenv("CXX", str(tmp_path / "no-such-compiler"))
    toolchain.find_cxx.cache_clear()
    try:
        module = load_cpu_jit("seed_copy", cpp_files=[KERNELS / "seed_copy.cpp"], cpp_wrappers=wrappers)
    finally:
        toolchain.find_cxx.cache_clear()
    assert callable(module.copy_int32)


def test_cuda_prebuilt_is_used_only_where_its_architectures_run(tmp_path, isolated_cache, monkeypatch):
    """A CUDA module built for 8.0 and 9.0 on a machine with nvcc and no GPU serves an 8.6 or
    a 9.0 GPU (SASS of the same major), a 10.0 GPU (9.0's PTX), but not a 7.5 one."""
    from mllm_kernel.jit_utils import JitDisabledError, load_cuda_jit, toolchain
    from mllm_kernel.jit_utils.cache import build_and_publish, find_library
    from mllm_kernel.jit_utils.load import cuda_build_spec

    try:
        toolchain.find_nvcc()
    except Exception:
        pytest.skip("needs nvcc")
    files, wrappers = [KERNELS / "seed_copy.cuh"], [("copy_float32", "SeedCopy<fp32_t>::run")]
    spec = cuda_build_spec("seed_copy", cuda_files=files, cuda_wrappers=wrappers, cuda_archs=("8.0", "9.0"))
    spec = spec.prebuilt_variant()
    build_and_publish(spec, tmp_path / "prebuilt" / spec.prebuilt_folder_name)
    monkeypatch.setenv("MLLM_KERNEL_PREBUILT_PATH", str(tmp_path / "prebuilt"))
    monkeypatch.setenv("MLLM_KERNEL_DISABLE_JIT", "1")

    def load(arch: str):
        monkeypatch.setenv("MLLM_KERNEL_CUDA_ARCH_LIST", arch)
        return find_library(cuda_build_spec("seed_copy", cuda_files=files, cuda_wrappers=wrappers))

    for arch in ("8.0", "8.6", "9.0", "10.0"):
        assert load(arch).parent.parent == tmp_path / "prebuilt", arch
    with pytest.raises(JitDisabledError, match=r"^JIT module 'seed_copy', variant \[\] for cuda, is neither"):
        load("7.5")
    with pytest.raises(JitDisabledError, match="--device cuda"):
        load_cuda_jit("seed_copy", cuda_files=files, cuda_wrappers=[("copy_int8", "SeedCopy<int8_t>::run")])


def test_archs_cover_rules():
    from mllm_kernel.jit_utils.toolchain import archs_cover

    assert archs_cover(("8.0", "9.0"), ("8.7",))
    assert archs_cover(("9.0",), ("12.0",))
    assert not archs_cover(("9.0a",), ("10.0",))
    assert archs_cover(("9.0a",), ("9.0a",))
    assert not archs_cover(("8.6",), ("8.0",))
    assert not archs_cover((), ("9.0",))


def test_clear_cache_by_name_and_all(tmp_path, isolated_cache):
    from mllm_kernel.jit_utils import load_cpu_jit

    load_cpu_jit("seed_copy", cpp_files=[KERNELS / "seed_copy.cpp"], cpp_wrappers=[("copy_int8", "SeedCopy<int8_t>::run")])
    (isolated_cache / "cpu_other_0123456789abcdef" / ".build-1234-dead").mkdir(parents=True)
    env = subprocess_env(MLLM_KERNEL_CACHE_DIR=str(isolated_cache))
    out = subprocess.run([PYTHON, "-m", "mllm_kernel", "clear-cache"], capture_output=True, text=True, env=env)
    assert out.returncode == 2 and "--all" in out.stderr
    out = subprocess.run([PYTHON, "-m", "mllm_kernel", "clear-cache", "seed_copy"], capture_output=True, text=True,
                         env=env)
    assert out.returncode == 0, out.stderr
    assert not list(isolated_cache.glob("cpu_seed_copy_*")), "the named module's builds are gone"
    assert not list(isolated_cache.glob("*/.build-*")), "a dead build's leftovers are gone"
    assert (isolated_cache / "cpu_other_0123456789abcdef").is_dir(), "other modules stay"
    out = subprocess.run([PYTHON, "-m", "mllm_kernel", "clear-cache", "--all"], capture_output=True, text=True, env=env)
    assert out.returncode == 0 and not any(isolated_cache.iterdir())



def test_users_prebuilt_kernel_loads_without_a_compiler(prebuilt_cpu, tmp_path):
    code = textwrap.dedent("""
        import torch, my_kernels
        x = torch.arange(1, 6, dtype=torch.int16); y = torch.full_like(x, -1)
        my_kernels.COPY.load().copy_int16(x, y)
        assert torch.equal(x, y)
        print("OK")
    """)
    env = _no_compiler_env(tmp_path, prebuilt_cpu)
    env["PYTHONPATH"] += f"{os.pathsep}{prebuilt_cpu.parent}"
    out = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, timeout=600, env=env)
    assert out.returncode == 0 and "OK" in out.stdout, out.stdout + out.stderr


EVERY_CUDA_OP = textwrap.dedent("""
    import torch
    from mllm_kernel import ops
    from mllm_kernel.cuda.jit import add_constant
    from mllm_kernel.jit_utils import registered_kernels

    g = torch.Generator(device="cuda").manual_seed(0)
    for dt in (torch.float32, torch.float16, torch.bfloat16):
        def r(*shape, dtype=dt):
            return torch.randn(*shape, generator=g, device="cuda").to(dtype)
        x, w = r(3, 256), r(256)
        ref = (x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()).to(dt)
        torch.testing.assert_close(ops.rmsnorm(x, w), ref, rtol=2e-2, atol=2e-2)
        ops.fused_add_rmsnorm(x.clone(), r(3, 256), w)
        q, k = r(2, 4, 64), r(2, 2, 64)
        ops.qknorm(q, k, r(64), r(64)); ops.qknorm_across_heads(q, k, r(256), r(128))
        gu = r(3, 128)
        ops.silu_and_mul(gu); ops.gelu_and_mul(gu)
        ops.apply_rope(torch.tensor([1, 5], device="cuda"), q, k, r(16, 64, dtype=torch.float32))
        ops.per_tensor_quant_fp8(x); ops.per_token_quant_fp8(x); ops.per_token_quant_int8(x)
        ops.per_token_group_quant_fp8(x, 128); ops.per_token_group_quant_int8(x, 128)
        kc, vc = r(8, 2, 64), r(8, 2, 64)
        ops.store_kv_cache(k, k, kc, vc, torch.tensor([3, 6], device="cuda"))
        ops.rms_norm_gated(x, w, r(3, 256))
    ops.store_cache(gu, gu, r(4, 128), r(4, 128), torch.tensor([0, 3, 1], device="cuda"))
    for dt in (torch.float16, torch.bfloat16):
        gq, gv, gab = r(3, 1, 64, dtype=dt), r(3, 2, 16, dtype=dt), r(3, 2, dtype=dt)
        pool, cuda_i64 = r(4, 2, 16, 64, dtype=torch.float32), lambda *x: torch.tensor(x, device="cuda")
        ops.gdn_decode(gq, gq, gv, gab, gab, r(2, dtype=torch.float32), r(2, dtype=torch.float32), pool,
                       cuda_i64(0, 3, -1))
        ops.gdn_extend_chunkwise(gq, gq, gv, gab, gab, r(2, dtype=torch.float32), r(2, dtype=torch.float32), pool,
                                 cuda_i64(1), cuda_i64(0, 3))
    k8 = torch.zeros(8, 2, 64, dtype=torch.float8_e4m3fn, device="cuda")
    one = torch.ones(1, device="cuda")
    ops.store_kv_cache(k.float(), k.float(), k8, k8.clone(), torch.tensor([3, 6], device="cuda"), one, one)
    table = torch.arange(40, dtype=torch.int32, device="cuda").reshape(4, 10)
    kv = torch.full((8,), -1, dtype=torch.int32, device="cuda")
    i32 = lambda *v: torch.tensor(v, dtype=torch.int32, device="cuda")
    ops.create_kv_indices(table, i32(2), i32(3), i32(1, 4), None, kv)
    assert kv.tolist() == [-1, 20, 21, 22, -1, -1, -1, -1]
    xi = torch.arange(1000, dtype=torch.int32, device="cuda")
    for c in (1, 2, 4, 8, 16):
        assert torch.equal(add_constant(xi, c), xi + c)
    torch.cuda.synchronize()
    if torch.cuda.get_device_capability() == (9, 0):
        a8 = torch.randint(-128, 128, (3, 64), dtype=torch.int8, device="cuda")
        w8 = torch.randint(-128, 128, (16, 64), dtype=torch.int8, device="cuda")
        s3, s16 = torch.ones(3, device="cuda"), torch.ones(16, device="cuda")
        ops.int8_scaled_mm(a8, w8.t(), s3, s16, torch.bfloat16)
        ops.fp8_scaled_mm(a8.float().to(torch.float8_e4m3fn), w8.float().to(torch.float8_e4m3fn).t(), s3, s16,
                          torch.bfloat16)
    # The GEMMs' other configurations (one module each, picked by M) are the same source.
    missing = [f"{k.name}{list(k.args)}" for k in registered_kernels()
               if "cuda" in k.devices and "cuda" not in k.kernel._modules and not k.name.startswith("scaled_mm_sm90_")]
    assert not missing, f"CUDA modules never loaded: {missing}"
    print("EVERY CUDA OP RAN")
""")


@requires_cuda
def test_every_cuda_op_runs_from_prebuilt_without_a_compiler(tmp_path):
    """prebuild --output for two architectures (the GPU's among them), then every CUDA op in a
    process with no nvcc, no C++ compiler and JIT off."""
    import torch

    major, minor = torch.cuda.get_device_capability()
    archs = ";".join(sorted({"8.0", f"{major}.{minor}"}))
    out = subprocess.run([PYTHON, "-m", "mllm_kernel", "prebuild", "--output", str(tmp_path / "prebuilt"), "--device",
                          "cuda", "--cuda-arch-list", archs], capture_output=True, text=True, timeout=1800,
                         env=subprocess_env(MLLM_KERNEL_CACHE_DIR=str(tmp_path / "build-cache")))
    assert out.returncode == 0, out.stdout + out.stderr
    env = _no_compiler_env(tmp_path, tmp_path / "prebuilt", CUDA_HOME=str(tmp_path / "no-cuda"))
    out = subprocess.run([PYTHON, "-c", EVERY_CUDA_OP], capture_output=True, text=True, timeout=600, env=env)
    assert out.returncode == 0 and "EVERY CUDA OP RAN" in out.stdout, out.stdout + out.stderr
    cache = tmp_path / "empty-cache"
    assert not cache.exists() or not any(cache.iterdir()), "nothing may be built or cached"
