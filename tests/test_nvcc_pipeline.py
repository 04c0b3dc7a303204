"""nvcc's phases run as a graph (jit_utils.nvcc_pipeline): the object it builds is nvcc's own in
every way that matters (no GPU needed; runs in CI where nvcc exists)."""

from __future__ import annotations

import os
import re
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import needs_nvcc

from mllm_kernel.jit_utils import build, nvcc_pipeline
from mllm_kernel.jit_utils.errors import JitCompileError
from mllm_kernel.jit_utils.load import cuda_build_spec

pytestmark = needs_nvcc
KERNELS = Path(__file__).parent / "user_kernels"


def _spec(name="pipeline_seed_copy", source=KERNELS / "seed_copy.cuh"):
    return cuda_build_spec(name, cuda_files=[source], cuda_wrappers=[("copy_float32", "SeedCopy<fp32_t>::run")],
                           cuda_archs=("8.0", "9.0"))


def _listing(spec, folder: Path) -> list[str]:
    """The nvcc command of spec's CUDA unit as plan() takes it (nvcc's own -MD taken out)."""
    source = folder / "unit.cu"
    source.write_text(spec.units[0].source_text())
    command = build._unit_command(spec, spec.units[0], source, folder / "unit.o", folder / "unit.d")
    at = command.index("-MD")
    return command[:at] + command[at + 3:]


def _objects(spec, folder: Path) -> list[str]:
    library, deps = build.compile_module(spec, folder)
    assert library.is_file()
    return deps


def test_plan_runs_host_and_device_chains_side_by_side(tmp_path):
    """cudafe++ waits only for the host preprocessor, each cicc only for its device one, and
    the final host compile only for the preprocessors and cudafe++ (the stubs come through a
    pipe, the image is linked apart); cudafe++ no longer writes the module id."""
    pipeline = nvcc_pipeline.plan(_listing(_spec(), tmp_path), tmp_path / "keep")
    assert pipeline is not None
    tools = [s.tool for s in pipeline.steps]
    assert tools.count("cicc") == 2 and tools.count("cudafe++") == 1 and tools[-1] == "gcc"
    cudafe = tools.index("cudafe++")
    assert "--gen_module_id_file" not in pipeline.steps[cudafe].command
    assert [tools[j] for j in pipeline.steps[cudafe].after] == ["gcc"]
    for i, tool in enumerate(tools):
        if tool == "cicc":
            assert [tools[j] for j in pipeline.steps[i].after] == ["gcc"]
            assert cudafe not in pipeline.steps[i].after
    assert sorted(tools[j] for j in pipeline.steps[-1].after) == ["cudafe++", "gcc", "gcc", "gcc"]
    # The last arch's cicc writes the stubs cudafe++'s output includes, elsewhere than that file.
    stubs = pipeline.stubs
    assert stubs is not None and tools[stubs.step] == "cicc"
    assert f"--stub_file_name {stubs.written}" in pipeline.steps[stubs.step].command
    assert f"{stubs.pipe.name}" in pipeline.steps[cudafe].command
    # fatbinary writes nvcc's own fatbin.c elsewhere: the host stubs include the wrapper written here.
    embedded = pipeline.embedded
    assert embedded is not None and tools[embedded.step] == "fatbinary"
    fatbinary = pipeline.steps[embedded.step].command
    assert f"--embedded-fatbin={embedded.nvcc_wrapper}" in fatbinary and str(embedded.wrapper) not in fatbinary


def _section(library: Path, name: str) -> bytes:
    out = library.parent / "section.bin"
    subprocess.run(["objcopy", "-O", "binary", f"--only-section={name}", str(library), str(out)], check=True)
    return out.read_bytes()


def test_the_stubs_reach_the_host_compile_as_cicc_wrote_them(tmp_path):
    """After a build the piped stubs lie where the host code includes them, a plain file with
    cicc's text (the kernels' registrations)."""
    _objects(_spec("pipeline_stubs"), tmp_path)
    host = next(tmp_path.glob("*.nvcc/*.cudafe1.cpp"))
    (included,) = re.findall(r'#include "([^"]+stub.c)"', host.read_text())
    stubs = host.parent / included
    assert stubs.is_file() and not list(tmp_path.glob("*.nvcc/*.stub.c.cicc"))
    assert "seed_copy_kernel" in stubs.read_text() and "__cudaRegisterEntry" in stubs.read_text()


def test_without_named_pipes_the_host_compile_waits_for_cicc(tmp_path, monkeypatch):
    """A build folder whose file system makes no named pipe: the stubs are read from cicc's file,
    after cicc, and the module builds."""
    def no_fifo(path, *args, **kwargs):
        raise OSError(95, "Operation not supported", str(path))

    monkeypatch.setattr(nvcc_pipeline.os, "mkfifo", no_fifo)
    pipeline = nvcc_pipeline.plan(_listing(_spec(), tmp_path), tmp_path / "keep")
    tools = [s.tool for s in pipeline.steps]
    assert pipeline.stubs is None and "cicc" in {tools[j] for j in pipeline.steps[-1].after}
    assert all(".stub.c.cicc" not in s.command for s in pipeline.steps)  # cicc writes the included file
    (tmp_path / "build").mkdir()
    _objects(_spec("pipeline_no_fifo"), tmp_path / "build")


def _fifo(tmp_path: Path) -> nvcc_pipeline.StubPipe:
    stubs = nvcc_pipeline.StubPipe(0, tmp_path / "unit.stub.c", tmp_path / "unit.stub.c.cicc")
    os.mkfifo(stubs.pipe)
    return stubs


def test_a_host_compile_that_ends_without_reading_the_stubs_does_not_hold_the_feeder(tmp_path):
    stubs = _fifo(tmp_path)
    stubs.written.write_text("int stub;\n")
    with ThreadPoolExecutor(2) as pool:
        writer = pool.submit(lambda: None)
        host = pool.submit(lambda: None)
        host.result()
        pool.submit(stubs.feed, writer, host).result(timeout=10)


def test_a_failed_cicc_gives_the_host_compiler_no_stubs_and_its_error(tmp_path):
    """The host compiler, blocked on the pipe, reads an empty file and goes on; the feeder
    raises cicc's error."""
    stubs = _fifo(tmp_path)

    def cicc():
        raise JitCompileError("unit", tmp_path, ["cicc"], "cicc failed")

    def host_compiler():
        return stubs.pipe.read_bytes()

    with ThreadPoolExecutor(3) as pool:
        host = pool.submit(host_compiler)
        feeder = pool.submit(stubs.feed, pool.submit(cicc), host)
        assert host.result(timeout=10) == b""
        with pytest.raises(JitCompileError, match="cicc failed"):
            feeder.result(timeout=10)


def test_a_compiler_opening_the_stubs_again_finds_them(tmp_path):
    """A compiler that reads the stubs and opens the file again (to quote a line of it in an
    error) gets the stubs the second time too, not a pipe no one writes to; likewise the empty
    stubs of a failed cicc."""
    stubs = _fifo(tmp_path)
    stubs.written.write_text("int stub;\n")

    def host_compiler():
        first = stubs.pipe.read_bytes()
        return first, stubs.pipe.read_bytes(), stubs.pipe.is_fifo()

    with ThreadPoolExecutor(3) as pool:
        host = pool.submit(host_compiler)
        pool.submit(stubs.feed, pool.submit(lambda: None), host).result(timeout=10)
        assert host.result(timeout=10) == (b"int stub;\n", b"int stub;\n", False)

    (tmp_path / "failed").mkdir()
    stubs = _fifo(tmp_path / "failed")

    def cicc():
        raise JitCompileError("unit", tmp_path, ["cicc"], "cicc failed")

    with ThreadPoolExecutor(3) as pool:
        host = pool.submit(host_compiler)
        feeder = pool.submit(stubs.feed, pool.submit(cicc), host)
        assert host.result(timeout=10) == (b"", b"", False)
        with pytest.raises(JitCompileError, match="cicc failed"):
            feeder.result(timeout=10)


def test_the_fatbinary_linked_apart_is_the_image_nvcc_made(tmp_path):
    """The module's device code section holds exactly the image fatbinary wrote, whose own
    fatbin.c was checked to wrap it as the wrapper written here does."""
    spec = _spec("pipeline_image")
    library, _ = build.compile_module(spec, tmp_path)
    (image,) = tmp_path.glob("*.nvcc/*.fatbin")
    assert image.with_suffix(".o").is_file()
    data = image.read_bytes()
    assert _section(library, ".nv_fatbin") == data.ljust((len(data) + 7) // 8 * 8, b"\0")
    # The wrapper the host code registers holds the image's address (relocated at load).
    assert len(_section(library, ".nvFatBinSegment")) == 24


def test_an_unknown_fatbin_wrapper_compiles_the_host_code_again_over_nvccs(tmp_path, monkeypatch):
    """A toolchain whose fatbin.c is not the known wrapper: the host code is compiled again with
    nvcc's file, and the image is embedded as nvcc embeds it (no object of its own)."""
    monkeypatch.setattr(nvcc_pipeline.EmbeddedImage, "matches_nvcc", lambda self: False)
    spec = _spec("pipeline_unknown_wrapper")
    library, _ = build.compile_module(spec, tmp_path)
    (image,) = tmp_path.glob("*.nvcc/*.fatbin")
    assert not image.with_suffix(".o").exists()
    assert "fatbinData" in image.with_suffix(".fatbin.c").read_text()
    data = image.read_bytes()
    assert _section(library, ".nv_fatbin") == data.ljust((len(data) + 7) // 8 * 8, b"\0")


def test_nvccs_fatbin_wrapper_is_recognised_only_around_its_image(tmp_path):
    """matches_nvcc accepts nvcc's fatbin.c for its own image, and nothing else: another image,
    or a wrapper that differs from the known one."""
    pipeline = nvcc_pipeline.plan(_listing(_spec(), tmp_path), tmp_path / "keep")
    nvcc_pipeline.run(pipeline, tmp_path / "unit.cu", lambda argv: subprocess.run(argv, check=True))
    embedded = pipeline.embedded
    assert embedded.matches_nvcc()
    real = embedded.image.read_bytes()
    embedded.image.write_bytes(real[:-8] + bytes(8))
    assert not embedded.matches_nvcc()
    embedded.image.write_bytes(real)
    text = embedded.nvcc_wrapper.read_text()
    embedded.nvcc_wrapper.write_text(text.replace("0x466243b1, 1", "0x466243b1, 2"))
    assert not embedded.matches_nvcc()


def test_kernels_in_anonymous_namespaces_keep_one_name_on_both_sides(tmp_path):
    """The host stubs register each kernel under the name the device code gives it: both halves
    read the same module id, so anonymous namespaces mangle alike."""
    deps = _objects(_spec(), tmp_path)
    # The host side's name for the unit's anonymous namespace, in cudafe++'s output.
    host = next(tmp_path.glob("*.nvcc/*.cudafe1.cpp")).read_text()
    (anonymous,) = re.findall(r"#define _NV_ANON_NAMESPACE (\S+)", host)
    # The device side's names: the kernel entries of the PTX that the pipeline kept.
    entries = set()
    for ptx in tmp_path.glob("*.nvcc/*.ptx"):
        entries |= set(re.findall(r"\.entry\s+([0-9A-Za-z_]+)", ptx.read_text()))
    kernels = {e for e in entries if "seed_copy_kernel" in e}
    assert kernels, f"no kernel in the device code: {entries}"
    for name in kernels:
        assert f"{len(anonymous)}{anonymous}" in name, f"the host names the namespace {anonymous}, the device {name}"
    # The depfile lists the kernel's source and the headers it includes.
    assert str((KERNELS / "seed_copy.cuh").resolve()) in deps
    assert any(d.endswith("mllm_kernel/tensor.hpp") for d in deps)


def test_plain_nvcc_when_turned_off(tmp_path, monkeypatch):
    monkeypatch.setenv(nvcc_pipeline.PIPELINE_ENV, "0")
    calls = []
    monkeypatch.setattr(nvcc_pipeline, "plan", lambda *a: calls.append(a))
    deps = _objects(_spec("pipeline_off"), tmp_path)
    assert not calls and str((KERNELS / "seed_copy.cuh").resolve()) in deps


def test_unknown_step_falls_back_to_plain_nvcc(tmp_path, monkeypatch):
    """A listing with a tool the graph does not know is not taken apart: nvcc runs as usual."""
    real = subprocess.run

    def listing_with_unknown_tool(command, *args, **kwargs):
        result = real(command, *args, **kwargs)
        if "--dryrun" in command:
            result.stderr += "#$ mystery-tool --frobnicate x\n"
        return result

    monkeypatch.setattr(nvcc_pipeline.subprocess, "run", listing_with_unknown_tool)
    spec = _spec("pipeline_unknown")
    assert nvcc_pipeline.plan(_listing(spec, tmp_path), tmp_path / "keep") is None
    (tmp_path / "build").mkdir()
    _objects(spec, tmp_path / "build")


def test_device_code_error_names_the_nvcc_command(tmp_path):
    source = tmp_path / "broken.cuh"
    source.write_text("#pragma once\n#include <cstdint>\n__global__ void broken(int* p) { p[0] = undeclared_name; }\n"
                      "inline void run(std::int64_t) {}\n")
    spec = cuda_build_spec("pipeline_broken", cuda_files=[source], cuda_wrappers=[("run", "run")],
                           cuda_archs=("9.0",))
    (tmp_path / "build").mkdir()
    with pytest.raises(JitCompileError) as info:
        build.compile_module(spec, tmp_path / "build")
    assert "undeclared_name" in info.value.output and "is undefined" in info.value.output
    assert Path(info.value.command[0]).name == "nvcc"


def test_a_graph_that_fails_where_nvcc_succeeds_falls_back(tmp_path, monkeypatch, caplog):
    """A toolchain whose steps the graph misreads still builds (through nvcc alone), with a
    warning that says how to skip the graph."""
    def misread(pipeline, source, run_step):
        run_step(["bash", "-c", "echo 'cicc: unexpected listing' >&2; exit 3"])

    monkeypatch.setattr(nvcc_pipeline, "run", misread)
    with caplog.at_level("WARNING", logger="mllm_kernel"):
        deps = _objects(_spec("pipeline_misread"), tmp_path)
    assert str((KERNELS / "seed_copy.cuh").resolve()) in deps
    assert any(nvcc_pipeline.PIPELINE_ENV in r.getMessage() for r in caplog.records)
