"""The stand-in for tvm-ffi's tensor header (mllm_kernel/standin/, jit_utils/standin.py): which
sources build against it, that its TensorView reads every tensor as tvm-ffi's own does, and that
a source it cannot build is built against the real header, once."""

from __future__ import annotations

import logging
import textwrap
from pathlib import Path

import pytest
import torch
from conftest import needs_nvcc

from mllm_kernel.jit_utils import cache, load_cpu_jit, make_cpp_args, standin
from mllm_kernel.jit_utils.load import cpu_build_spec, cuda_build_spec
from mllm_kernel.jit_utils.paths import CUDA_CSRC_DIR

KERNELS = Path(__file__).resolve().parent / "user_kernels"

SEED = """
#include <mllm_kernel/tensor.hpp>
#include <tvm/ffi/container/tensor.h>
void run(tvm::ffi::TensorView x, const tvm::ffi::TensorView y) { (void)tvm::ffi::ShapeView(x.shape()); }
"""


def _source(tmp_path: Path, text: str, name: str = "kernel.cuh") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def test_the_seed_guides_kernels_take_it():
    for name in ("seed_copy.cuh", "seed_copy.cpp", "grid_sum.cuh", "tensor_view_probe.cpp"):
        assert standin.applies([KERNELS / name]), name


@pytest.mark.parametrize("change", [
    ("void run(", "void other(tvm::ffi::Optional<tvm::ffi::TensorView> z);\nvoid run("),
    ("void run(", "using namespace tvm::ffi;\nvoid run("),
    ("void run(", "namespace ffi = tvm::ffi;\nvoid run("),
    ("void run(", "namespace tvm::ffi { struct Mine; }\nvoid run("),
    ("(void)tvm", "TVM_FFI_ICHECK(true); (void)tvm"),
    ("(void)tvm::ffi::ShapeView(x.shape())", "(void)tvm::ffi::GetDataSize(x)"),
    ("#include <tvm/ffi/container/tensor.h>", "#include <tvm/ffi/container/tensor.h>\n#include <tvm/ffi/function.h>"),
    ("#include <tvm/ffi/container/tensor.h>", '#include "tvm/ffi/container/shape.h"'),
    ("#include <tvm/ffi/container/tensor.h>", ""),  # nothing to stand in for
], ids=["Optional", "using-namespace", "alias", "reopened", "macro", "free-function", "function.h", "other-header",
        "no-tensor-header"])
def test_anything_else_of_tvm_ffi_keeps_the_real_header(tmp_path, change):
    assert standin.applies([_source(tmp_path, SEED)])
    assert not standin.applies([_source(tmp_path, SEED.replace(*change))])


def test_files_included_by_quotes_are_read_too(tmp_path):
    (tmp_path / "sub").mkdir()
    helper = _source(tmp_path / "sub", """
        #include <tvm/ffi/container/tensor.h>
        inline int helper(tvm::ffi::TensorView x) { return x.ndim(); }
    """, "helper.h")
    kernel = _source(tmp_path, '#include "sub/helper.h"\n' + SEED)
    assert standin.applies([kernel])
    helper.write_text(helper.read_text().replace("int helper", "tvm::ffi::Tensor keep(); int helper"))
    assert not standin.applies([kernel])
    # A helper found through the module's include paths is read; one found nowhere is not (nor
    # are headers included by angle brackets): a build that fails for it falls back (below).
    elsewhere = _source(tmp_path, '#include "helper.h"\n' + SEED, "elsewhere.cuh")
    assert not standin.applies([elsewhere], [tmp_path / "sub"])
    assert standin.applies([elsewhere])
    helper.write_text(helper.read_text().replace("tvm::ffi::Tensor keep(); ", ""))
    assert standin.applies([elsewhere], [tmp_path / "sub"])


def test_the_librarys_kernels_are_left_alone():
    spec = cuda_build_spec("rmsnorm", "bf16_t", cuda_files=[CUDA_CSRC_DIR / "norm.cuh"], cuda_wrappers=[])
    assert not spec.tvm_ffi_standin
    assert str(standin.STANDIN_INCLUDE_DIR) not in spec.include_dirs()


def test_the_stand_in_is_first_on_the_include_path_and_in_the_key():
    wrappers = [("run", f"SeedCopy<{make_cpp_args(torch.float32)}>::run")]
    spec = cpu_build_spec("seed_copy", cpp_files=[KERNELS / "seed_copy.cpp"], cpp_wrappers=wrappers)
    real = spec.without_standin()
    assert spec.tvm_ffi_standin and not real.tvm_ffi_standin
    assert spec.include_dirs()[0] == str(standin.STANDIN_INCLUDE_DIR)
    assert str(standin.STANDIN_INCLUDE_DIR) not in real.include_dirs()
    assert spec.portable_key() != real.portable_key() and spec.folder_name != real.folder_name


@pytest.fixture(scope="module")
def probes(tmp_path_factory):
    """tensor_view_probe.cpp built against the stand-in and against tvm-ffi's own header."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MLLM_KERNEL_CACHE_DIR", str(tmp_path_factory.mktemp("standin-cache")))
        names = ("describe", "size_at", "stride_at", "shape_at", "shape_back")
        spec = cpu_build_spec("tensor_view_probe", cpp_files=[KERNELS / "tensor_view_probe.cpp"],
                              cpp_wrappers=[(n, n) for n in names])
        assert spec.tvm_ffi_standin
        yield cache.load_module(spec), cache.load_module(spec.without_standin())


def _tensors():
    x = torch.randn(6, 8)
    yield x
    yield x.t()
    yield x[1:, ::3]
    yield torch.randn(4, 1, 5).permute(2, 1, 0)
    yield torch.randn(1, 7)[:, 2:]
    yield torch.empty(0, 3)
    yield torch.tensor(2.5)
    yield torch.randint(-5, 5, (3, 2, 2), dtype=torch.int8)
    yield torch.randn(5, 3).to(torch.bfloat16)[::2]


def test_its_tensor_view_reads_every_tensor_as_tvm_ffis_does(probes):
    light, real = probes
    for x in _tensors():
        described = light.describe(x)
        assert described == real.describe(x)
        assert f"data {x.data_ptr()} " in described
        assert f" numel {x.numel()} " in described
        assert " shape [" + "".join(f"{s}," for s in x.shape) + "]" in described
        assert " strides [" + "".join(f"{s}," for s in x.stride()) + "]" in described
        for i in range(-x.dim(), x.dim()):
            assert light.size_at(x, i) == real.size_at(x, i) == x.shape[i]
            assert light.stride_at(x, i) == real.stride_at(x, i) == x.stride(i)


@pytest.mark.parametrize("call, args, message", [
    ("size_at", (2,), "Index 2 out of bounds for tensor with 2 dimensions"),
    ("size_at", (-3,), "Index -3 out of bounds for tensor with 2 dimensions"),
    ("stride_at", (5,), "Index 5 out of bounds for tensor with 2 dimensions"),
    ("shape_at", (2,), "indexing 2 on a Shape of size 2"),
])
def test_an_index_out_of_range_raises_the_same_index_error(probes, call, args, message):
    x = torch.randn(3, 4)
    for module in probes:
        with pytest.raises(IndexError, match=message):
            getattr(module, call)(x, *args)


def test_the_back_of_an_empty_shape_raises_the_same_index_error(probes):
    for module in probes:
        with pytest.raises(IndexError, match="indexing 18446744073709551615 on a Shape of size 0"):
            module.shape_back(torch.tensor(1.0))


AS_STRIDED = """
#include <mllm_kernel/tensor.hpp>
#include <tvm/ffi/container/tensor.h>
#include <cstdint>
namespace {
// as_strided is tvm-ffi's, not the stand-in's: the text test passes, the build does not.
std::int64_t strided_numel(tvm::ffi::TensorView x) { return x.as_strided(x.shape(), x.strides()).numel(); }
}  // namespace
"""


def test_a_source_the_stand_in_cannot_build_is_built_against_the_real_header_once(isolated_cache, tmp_path,
                                                                                   caplog):
    source = _source(tmp_path, AS_STRIDED, "strided.cpp")
    wrappers = [("strided_numel", "strided_numel")]
    spec = cpu_build_spec("strided", cpp_files=[source], cpp_wrappers=wrappers)
    assert spec.tvm_ffi_standin
    with caplog.at_level(logging.INFO, logger="mllm_kernel"):
        module = load_cpu_jit("strided", cpp_files=[source], cpp_wrappers=wrappers)
        assert module.strided_numel(torch.randn(3, 5).t()) == 15
        assert "does not compile against the stand-in for tvm-ffi's tensor header" in caplog.text
        refused = isolated_cache / spec.folder_name / cache.STANDIN_REFUSED
        assert "as_strided" in refused.read_text()
        caplog.clear()
        library = cache.find_library(spec)
        assert "compile" not in caplog.text, "neither build is tried again"
    assert library.parent.name == spec.without_standin().folder_name


def test_a_genuine_error_is_reported_from_the_real_headers_build(isolated_cache, tmp_path):
    from mllm_kernel.jit_utils import JitCompileError

    source = _source(tmp_path, SEED.replace("(void)tvm::ffi::ShapeView(x.shape());", "x.no_such_member();"),
                     "broken.cpp")
    spec = cpu_build_spec("broken", cpp_files=[source], cpp_wrappers=[("run", "run")])
    with pytest.raises(JitCompileError, match="no_such_member") as error:
        load_cpu_jit("broken", cpp_files=[source], cpp_wrappers=[("run", "run")])
    assert str(error.value.build_dir).startswith(str(isolated_cache / spec.without_standin().folder_name))


@needs_nvcc
def test_a_seed_kernel_compiles_for_cuda_against_it(isolated_cache):
    """seed_copy.cuh builds with nvcc against the stand-in (no GPU needed to compile)."""
    from mllm_kernel.jit_utils import load_cuda_jit

    wrappers = [(f"copy_{d}", f"SeedCopy<{make_cpp_args(getattr(torch, d))}>::run") for d in ("float32", "bfloat16")]
    spec = cuda_build_spec("seed_copy", cuda_files=[KERNELS / "seed_copy.cuh"], cuda_wrappers=wrappers)
    assert spec.tvm_ffi_standin
    module = load_cuda_jit("seed_copy", cuda_files=[KERNELS / "seed_copy.cuh"], cuda_wrappers=wrappers)
    assert callable(module.copy_float32) and callable(module.copy_bfloat16)
    manifest = cache.read_manifest(isolated_cache / spec.folder_name)
    assert any("standin/tvm/ffi/container/tensor.h" in record[0] for record in manifest["dependencies"])
