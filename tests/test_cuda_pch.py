"""The CUDA host precompiled header (jit_utils/cuda_pch.py): which prefix of cudafe++'s output it
takes, when it is built and read, and that what is built with it is right. The compile tests
need nvcc, no GPU; the kernel runs where a GPU is."""

from __future__ import annotations

import json
import logging
import shlex
from pathlib import Path

import pytest
import torch
from conftest import needs_nvcc, requires_cuda

from mllm_kernel.jit_utils import cuda_pch, load_cuda_jit, make_cpp_args, pch_build, toolchain

KERNELS = Path(__file__).resolve().parent / "user_kernels"

TVM_HEADER = "/site/tvm_ffi/include/tvm/ffi/container/tensor.h"


def _output(*marks: str, first: str = '# 1 "/build/unit.cu"') -> str:
    """A cudafe++-like output: the first line, then each mark followed by a declaration."""
    return first + "\n" + "".join(f"{m}\nint x{i};\n" for i, m in enumerate(marks))


def test_the_prefix_ends_at_the_first_mark_of_the_units_own_files():
    text = _output('# 61 "/cuda/include/cuda_runtime.h"', f'# 12 "{TVM_HEADER}"', "# 3",
                   '# 10 "/home/me/kernel.cuh"', '# 20 "/cuda/include/other.h"', '# 4 "/build/unit.cu"')
    first, prefix, rest = cuda_pch.split(text, {"/build/unit.cu", "/home/me/kernel.cuh"})
    assert first == '# 1 "/build/unit.cu"\n'
    assert prefix.startswith('# 61 "/cuda/include/cuda_runtime.h"') and prefix.endswith("int x2;\n")
    assert rest.startswith('# 10 "/home/me/kernel.cuh"')
    assert first + prefix + rest == text
    # GCC's marks carry flags after the name.
    text = _output(f'# 12 "{TVM_HEADER}" 1 3', '# 4 "/build/unit.cu" 2')
    assert cuda_pch.split(text, {"/build/unit.cu"})[2].startswith('# 4 "/build/unit.cu" 2')


def test_no_prefix_without_tvm_ffis_cpp_headers_or_a_mark_of_the_unit():
    own = {"/build/unit.cu"}
    c_api_only = _output('# 1 "/site/tvm_ffi/include/tvm/ffi/c_api.h"',
                         '# 1 "/site/tvm_ffi/include/tvm/ffi/extra/c_env_api.h"', '# 4 "/build/unit.cu"')
    assert cuda_pch.split(c_api_only, own) is None
    # The unit's own code before tvm-ffi's headers: the prefix would hold none of them.
    late = _output('# 2 "/build/unit.cu"', f'# 12 "{TVM_HEADER}"', '# 4 "/build/unit.cu"')
    assert cuda_pch.split(late, own) is None
    assert cuda_pch.split(_output(f'# 12 "{TVM_HEADER}"'), own) is None
    assert cuda_pch.split("", own) is None


def test_own_files_are_the_unit_and_the_sources_it_includes(tmp_path):
    unit = tmp_path / "unit.cu"
    unit.write_text('// generated\n#include "/home/me/kernel.cuh"\n#include <mllm_kernel/ffi_export.hpp>\n')
    assert cuda_pch.own_files(unit) == {str(unit), "/home/me/kernel.cuh"}


@pytest.fixture
def gcc_host(isolated_cache, monkeypatch):
    if not toolchain.compiler_is_gcc("gcc"):
        pytest.skip("the precompiled header is GCC's")
    monkeypatch.setenv(cuda_pch.PCH_ENV, "1")
    return isolated_cache


def _read(tmp_path: Path, text: str, flags: str = "-O1"):
    unit = tmp_path / "unit.cu"
    unit.write_text('#include "/home/me/kernel.cuh"\n')
    host_source = tmp_path / "unit.cudafe1.cpp"
    host_source.write_text(text)
    command = f"gcc -std=c++20 {flags} -c -x c++ {shlex.quote(str(host_source))} -o {shlex.quote(str(tmp_path / 'unit.o'))}"
    return cuda_pch.read(host_source, unit, command)


def test_the_key_covers_the_prefix_and_the_flags_not_the_unit(gcc_host, tmp_path):
    text = _output(f'# 12 "{TVM_HEADER}"', '# 10 "/home/me/kernel.cuh"')
    folders = {}
    for case, (variant, flags) in {"one": (text, "-O1"), "other unit": (text.replace("/build/unit.cu", "/x/u.cu"), "-O1"),
                                   "edited header": (text.replace("int x0;", "int y0;"), "-O1"),
                                   "other flags": (text, "-O2")}.items():
        (tmp_path / case).mkdir()
        prefix = _read(tmp_path / case, variant, flags)
        assert prefix.flags[0].endswith("gcc") and "-c" not in prefix.flags
        assert not any("unit.o" in f or "cudafe1" in f for f in prefix.flags)
        folders[case] = prefix.folder
    assert folders["one"] == folders["other unit"], "the unit's own name and folder are not in the key"
    assert len({folders["one"], folders["edited header"], folders["other flags"]}) == 3


def test_turned_off_or_another_compiler(gcc_host, tmp_path, monkeypatch):
    text = _output(f'# 12 "{TVM_HEADER}"', '# 10 "/home/me/kernel.cuh"')
    assert _read(tmp_path, text) is not None
    monkeypatch.setenv(cuda_pch.PCH_ENV, "0")
    assert _read(tmp_path, text) is None
    monkeypatch.setenv(cuda_pch.PCH_ENV, "1")
    host_source = tmp_path / "unit.cudafe1.cpp"
    assert cuda_pch.read(host_source, tmp_path / "unit.cu", f"no-such-compiler -c {host_source} -o x.o") is None


def test_a_prefix_that_fails_to_build_is_logged_and_left_out(gcc_host, tmp_path, caplog):
    prefix = _read(tmp_path, _output(f'# 12 "{TVM_HEADER}"', '# 10 "/home/me/kernel.cuh"').replace(
        "int x0;", "int x0 = missing_name;"))
    with caplog.at_level(logging.WARNING, logger="mllm_kernel"):
        assert not prefix.build()
    assert "host precompiled header did not build" in caplog.text
    assert not prefix.built()
    assert not list(gcc_host.glob(f"*{cuda_pch.FOLDER_PREFIX}*")), "nothing published, no temporary folder left"


def test_the_least_recently_used_folder_makes_way_beyond_the_limit(gcc_host, tmp_path):
    import os

    for i in range(cuda_pch.MAX_FOLDERS):
        folder = gcc_host / f"{cuda_pch.FOLDER_PREFIX}{i}"
        folder.mkdir(parents=True)
        os.utime(folder, (1000 + i, 1000 + i))  # folder 0 used longest ago
    prefix = _read(tmp_path, _output(f'# 12 "{TVM_HEADER}"', '# 10 "/home/me/kernel.cuh"'))
    assert prefix.build() and prefix.built()
    names = {f.name for f in gcc_host.glob(cuda_pch.FOLDER_PREFIX + "*")}
    assert len(names) == cuda_pch.MAX_FOLDERS and f"{cuda_pch.FOLDER_PREFIX}0" not in names
    assert prefix.folder.name in names and not list(gcc_host.glob(".*")), "nothing left aside"


def test_a_folder_left_incomplete_or_by_a_dead_process_is_replaced(tmp_path):
    target = tmp_path / "cuda-pch_x"
    (target / "partial").mkdir(parents=True)  # no complete file: an interrupted copy
    dead = tmp_path / ".cuda-pch_x.999999999.abcd1234"  # a pid no process has
    dead.mkdir()

    def fill(folder):
        (folder / "done").write_text("1")
        return True

    assert pch_build.publish(target, fill, "done")
    assert (target / "done").is_file() and not (target / "partial").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cuda-pch_x"]


def test_a_background_build_that_raises_is_logged_and_not_tried_again(tmp_path, caplog):
    calls = []

    def build():
        calls.append(1)
        raise OSError("disk full")

    target = tmp_path / "cuda-pch_y"
    with caplog.at_level(logging.WARNING, logger="mllm_kernel"):
        pch_build.start_in_background(target, build)
        pch_build.wait_for_background()
        pch_build.start_in_background(target, build)
        pch_build.wait_for_background()
    assert calls == [1]
    assert "building the precompiled header cuda-pch_y failed" in caplog.text and "disk full" in caplog.text
    pch_build.forget_failures()


def _seed_kernel(folder: Path, name: str, factor: str) -> Path:
    """tests/user_kernels/seed_copy.cuh with its copy turned into a scale by ``factor``, and a
    call into tvm-ffi's tensor header beyond TensorView, so that it builds against the real
    header, not the stand-in (jit_utils/standin.py)."""
    folder.mkdir(parents=True, exist_ok=True)
    source = folder / f"{name}.cuh"
    source.write_text((KERNELS / "seed_copy.cuh").read_text().replace(
        "if (i < n) out[i] = in[i];", f"if (i < n) out[i] = static_cast<T>(static_cast<float>(in[i]) * {factor});").replace(
        "    constexpr int kBlock = 256;", "    (void)tvm::ffi::GetDataSize(input);\n    constexpr int kBlock = 256;"))
    return source


def _load(name: str, source: Path):
    wrappers = [(f"scale_{d}", f"SeedCopy<{make_cpp_args(getattr(torch, d))}>::run") for d in ("float32", "bfloat16")]
    return load_cuda_jit(name, cuda_files=[source], cuda_wrappers=wrappers)


def _build_twice(root: Path, tmp_path: Path, caplog):
    """Two seed-style kernels, the same includes, other sources: the second, built once the
    first's prefix is, and the prefix's folder."""
    with caplog.at_level(logging.INFO, logger="mllm_kernel"):
        _load("pch_first", _seed_kernel(tmp_path / "a", "first", "2.0f"))
        assert "precompiled prefix" not in caplog.text
        cuda_pch.wait_for_background()
        (folder,) = root.glob(cuda_pch.FOLDER_PREFIX + "*")
        caplog.clear()
        second = _load("pch_second", _seed_kernel(tmp_path / "b", "second", "-3.0f"))
    return second, folder


@needs_nvcc
def test_a_seed_kernel_builds_it_and_the_next_one_reads_it(gcc_host, tmp_path, caplog):
    """The first seed-style kernel compiles as before and leaves the prefix built; a second one
    compiles its host code with it and exports the same functions."""
    module, folder = _build_twice(gcc_host, tmp_path, caplog)
    assert (folder / "prefix.h.gch").is_file()
    command = json.loads((folder / "command.json").read_text())
    assert "c++-header" in command and "-c" not in command
    assert f"compiled with the precompiled prefix {folder.name}" in caplog.text
    assert list(gcc_host.glob(cuda_pch.FOLDER_PREFIX + "*")) == [folder]
    assert callable(module.scale_float32) and callable(module.scale_bfloat16)


@requires_cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_kernel_compiled_with_it_computes_right(gcc_host, tmp_path, caplog, dtype):
    module, _ = _build_twice(gcc_host, tmp_path, caplog)
    x = (torch.randn(4097, device="cuda") * 4 + 0.5).to(dtype)
    out = torch.full_like(x, float("nan"))
    getattr(module, f"scale_{str(dtype).removeprefix('torch.')}")(x, out)
    torch.testing.assert_close(out, (x.float() * -3.0).to(dtype), rtol=0, atol=0)


@needs_nvcc
def test_library_units_take_no_prefix(gcc_host, caplog):
    """The library's own units include tvm-ffi's C API only: nothing is precompiled for them."""
    import mllm_kernel.cuda.jit  # noqa: F401 - declares the CUDA modules
    from mllm_kernel.jit_utils import cache, find_module

    cache.find_library(find_module("add_constant", ("2",), "cuda").spec("cuda"))
    cuda_pch.wait_for_background()
    assert not list(gcc_host.glob(cuda_pch.FOLDER_PREFIX + "*"))


def test_the_output_is_rewritten_byte_for_byte(gcc_host, tmp_path):
    """Bytes that are not UTF-8 (a Latin-1 string in a kernel) come through use() unchanged."""
    text = _output(f'# 12 "{TVM_HEADER}"', '# 10 "/home/me/kernel.cuh"')
    raw = text.encode().replace(b"int x1;", b'const char* s = "caf\xe9";')
    unit = tmp_path / "unit.cu"
    unit.write_text('#include "/home/me/kernel.cuh"\n')
    host_source = tmp_path / "unit.cudafe1.cpp"
    host_source.write_bytes(raw)
    prefix = cuda_pch.read(host_source, unit, f"gcc -c {host_source} -o {tmp_path / 'unit.o'}")
    prefix.use(host_source)
    assert not [f for f in tmp_path.iterdir() if f.name.startswith(".")], "no temporary file left"
    _, _, rest = raw.partition(b'# 10 "/home/me/kernel.cuh"')
    assert host_source.read_bytes() == (raw[:raw.index(b"\n") + 1] + f'#include "{prefix.header()}"\n'.encode()
                                        + b'# 10 "/home/me/kernel.cuh"' + rest)
    assert b"caf\xe9" in host_source.read_bytes()
    prefix.give_up(host_source)
    assert host_source.read_bytes() == raw, "cudafe++'s own output back"


def test_no_prefix_where_the_cache_path_cannot_be_included(gcc_host, tmp_path, monkeypatch):
    text = _output(f'# 12 "{TVM_HEADER}"', '# 10 "/home/me/kernel.cuh"')
    monkeypatch.setenv("MLLM_KERNEL_CACHE_DIR", str(tmp_path / 'a"b'))
    assert _read(tmp_path, text) is None


def test_a_failing_prefix_leaves_the_host_compile_as_it_was(tmp_path, monkeypatch, caplog):
    """Anything going wrong around the prefix is logged and skipped, never a failed build."""
    from mllm_kernel.jit_utils import nvcc_pipeline

    def broken(*args):
        raise OSError("cannot read it")

    monkeypatch.setattr(cuda_pch, "read", broken)
    pipeline = nvcc_pipeline.Pipeline([], [nvcc_pipeline.Step("gcc -c x.cpp -o x.o", "gcc")], [], tmp_path / "id",
                                      host_source=tmp_path / "x.cudafe1.cpp")
    with caplog.at_level(logging.WARNING, logger="mllm_kernel"):
        assert nvcc_pipeline._precompiled_prefix(pipeline, tmp_path / "unit.cu") == (None, False)
    assert "precompiled host prefix was skipped: cannot read it" in caplog.text


@needs_nvcc
def test_a_host_compile_that_fails_with_the_prefix_compiles_without_it(gcc_host, tmp_path, caplog):
    """A prefix whose compile fails (here: broken after it was built) costs one plain nvcc build
    of the unit, never the build, and is not used after."""
    _, folder = _build_twice(gcc_host, tmp_path, caplog)
    (folder / "prefix.h.gch").write_bytes(b"not a precompiled header")
    (folder / "prefix.h").write_text("#error broken prefix\n")
    with caplog.at_level(logging.INFO, logger="mllm_kernel"):
        caplog.clear()
        module = _load("pch_third", _seed_kernel(tmp_path / "c", "third", "5.0f"))
        assert "the host compile failed with the precompiled prefix" in caplog.text
        assert (folder / cuda_pch.UNUSABLE).exists()
        assert callable(module.scale_float32)
        caplog.clear()
        _load("pch_fourth", _seed_kernel(tmp_path / "d", "fourth", "7.0f"))
        cuda_pch.wait_for_background()
    assert "precompiled prefix" not in caplog.text
    assert list(gcc_host.glob(cuda_pch.FOLDER_PREFIX + "*")) == [folder], "not built again either"
