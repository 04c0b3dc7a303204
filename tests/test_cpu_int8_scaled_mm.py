"""CPU int8_scaled_mm (mllm_kernel.cpu.jit) against an exact reference: the int8 products summed in
float64 (exact at these sizes), scaled in float64, and compared with the output after its one
rounding to out_dtype. Covers every shape class (tiles and their tails, the K tail, streaming
small M, the row split of narrow outputs), every layout the op accepts, the thread count, the
portable build (every SIMD target, chosen at run time), the byte dot product in x86 builds for
CPUs that have it, and every bad input."""

import importlib
import platform
import re
import shutil
import subprocess

import pytest
import torch

from mllm_kernel.cpu.jit import _threads, int8_scaled_mm
from conftest import build_cross_check
from mllm_kernel.jit_utils import load_cpu_jit, toolchain

OUT_DTYPES = [torch.bfloat16, torch.float16, torch.float32]
# The one rounding to out_dtype, relative to the exact value: half an ulp (bf16: 2**-9, kept at
# 2**-8; fp16: 2**-11; fp32: a few ulps of float32 arithmetic).
RTOL = {torch.bfloat16: 2**-8, torch.float16: 2**-11, torch.float32: 2**-20}
# Half the spacing of fp16's subnormals, where a relative bound says nothing.
ATOL = {torch.bfloat16: 0.0, torch.float16: 2**-25, torch.float32: 0.0}


def _int8(*shape, seed):
    return torch.randint(-128, 128, shape, dtype=torch.int8, generator=torch.Generator().manual_seed(seed))


def _operands(m, n, k, seed=0, out_dtype=torch.bfloat16, bias=False):
    """mat_a [m, k], mat_b = w.t() of w [n, k], float32 scales [m] and [n] that keep |out| below
    about 2.3 * sqrt(k) (inside fp16's range), and a bias [n] of out_dtype or None."""
    g = torch.Generator().manual_seed(seed + 1)
    a, w = _int8(m, k, seed=seed), _int8(n, k, seed=seed + 2)
    scales_a = (torch.rand(m, generator=g) + 0.5) / (128 * k**0.5)
    scales_b = (torch.rand(n, generator=g) + 0.5) / 128
    b = torch.randn(n, generator=g).to(out_dtype) if bias else None
    return a, w.t(), scales_a, scales_b, b


def _check(out, a, b, scales_a, scales_b, bias, out_dtype):
    assert out.dtype == out_dtype and out.shape == (a.shape[0], b.shape[1]) and out.is_contiguous()
    assert not out.isnan().any()
    x = (a.double() @ b.double()) * scales_a.double().reshape(-1, 1) * scales_b.double().reshape(1, -1)
    ref = x if bias is None else x + bias.double()
    # float32 arithmetic before the rounding errs by a few float32 ulps of the unbiased value,
    # which a bias may cancel: that part of the bound follows |x| and |bias|, not |ref|.
    slack = 2**-20 * (x.abs() + (0 if bias is None else bias.double().abs()))
    bound = RTOL[out_dtype] * ref.abs() + slack + ATOL[out_dtype]
    excess = (out.double() - ref).abs() - bound
    assert excess.max() <= 0, f"worst error exceeds the bound by {excess.max().item():.3g}"


@pytest.mark.parametrize("out_dtype", OUT_DTYPES, ids=str)
@pytest.mark.parametrize("k", [1, 15, 16, 100, 129])
@pytest.mark.parametrize("n", [1, 7, 8, 129])
@pytest.mark.parametrize("m", [1, 3, 17, 64, 1000])
def test_shapes(m, n, k, out_dtype):
    a, b, sa, sb, _ = _operands(m, n, k, seed=m + n + k, out_dtype=out_dtype)
    _check(int8_scaled_mm(a, b, sa, sb, out_dtype), a, b, sa, sb, None, out_dtype)


@pytest.mark.parametrize("out_dtype", OUT_DTYPES[:2], ids=str)
@pytest.mark.parametrize("m,n,k", [(1, 4096, 4096), (2, 1000, 4096), (3, 4096, 1000), (17, 4096, 4096),
                                   (64, 520, 4096), (130, 260, 1000), (5, 64, 16384)])
def test_large_shapes(m, n, k, out_dtype):
    a, b, sa, sb, bias = _operands(m, n, k, seed=1, out_dtype=out_dtype, bias=True)
    _check(int8_scaled_mm(a, b, sa, sb, out_dtype, bias), a, b, sa, sb, bias, out_dtype)


@pytest.mark.parametrize("out_dtype", OUT_DTYPES, ids=str)
@pytest.mark.parametrize("bias", [False, True], ids=["no_bias", "bias"])
@pytest.mark.parametrize("scales", ["1d", "2d", "shared_a", "shared_b"])
@pytest.mark.parametrize("strided", [False, True], ids=["dense", "strided"])
@pytest.mark.parametrize("m,n,k", [(17, 129, 100), (5, 64, 300)])
def test_layouts(m, n, k, strided, scales, bias, out_dtype):
    a, b, sa, sb, bias_t = _operands(m, n, k, seed=2, out_dtype=out_dtype, bias=bias)
    if strided:
        # Rows of mat_a and columns of mat_b at a padded stride: slices of wider buffers.
        a_big, w_big = _int8(m, k + 13, seed=5), _int8(n, k + 29, seed=6)
        a_big[:, :k], w_big[:, :k] = a, b.t()
        a, b = a_big[:, :k], w_big[:, :k].t()
        assert a.stride() == (k + 13, 1) and b.stride() == (1, k + 29)
    if scales == "2d":
        sa, sb = sa.view(m, 1), sb.view(1, n)
    elif scales == "shared_a":  # one scale for every row of mat_a
        sa = sa[:1]
    elif scales == "shared_b":  # one scale for every column of mat_b
        sb = sb[:1]
    out = int8_scaled_mm(a, b, sa, sb, out_dtype, bias_t)
    _check(out, a, b, sa, sb, bias_t, out_dtype)


def test_extreme_values_are_summed_exactly():
    # -128 * -128 * 4096 = 2**26 per output, and mixed signs of the largest magnitude: int32 sums
    # must be exact, so float32 outputs of unit scales are exactly the integer sums.
    m, n, k = 5, 9, 4096
    a = torch.full((m, k), -128, dtype=torch.int8)
    w = torch.full((n, k), -128, dtype=torch.int8)
    a[1], w[2] = 127, 127
    a[3, ::2], w[4, 1::2] = 127, 127
    out = int8_scaled_mm(a, w.t(), torch.ones(m), torch.ones(n), torch.float32)
    assert torch.equal(out.double(), a.double() @ w.double().t())


def test_k1_accepts_any_layout_of_mat_b():
    # With K = 1 a column holds one element, so mat_b's stride(0) is never read: a contiguous
    # [1, N] is as good as w.t().
    a, b = _int8(4, 1, seed=7), _int8(1, 10, seed=8)
    sa, sb = torch.rand(4) + 0.5, torch.rand(10) + 0.5
    _check(int8_scaled_mm(a, b, sa, sb, torch.float32), a, b, sa, sb, None, torch.float32)


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("m,n,k", [(64, 4096, 512), (1000, 7, 100), (1, 8192, 1000), (3, 2000, 777)])
def test_same_result_any_thread_count(monkeypatch, threads, m, n, k):
    # Each output is computed by one thread in one order, so results are bit-identical; (1000, 7)
    # splits rows across threads, the others columns.
    a, b, sa, sb, bias = _operands(m, n, k, seed=3, bias=True)
    monkeypatch.setattr(_threads, "_ENV_THREADS", 1)
    single = int8_scaled_mm(a, b, sa, sb, torch.bfloat16, bias)
    monkeypatch.setattr(_threads, "_ENV_THREADS", threads)
    for _ in range(2):
        assert torch.equal(int8_scaled_mm(a, b, sa, sb, torch.bfloat16, bias), single)


def test_portable_build(monkeypatch):
    # The build for every SIMD target, chosen at run time, gives the native build's bits (both
    # sum exactly in int32).
    monkeypatch.setenv("MLLM_KERNEL_CPU_TARGET", "portable")
    module = load_cpu_jit("test_cpu_int8_scaled_mm_portable", cpp_files=["int8_scaled_mm.cpp"],
                          cpp_wrappers=[("int8_scaled_mm", "mllm_kernel::cpu::int8_scaled_mm")])
    for m, n, k in [(1, 129, 100), (2, 70, 4096), (3, 8, 1), (17, 129, 15), (64, 520, 1000), (1000, 7, 100)]:
        a, b, sa, sb, _ = _operands(m, n, k, seed=4)
        out = torch.empty(m, n, dtype=torch.bfloat16)
        module.int8_scaled_mm(out, a, b, sa, sb, 2)
        assert torch.equal(out, int8_scaled_mm(a, b, sa, sb, torch.bfloat16)), (m, n, k)


#: x86 builds of the GEMM's body as the JIT makes them for a CPU (-march, Highway's static target
#: only): (-march, whether it multiplies by vpdpbusd, the /proc/cpuinfo flags it needs to run).
#: Ice Lake has AVX-512 VNNI but not AVX-VNNI, so Highway 1.0 names its target AVX3, as it does
#: Zen 4's: the byte dot product must follow the instruction set, not the target's name.
X86_BUILDS = [("skylake-avx512", False, {"avx512f", "avx512bw", "avx512dq", "avx512vl", "avx512cd"}),
              ("icelake-server", True, {"avx512f", "avx512bw", "avx512dq", "avx512vl", "avx512cd", "avx512_vnni",
                                        "avx512vbmi", "avx512_vbmi2", "avx512_bitalg", "avx512_vpopcntdq", "gfni",
                                        "vaes", "vpclmulqdq"})]


def _cpu_flags() -> set[str]:
    try:
        with open("/proc/cpuinfo") as f:
            return next((set(line.split(":", 1)[1].split()) for line in f if line.startswith("flags")), set())
    except OSError:
        return set()


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64") or not shutil.which("objdump"),
                    reason="x86 builds, read back with objdump")
@pytest.mark.parametrize("march,vnni,flags", X86_BUILDS, ids=[b[0] for b in X86_BUILDS])
def test_byte_dot_product_where_the_cpu_has_it(tmp_path, march, vnni, flags):
    # tests/cross/int8_scaled_mm_check.cpp (every shape class against exact sums), built for the
    # CPU `march` names: vpdpbusd exactly where that CPU has it, and correct where this one runs it.
    program = tmp_path / "int8_scaled_mm_check"
    build_cross_check(toolchain.find_cxx(), "int8_scaled_mm_check", march, program)
    code = subprocess.run(["objdump", "-d", str(program)], capture_output=True, text=True, check=True).stdout
    assert ("vpdpbusd" in code) == vnni
    if flags <= _cpu_flags():
        run = subprocess.run([str(program)], capture_output=True, text=True, timeout=300)
        assert run.returncode == 0 and run.stdout.rstrip().endswith("ok"), run.stdout + run.stderr


def _msg(text):
    return "^" + re.escape(text)


def test_bad_inputs():
    # The arguments are checked as for CUDA (op_args.scaled_mm_operands), then by the kernel.
    m, n, k = 17, 129, 100
    a, b, sa, sb, _ = _operands(m, n, k)
    bias = torch.zeros(n, dtype=torch.bfloat16)

    def raises(text, *args, out_dtype=torch.bfloat16, bias=None):
        with pytest.raises(ValueError, match=_msg(f"int8_scaled_mm: {text}")):
            int8_scaled_mm(*args, out_dtype, bias)

    raises("out_dtype must be one of float16, bfloat16, float32, got torch.int8", a, b, sa, sb, out_dtype=torch.int8)
    raises("out_dtype must be one of float16, bfloat16, float32, got 'bfloat16'", a, b, sa, sb, out_dtype="bfloat16")
    raises("mat_a: must be a torch.Tensor, got list", a.tolist(), b, sa, sb)
    raises("scales_a: must be a torch.Tensor, got float", a, b, 1.0, sb)
    raises("bias: must be a torch.Tensor, got list", a, b, sa, sb, bias=[0.0] * n)
    raises("mat_a: must be int8, got float32", a.float(), b, sa, sb)
    raises("mat_b: must be int8, got uint8", a, b.view(torch.uint8), sa, sb)
    raises("mat_a: must be 2-D, got shape [1, 17, 100]", a[None], b, sa, sb)
    raises("mat_b: must be 2-D, got shape [100]", a, b[:, 0], sa, sb)
    raises("mat_a: must be row-major (stride(1) == 1), got strides [1, 17]", a.t().contiguous().t(), b, sa, sb)
    raises("mat_b: must be column-major (stride(0) == 1, the transpose of a row-major [N, K] weight), got strides "
           "[129, 1]", a, b.contiguous(), sa, sb)
    raises("mat_a is [17, 100] but mat_b is [99, 129]: K differs", a, b[:99], sa, sb)
    raises("mat_b must not be empty, got K = 100, N = 0", a, b[:, :0], sa, sb[:0])
    raises("scales_a: must be [17], [17, 1] or [1], got shape [16]", a, b, sa[:16], sb)
    raises("scales_a: must be [17], [17, 1] or [1], got shape [17, 1, 1]", a, b, sa.view(m, 1, 1), sb)
    raises("scales_a: must be float32, got float64", a, b, sa.double(), sb)
    raises("scales_a: must be contiguous (strides [1]), got strides [2]", a, b, torch.rand(m, 2)[:, :1], sb)
    raises("scales_b: must be [129], [1, 129] or [1], got shape [128]", a, b, sa, sb[:128])
    raises("scales_b: must be float32, got bfloat16", a, b, sa, sb.bfloat16())
    raises("scales_b: must be contiguous (strides [1]), got strides [2]", a, b, sa, torch.rand(2 * n)[::2])
    raises("bias: must be [129] of bfloat16, got shape [128] of bfloat16", a, b, sa, sb, bias=bias[:128])
    raises("bias: must be [129] of bfloat16, got shape [129] of float32", a, b, sa, sb, bias=bias.float())
    raises("bias: must be [129] of float16, got shape [129] of bfloat16", a, b, sa, sb, out_dtype=torch.float16,
           bias=bias)
    raises("bias: must be contiguous (strides [1]), got strides [2]", a, b, sa, sb,
           bias=torch.zeros(2 * n, dtype=torch.bfloat16)[::2])


def test_kernel_checks_what_reaches_it():
    # The module's entry points check every tensor themselves, whatever the wrapper let through.
    a, b, sa, sb, _ = _operands(17, 129, 100)
    out = torch.empty(17, 129, dtype=torch.bfloat16)
    kernel = importlib.import_module("mllm_kernel.cpu.jit.int8_scaled_mm")._MM[torch.bfloat16]

    def raises(text, *args):
        with pytest.raises(ValueError, match=_msg(f"int8_scaled_mm: {text}")):
            kernel(*args, 1)

    raises("mat_a: dtype must be int8, got float32", out, a.float(), b, sa, sb)
    raises("mat_a: rows must be contiguous (stride(1) == 1), got strides [1, 17]", out, a.t().contiguous().t(), b,
           sa, sb)
    raises("mat_b: must be column-major (stride(0) == 1: w.t() of a row-major [N, K] weight w), got strides [129, 1]",
           out, a, b.contiguous(), sa, sb)
    raises("mat_b: dim 0 (K) must be 100 as bound by mat_a, got 99", out, a, b[:99], sa, sb)
    raises("scales_a: dim 0 (M) must be 17 as bound by mat_a, got 16", out, a, b, sa[:16], sb)
    raises("scales_b: must have 1 dims [N], got 2 dims [1, 129]", out, a, b, sa, sb.view(1, 129))
    raises("out: dtype must be one of float16, bfloat16, float32, got int32", out.int(), a, b, sa, sb)
    raises("out: dim 1 (N) must be 129 as bound by mat_b, got 128", out[:, :128], a, b, sa, sb)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a second device type")
def test_devices_must_match():
    a, b, sa, sb, _ = _operands(17, 129, 100)
    with pytest.raises(ValueError, match=_msg("int8_scaled_mm: scales_a is on cuda:0 but mat_a is on cpu")):
        int8_scaled_mm(a, b, sa.cuda(), sb, torch.bfloat16)
    with pytest.raises(ValueError, match=_msg("int8_scaled_mm: mat_b is on cuda:0 but mat_a is on cpu")):
        int8_scaled_mm(a, b.cuda(), sa, sb, torch.bfloat16)


def test_no_rows_give_an_empty_result():
    """An empty batch (M = 0) is an empty [0, N] product, as on CUDA and in torch.mm."""
    a = torch.randint(-128, 128, (0, 64), dtype=torch.int8)
    b = torch.randint(-128, 128, (48, 64), dtype=torch.int8).t()
    for bias in (None, torch.ones(48, dtype=torch.bfloat16)):
        out = int8_scaled_mm(a, b, torch.ones(0), torch.ones(48), torch.bfloat16, bias)
        assert out.shape == (0, 48) and out.dtype == torch.bfloat16
