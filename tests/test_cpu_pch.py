"""The CPU precompiled header (jit_utils/cpu_pch.py): when it is built, what reads it, and that
modules compiled with it are right and record what they depend on."""

from __future__ import annotations

import json
import logging

import dataclasses

import pytest
import torch

import mllm_kernel.cpu.jit  # noqa: F401  (declares the CPU modules)
from mllm_kernel.jit_utils import build, cache, cpu_pch, find_module, toolchain

pytestmark = pytest.mark.skipif(not toolchain.compiler_is_gcc(toolchain.find_cxx()),
                                reason="the precompiled header is GCC's")


def _spec(name: str = "rmsnorm"):
    return find_module(f"cpu_{name}", (), "cpu").spec("cpu")


@pytest.fixture
def commands(monkeypatch):
    """Every compiler command the JIT runs, in order."""
    seen: list[list[str]] = []
    run = build._run

    def record(spec, command, build_dir):
        seen.append(command)
        run(spec, command, build_dir)

    monkeypatch.setattr(build, "_run", record)
    return seen


def _unit_compiles(commands: list[list[str]], name: str) -> list[list[str]]:
    return [c for c in commands if "-c" in c and c[c.index("-c") + 1].endswith(f"cpu_{name}_0.cpp")]


def test_library_cpu_modules_use_it_and_others_do_not(tmp_path, monkeypatch):
    spec = _spec()
    assert cpu_pch.applies(spec)
    assert not cpu_pch.applies(dataclasses.replace(spec, extra_cflags=("-DX=1",)))
    assert not cpu_pch.applies(dataclasses.replace(spec, extra_include_paths=(str(tmp_path),)))
    users = tuple(dataclasses.replace(u, files=(tmp_path / "mine.cpp",)) for u in spec.units)
    assert not cpu_pch.applies(dataclasses.replace(spec, units=users)), "a user's own source"
    monkeypatch.setenv(cpu_pch.PCH_ENV, "0")
    assert not cpu_pch.applies(spec)
    monkeypatch.setenv(cpu_pch.PCH_ENV, "1")
    monkeypatch.setenv(toolchain.CPU_TARGET_ENV, "portable")
    assert not cpu_pch.applies(_spec())


def test_module_built_after_it_reads_it_and_is_right(isolated_cache, commands):
    """Built first, the header is read by the next module's compile (-include), whose manifest
    lists the files the header was made from (GCC's depfile omits them), and the op is right."""
    spec = _spec()
    assert cpu_pch.build(spec)
    folder = cpu_pch.folder(spec)
    assert (folder / "precompiled.hpp.gch").is_file()
    made_from = json.loads((folder / cpu_pch.DEPENDENCIES).read_text())
    assert any(path.endswith("mllm_kernel/tensor.hpp") for path in made_from)

    library = cache.find_library(spec)
    (compile_command,) = _unit_compiles(commands, "rmsnorm")
    assert compile_command[compile_command.index("-include") + 1] == str(folder / "precompiled.hpp")
    manifest = cache.read_manifest(library.parent)
    recorded = [record[0] for record in manifest["dependencies"]]
    assert any(path.endswith("include/mllm_kernel/tensor.hpp") for path in recorded)

    module = cache.load_module(spec)
    x, weight = torch.randn(7, 300), torch.randn(300)
    out = torch.full_like(x, float("nan"))
    module.rmsnorm(out, x, weight, 1e-6, 1)
    expected = (x.double() * torch.rsqrt(x.double().pow(2).mean(-1, keepdim=True) + 1e-6)) * weight.double()
    torch.testing.assert_close(out.double(), expected, rtol=1e-5, atol=1e-5)


def test_built_in_background_only_with_a_spare_core(isolated_cache, commands, monkeypatch):
    """A module built with no core to spare starts no header build; with one, the module does not
    wait for it, and the header is there once the background build ends."""
    spec = _spec("silu_and_mul")
    monkeypatch.setattr(cpu_pch.os, "cpu_count", lambda: 1)
    cache.find_library(spec)
    cpu_pch.wait_for_background()
    assert not cpu_pch.folder(spec).exists()

    monkeypatch.setattr(cpu_pch.os, "cpu_count", lambda: 64)
    cache.clear_cache()
    cache.find_library(spec)
    (compile_command,) = _unit_compiles(commands, "silu_and_mul")[-1:]
    assert "-include" not in compile_command  # this one started before the header existed
    cpu_pch.wait_for_background()
    assert (cpu_pch.folder(spec) / cpu_pch.DEPENDENCIES).is_file()


def test_a_header_that_fails_to_build_is_logged_and_left_out(isolated_cache, tmp_path, monkeypatch, caplog):
    broken = tmp_path / "precompiled.hpp"
    broken.write_text("#include <no_such_header_anywhere.h>\n")
    monkeypatch.setattr(cpu_pch, "HEADER", broken)
    spec = _spec()
    with caplog.at_level(logging.WARNING, logger="mllm_kernel"):
        assert not cpu_pch.build(spec)
    assert "precompiled header did not build" in caplog.text
    assert cpu_pch.usage(spec) == ([], [])
    assert not list(isolated_cache.glob("*cpu-pch_*")), "nothing published, no temporary folder left"


def test_a_second_build_finds_the_first(isolated_cache, commands):
    spec = _spec()
    assert cpu_pch.build(spec)
    assert cpu_pch.build(spec)
    assert len([c for c in commands if "c++-header" in c]) == 0  # built by cpu_pch, not through build._run
    assert len(list(isolated_cache.glob("*cpu-pch_*"))) == 1


def test_headers_of_the_old_folder_name_are_removed(isolated_cache):
    """``cpu_pch_<key>`` folders (the name before) go when a header is built; a module folder
    that shares the start of that name stays."""
    old = isolated_cache / "cpu_pch_0123456789abcdef"
    old.mkdir(parents=True)
    (old / cpu_pch.DEPENDENCIES).write_text("[]")
    module = isolated_cache / "cpu_pch_mine_0123456789abcdef"
    module.mkdir()
    (module / "manifest.json").write_text("{}")
    (module / cpu_pch.DEPENDENCIES).write_text("[]")
    assert cpu_pch.build(_spec())
    assert not old.exists() and module.is_dir()

