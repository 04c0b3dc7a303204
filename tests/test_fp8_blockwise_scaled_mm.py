"""fp8_blockwise_scaled_mm (DeepSeek-V3 block-scaled FP8 GEMM) on CUDA against a float64 GEMM of
the dequantized operands. The argument checks run anywhere (they raise before any kernel runs).
"""

from __future__ import annotations

import pytest
import torch

from mllm_kernel.cuda.jit import fp8_blockwise_scaled_mm
from mllm_kernel.cuda.jit import fp8_blockwise_scaled_mm_cutlass as blockwise
from mllm_kernel.op_args import blockwise_scaled_mm_operands, tma_column_major

HAS_SM90 = torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)
sm90 = pytest.mark.skipif(not HAS_SM90, reason="needs an sm_90 GPU")
FP8 = torch.float8_e4m3fn
OUT_DTYPES = (torch.float16, torch.bfloat16)
ULP = {torch.float16: 2.0**-10, torch.bfloat16: 2.0**-7}
BLOCK = 128


def _blocks(x: int) -> int:
    return -(-x // BLOCK)


def _operands(m, n, k, *, seed, a_pad=0, b_pad=0, sa_row_major=False, sb_col_major=False):
    g = torch.Generator().manual_seed(seed)
    a = (torch.randn(m, k + a_pad, generator=g) * 4).clamp(-448, 448).to(FP8)
    w = (torch.randn(n, k + b_pad, generator=g) * 4).clamp(-448, 448).to(FP8)
    # Scales spread over two decades, so a kernel that applied the wrong block's scale is off.
    sa = torch.rand(m, _blocks(k), generator=g) * 0.02 + 2e-4
    sb = torch.rand(_blocks(n), _blocks(k), generator=g) * 0.02 + 2e-4
    sa = sa.cuda() if sa_row_major else sa.t().contiguous().cuda().t()
    sb = sb.t().contiguous().cuda().t() if sb_col_major else sb.cuda()
    return a.cuda()[:, :k], w.cuda()[:, :k].t(), sa, sb


def _reference(a, b, sa, sb):
    """float64 (A * scale_a) @ (B * scale_b), the scales expanded to one per element, and the
    bound on the float32 accumulation of FP8 products (|A| @ |B| scaled, relative 2^-11)."""
    m, k = a.shape
    n = b.shape[1]
    sa_full = sa.double().repeat_interleave(BLOCK, dim=1)[:, :k]
    sb_full = sb.double().repeat_interleave(BLOCK, dim=0)[:n].repeat_interleave(BLOCK, dim=1)[:, :k]
    a_deq, b_deq = a.double() * sa_full, b.double() * sb_full.t()
    return a_deq @ b_deq, 2.0**-11 * (a_deq.abs() @ b_deq.abs())


def _tma_aligned(sa):
    """sa copied into a column-major buffer whose columns are padded to a multiple of 4 rows (as
    sglang's TMA-aligned scales are), the padding NaN: the layout the kernel reads by TMA."""
    out = blockwise.column_major_scales(sa)
    m, blocks = sa.shape
    out.as_strided((blocks, out.stride(1)), (out.stride(1), 1))[:, m:] = float("nan")
    return out


def _check(out, a, b, sa, sb, out_dtype):
    assert out.dtype == out_dtype and out.shape == (a.shape[0], b.shape[1])
    assert not torch.isnan(out).any()
    ref, slack = _reference(a, b, sa, sb)
    err = (out.double() - ref).abs()
    bound = ULP[out_dtype] * ref.abs() + slack + 1e-6 * ref.abs().max()
    bad = err > bound
    assert not bad.any(), f"{int(bad.sum())} of {bad.numel()} off; worst {float((err - bound).max())}"


def _poison(m, n, dtype):
    # The caching allocator hands this block back to the op's output: unwritten elements stay NaN.
    torch.full((m, n), float("nan"), dtype=dtype, device="cuda")


CASES = [(1, 128, 128), (3, 256, 384), (17, 4096, 512), (64, 1000, 272), (100, 520, 1024), (1000, 4096, 896),
         (2048, 2048, 4096), (4100, 136, 128)]


@sm90
@pytest.mark.cuda
@pytest.mark.parametrize("m,n,k", CASES)
@pytest.mark.parametrize("out_dtype", OUT_DTYPES, ids=["fp16", "bf16"])
def test_matches_reference(m, n, k, out_dtype):
    a, b, sa, sb = _operands(m, n, k, seed=m + n + k)
    _poison(m, n, out_dtype)
    _check(fp8_blockwise_scaled_mm(a, b, sa, sb, out_dtype), a, b, sa, sb, out_dtype)


@sm90
@pytest.mark.cuda
@pytest.mark.parametrize("name", list(blockwise.CONFIGS))
@pytest.mark.parametrize("sa_layout", ["row_major", "tma_column_major"])
def test_every_configuration(name, sa_layout):
    """Each kernel configuration, whatever M the heuristic gives it, on odd M, N and K tails,
    with scales_a read by rows (cp.async) and by columns (TMA, NaN in the padding rows it reads
    past M)."""
    for m in (1, 33, 300):
        a, b, sa, sb = _operands(m, 264, 400, seed=m, sa_row_major=True)
        if sa_layout == "tma_column_major":
            sa = _tma_aligned(sa)
            assert sa.stride(1) != 1
        _poison(m, 264, torch.bfloat16)
        out = blockwise.blockwise_scaled_mm(a, b, sa, sb, torch.bfloat16, m, 264, config=blockwise.CONFIGS[name])
        _check(out, a, b, sa, sb, torch.bfloat16)


@sm90
@pytest.mark.cuda
def test_column_major_module_refuses_other_scales():
    """The module that reads scales_a by TMA refuses scales it cannot read in place (the op
    copies those into rows before it chooses a module)."""
    m, n, k = 8, 256, 384
    a, b, sa, sb = _operands(m, n, k, seed=5, sa_row_major=True)
    function = blockwise.MODULES[(torch.bfloat16, "64x128x128_c1x1_pingpong", True)].load().blockwise_scaled_mm
    out = torch.empty(m, n, dtype=torch.bfloat16, device="cuda")
    workspace = blockwise.scaled_mm_sm90.workspace(a.device)
    wide = torch.zeros(3, 2 * m + 2, device="cuda")[:, :m].t()  # columns 18 floats apart
    unaligned = torch.zeros(3 * m + 1, device="cuda")[1:].view(3, m).t()
    cases = [(sa, r"scales_a must be column-major \(stride\(0\) == 1\), got strides \[3, 1\]"),
             (wide, r"scales_a's columns must start 16 bytes apart \(stride\(1\) a multiple of 4\), got stride 18"),
             (unaligned, "column-major scales_a must start 16-byte aligned")]
    for scales, message in cases:
        with pytest.raises(ValueError, match=message):
            function(out, a, b, scales, sb, workspace, 1, 0)


@sm90
@pytest.mark.cuda
@pytest.mark.parametrize("name", list(blockwise.CONFIGS))
def test_tile_orders_give_the_same_result(name):
    """The tile order only moves tiles between SMs: every swizzle and raster gives the default
    order's result bit for bit; other values are refused."""
    m, n, k = 1000, 2048, 512
    a, b, sa, sb = _operands(m, n, k, seed=9, sa_row_major=True)
    config = blockwise.CONFIGS[name]
    run = lambda swizzle, raster: blockwise.blockwise_scaled_mm(a, b, sa, sb, torch.bfloat16, m, n,  # noqa: E731
                                                                config=config, swizzle=swizzle, raster=raster)
    expected = run(1, 0)
    _check(expected, a, b, sa, sb, torch.bfloat16)
    for swizzle, raster in ((4, 2), (8, 1), (2, 2), (1, 1)):
        assert torch.equal(run(swizzle, raster), expected), (swizzle, raster)
    with pytest.raises(ValueError, match="swizzle must be 1, 2, 4 or 8, got 3"):
        run(3, 0)
    with pytest.raises(ValueError, match="raster must be 0, 1 or 2, got 3"):
        run(1, 3)


def test_heuristic_picks_by_the_number_of_tiles():
    """The ping-pong kernel while its 64 x 128 tiles fit one wave, the cooperative one beyond,
    in clusters of two from 1024 tiles of 128 x 128 (where the sweep and the A/B found each
    faster at Llama-3-8B's shapes)."""
    pick = lambda m, n: blockwise.pick_config(m, n, 4096).name  # noqa: E731
    assert pick(1, 4096) == pick(256, 4096) == pick(64, 14336) == pick(128, 6144) == "64x128x128_c1x1_pingpong"
    assert pick(257, 4096) == pick(96, 14336) == pick(256, 6144) == pick(1024, 14336) == "128x128x128_c1x1_coop"
    assert pick(4096, 4096) == pick(8192, 4096) == pick(8192, 14336) == "128x128x128_c1x2_coop"
    assert pick(4096 - 128, 4096) == "128x128x128_c1x1_coop"  # 31 x 32 tiles


@sm90
@pytest.mark.cuda
@pytest.mark.parametrize("sa_row_major,sb_col_major", [(True, False), (False, True), (True, True)])
@pytest.mark.parametrize("m", [1, 200])
def test_scale_layouts(sa_row_major, sb_col_major, m):
    """Scales in the other layouts (row-major scales_a, column-major scales_b) are taken too."""
    a, b, sa, sb = _operands(m, 384, 640, seed=m, sa_row_major=sa_row_major, sb_col_major=sb_col_major)
    _check(fp8_blockwise_scaled_mm(a, b, sa, sb, torch.bfloat16), a, b, sa, sb, torch.bfloat16)


@sm90
@pytest.mark.cuda
def test_row_major_scales_go_by_columns_for_large_m(monkeypatch):
    """From COLUMN_SCALES_MIN_M rows the cooperative kernel takes row-major scales_a copied
    column-major (read by TMA); below, and for the ping-pong kernel, they stay by rows."""
    copies = []
    real = blockwise.column_major_scales
    monkeypatch.setattr(blockwise, "column_major_scales", lambda s: copies.append(s.shape) or real(s))
    for m, n in ((blockwise.COLUMN_SCALES_MIN_M, 1152), (blockwise.COLUMN_SCALES_MIN_M - 4, 1152), (64, 256)):
        a, b, sa, sb = _operands(m, n, 640, seed=m, sa_row_major=True)
        _poison(m, n, torch.bfloat16)
        _check(fp8_blockwise_scaled_mm(a, b, sa, sb, torch.bfloat16), a, b, sa, sb, torch.bfloat16)
    assert blockwise.pick_config(blockwise.COLUMN_SCALES_MIN_M - 4, 1152, 640).name == "128x128x128_c1x1_coop"
    assert copies == [(blockwise.COLUMN_SCALES_MIN_M, 5)]


@sm90
@pytest.mark.cuda
@pytest.mark.parametrize("m", [1, 300])
def test_strided_operands(m):
    """mat_a rows and mat_b columns with padding, and scales_a a view with padded rows."""
    a, b, sa, sb = _operands(m, 256, 512, seed=m, a_pad=32, b_pad=16)
    padded = torch.rand(m, 7, device="cuda")[:, :4]  # stride (7, 1)
    padded.copy_(sa)
    _check(fp8_blockwise_scaled_mm(a, b, padded, sb, torch.float16), a, b, sa, sb, torch.float16)


@sm90
@pytest.mark.cuda
def test_quantized_linear_layer():
    """x quantized per 1 x 128 group with the package's quantizer and a weight per 128 x 128 block:
    the GEMM is within FP8's quantization error of the bfloat16 layer."""
    from mllm_kernel import ops

    g = torch.Generator().manual_seed(3)
    x = torch.randn(37, 512, generator=g).to(torch.bfloat16).cuda()
    weight = (torch.randn(384, 512, generator=g) * 0.05).cuda()
    blocks = weight.view(3, BLOCK, 4, BLOCK).abs().amax(dim=(1, 3)) / 448
    w_q = (weight / blocks.repeat_interleave(BLOCK, 0).repeat_interleave(BLOCK, 1)).to(FP8)
    x_q, x_scale = ops.per_token_group_quant_fp8(x, BLOCK, column_major_scales=True)
    y = ops.fp8_blockwise_scaled_mm(x_q, w_q.t(), x_scale, blocks, torch.bfloat16)
    ref = x.double() @ weight.double().t()
    assert (y.double() - ref).abs().max() / ref.abs().max() < 0.06
    # 37 rows: TMA reads those scales only when their rows are padded to a multiple of 4.
    assert not tma_column_major(x_scale)
    _, aligned = ops.per_token_group_quant_fp8(x, BLOCK, column_major_scales=True, scale_tma_aligned=True)
    assert tma_column_major(aligned) and torch.equal(aligned, x_scale)
    assert torch.equal(ops.fp8_blockwise_scaled_mm(x_q, w_q.t(), aligned, blocks, torch.bfloat16), y)


@sm90
@pytest.mark.cuda
def test_alignment_limits():
    a, b, sa, sb = _operands(4, 16, 24, seed=1)
    with pytest.raises(ValueError, match="K must be a multiple of 16"):
        fp8_blockwise_scaled_mm(a, b, sa, sb, torch.bfloat16)
    a, b, sa, sb = _operands(4, 12, 32, seed=1)
    with pytest.raises(ValueError, match="N must be a multiple of 8"):
        fp8_blockwise_scaled_mm(a, b, sa, sb, torch.bfloat16)
    a, b, sa, sb = _operands(4, 16, 32, seed=1, a_pad=8)
    with pytest.raises(ValueError, match="row strides must keep rows 16-byte aligned"):
        fp8_blockwise_scaled_mm(a, b, sa, sb, torch.bfloat16)


# --- argument checks (no GPU needed: they raise before the kernel) -----------------------------


def _cpu_args(m=4, n=256, k=384):
    a = torch.zeros(m, k, dtype=FP8)
    b = torch.zeros(n, k, dtype=FP8).t()
    return a, b, torch.ones(k // BLOCK, m).t(), torch.ones(_blocks(n), k // BLOCK)


def test_bad_arguments():
    op = "fp8_blockwise_scaled_mm"
    a, b, sa, sb = _cpu_args()
    cases = [
        ((a.to(torch.int8), b, sa, sb, torch.bfloat16), f"{op}: mat_a: must be float8_e4m3fn, got int8"),
        ((a, b[:128], sa, sb, torch.bfloat16), rf"{op}: mat_a is \[4, 384\] but mat_b is \[128, 256\]: K differs"),
        ((a, b.contiguous(), sa, sb, torch.bfloat16), f"{op}: mat_b: must be column-major"),
        ((a, b, sa, sb, torch.float32), f"{op}: out_dtype must be one of float16, bfloat16"),
        ((a, b, sa.double(), sb, torch.bfloat16), f"{op}: scales_a: must be float32, got float64"),
        ((a, b, torch.ones(4, 4), sb, torch.bfloat16),
         rf"{op}: scales_a: must be \[4, 3\] \(blocks of 128 along K\), got shape \[4, 4\]"),
        ((a, b, sa, torch.ones(3, 2), torch.bfloat16),
         rf"{op}: scales_b: must be \[2, 3\] \(blocks of 128 along K and N\), got shape \[3, 2\]"),
        ((a, b, sa, sb, torch.bfloat16), f"{op}: mat_a: must be a CUDA tensor here"),
        ((a, b, sa, 1.0, torch.bfloat16), f"{op}: scales_b: must be a torch.Tensor, got float"),
    ]
    for args, message in cases:
        with pytest.raises(ValueError, match=message):
            fp8_blockwise_scaled_mm(*args)


def test_scales_come_back_in_the_kernel_layout():
    """Scales with contiguous rows pass through as they are (no copy); so does a column-major
    scales_a that TMA can read in place; other column-major ones are copied into rows."""
    a, b, sa_cm, sb = _cpu_args(m=5)
    sa = sa_cm.contiguous() * 2
    _, _, _, sa_out, sb_out = blockwise_scaled_mm_operands("t", a, b, sa, sb, torch.bfloat16, FP8, OUT_DTYPES)
    assert sa_out.data_ptr() == sa.data_ptr() and sb_out.data_ptr() == sb.data_ptr()
    sb_cm = (sb * 3).t().contiguous().t()
    _, _, _, sa_out, sb_out = blockwise_scaled_mm_operands("t", a, b, sa_cm, sb_cm, torch.bfloat16, FP8, OUT_DTYPES)
    assert sa_out.stride(1) == 1 and torch.equal(sa_out, sa_cm)  # columns 5 floats apart
    assert sb_out.stride(1) == 1 and torch.equal(sb_out, sb_cm)
    padded = _tma_aligned(sa_cm)  # columns 8 floats apart, the 3 rows past M inside the storage
    _, _, _, sa_out, _ = blockwise_scaled_mm_operands("t", a, b, padded, sb, torch.bfloat16, FP8, OUT_DTYPES)
    assert sa_out.data_ptr() == padded.data_ptr() and sa_out.stride() == (1, 8)
    a8, b8, sa8, sb8 = _cpu_args(m=8)  # the quantizer's column_major_scales layout, 8 rows
    _, _, _, sa_out, _ = blockwise_scaled_mm_operands("t", a8, b8, sa8, sb8, torch.bfloat16, FP8, OUT_DTYPES)
    assert sa_out.data_ptr() == sa8.data_ptr() and sa_out.stride() == (1, 8)


def test_tma_column_major():
    """Column-major scales read in place only with columns a multiple of 4 floats apart, a
    16-byte aligned start, and the rows up to a multiple of 4 inside the storage."""
    assert tma_column_major(torch.empty(3, 8).t())
    assert tma_column_major(torch.empty(3, 8)[:, :5].t())  # 5 rows, padded to 8
    assert not tma_column_major(torch.empty(3, 8))  # row-major
    assert not tma_column_major(torch.empty(3, 6).t())  # columns 6 floats apart
    assert not tma_column_major(torch.empty(25)[1:].view(3, 8).t())  # starts 4 bytes in
    short = torch.empty(8 * 2 + 5)  # the last column's rows 5-7 would lie past the storage
    assert not tma_column_major(short.as_strided((5, 3), (1, 8)))
    assert tma_column_major(torch.empty(8 * 3).as_strided((5, 3), (1, 8)))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
@pytest.mark.cuda
def test_devices_must_match():
    a, b, sa, sb = _cpu_args()
    with pytest.raises(ValueError, match="fp8_blockwise_scaled_mm: scales_b is on cpu but mat_a is on cuda"):
        fp8_blockwise_scaled_mm(a.cuda(), b.cuda(), sa.cuda(), sb, torch.bfloat16)


@sm90
@pytest.mark.cuda
def test_under_torch_compile_and_cuda_graphs():
    from mllm_kernel import ops

    a, b, sa, sb = _operands(5, 256, 256, seed=9)
    eager = ops.fp8_blockwise_scaled_mm(a, b, sa, sb, torch.float16)
    compiled = torch.compile(lambda *t: ops.fp8_blockwise_scaled_mm(*t, torch.float16), fullgraph=True)
    assert torch.equal(compiled(a, b, sa, sb), eager)
    graph, static = torch.cuda.CUDAGraph(), {}
    ops.fp8_blockwise_scaled_mm(a, b, sa, sb, torch.float16)  # warm up outside capture
    with torch.cuda.graph(graph):
        static["out"] = ops.fp8_blockwise_scaled_mm(a, b, sa, sb, torch.float16)
    a.copy_(torch.flip(a, [0]))
    graph.replay()
    torch.testing.assert_close(static["out"], ops.fp8_blockwise_scaled_mm(a, b, sa, sb, torch.float16), rtol=0,
                               atol=0)
