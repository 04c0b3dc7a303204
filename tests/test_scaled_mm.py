"""W8A8 scaled GEMMs on CUDA: int8_scaled_mm and fp8_scaled_mm against float64 references.

int8 products are exact integers (compared before the final rounding through a float64
reference of the same formula), FP8 products are compared with a float64 GEMM of the
dequantized operands. The argument checks run anywhere (they raise before any kernel runs).
"""

from __future__ import annotations

import pytest
import torch

from mllm_kernel.cuda.jit import (fp8_scaled_mm, int8_scaled_mm, scaled_mm_dispatch, scaled_mm_gemv, scaled_mm_sm80,
                                  scaled_mm_sm90)

HAS_SM90 = torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)
sm90 = pytest.mark.skipif(not HAS_SM90, reason="needs an sm_90 GPU")
OUT_DTYPES = (torch.float16, torch.bfloat16)
#: Relative size of one unit in the last place of each output dtype.
ULP = {torch.float16: 2.0**-10, torch.bfloat16: 2.0**-7}


def _operands(m, n, k, dtype, *, seed=0, device="cuda", a_pad=0, b_pad=0):
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.int8:
        a = torch.randint(-128, 128, (m, k + a_pad), generator=g, dtype=torch.int8)
        w = torch.randint(-128, 128, (n, k + b_pad), generator=g, dtype=torch.int8)
    else:
        a = (torch.randn(m, k + a_pad, generator=g) * 4).clamp(-448, 448).to(dtype)
        w = (torch.randn(n, k + b_pad, generator=g) * 4).clamp(-448, 448).to(dtype)
    return a.to(device)[:, :k], w.to(device)[:, :k].t()


def _scales(length, vector, shape2d, *, seed):
    g = torch.Generator().manual_seed(seed)
    if not vector:
        return (torch.rand(1, generator=g) * 0.02 + 0.001).cuda()
    s = (torch.rand(length, generator=g) * 0.02 + 0.001).cuda()
    return s.view(shape2d) if shape2d else s


def _reference(a, b, sa, sb, bias):
    acc = a.double() @ b.double()
    ref = acc * sa.double().reshape(-1, 1) * sb.double().reshape(1, -1)
    return ref + bias.double() if bias is not None else ref


def _poison_allocator(m, n, dtype):
    # The caching allocator hands this block back to the op's output: unwritten elements stay NaN.
    torch.full((m, n), float("nan"), dtype=dtype, device="cuda")


def _check(out, ref, out_dtype, slack=None):
    assert out.dtype == out_dtype and not torch.isnan(out).any()
    err = (out.double() - ref).abs()
    bound = ULP[out_dtype] * ref.abs() + 1e-6 * ref.abs().max()
    if slack is not None:
        bound = bound + slack
    bad = err > bound
    assert not bad.any(), f"{int(bad.sum())} of {bad.numel()} off; worst {float((err - bound).max())}"


def _run(fn, dtype, m, n, k, out_dtype, *, bias, a_vector=True, b_vector=True, seed=0, config=None,
         backend=scaled_mm_sm90, gemv=False, block=None, **pads):
    a, b = _operands(m, n, k, dtype, seed=seed, **pads)
    sa = _scales(m, a_vector, (m, 1) if seed % 2 else None, seed=seed + 1)
    sb = _scales(n, b_vector, (1, n) if seed % 2 else None, seed=seed + 2)
    bias_t = (torch.randn(n, generator=torch.Generator().manual_seed(seed + 3)) * 4).to(out_dtype).cuda() if bias else None
    _poison_allocator(m, n, out_dtype)
    if config is None and not gemv:
        out = fn(a, b, sa, sb, out_dtype, bias_t)
    else:
        from mllm_kernel.op_args import scaled_mm_operands

        _, _, _, sa1, sb1 = scaled_mm_operands("t", a, b, sa, sb, out_dtype, bias_t, dtype, OUT_DTYPES)
        if gemv:
            out = scaled_mm_gemv.scaled_mm_gemv(a, b, sa1, sb1, out_dtype, bias_t, m, n, block=block)
        else:
            out = backend.scaled_mm(a, b, sa1, sb1, out_dtype, bias_t, m, n, k, config=config)
    assert out.shape == (m, n)
    ref = _reference(a, b, sa, sb, bias_t)
    slack = None
    if dtype != torch.int8:
        # FP8 MMAs accumulate with fewer bits than float32 (no periodic promotion).
        slack = 2.0**-11 * (a.double().abs() @ b.double().abs()) * (sa.double().reshape(-1, 1) * sb.double().reshape(1, -1))
    _check(out, ref, out_dtype, slack)


CASES = [(1, 8, 16), (3, 24, 48), (17, 4096, 4096), (64, 1000, 272), (100, 512, 1024), (1000, 4096, 512),
         (2048, 2048, 4096), (4100, 520, 128),
         # decoding shapes that take the GEMV: N not a multiple of its 16-column blocks, K not of
         # its 64-byte steps
         (1, 4096, 4096), (16, 2056, 80), (9, 2048, 14352),
         # and the block shapes block_shape picks for more tiles (three blocks an SM, four-warp blocks)
         (8, 6144, 256), (16, 6144, 64)]


@sm90
@pytest.mark.cuda
@pytest.mark.parametrize("dtype,fn", [(torch.int8, int8_scaled_mm), (torch.float8_e4m3fn, fp8_scaled_mm)],
                         ids=["int8", "fp8"])
@pytest.mark.parametrize("m,n,k", CASES)
@pytest.mark.parametrize("out_dtype", OUT_DTYPES, ids=["fp16", "bf16"])
def test_scaled_mm_matches_reference(dtype, fn, m, n, k, out_dtype):
    _run(fn, dtype, m, n, k, out_dtype, bias=(m + n) % 2 == 0, seed=m + n + k)


@sm90
@pytest.mark.cuda
@pytest.mark.parametrize("name", list(scaled_mm_sm90.CONFIGS))
@pytest.mark.parametrize("dtype", [torch.int8, torch.float8_e4m3fn], ids=["int8", "fp8"])
def test_every_configuration(name, dtype):
    """Each kernel configuration, whatever M the heuristic gives it, on odd M and a bias."""
    config = scaled_mm_sm90.CONFIGS[name]
    for m in (1, 33, 300):
        _run(None, dtype, m, 264, 400, torch.bfloat16, bias=True, seed=m, config=config)


# The decoding GEMV (csrc/scaled_mm_gemv.cuh) called directly, whatever the shape.


@sm90
@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.int8, torch.float8_e4m3fn], ids=["int8", "fp8"])
@pytest.mark.parametrize("m", [1, 2, 7, 8, 9, 15, 16])
@pytest.mark.parametrize("n,k", [(8, 16), (24, 48), (40, 64), (136, 80), (264, 1040), (1032, 4096 + 16)])
def test_gemv_matches_reference(dtype, m, n, k):
    """Every row count of both activation blocks; N below, at and past one 16-column block, K
    below, at and past the 64-byte step and a batch of steps; scales per row or shared; bias or
    none; both output types."""
    seed = m * 7 + n + k
    out_dtype = OUT_DTYPES[seed % 2]
    _run(None, dtype, m, n, k, out_dtype, bias=seed % 3 != 0, a_vector=seed % 4 != 1, b_vector=seed % 5 != 2,
         seed=seed, gemv=True)


@sm90
@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.int8, torch.float8_e4m3fn], ids=["int8", "fp8"])
def test_gemv_strided_operands(dtype):
    """mat_a rows and weight rows with padding (strides beyond K, 16-byte aligned)."""
    for m in (1, 12):
        _run(None, dtype, m, 72, 208, torch.bfloat16, bias=True, a_pad=32, b_pad=48, seed=m, gemv=True)


@sm90
@pytest.mark.cuda
def test_gemv_refuses_more_than_16_rows():
    from mllm_kernel.op_args import scaled_mm_operands

    a, b = _operands(17, 64, 64, torch.int8)
    _, _, _, sa, sb = scaled_mm_operands("t", a, b, torch.ones(17, device="cuda"), torch.ones(64, device="cuda"),
                                         torch.bfloat16, None, torch.int8, OUT_DTYPES)
    with pytest.raises(ValueError, match="scaled_mm_gemv: at most 16 rows of mat_a, got 17"):
        scaled_mm_gemv.scaled_mm_gemv(a, b, sa, sb, torch.bfloat16, None, 17, 64)


@sm90
@pytest.mark.cuda
@pytest.mark.parametrize("dtype", ["int8", "fp8"])
def test_gemv_after_the_quantizer_in_a_cuda_graph(dtype):
    """Decoding as an engine runs it: the activations' quantizer, then the GEMV (both launched
    with PDL, so the GEMV asks for its weights before the quantizer is done), captured in a
    CUDA graph and replayed on new activations; equal to the same calls without PDL, eagerly."""
    from mllm_kernel.cuda.jit import fp8_scaled_mm, int8_scaled_mm, per_token_quant_fp8, per_token_quant_int8

    quant, gemm = (per_token_quant_int8, int8_scaled_mm) if dtype == "int8" else (per_token_quant_fp8, fp8_scaled_mm)
    g = torch.Generator(device="cuda").manual_seed(5)
    x = torch.randn(4, 4096, device="cuda", generator=g, dtype=torch.bfloat16)
    w_q, w_scale = quant(torch.randn(2048, 4096, device="cuda", generator=g, dtype=torch.bfloat16) * 0.05)

    def step(enable_pdl=None):
        x_q, x_scale = quant(x, enable_pdl=enable_pdl)
        return gemm(x_q, w_q.t(), x_scale, w_scale, torch.bfloat16, enable_pdl=enable_pdl)

    step()  # builds and warms up outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = step()
    for _ in range(3):
        x.copy_(torch.randn(x.shape, device="cuda", generator=g, dtype=torch.bfloat16))
        graph.replay()
        assert torch.equal(out, step(enable_pdl=False))


@sm90
@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.int8, torch.float8_e4m3fn], ids=["int8", "fp8"])
@pytest.mark.parametrize("block", scaled_mm_gemv.BLOCK_SHAPES, ids=lambda b: f"{b[0]}w{b[1]}")
def test_gemv_every_block_shape(dtype, block):
    """Each block shape, forced, on the rows it exists for: N past a whole number of tiles, K
    past a batch of steps in every block's warps, bias and none."""
    rows = [1, 5, 8] if block == (8, 3) else [9, 16] if block == (4, 4) else [1, 16]
    for m in rows:
        _run(None, dtype, m, 1048, 2128, torch.bfloat16, bias=m % 2 == 1, seed=m + sum(block), gemv=True, block=block)


@sm90
@pytest.mark.cuda
@pytest.mark.parametrize("m,block", [(9, (8, 3)), (8, (4, 4)), (1, (4, 2)), (16, (8, 4))])
def test_gemv_refuses_a_block_shape_it_lacks(m, block):
    a, b = _operands(m, 64, 64, torch.int8)
    sa, sb = torch.ones(m, device="cuda"), torch.ones(64, device="cuda")
    with pytest.raises(ValueError, match=rf"scaled_mm_gemv: no block of {block[0]} warps, {block[1]} an SM, "
                                         rf"for {m} rows of mat_a"):
        scaled_mm_gemv.scaled_mm_gemv(a, b, sa, sb, torch.bfloat16, None, m, 64, block=block)


def test_gemv_block_shape_fills_the_last_wave():
    """132 SMs (an H100 or H200): three blocks an SM up to 8 rows only where the tiles fit one
    wave of three and not one of two; four-warp blocks from 9 rows from two tiles an SM."""
    shape = scaled_mm_gemv.block_shape
    assert [shape(1, n, 132) for n in (2048, 4096, 4224, 4240, 6144, 6336, 6352, 14336)] == [
        (8, 2), (8, 2), (8, 2), (8, 3), (8, 3), (8, 3), (8, 2), (8, 2)]
    assert shape(8, 6144, 132) == (8, 3) and shape(9, 6144, 132) == (4, 4)
    assert shape(1, 4225, 132) == (8, 3) and shape(16, 4209, 132) == (4, 4)  # a partial tile counts
    assert [shape(16, n, 132) for n in (2048, 4096, 4208, 4224, 6144, 14336)] == [
        (8, 2), (8, 2), (8, 2), (4, 4), (4, 4), (4, 4)]
    # Every pick is a shape the module builds for its rows.
    for m in range(1, 17):
        for n in range(2048, 30000, 16):
            warps, per_sm = shape(m, n, 132)
            assert (warps, per_sm) in scaled_mm_gemv.BLOCK_SHAPES
            assert per_sm != 3 or m <= 8
            assert warps != 4 or m > 8


def test_gemv_applies_to_decoding_on_wide_layers():
    assert scaled_mm_gemv.applies(1, 4096, 4096) and scaled_mm_gemv.applies(16, 2048, 64)
    assert not scaled_mm_gemv.applies(17, 4096, 4096)  # CUTLASS's transposed tile from here
    assert not scaled_mm_gemv.applies(1, 2040, 4096)  # too few blocks to fill the GPU
    assert not scaled_mm_gemv.applies(0, 4096, 4096)


@sm90
@pytest.mark.cuda
@pytest.mark.parametrize("dtype,fn", [(torch.int8, int8_scaled_mm), (torch.float8_e4m3fn, fp8_scaled_mm)],
                         ids=["int8", "fp8"])
def test_scaled_mm_decodes_with_the_gemv(monkeypatch, dtype, fn):
    """The public ops take the GEMV exactly where ``applies`` says, CUTLASS elsewhere."""
    calls = []
    real = scaled_mm_gemv.scaled_mm_gemv
    monkeypatch.setattr(scaled_mm_gemv, "scaled_mm_gemv", lambda *args: calls.append(args[6:8]) or real(*args))
    for m, n in ((4, 2048), (16, 4096), (17, 4096), (4, 1024)):
        a, b = _operands(m, n, 128, dtype)
        fn(a, b, torch.ones(m, device="cuda"), torch.ones(n, device="cuda"), torch.bfloat16)
    assert calls == [(4, 2048), (16, 4096)]


# The Ampere/Ada kernels (mma.sync, which Hopper runs too) built for this GPU and called directly.


@sm90
@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.int8, torch.float8_e4m3fn], ids=["int8", "fp8"])
@pytest.mark.parametrize("m,n,k", CASES)
def test_ampere_kernels_match_reference(dtype, m, n, k):
    config = scaled_mm_sm80.pick_config(m, n, k)
    _run(None, dtype, m, n, k, torch.bfloat16 if m % 2 else torch.float16, bias=(m + n) % 2 == 0, seed=m + n + k,
         config=config, backend=scaled_mm_sm80)


@sm90
@pytest.mark.cuda
@pytest.mark.parametrize("name", list(scaled_mm_sm80.CONFIGS))
@pytest.mark.parametrize("dtype", [torch.int8, torch.float8_e4m3fn], ids=["int8", "fp8"])
def test_every_ampere_configuration(name, dtype):
    """Each configuration on odd M, with a bias, per-tensor and vector scales, strided operands."""
    config = scaled_mm_sm80.CONFIGS[name]
    for m in (1, 33, 300):
        _run(None, dtype, m, 264, 400, torch.bfloat16, bias=True, seed=m, config=config, backend=scaled_mm_sm80)
        _run(None, dtype, m, 136, 256, torch.float16, bias=False, a_vector=False, b_vector=False, seed=m,
             config=config, backend=scaled_mm_sm80, a_pad=16, b_pad=32)


def test_ampere_heuristic_buckets_cover_every_m():
    names = {scaled_mm_sm80.pick_config(m, 4096, 4096).name for m in range(1, 5000, 7)}
    assert names == set(scaled_mm_sm80.CONFIGS)
    assert scaled_mm_sm80.pick_config(16, 4096, 4096).tile[0] == 16
    assert scaled_mm_sm80.pick_config(17, 4096, 4096).tile[0] == 64


@sm90
@pytest.mark.cuda
def test_ampere_kernels_refuse_misaligned_vectors():
    a, b = _operands(4, 16, 32, torch.int8)
    sa, sb = torch.ones(4, device="cuda"), torch.ones(17, device="cuda")[1:]
    with pytest.raises(ValueError, match="scales_b and bias must start at 16-byte aligned addresses"):
        scaled_mm_sm80.scaled_mm(a, b, sa, sb, torch.bfloat16, None, 4, 16, 32)


@sm90
@pytest.mark.cuda
def test_dispatch_by_compute_capability(monkeypatch):
    """sm_8x GPUs run the Ampere/Ada kernels (FP8 from sm_89); others get an error naming the
    GPUs supported. The capability is faked on this GPU, whose kernels run both families."""
    a, b = _operands(7, 64, 128, torch.int8)
    sa, sb = torch.rand(7, device="cuda") + 0.5, torch.rand(64, device="cuda") + 0.5
    af, bf = _operands(7, 64, 128, torch.float8_e4m3fn)
    calls = []
    real = scaled_mm_sm80.scaled_mm
    monkeypatch.setattr(scaled_mm_sm80, "scaled_mm", lambda *args, **kw: calls.append(1) or real(*args, **kw))
    for capability in [(8, 0), (8, 6), (8, 7), (8, 9)]:
        monkeypatch.setattr(scaled_mm_dispatch, "capability", lambda index, c=capability: c)
        out = int8_scaled_mm(a, b, sa, sb, torch.bfloat16)
        torch.testing.assert_close(out.double(), _reference(a, b, sa, sb, None), rtol=2**-7, atol=0)
        if capability == (8, 9):
            fp8_scaled_mm(af, bf, sa, sb, torch.bfloat16)
        else:
            with pytest.raises(ValueError, match=f"fp8_scaled_mm: runs on sm_89 and sm_90 GPUs; this GPU is "
                                                 f"sm_8{capability[1]}"):
                fp8_scaled_mm(af, bf, sa, sb, torch.bfloat16)
    assert len(calls) == 5
    for capability in [(7, 5), (10, 0), (12, 0)]:
        monkeypatch.setattr(scaled_mm_dispatch, "capability", lambda index, c=capability: c)
        with pytest.raises(ValueError, match=r"int8_scaled_mm: runs on sm_80, sm_86, sm_87, sm_89 and sm_90 GPUs; "
                                             rf"this GPU is sm_{capability[0]}{capability[1]}"):
            int8_scaled_mm(a, b, sa, sb, torch.bfloat16)


@sm90
@pytest.mark.cuda
@pytest.mark.parametrize("a_vector,b_vector", [(False, False), (True, False), (False, True), (True, True)])
@pytest.mark.parametrize("m", [5, 200])
def test_fp8_scale_mixes(a_vector, b_vector, m):
    _run(fp8_scaled_mm, torch.float8_e4m3fn, m, 136, 256, torch.bfloat16, bias=False, a_vector=a_vector,
         b_vector=b_vector, seed=m)
    _run(int8_scaled_mm, torch.int8, m, 136, 256, torch.float16, bias=True, a_vector=a_vector, b_vector=b_vector,
         seed=m + 1)


@sm90
@pytest.mark.cuda
@pytest.mark.parametrize("m", [1, 300])
def test_strided_operands(m):
    """mat_a rows and mat_b columns with padding (strides beyond K, still 16-byte aligned)."""
    _run(int8_scaled_mm, torch.int8, m, 72, 96, torch.bfloat16, bias=True, a_pad=32, b_pad=16)
    _run(fp8_scaled_mm, torch.float8_e4m3fn, m, 72, 96, torch.float16, bias=False, a_pad=16, b_pad=48)


@sm90
@pytest.mark.cuda
def test_heuristic_buckets_cover_every_m():
    names = {scaled_mm_sm90.pick_config(m, n, 4096).name for m in range(1, 5000, 7) for n in (4096, 6144, 14336)}
    assert names == set(scaled_mm_sm90.CONFIGS)


@sm90
@pytest.mark.cuda
@pytest.mark.parametrize("fn,dtype", [(int8_scaled_mm, torch.int8), (fp8_scaled_mm, torch.float8_e4m3fn)])
def test_alignment_limits(fn, dtype):
    sa, sb = torch.ones(4, device="cuda"), torch.ones(16, device="cuda")
    a, b = _operands(4, 16, 24, dtype)
    with pytest.raises(ValueError, match="K must be a multiple of 16"):
        fn(a, b, sa, sb, torch.bfloat16)
    a, b = _operands(4, 12, 32, dtype)
    with pytest.raises(ValueError, match="N must be a multiple of 8"):
        fn(a, b, sa, torch.ones(12, device="cuda"), torch.bfloat16)
    a, b = _operands(4, 16, 32, dtype, a_pad=8)
    with pytest.raises(ValueError, match="row strides must keep rows 16-byte aligned"):
        fn(a, b, sa, sb, torch.bfloat16)


def test_sm90_wave_rule_picks_the_tile_that_fills_the_waves():
    """Above M = 256, 128 x 128 tiles where 128 x 256 ones leave much of their last wave idle
    (the H100 sweep's winners: 4096 x 4096 at M = 512, 6144 x 4096 at M = 1024), the larger tile
    otherwise, ties included."""
    pick = lambda m, n: scaled_mm_sm90.pick_config(m, n, 4096).name  # noqa: E731
    assert scaled_mm_sm90.wave_fill(1024, 6144, 256) == pytest.approx(192 / 264)
    assert scaled_mm_sm90.wave_fill(1024, 6144, 128) == pytest.approx(384 / 396)
    assert pick(512, 4096) == pick(2048, 6144 // 2) == "128x128x128_c1x1_coop"
    assert pick(1024, 4096) == pick(512, 14336) == pick(8192, 14336) == "128x256x128_c2x1_coop"
    assert pick(256, 6144) == "64x128x128_c1x1_pingpong"


def test_sm90_narrow_tiles_where_they_fill_the_wave():
    """At M <= 128, 64 x 96 tiles where 64 x 128 ones leave a quarter of the SMs idle (6144 x
    4096: 96 tiles, against 128 of 96 columns); not where 128 columns fill the waves as well
    (14336 x 4096) or the transposed kernel runs (4096 x 4096)."""
    pick = lambda m, n: scaled_mm_sm90.pick_config(m, n, 4096).name  # noqa: E731
    assert scaled_mm_sm90.wave_fill(128, 6144, 96, tile_m=64) == pytest.approx(128 / 132)
    assert pick(128, 6144) == pick(100, 6144) == "64x96x128_c1x1_pingpong"
    assert pick(128, 14336) == "64x128x128_c1x1_pingpong"
    assert pick(128, 4096) == "swap_64x64x256_c1x1_pingpong"


def test_sm90_pingpong_rule_needs_many_tiles_an_sm():
    """64 x 256 ping-pong tiles at 512 < M <= 1024 only where they make PINGPONG_WAVES tiles an
    SM or more (14336 x 4096 and 6144 x 4096 at M = 1024; not 4096 x 4096, nor M = 2048)."""
    pick = lambda m, n: scaled_mm_sm90.pick_config(m, n, 4096).name  # noqa: E731
    assert pick(1024, 14336) == pick(1024, 6144) == pick(600, 14336) == "64x256x128_c1x1_pingpong"
    assert scaled_mm_sm90.output_tiles(1024, 4096, 64, 256) < scaled_mm_sm90.PINGPONG_WAVES * scaled_mm_sm90.SMS
    assert pick(1024, 4096) == "128x256x128_c2x1_coop"
    assert pick(512, 14336) != "64x256x128_c1x1_pingpong" != pick(2048, 14336)


@sm90
@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.int8, torch.float8_e4m3fn])
def test_sm90_tile_orders_give_the_same_result(dtype):
    """The tile order only moves tiles between SMs: every swizzle and raster gives the default
    order's result bit for bit (pick_order swizzles large outputs)."""
    m, n, k = 1000, 2048, 512
    a, b = _operands(m, n, k, dtype, seed=3)
    sa, sb = _scales(m, True, False, seed=4).view(-1), _scales(n, True, False, seed=5).view(-1)
    config = scaled_mm_sm90.CONFIGS["128x256x128_c2x1_coop"]
    run = lambda swizzle, raster: scaled_mm_sm90.scaled_mm(a, b, sa, sb, torch.bfloat16, None, m, n, k,  # noqa: E731
                                                           config=config, swizzle=swizzle, raster=raster)
    expected = run(1, 0)
    for swizzle, raster in ((4, 2), (8, 1), (2, 2)):
        assert torch.equal(run(swizzle, raster), expected), (swizzle, raster)


def test_sm90_tile_order_swizzles_only_large_outputs():
    config = scaled_mm_sm90.CONFIGS["128x256x128_c2x1_coop"]
    assert scaled_mm_sm90.pick_order(8192, 14336, config) == (4, 2)  # 3584 tiles
    assert scaled_mm_sm90.pick_order(8192, 4096, config) == (1, 0)  # 1024 tiles
    assert scaled_mm_sm90.pick_order(8192, 8192, config) == (4, 2)  # 2048: the first swizzled size


# --- argument checks (no GPU needed: they raise before the kernel) -----------------------------


def _cpu_args(dtype=torch.int8, m=4, n=16, k=32):
    a = torch.zeros(m, k, dtype=dtype)
    b = torch.zeros(n, k, dtype=dtype).t()
    return a, b, torch.ones(m), torch.ones(n)


@pytest.mark.parametrize("fn,dtype,op", [(int8_scaled_mm, torch.int8, "int8_scaled_mm"),
                                         (fp8_scaled_mm, torch.float8_e4m3fn, "fp8_scaled_mm")])
def test_bad_arguments(fn, dtype, op):
    a, b, sa, sb = _cpu_args(dtype)
    other = torch.float8_e4m3fn if dtype == torch.int8 else torch.int8
    cases = [
        ((a.to(torch.float32), b, sa, sb, torch.bfloat16), f"{op}: mat_a: must be "),
        ((a, b.contiguous().to(other), sa, sb, torch.bfloat16), f"{op}: mat_b: must be "),
        ((a[0], b, sa, sb, torch.bfloat16), f"{op}: mat_a: must be 2-D"),
        ((a, b[:16], sa, sb, torch.bfloat16), rf"{op}: mat_a is \[4, 32\] but mat_b is \[16, 16\]: K differs"),
        ((a, b.contiguous(), sa, sb, torch.bfloat16), f"{op}: mat_b: must be column-major"),
        ((a.t().contiguous().t(), b, sa, sb, torch.bfloat16), f"{op}: mat_a: must be row-major"),
        ((a, b, sa, sb, torch.float32), f"{op}: out_dtype must be one of float16, bfloat16"),
        ((a, b, sa.double(), sb, torch.bfloat16), f"{op}: scales_a: must be float32"),
        ((a, b, torch.ones(3), sb, torch.bfloat16), rf"{op}: scales_a: must be \[4\], \[4, 1\] or \[1\]"),
        ((a, b, sa, torch.ones(2, 16), torch.bfloat16), rf"{op}: scales_b: must be \[16\], \[1, 16\] or \[1\]"),
        ((a, b, sa, sb, torch.bfloat16, torch.zeros(15, dtype=torch.bfloat16)), rf"{op}: bias: must be \[16\]"),
        ((a, b, sa, sb, torch.bfloat16, torch.zeros(16, dtype=torch.float16)), rf"{op}: bias: must be \[16\] of bfloat16"),
        ((a, b, sa, sb, torch.bfloat16), f"{op}: mat_a: must be a CUDA tensor here"),
        (("a", b, sa, sb, torch.bfloat16), f"{op}: mat_a: must be a torch.Tensor"),
    ]
    for args, message in cases:
        with pytest.raises(ValueError, match=message):
            fn(*args)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
@pytest.mark.cuda
def test_devices_must_match():
    a, b, sa, sb = _cpu_args()
    with pytest.raises(ValueError, match="int8_scaled_mm: mat_b is on cpu but mat_a is on cuda"):
        int8_scaled_mm(a.cuda(), b, sa, sb, torch.bfloat16)


# --- ops: device dispatch, torch.compile, the W8A8 linear layer ----------------------------------


def _linear_reference(x, weight, bias):
    return x.double() @ weight.double().t() + (bias.double() if bias is not None else 0)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=[sm90, pytest.mark.cuda])])
@pytest.mark.parametrize("dtype", ["int8", "fp8"])
def test_w8a8_linear(device, dtype):
    """Quantize a float weight per channel with the package's quantizer, then y = x @ w.t() + b:
    within the quantization error of the float layer."""
    from mllm_kernel import ops

    if device == "cpu" and dtype == "fp8":
        pytest.skip("fp8_scaled_mm has no CPU kernel")
    g = torch.Generator().manual_seed(7)
    x = torch.randn(2, 5, 256, generator=g).to(torch.bfloat16).to(device)
    weight = (torch.randn(136, 256, generator=g) * 0.05).to(torch.bfloat16).to(device)
    bias = torch.randn(136, generator=g).to(torch.bfloat16).to(device)
    quant = ops.per_token_quant_int8 if dtype == "int8" else ops.per_token_quant_fp8
    w_q, w_scale = quant(weight)
    y = ops.w8a8_linear(x, w_q, w_scale, bias, dtype=dtype)
    assert y.shape == (2, 5, 136) and y.dtype == torch.bfloat16
    ref = _linear_reference(x, weight, bias)
    err = (y.double() - ref).abs().max() / ref.abs().max()
    assert err < (0.02 if dtype == "int8" else 0.06), float(err)
    # The same by hand, as the README shows it.
    x_q, x_scale = quant(x.reshape(-1, 256))
    gemm = ops.int8_scaled_mm if dtype == "int8" else ops.fp8_scaled_mm
    assert torch.equal(gemm(x_q, w_q.t(), x_scale, w_scale, torch.bfloat16, bias).view(2, 5, 136), y)


def test_w8a8_linear_bad_arguments():
    from mllm_kernel import ops

    x, w = torch.zeros(3, 32, dtype=torch.bfloat16), torch.zeros(16, 32, dtype=torch.int8)
    cases = [((x, w, torch.ones(16)), {"dtype": "int4"}, "w8a8_linear: dtype must be 'int8' or 'fp8', got 'int4'"),
             ((x.float(), w, torch.ones(16)), {}, "w8a8_linear: x: must be a float16 or bfloat16 tensor"),
             ((x, w, torch.ones(16)), {"dtype": "fp8"}, "w8a8_linear: weight: must be a 2-D float8_e4m3fn tensor"),
             ((x, w[:, :16], torch.ones(16)), {}, r"w8a8_linear: x has K = 32 but weight is \[16, 16\]"),
             ((x, w, 1.0), {}, "w8a8_linear: weight_scale: must be a torch.Tensor, got float")]
    for args, kwargs, message in cases:
        with pytest.raises(ValueError, match=message):
            ops.w8a8_linear(*args, **kwargs)


@sm90
@pytest.mark.cuda
def test_scaled_mm_under_torch_compile_and_cuda_graphs():
    from mllm_kernel import ops

    a, b = _operands(5, 64, 128, torch.int8)
    sa, sb = torch.rand(5, 1, device="cuda") + 0.5, torch.rand(64, device="cuda") + 0.5
    eager = ops.int8_scaled_mm(a, b, sa, sb, torch.float16)
    compiled = torch.compile(lambda *t: ops.int8_scaled_mm(*t, torch.float16), fullgraph=True)
    assert torch.equal(compiled(a, b, sa, sb), eager)
    graph, static = torch.cuda.CUDAGraph(), {}
    ops.int8_scaled_mm(a, b, sa, sb, torch.float16)  # warm up outside capture
    with torch.cuda.graph(graph):
        static["out"] = ops.int8_scaled_mm(a, b, sa, sb, torch.float16)
    a.copy_(torch.flip(a, [0]))
    graph.replay()
    torch.testing.assert_close(static["out"], ops.int8_scaled_mm(a, b, sa, sb, torch.float16), rtol=0, atol=0)
