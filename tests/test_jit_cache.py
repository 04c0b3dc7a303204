"""The JIT build-and-cache layer: hits, misses, rebuilds, concurrency, crashes and errors."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import textwrap
import time
from pathlib import Path

import pytest
import torch

from conftest import PYTHON, subprocess_env
from mllm_kernel.jit_utils import JitCompileError, load_cpu_jit, make_cpp_args

LOAD_SNIPPET = """
import logging, sys, time, torch
logging.basicConfig(level=logging.INFO, format="LOG %(message)s", stream=sys.stdout)
from mllm_kernel.jit_utils import load_cpu_jit
start = time.perf_counter()
m = load_cpu_jit("scale", "2", cpp_files=[{file!r}], cpp_wrappers=[("scale", "user::scale<2>")],
                 extra_include_paths=[{include!r}])
x = torch.arange(5, dtype=torch.float32)
y = torch.full_like(x, float("nan"))
m.scale(y, x)
print("RESULT", y.tolist())
print("SECONDS", time.perf_counter() - start)
"""


def load_scale(folder: Path, scale: int = 2, **kwargs):
    args = make_cpp_args(scale)
    return load_cpu_jit("scale", *args, cpp_files=[str(folder / "scale.cpp")],
                        cpp_wrappers=[("scale", f"user::scale<{args}>")],
                        extra_include_paths=[str(folder / "include")], **kwargs)


def run_scale(module) -> list[float]:
    x = torch.arange(5, dtype=torch.float32)
    y = torch.full_like(x, float("nan"))
    module.scale(y, x)
    return y.tolist()


def compile_lines(caplog) -> list[str]:
    """The modules compiled (the host runtime, built once per cache, is not one of them)."""
    return [r.getMessage() for r in caplog.records
            if "compiled cpu module" in r.getMessage() and "host_runtime" not in r.getMessage()]


def module_folders(cache: Path) -> list[Path]:
    """The cache's module folders, in name order (without the host runtime's)."""
    return sorted(p for p in cache.iterdir() if not p.name.startswith("cpu_host_runtime_"))


def test_first_call_compiles_then_hits(isolated_cache, user_kernel, caplog):
    caplog.set_level(logging.INFO, logger="mllm_kernel")
    module = load_scale(user_kernel)
    assert run_scale(module) == [1.0, 3.0, 5.0, 7.0, 9.0]
    assert len(compile_lines(caplog)) == 1
    assert "scale[2]" in compile_lines(caplog)[0]
    load_scale(user_kernel)
    assert len(compile_lines(caplog)) == 1, "a second load must not compile"
    folders = [p.name for p in module_folders(isolated_cache)]
    assert len(folders) == 1 and folders[0].startswith("cpu_scale_2_")
    manifest = json.loads((isolated_cache / folders[0] / "manifest.json").read_text())
    deps = [d[0] for d in manifest["dependencies"]]
    assert str((user_kernel / "include" / "scale_params.h").resolve()) in deps
    assert any(d.endswith("mllm_kernel/tensor.hpp") for d in deps)


def test_new_process_loads_without_compiling(isolated_cache, user_kernel):
    load_scale(user_kernel)
    code = LOAD_SNIPPET.format(file=str(user_kernel / "scale.cpp"), include=str(user_kernel / "include"))
    out = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True,
                         env=subprocess_env(MLLM_KERNEL_CACHE_DIR=str(isolated_cache)), check=True).stdout
    assert "RESULT [1.0, 3.0, 5.0, 7.0, 9.0]" in out
    assert "compiled" not in out


def test_variant_args_get_their_own_module(isolated_cache, user_kernel):
    assert run_scale(load_scale(user_kernel, 3)) == [1.0, 4.0, 7.0, 10.0, 13.0]
    assert run_scale(load_scale(user_kernel, 2)) == [1.0, 3.0, 5.0, 7.0, 9.0]
    assert len(module_folders(isolated_cache)) == 2


def test_header_edit_rebuilds(isolated_cache, user_kernel, caplog):
    caplog.set_level(logging.INFO, logger="mllm_kernel")
    assert run_scale(load_scale(user_kernel)) == [1.0, 3.0, 5.0, 7.0, 9.0]
    header = user_kernel / "include" / "scale_params.h"
    header.write_text(header.read_text().replace("kOffset = 1.0f", "kOffset = 10.0f"))
    assert run_scale(load_scale(user_kernel)) == [10.0, 12.0, 14.0, 16.0, 18.0]
    assert len(compile_lines(caplog)) == 2


def test_touched_but_unchanged_header_does_not_rebuild(isolated_cache, user_kernel, caplog):
    caplog.set_level(logging.INFO, logger="mllm_kernel")
    load_scale(user_kernel)
    header = user_kernel / "include" / "scale_params.h"
    header.write_text(header.read_text())
    os.utime(header, ns=(time.time_ns() + 10**9, time.time_ns() + 10**9))
    load_scale(user_kernel)
    assert len(compile_lines(caplog)) == 1


def test_source_edit_rebuilds(isolated_cache, user_kernel):
    assert run_scale(load_scale(user_kernel)) == [1.0, 3.0, 5.0, 7.0, 9.0]
    source = user_kernel / "scale.cpp"
    source.write_text(source.read_text().replace("s[i] * kScale", "s[i] * kScale * 2"))
    assert run_scale(load_scale(user_kernel)) == [1.0, 5.0, 9.0, 13.0, 17.0]


def test_flag_change_rebuilds(isolated_cache, user_kernel):
    assert run_scale(load_scale(user_kernel)) == [1.0, 3.0, 5.0, 7.0, 9.0]
    assert run_scale(load_scale(user_kernel, extra_cflags=["-DEXTRA_OFFSET=100"])) == [101.0, 103.0, 105.0, 107.0, 109.0]
    assert len(module_folders(isolated_cache)) == 2


def test_cpu_target_change_rebuilds(isolated_cache, user_kernel, monkeypatch):
    """A JIT CPU build is for this CPU; a portable build (every Highway target) is another
    variant with its own folder, and the CPU target is in the manifest."""
    assert run_scale(load_scale(user_kernel)) == [1.0, 3.0, 5.0, 7.0, 9.0]
    monkeypatch.setenv("MLLM_KERNEL_CPU_TARGET", "portable")
    assert run_scale(load_scale(user_kernel)) == [1.0, 3.0, 5.0, 7.0, 9.0]
    folders = module_folders(isolated_cache)
    assert len(folders) == 2
    targets = {json.loads((f / "manifest.json").read_text())["cpu_target"] for f in folders}
    assert "portable" in targets and any(t.startswith("native-") for t in targets), targets
    monkeypatch.setenv("MLLM_KERNEL_CPU_TARGET", "fastest")
    with pytest.raises(ValueError, match=r"^MLLM_KERNEL_CPU_TARGET must be 'native' or 'portable', got 'fastest'$"):
        load_scale(user_kernel)


def test_modules_link_one_host_runtime(isolated_cache, user_kernel, caplog):
    """The host runtime is built once into the cache, and every module records it as a needed
    library by its soname."""
    from mllm_kernel.jit_utils import host_runtime

    caplog.set_level(logging.INFO, logger="mllm_kernel")
    assert run_scale(load_scale(user_kernel)) == [1.0, 3.0, 5.0, 7.0, 9.0]
    assert run_scale(load_scale(user_kernel, scale=3)) == [1.0, 4.0, 7.0, 10.0, 13.0]
    runtime_builds = [r for r in caplog.records if "compiled cpu module host_runtime" in r.getMessage()]
    assert len(runtime_builds) == 1
    runtime_folders = [p for p in isolated_cache.iterdir() if p.name.startswith("cpu_host_runtime_")]
    assert len(runtime_folders) == 1 and (runtime_folders[0] / host_runtime.soname()).is_file()
    for folder in module_folders(isolated_cache):
        library = folder / json.loads((folder / "manifest.json").read_text())["library"]
        assert host_runtime.soname().encode() in library.read_bytes(), "the module must need the runtime"


def test_host_runtime_changes_rebuild_modules(tmp_path, monkeypatch):
    """The runtime's id hashes its source and the host headers, and a module's keys hold it."""
    import dataclasses

    from mllm_kernel.jit_utils import host_runtime
    from mllm_kernel.jit_utils.load import cpu_build_spec

    spec = cpu_build_spec("scale", 2, cpp_files=["add_constant.cpp"], cpp_wrappers=[("f", "f")])
    assert spec.host_runtime == host_runtime.runtime_id()
    other = dataclasses.replace(spec, host_runtime="0" * 16)
    assert other.portable_key() != spec.portable_key() and other.key() != spec.key()
    before = host_runtime.runtime_id()
    # Each source and the thread pool's header (outside the header library) count.
    for index, original in enumerate([*host_runtime.SOURCES, *host_runtime.HEADERS]):
        edited = tmp_path / f"{index}_{original.name}"
        edited.write_text(original.read_text() + "\n// edited\n")
        monkeypatch.setattr(host_runtime, "SOURCES", tuple(edited if s == original else s for s in host_runtime.SOURCES))
        monkeypatch.setattr(host_runtime, "HEADERS", tuple(edited if h == original else h for h in host_runtime.HEADERS))
        host_runtime.runtime_id.cache_clear()
        try:
            assert host_runtime.runtime_id() != before, original.name
            assert host_runtime.soname() == f"libmllm_kernel_host_{host_runtime.runtime_id()}.so"
        finally:
            monkeypatch.undo()
            host_runtime.runtime_id.cache_clear()


def test_cached_load_starts_no_subprocess(isolated_cache, user_kernel, monkeypatch):
    load_scale(user_kernel)
    import subprocess as sp

    def refuse(*args, **kwargs):
        raise AssertionError(f"a cached load started a subprocess: {args}")

    monkeypatch.setattr(sp, "run", refuse)
    monkeypatch.setattr(sp, "Popen", refuse)
    assert run_scale(load_scale(user_kernel)) == [1.0, 3.0, 5.0, 7.0, 9.0]


def test_processes_racing_compile_once(isolated_cache, user_kernel):
    code = LOAD_SNIPPET.format(file=str(user_kernel / "scale.cpp"), include=str(user_kernel / "include"))
    env = subprocess_env(MLLM_KERNEL_CACHE_DIR=str(isolated_cache))
    procs = [subprocess.Popen([PYTHON, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
             for _ in range(4)]
    outputs = [p.communicate(timeout=300)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs), outputs
    assert all("RESULT [1.0, 3.0, 5.0, 7.0, 9.0]" in o for o in outputs), outputs
    assert sum(o.count("compiled cpu module scale") for o in outputs) == 1, outputs
    assert sum(o.count("compiled cpu module host_runtime") for o in outputs) == 1, outputs


def test_killed_compile_leaves_nothing_stale(isolated_cache, user_kernel, tmp_path):
    # A compiler wrapper that hangs while a marker file exists, so the build can be killed mid-way.
    marker = tmp_path / "hang"
    marker.touch()
    wrapper = tmp_path / "slow-cxx"
    wrapper.write_text(f"#!/bin/sh\nwhile [ -e {marker} ]; do sleep 0.1; done\nexec c++ \"$@\"\n")
    wrapper.chmod(0o755)
    code = LOAD_SNIPPET.format(file=str(user_kernel / "scale.cpp"), include=str(user_kernel / "include"))
    env = subprocess_env(MLLM_KERNEL_CACHE_DIR=str(isolated_cache), CXX=str(wrapper))
    victim = subprocess.Popen([PYTHON, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                              start_new_session=True)
    deadline = time.time() + 60
    while not list(isolated_cache.glob("*/.build-*")) and time.time() < deadline:
        time.sleep(0.1)
    assert list(isolated_cache.glob("*/.build-*")), "the build never started"
    os.killpg(victim.pid, signal.SIGKILL)
    victim.wait()
    folder = module_folders(isolated_cache)[0]
    assert not (folder / "manifest.json").exists()
    marker.unlink()
    out = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "RESULT [1.0, 3.0, 5.0, 7.0, 9.0]" in out.stdout
    assert not list(folder.glob(".build-*")), "the dead build's folder must be cleaned up"
    assert (folder / "manifest.json").exists()


def test_compile_error_reports_compiler_diagnostics(isolated_cache, user_kernel):
    source = user_kernel / "scale.cpp"
    good = source.read_text()
    lines = good.splitlines()
    bad_line = next(i for i, line in enumerate(lines) if "d[i] = s[i]" in line) + 1
    source.write_text(good.replace("d[i] = s[i]", "d[i] = undefined_symbol + s[i]"))
    with pytest.raises(JitCompileError) as info:
        load_scale(user_kernel)
    message = str(info.value)
    assert f"scale.cpp:{bad_line}" in message
    assert "undefined_symbol" in message and "was not declared" in message
    assert "failed-build" in message and "scale[2]" in message
    folder = module_folders(isolated_cache)[0]
    assert not (folder / "manifest.json").exists(), "nothing may be cached from a failed build"
    assert (folder / "failed-build" / "build.log").exists()
    source.write_text(good)
    assert run_scale(load_scale(user_kernel)) == [1.0, 3.0, 5.0, 7.0, 9.0]


def test_missing_source_file_is_a_clear_error(isolated_cache):
    with pytest.raises(FileNotFoundError, match="no_such_kernel.cpp"):
        load_cpu_jit("nothing", cpp_files=["no_such_kernel.cpp"], cpp_wrappers=[("f", "f")])


def test_bad_wrapper_spec_is_rejected(isolated_cache, user_kernel):
    with pytest.raises(TypeError, match="export_name, cpp_symbol"):
        load_cpu_jit("scale", cpp_files=[str(user_kernel / "scale.cpp")], cpp_wrappers=["scale"])
    with pytest.raises(ValueError, match="not a valid identifier"):
        load_cpu_jit("scale", cpp_files=[str(user_kernel / "scale.cpp")], cpp_wrappers=[("bad name", "f")])


def test_verbose_prints_compiler_commands(isolated_cache, user_kernel):
    code = LOAD_SNIPPET.format(file=str(user_kernel / "scale.cpp"), include=str(user_kernel / "include"))
    out = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, check=True,
                         env=subprocess_env(MLLM_KERNEL_CACHE_DIR=str(isolated_cache), MLLM_KERNEL_VERBOSE="1")).stdout
    assert "-std=c++20" in out and "scale_0.cpp" in out


def test_cache_dir_env_and_default(monkeypatch):
    from mllm_kernel.jit_utils.paths import cache_root

    monkeypatch.delenv("MLLM_KERNEL_CACHE_DIR", raising=False)
    assert cache_root() == Path("~/.cache/mllm_kernel").expanduser()
    monkeypatch.setenv("MLLM_KERNEL_CACHE_DIR", "/tmp/somewhere")
    assert cache_root() == Path("/tmp/somewhere")


def test_cuda_arch_list_overrides(monkeypatch):
    from mllm_kernel.jit_utils import toolchain

    monkeypatch.setenv("MLLM_KERNEL_CUDA_ARCH_LIST", "8.0;9.0a")
    assert toolchain.cuda_arch_list() == ("8.0", "9.0a")
    monkeypatch.delenv("MLLM_KERNEL_CUDA_ARCH_LIST")
    monkeypatch.setenv("TVM_FFI_CUDA_ARCH_LIST", "8.9 9.0")
    assert toolchain.cuda_arch_list() == ("8.9", "9.0")
    monkeypatch.setenv("TVM_FFI_CUDA_ARCH_LIST", "sm90")
    with pytest.raises(ValueError, match="invalid CUDA architecture 'sm90'"):
        toolchain.cuda_arch_list()
    monkeypatch.delenv("TVM_FFI_CUDA_ARCH_LIST")
    if not torch.cuda.is_available():
        assert toolchain.cuda_arch_list() == toolchain.DEFAULT_CUDA_ARCHS


def test_depfile_parsing(tmp_path):
    from mllm_kernel.jit_utils.build import parse_depfile

    dep = tmp_path / "x.d"
    dep.write_text("x.o: /a/b.cpp /a/with\\ space.h \\\n /usr/include/c.h\n")
    assert parse_depfile(dep) == ["/a/b.cpp", "/a/with space.h", "/usr/include/c.h"]
