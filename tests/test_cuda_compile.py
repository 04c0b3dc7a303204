"""Compile-only checks for the CUDA kernels (no GPU needed; runs in CI where nvcc exists).

Builds every CUDA module variant the package declares (each op family for float32, float16 and
bfloat16, add_constant's five constants, the KV-cache store) through the normal JIT path, and
compiles each device header on its own for sm_80 and sm_90.
"""

from __future__ import annotations

import subprocess

import pytest
from conftest import needs_nvcc

from mllm_kernel.jit_utils import toolchain
from mllm_kernel.jit_utils.paths import INCLUDE_DIR

pytestmark = needs_nvcc

#: The CUTLASS GEMM modules compiled through the JIT here (a minute each on two cores): for the
#: Hopper per-tensor and per-channel family, the int8 one takes the transposed ping-pong path and
#: bf16 out, the FP8 one the cooperative path and fp16 out, so every template branch of
#: csrc/scaled_mm_sm90.cuh is compiled; one Ampere/Ada configuration (the others' branches:
#: test_ampere_gemms_build_for_orin_and_ada). The block-scaled family's configuration is compiled
#: by test_hopper_gemm_wgmma_not_serialized, which also reads ptxas's report.
GEMM_CHECKED = {("scaled_mm_sm90_swap_64x16x256_c1x1_pingpong", ("int8_t", "bf16_t")),
                ("scaled_mm_sm90_128x256x128_c2x1_coop", ("fp8_e4m3_t", "fp16_t")),
                ("scaled_mm_sm80_128x128x64_w64x64x64_s4", ("int8_t", "bf16_t"))}
#: The name prefixes of the GEMM families, whose modules are compiled only as said above.
GEMM_FAMILIES = ("scaled_mm_sm90_", "scaled_mm_sm80_", "scaled_mm_blockwise_sm90_")


#: The Marlin GEMM modules built through the JIT here (sm_90): bf16 activations and 4-bit integer
#: weights, every kernel; test_marlin_gemm_builds_for_ampere_ada_and_orin compiles the other dtype
#: and weight types for sm_80, sm_86 and sm_87.
MARLIN_FAMILIES = ("marlin_gemm", "marlin_gemv", "marlin_dequant")
MARLIN_CHECKED = ("bf16_t", "4", "false")


def _checked(record) -> bool:
    if record.name in MARLIN_FAMILIES:
        return tuple(record.args[:3]) == MARLIN_CHECKED
    return not record.name.startswith(GEMM_FAMILIES) or (record.name, record.args) in GEMM_CHECKED


def _cuda_modules():
    import mllm_kernel.ops  # noqa: F401 - declares every module of the package
    from mllm_kernel.jit_utils import registered_kernels

    return [r for r in registered_kernels() if "cuda" in r.devices and _checked(r)]


def test_gemm_modules_checked_exist():
    from mllm_kernel.cuda.jit import fp8_blockwise_scaled_mm_cutlass, scaled_mm_sm80, scaled_mm_sm90

    families = (scaled_mm_sm90, fp8_blockwise_scaled_mm_cutlass, scaled_mm_sm80)
    declared = {(m.name, m.args) for family in families for m in family.MODULES.values()}
    assert GEMM_CHECKED <= declared
    for prefix in GEMM_FAMILIES[:2]:
        assert any(name.startswith(prefix) for name, _ in GEMM_CHECKED)


@pytest.mark.parametrize("record", _cuda_modules(), ids=lambda r: "-".join([r.name, *r.args]))
def test_every_cuda_module_builds(record):
    """Every CUDA module the package declares (each op family, dtype and constant) builds
    through the normal JIT path and exports each function it declares."""
    module = record.kernel.module("cuda")
    exports = record.kernel.exports("cuda")
    assert exports
    for name in exports:
        assert callable(getattr(module, name)), f"{record.name}{list(record.args)} does not export {name}"


def test_every_op_family_has_cuda_modules():
    names = {r.name for r in _cuda_modules()}
    assert {"rmsnorm", "fused_add_rmsnorm", "qknorm", "qknorm_across_heads", "silu_and_mul", "gelu_and_mul", "rope",
            "add_constant", "kv_cache", "kv_cache_fp8", "per_tensor_quant_fp8", "per_token_quant_fp8",
            "per_token_quant_int8", "per_token_group_quant_fp8", "per_token_group_quant_int8"} <= names


def test_cooperative_launch_test_kernel_builds():
    from conftest import grid_sum_module

    assert callable(grid_sum_module().grid_sum)


HEADERS = ["type.cuh", "math.cuh", "vec.cuh", "warp.cuh", "cta.cuh", "atomic.cuh", "tile.cuh", "quantize.cuh", "cache_hint.cuh",
           "impl/norm.cuh", "impl/quant.cuh", "impl/gdn.cuh", "impl/gdn_chunk.cuh", "impl/gdn_chunk_prepare.cuh",
           "impl/gdn_chunked.cuh", "mma.cuh", "async_copy.cuh"]


@pytest.mark.parametrize("header", HEADERS)
def test_device_header_compiles_alone(header, tmp_path):
    """Each header is self-contained: a translation unit that includes only it builds for
    sm_80 and sm_90 (device code is instantiated through a tiny kernel where it is a template)."""
    source = tmp_path / "tu.cu"
    source.write_text(f"#include <mllm_kernel/{header}>\n#include <mllm_kernel/{header}>\n__global__ void probe() {{}}\n")
    includes, _ = toolchain.tvm_ffi_paths()
    command = [toolchain.find_nvcc(), "-std=c++20", "-c", str(source), "-o", str(tmp_path / "tu.o"),
               "--expt-relaxed-constexpr", f"-I{INCLUDE_DIR}", *(f"-I{d}" for d in includes),
               "-gencode=arch=compute_80,code=sm_80", "-gencode=arch=compute_90,code=sm_90"]
    result = subprocess.run(command, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_gdn_chunk_smem_bytes_match_the_kernel(tmp_path):
    """The wrapper's size of the chunked state pass's shared memory, by which it keeps blocks of
    64 rows off GPUs that cannot hold them, is the kernel's own (static_asserts, compiled)."""
    from mllm_kernel.cuda.jit.gdn_extend_chunkwise import CHUNK_ROWS, HEAD_K_DIMS, chunk_smem_bytes

    checks = "".join(f"static_assert(sizeof(mllm_kernel::device::gdn::ChunkSmem<{dk}, {rows}>) == "
                     f"{chunk_smem_bytes(dk, rows)});\n" for dk in HEAD_K_DIMS for rows in CHUNK_ROWS)
    source = tmp_path / "smem.cu"
    source.write_text("#include <mllm_kernel/impl/gdn_chunked.cuh>\n" + checks)
    includes, _ = toolchain.tvm_ffi_paths()
    command = [toolchain.find_nvcc(), "-std=c++20", "-c", str(source), "-o", str(tmp_path / "smem.o"),
               "--expt-relaxed-constexpr", f"-I{INCLUDE_DIR}", *(f"-I{d}" for d in includes),
               "-gencode=arch=compute_90,code=sm_90"]
    result = subprocess.run(command, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_device_headers_instantiate(tmp_path):
    """The header templates instantiate for every element type on sm_80 and sm_90."""
    source = tmp_path / "inst.cu"
    source.write_text(r'''
#include <mllm_kernel/atomic.cuh>
#include <mllm_kernel/cta.cuh>
#include <mllm_kernel/impl/norm.cuh>
#include <mllm_kernel/math.cuh>
#include <mllm_kernel/tile.cuh>
#include <mllm_kernel/type.cuh>
#include <mllm_kernel/vec.cuh>
#include <mllm_kernel/warp.cuh>
using namespace mllm_kernel::device;
template <typename T>
__global__ void probe(T* out, const T* in, float* amax) {
  __shared__ float scratch[cta::kScratchSize];
  AlignedVector<T, kVecElems<T>> v;
  v.load(in, threadIdx.x);
  float s = warp::reduce_sum(cast<float>(v[0])) + warp::reduce_max(cast<float>(v[1]));
  s += cta::reduce_sum(s, scratch);
  __syncthreads();
  s += cta::reduce_max(s, scratch);
  atomic::max(amax, s);
  v[0] = math::max(v[0], math::exp(v[1]));
  v[1] = math::rsqrt(math::abs(v[1])) + cast<T>(math::sin(1.0f) * math::cos(s));
  const auto p = cast<float2>(packed_t<T>{});
  v[2] = cast<T>(p.x + math::kPi);
  v[3] = cast<T>(static_cast<float>(cast<fp8_e4m3_t>(s)));
  v.store(out, threadIdx.x);
  norm::Row<T> row{out, in, out, in, in, 1024};
  norm::rms_group_row<T, kVecElems<T>, 16, 1, norm::Fuse::kResidualAdd>(row, 1e-6f);
  norm::rms_cta_row<T, 1, 4, norm::Fuse::kSiluGate>(row, 1e-6f, scratch);
}
template __global__ void probe<float>(float*, const float*, float*);
template __global__ void probe<fp16_t>(fp16_t*, const fp16_t*, float*);
template __global__ void probe<bf16_t>(bf16_t*, const bf16_t*, float*);
''')
    includes, _ = toolchain.tvm_ffi_paths()
    command = [toolchain.find_nvcc(), "-std=c++20", "-c", str(source), "-o", str(tmp_path / "inst.o"),
               "--expt-relaxed-constexpr", f"-I{INCLUDE_DIR}", *(f"-I{d}" for d in includes),
               "-gencode=arch=compute_80,code=sm_80", "-gencode=arch=compute_90,code=sm_90"]
    result = subprocess.run(command, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_marlin_gemm_builds_for_ampere_ada_and_orin(tmp_path):
    """The weight-only GEMM's kernels (fp16 activations with 8-bit weights and bf16 with float8
    ones: the variants the JIT test above does not build), and the GEMV beside them, compile for
    sm_80 (A100), sm_86 (three pipeline stages) and sm_87 (Jetson Orin), where float8 weights
    have no tensor cores of their own; every 4-bit tile and the 8-bit 16-row one fit the 163 KB
    of shared memory a block has on sm_80 and sm_87, and the 4-bit 16- and 32-row tiles the 99
    KB of sm_86 and sm_89."""
    from mllm_kernel.cuda.jit.gptq_marlin import GEMM_KERNELS
    from mllm_kernel.jit_utils.paths import CUDA_CSRC_DIR

    def flags(kernel):
        return ", ".join([str(kernel.m_tiles), str(kernel.act_order).lower(), str(kernel.swapped).lower()])

    probes = "".join(f"void* probe_{i} = (void*)&marlin_gemm<fp16_t, 8, false, {flags(kernel)}>;\n"
                     f"void* probe_fp8_{i} = (void*)&marlin_gemm<bf16_t, 8, true, {flags(kernel)}>;\n"
                     for i, kernel in enumerate(GEMM_KERNELS))
    source = tmp_path / "marlin.cu"
    source.write_text('#include "marlin_gemm.cuh"\n#include "marlin_gemv.cuh"\n' + probes +
                      'void* probe_gemv = (void*)&marlin_gemv<bf16_t, 4, false, false>;\n'
                      'void* probe_gemv_act_order = (void*)&marlin_gemv<bf16_t, 4, false, true>;\n'
                      "constexpr int kAmpere = 163 * 1024, kAda = 99 * 1024;\n"
                      "static_assert(MarlinSmem<4, 4>::bytes(marlin_stages(80)) <= kAmpere &&\n"
                      "              MarlinSmem<4, 2>::bytes(marlin_stages(87)) <= kAmpere &&\n"
                      "              MarlinSmem<4, 1>::bytes(marlin_stages(80)) <= kAmpere &&\n"
                      "              MarlinSmem<8, 1>::bytes(marlin_stages(87)) <= kAmpere);\n"
                      "static_assert(MarlinSmem<4, 1>::bytes(marlin_stages(86)) <= kAda &&\n"
                      "              MarlinSmem<4, 2>::bytes(marlin_stages(89)) <= kAda);\n")
    includes, _ = toolchain.tvm_ffi_paths()
    command = [toolchain.find_nvcc(), "-std=c++20", "-c", str(source), "-o", str(tmp_path / "marlin.o"),
               "--expt-relaxed-constexpr", f"-I{CUDA_CSRC_DIR}", f"-I{INCLUDE_DIR}", *(f"-I{d}" for d in includes),
               "-gencode=arch=compute_80,code=sm_80", "-gencode=arch=compute_86,code=sm_86",
               "-gencode=arch=compute_87,code=sm_87"]
    result = subprocess.run(command, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_ampere_gemms_build_for_orin_and_ada(tmp_path):
    """The Ampere/Ada W8A8 GEMM's branches the JIT test above does not build: int8 with fp16 out
    and the small-M tile for sm_87 (Jetson Orin), FP8 (sm_89's MMAs) for sm_89."""
    from mllm_kernel.jit_utils.paths import CUDA_CSRC_DIR

    includes, _ = toolchain.tvm_ffi_paths()
    for arch, instance in (("87", "int8_t, fp16_t, 16, 64, 128, 16, 64, 64, 6"),
                           ("89", "fp8_e4m3_t, bf16_t, 64, 128, 128, 64, 64, 64, 3")):
        source = tmp_path / f"scaled_mm_{arch}.cu"
        source.write_text(f'#include "scaled_mm_sm80.cuh"\nvoid* probe = (void*)&scaled_mm_sm80<{instance}>;\n')
        command = [toolchain.find_nvcc(), "-std=c++20", "-c", str(source), "-o", str(tmp_path / f"{arch}.o"),
                   "--expt-relaxed-constexpr", f"-I{CUDA_CSRC_DIR}", f"-I{INCLUDE_DIR}",
                   *(f"-I{d}" for d in includes), f"-I{toolchain.find_cutlass_include()}",
                   f"-gencode=arch=compute_{arch},code=sm_{arch}"]
        result = subprocess.run(command, capture_output=True, text=True)
        assert result.returncode == 0, result.stdout + result.stderr


def _ptxas_report(tmp_path, spec) -> str:
    """nvcc's and ptxas's output (-Xptxas=-v) for a module's CUDA unit, built exactly as declared."""
    (unit,) = [u for u in spec.units if u.language == "cuda"]
    source = tmp_path / "unit.cu"
    source.write_text(unit.source_text())  # the module's own generated source
    command = [toolchain.find_nvcc(), *spec.nvcc_flags(), *toolchain.gencode_flags(spec.cuda_archs),
               *(f"-I{d}" for d in spec.include_dirs()), *spec.extra_cuda_cflags, "-Xptxas=-v",
               "-c", str(source), "-o", str(tmp_path / "unit.o")]
    result = subprocess.run(command, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout + result.stderr


@pytest.mark.parametrize("scale_a_major_m", [False, True], ids=["sa_k_major", "sa_m_major"])
def test_hopper_gemm_wgmma_not_serialized(tmp_path, scale_a_major_m):
    """The block-scaled GEMM (one configuration, exactly as declared, with each layout of A's
    scales) compiles with the JIT's flags for CUTLASS modules, and ptxas keeps its warpgroup MMAs
    pipelined: no C7510 report, which CUTLASS's device-side asserts cause unless NDEBUG is
    defined, and no C7517 (a wait for the MMAs in flight injected where a set of partial sums is
    live across a branch), which would undo the overlapped mainloop
    (csrc/scaled_mm_blockwise_sm90_mainloop.cuh)."""
    import torch

    from mllm_kernel.cuda.jit import fp8_blockwise_scaled_mm_cutlass as blockwise

    module = blockwise.MODULES[(torch.bfloat16, "128x128x128_c1x1_coop", scale_a_major_m)]
    report = _ptxas_report(tmp_path, module.spec("cuda"))
    assert "C7510" not in report, report
    assert "C7517" not in report, report


@pytest.mark.parametrize("weights,act_order", [(4, False), (4, True), (8, False), (8, True)],
                         ids=["w4", "w4_act_order", "w8", "w8_act_order"])
def test_marlin_wgmma_not_serialized(tmp_path, weights, act_order):
    """The Hopper Marlin kernel (bf16, as declared: 4- and 8-bit weights, with act-order and
    without) keeps its wgmmas pipelined (no C751x report: non-wgmma code touching accumulators
    or A registers in flight) and spills nothing."""
    import torch

    from mllm_kernel.cuda.jit import gptq_marlin

    report = _ptxas_report(tmp_path, gptq_marlin._declare_wgmma(torch.bfloat16, weights, act_order).spec("cuda"))
    assert "C751" not in report, report
    assert "Compiling entry function '_ZN" in report and " 0 bytes spill stores" in report, report
    assert " bytes spill stores" not in report.replace(" 0 bytes spill stores", ""), report


@pytest.mark.parametrize("weights", [4, 8])
def test_marlin_gemv_act_order_spills_nothing(tmp_path, weights):
    """The decoding GEMV with act-order (bf16, as declared; both its row-block kernels, at 128
    registers a thread for two blocks an SM) spills nothing: its per-row scaled path had spilled the
    common path's registers at 9-16 rows."""
    import torch

    from mllm_kernel.cuda.jit import gptq_marlin

    report = _ptxas_report(tmp_path, gptq_marlin._declare_gemv(torch.bfloat16, weights, True).spec("cuda"))
    assert report.count("Compiling entry function '_ZN") == 2 and report.count(" 0 bytes spill stores") == 2, report


@pytest.mark.parametrize("operand", ["int8", "fp8"])
def test_scaled_mm_gemv_block_shapes_spill_nothing(tmp_path, operand):
    """The W8A8 decoding GEMV (bf16 out, as declared) builds one kernel a block shape and row
    block, and none spills: three blocks an SM cap a thread at 80 registers, four-warp blocks at
    four an SM at 128 with both activation blocks."""
    import torch

    from mllm_kernel.cuda.jit import scaled_mm_gemv

    dtype = torch.int8 if operand == "int8" else torch.float8_e4m3fn
    report = _ptxas_report(tmp_path, scaled_mm_gemv.MODULES[(dtype, torch.bfloat16)].spec("cuda"))
    assert report.count("Compiling entry function '_ZN") == 4 and report.count(" 0 bytes spill stores") == 4, report


@pytest.mark.parametrize("op, args, scalar_kernels", [("rmsnorm", ("bf16_t",), 2),
                                                      ("per_tensor_quant_fp8", ("bf16_t", "true"), 1),
                                                      ("per_tensor_quant_fp8", ("bf16_t", "false"), 3)])
def test_scalar_paths_compile_few_kernels(tmp_path, op, args, scalar_kernels):
    """Rows that are misaligned or not whole 16-byte vectors take the scalar path, whose
    kernels every first call compiles too: the norms plan two shapes for it, static per-tensor
    quantization runs one kernel, dynamic three. Counted in the PTX of the bf16 module as the
    JIT declares it."""
    import re

    from mllm_kernel.jit_utils import find_module

    spec = find_module(op, args, "cuda").spec("cuda")
    (unit,) = [u for u in spec.units if u.language == "cuda"]
    source, ptx = tmp_path / f"{op}.cu", tmp_path / f"{op}.ptx"
    source.write_text(unit.source_text())
    command = [toolchain.find_nvcc(), *spec.nvcc_flags(), "-arch=compute_90", *(f"-I{d}" for d in spec.include_dirs()),
               *spec.extra_cuda_cflags, "-ptx", str(source), "-o", str(ptx)]
    result = subprocess.run(command, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    entries = re.findall(r"^(?:\.visible )?\.entry (\S+)\(", ptx.read_text(), re.MULTILINE)
    scalar = [name for name in entries if re.search(r"kernelI13__nv_bfloat16Li1E", name)]
    vector = [name for name in entries if re.search(r"kernelI13__nv_bfloat16Li8E", name)]
    assert len(scalar) == scalar_kernels, scalar
    assert len(vector) > scalar_kernels, vector  # the pattern names the kernels of both paths
