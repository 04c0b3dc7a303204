"""python -m mllm_kernel: show-env, show-config, show-clangd-recommend-config."""

from __future__ import annotations

import os

import subprocess

import pytest

from conftest import PYTHON, subprocess_env


def run_cli(*args: str, cwd=None, **env) -> subprocess.CompletedProcess:
    return subprocess.run([PYTHON, "-m", "mllm_kernel", *args], capture_output=True, text=True, cwd=cwd,
                          env=subprocess_env(**env), timeout=300)


def test_show_env_reports_everything(tmp_path):
    out = run_cli("show-env", cwd=tmp_path, MLLM_KERNEL_CACHE_DIR=str(tmp_path / "c"))
    assert out.returncode == 0, out.stderr
    for key in ("CUDA_HOME:", "nvcc:", "CUDA version (nvcc):", "nvidia-smi:", "PyTorch:", "OS:", "Python:",
                "CPU:", "CPU cores:", "Highway:", "Highway targets (CPU):", "Highway target in use:",
                "apache-tvm-ffi:", "CUDA archs for builds:"):
        assert key in out.stdout, key


def test_show_env_without_cuda_says_what_is_missing(tmp_path):
    # PATH without nvcc/nvidia-smi and a CUDA_HOME that holds nothing: still works.
    out = run_cli("show-env", "--no-probe", cwd=tmp_path, PATH="/usr/bin:/bin", CUDA_HOME=str(tmp_path))
    assert out.returncode == 0, out.stderr
    if "not found (install the CUDA toolkit" not in out.stdout:
        pytest.skip("/usr/local/cuda provides a toolkit on this machine")


def test_show_config_lists_kernels_and_cache_state(tmp_path):
    cache = tmp_path / "cache"
    warm = subprocess.run([PYTHON, "-c", "import torch; from mllm_kernel.cpu.jit import add_constant;"
                           "add_constant(torch.ones(4), 2)"], env=subprocess_env(MLLM_KERNEL_CACHE_DIR=str(cache)),
                          capture_output=True, text=True)
    assert warm.returncode == 0, warm.stderr
    out = run_cli("show-config", "--no-probe", cwd=tmp_path, MLLM_KERNEL_CACHE_DIR=str(cache))
    assert out.returncode == 0, out.stderr
    assert f"user cache: {cache}" in out.stdout
    assert "prebuilt folders (MLLM_KERNEL_PREBUILT_PATH): none" in out.stdout
    assert "compiling: on first call" in out.stdout
    assert "precompiled headers: 0 (" in out.stdout
    (cache / "cuda-pch_0123").mkdir()
    (cache / "cuda-pch_0123" / "prefix.h.gch").write_bytes(b"x" * 3000)
    counted = run_cli("show-config", "--no-probe", cwd=tmp_path, MLLM_KERNEL_CACHE_DIR=str(cache))
    assert "precompiled headers: 1 (2.9 KiB)" in counted.stdout, counted.stdout
    lines = out.stdout.splitlines()
    cpu_start = lines.index(next(line for line in lines if line.strip().startswith("cpu:")))
    cuda_start = lines.index(next(line for line in lines if line.strip().startswith("cuda:")))
    cpu_rows = lines[cpu_start + 1:cuda_start]
    assert any("add_constant[2]" in r and "cached (1 build" in r for r in cpu_rows), cpu_rows
    assert any("add_constant[16]" in r and "not cached" in r for r in cpu_rows), cpu_rows
    assert any("add_constant[8]" in r for r in lines[cuda_start:])


def test_show_config_tells_prebuilt_from_cached(tmp_path):
    """A module prebuilt into a folder shows as prebuilt (with its size and folder); a module
    built by the JIT as cached; with MLLM_KERNEL_DISABLE_JIT the header says so."""
    cache, prebuilt = tmp_path / "cache", tmp_path / "prebuilt"
    code = ("import torch; from mllm_kernel.cpu.jit import add_constant;"
            "from mllm_kernel.jit_utils.cache import build_and_publish;"
            "m = __import__('importlib').import_module('mllm_kernel.cpu.jit.add_constant');"
            "spec = m._ADD_CONSTANT.modules()[0].spec('cpu').prebuilt_variant();"
            f"build_and_publish(spec, __import__('pathlib').Path({str(prebuilt)!r}) / spec.prebuilt_folder_name);"
            "add_constant(torch.ones(4), 2)")
    warm = subprocess.run([PYTHON, "-c", code], env=subprocess_env(MLLM_KERNEL_CACHE_DIR=str(cache)),
                          capture_output=True, text=True)
    assert warm.returncode == 0, warm.stderr
    out = run_cli("show-config", "--no-probe", cwd=tmp_path, MLLM_KERNEL_CACHE_DIR=str(cache),
                  MLLM_KERNEL_PREBUILT_PATH=str(prebuilt), MLLM_KERNEL_DISABLE_JIT="1")
    assert out.returncode == 0, out.stderr
    assert f"prebuilt folders (MLLM_KERNEL_PREBUILT_PATH): {prebuilt}" in out.stdout
    assert "compiling: disabled (MLLM_KERNEL_DISABLE_JIT)" in out.stdout
    rows = [r for r in out.stdout.splitlines() if r.strip().startswith("add_constant[")]
    one = next(r for r in rows if r.strip().startswith("add_constant[1] "))
    assert "prebuilt (" in one and str(prebuilt) in one and "not cached" in one, one
    two = next(r for r in rows if r.strip().startswith("add_constant[2] "))
    assert "not prebuilt, cached (1 build" in two, two


def test_clangd_config_written_once(tmp_path):
    out = run_cli("show-clangd-recommend-config", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    text = (tmp_path / ".clangd").read_text()
    assert "mllm_kernel/include" in text and "tvm_ffi/include" in text and "-std=c++20" in text
    (tmp_path / ".clangd").write_text("mine\n")
    again = run_cli("show-clangd-recommend-config", cwd=tmp_path)
    assert again.returncode == 1
    assert "already exists" in again.stderr
    assert (tmp_path / ".clangd").read_text() == "mine\n"


@pytest.mark.parametrize("command", ["show-env", "show-config", "show-clangd-recommend-config", "demo", "prebuild"])
def test_help(command):
    out = run_cli(command, "--help")
    assert out.returncode == 0 and "usage:" in out.stdout


def test_prebuild_builds_every_registered_cpu_kernel():
    out = run_cli("prebuild", "--device", "cpu", "--jobs", "2")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    import mllm_kernel.ops  # noqa: F401 - declares every module of the package
    from mllm_kernel.jit_utils import registered_kernels

    count = sum(1 for r in registered_kernels()
                if "cpu" in r.devices and not any(os.path.isabs(f) for f in r.files))  # the package's own
    assert count >= 22  # the package's CPU modules, gated DeltaNet's included
    assert lines[-1].startswith(f"prebuild: {count} modules ready"), lines[-3:]
    assert any(line.startswith("cpu   add_constant[16]") for line in lines)


def test_demo_prints_a_checked_row_per_kernel(tmp_path):
    out = run_cli("demo", "--cache-dir", str(tmp_path / "cache"))
    assert out.returncode == 0, out.stdout + out.stderr
    rows = [line for line in out.stdout.splitlines() if line.split() and line.split()[-1] in ("ok", "MISMATCH")]
    assert len(rows) >= 6 and all(r.split()[-1] == "ok" for r in rows), out.stdout
    assert any(r.startswith("rmsnorm") for r in rows) and any(r.startswith("add_constant<16>") for r in rows)
