"""CUDA FP8/INT8 activation quantization against a PyTorch reference of the same formula.

The reference computes in float32 exactly what the kernels compute (``amax``, ``max(amax,
eps) / qmax``, UE8M0 rounding by bits, a true division, round to nearest even), so outputs and
scales must match bit for bit. Skipped without a GPU (tests/test_cuda_compile_quant.py builds
the modules in CI).
"""

from __future__ import annotations

import re

import pytest
import torch

from mllm_kernel.jit_utils import find_module
from mllm_kernel.cuda.jit.quant import (
    per_tensor_quant_fp8,
    per_token_group_quant_fp8,
    per_token_group_quant_int8,
    per_token_quant_fp8,
    per_token_quant_int8,
)

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (compile-only tests cover CI)"),
]

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
FP8 = torch.float8_e4m3fn
FP8_MAX, INT8_MAX = 448.0, 127.0
# Poison values no valid result takes: e4m3 NaN (finite inputs never give it), int8 -128
# (|x / scale| <= 127 always).
POISON = {FP8: 0x7F, torch.int8: -128}


def _ids(d):
    return str(d).removeprefix("torch.")


def _data(*shape, dtype, seed=0, device="cuda"):
    """Normal data with ~1% outliers 50x larger (so a few elements set each scale)."""
    g = torch.Generator(device=device)
    g.manual_seed(seed)
    x = torch.randn(*shape, device=device, generator=g)
    outliers = torch.rand(*shape, device=device, generator=g) < 0.01
    return torch.where(outliers, x * 50.0, x).to(dtype)


def _poisoned(shape, dtype):
    out = torch.empty(shape, dtype=dtype, device="cuda")
    out.view(torch.int8 if dtype == torch.int8 else torch.uint8).fill_(POISON[dtype])
    return out


def _round_up_pow2(s):
    """2^ceil(log2(s)) exactly, by bits (what the kernel does): bump the exponent when any
    mantissa bit is set."""
    bits = s.contiguous().view(torch.int32)
    up = (bits & 0x7F800000) + 0x800000
    return torch.where((bits & 0x7FFFFF) != 0, up, bits).view(torch.float32)


def _div(a, b: float):
    """a / b as a true float32 division (PyTorch turns division by a Python scalar into a
    multiplication by its reciprocal, which can differ by one ulp)."""
    return a / torch.full_like(a, b)


def _quantize(xf, scale, out_dtype):
    """x / scale (float32, true division) converted like the kernel; zeros where scale == 0."""
    q = torch.where(scale == 0, torch.zeros_like(xf), xf / scale)
    if out_dtype == FP8:
        return q.clamp(-FP8_MAX, FP8_MAX).to(FP8)
    return q.clamp(-128, 127).round().to(torch.int8)


def _ref_groups(x, group, eps, out_dtype, ue8m0=False):
    """(q [rows, hidden], scales [rows, groups]) for x viewed as rows of groups."""
    hidden = x.shape[-1]
    xf = x.float().reshape(-1, hidden // group, group)
    qmax = FP8_MAX if out_dtype == FP8 else INT8_MAX
    scale = _div(xf.abs().amax(-1).clamp_min(eps), qmax)
    if ue8m0:
        scale = _round_up_pow2(scale)
    q = _quantize(xf, scale[..., None], out_dtype)
    return q.reshape(-1, hidden), scale


def _bits(t):
    return t.view(torch.uint8) if t.dtype == FP8 else t


def _assert_same(actual, expected):
    assert actual.dtype == expected.dtype
    a, e = _bits(actual), _bits(expected)
    mismatch = (a != e).sum().item()
    assert mismatch == 0, f"{mismatch} of {a.numel()} elements differ (first at {(a != e).nonzero()[0].tolist()})"


def _assert_scales(actual, expected):
    assert not torch.isnan(actual).any(), "unwritten (NaN-poisoned) scales"
    torch.testing.assert_close(actual, expected, rtol=0, atol=0)


# --------------------------------------------------------------------------- per-token-group


@pytest.mark.parametrize("dtype", DTYPES, ids=_ids)
@pytest.mark.parametrize("group", [32, 64, 128])
@pytest.mark.parametrize("rows,hidden", [(1, 128), (7, 384), (257, 4096), (3, 16384), (1000, 256)])
@pytest.mark.parametrize("column_major", [False, True], ids=["row_major", "col_major"])
@pytest.mark.parametrize("ue8m0", [False, True], ids=["f32_scale", "ue8m0"])
def test_group_quant_fp8(dtype, group, rows, hidden, column_major, ue8m0):
    x = _data(rows, hidden, dtype=dtype, seed=rows + hidden)
    out = _poisoned((rows, hidden), FP8)
    q, s = per_token_group_quant_fp8(x, group, 1e-10, column_major, ue8m0, out=out)
    assert q is out
    ref_q, ref_s = _ref_groups(x, group, 1e-10, FP8, ue8m0)
    _assert_same(q, ref_q)
    assert s.shape == (rows, hidden // group)
    if column_major:
        assert s.stride() == (1, rows), "column-major scales must be the transpose of a [G, T] buffer"
    _assert_scales(s, ref_s)
    if ue8m0:
        assert torch.all(torch.frexp(s).mantissa == 0.5), "ue8m0 scales must be powers of two"


@pytest.mark.parametrize("rows", [1, 3, 257])
def test_group_quant_fp8_tma_aligned_scales(rows):
    """scale_tma_aligned: the scales of a [groups, rows rounded up to 4] buffer's first rows
    columns, NaN-poisoned first, written exactly; without column_major_scales it is refused."""
    x = _data(rows, 512, dtype=torch.bfloat16, seed=rows)
    pitch = -(-rows // 4) * 4
    torch.full((4, pitch), float("nan"), device="cuda")  # the allocator hands this block to the scales
    q, s = per_token_group_quant_fp8(x, 128, 1e-10, True, False, scale_tma_aligned=True)
    ref_q, ref_s = _ref_groups(x, 128, 1e-10, FP8)
    assert s.shape == (rows, 4) and s.stride() == (1, pitch)
    _assert_same(q, ref_q)
    _assert_scales(s, ref_s)
    with pytest.raises(ValueError, match="per_token_group_quant_fp8: scale_tma_aligned needs column_major_scales"):
        per_token_group_quant_fp8(x, 128, scale_tma_aligned=True)


@pytest.mark.parametrize("dtype", DTYPES, ids=_ids)
@pytest.mark.parametrize("group", [32, 64, 128])
@pytest.mark.parametrize("rows,hidden", [(1, 128), (5, 640), (300, 4096), (2, 16384)])
def test_group_quant_int8(dtype, group, rows, hidden):
    x = _data(rows, hidden, dtype=dtype, seed=7 * rows + hidden)
    out = _poisoned((rows, hidden), torch.int8)
    q, s = per_token_group_quant_int8(x, group, 1e-10, out=out)
    ref_q, ref_s = _ref_groups(x, group, 1e-10, torch.int8)
    _assert_same(q, ref_q)
    _assert_scales(s, ref_s)


@pytest.mark.parametrize("dtype", DTYPES, ids=_ids)
@pytest.mark.parametrize("fn,out_dtype", [(per_token_group_quant_fp8, FP8), (per_token_group_quant_int8, torch.int8)],
                         ids=["fp8", "int8"])
def test_group_quant_strided_and_unaligned(dtype, fn, out_dtype):
    """Rows of a wider buffer, offset by one element: the element-wise (unvectorized) kernel."""
    rows, hidden = 37, 512
    base = _data(rows, hidden + 3, dtype=dtype, seed=3)
    x = base[:, 1:hidden + 1]
    assert x.stride(0) == hidden + 3
    for group in (32, 128):
        q, s = fn(x, group)
        ref_q, ref_s = _ref_groups(x, group, 1e-10, out_dtype)
        _assert_same(q, ref_q)
        _assert_scales(s.reshape(rows, -1), ref_s)


@pytest.mark.parametrize("dtype", DTYPES, ids=_ids)
@pytest.mark.parametrize("fn,out_dtype", [(per_token_group_quant_fp8, FP8), (per_token_group_quant_int8, torch.int8)],
                         ids=["fp8", "int8"])
@pytest.mark.parametrize("strided", ["input", "out"])
def test_group_quant_strided_aligned_rows(dtype, fn, out_dtype, strided):
    """Rows 16 elements apart more than their length (16-byte aligned): the vector kernel that
    addresses through the strides, not the one for contiguous rows and row-major scales."""
    rows, hidden, pad = 33, 1024, 16
    x = _data(rows, hidden + (pad if strided == "input" else 0), dtype=dtype, seed=5)[:, :hidden]
    out_buffer = _poisoned((rows, hidden + (pad if strided == "out" else 0)), out_dtype)
    out = out_buffer[:, :hidden]
    for group in (32, 128):
        q, s = fn(x, group, out=out)
        assert q is out
        ref_q, ref_s = _ref_groups(x, group, 1e-10, out_dtype)
        _assert_same(q, ref_q)
        _assert_scales(s, ref_s)
    if strided == "out":  # the padding between the rows is never written
        untouched = _poisoned((rows, pad), out_dtype).view(torch.uint8)
        assert torch.equal(out_buffer[:, hidden:].contiguous().view(torch.uint8), untouched)


def test_group_quant_leading_dims_and_eps():
    x = _data(2, 3, 256, dtype=torch.bfloat16, seed=11)
    x[0, 1, :128] = 0  # a group of zeros: scale = eps / 448, output zeros
    q, s = per_token_group_quant_fp8(x, 128, eps=1e-4)
    assert q.shape == x.shape and s.shape == (2, 3, 2)
    ref_q, ref_s = _ref_groups(x, 128, 1e-4, FP8)
    _assert_same(q.reshape(-1, 256), ref_q)
    _assert_scales(s.reshape(-1, 2), ref_s)
    assert s[0, 1, 0].item() == pytest.approx(1e-4 / 448, rel=1e-6)
    # column-major with leading dims: the scales are [rows, groups] over the flattened rows.
    q2, s2 = per_token_group_quant_fp8(x, 128, eps=1e-4, column_major_scales=True)
    assert s2.shape == (6, 2)
    _assert_scales(s2, ref_s)


# --------------------------------------------------------------------------------- per-token


@pytest.mark.parametrize("dtype", DTYPES, ids=_ids)
@pytest.mark.parametrize("rows", [1, 33, 300])
@pytest.mark.parametrize("hidden", [1, 7, 128, 1000, 4096, 16384])
@pytest.mark.parametrize("fn,out_dtype", [(per_token_quant_fp8, FP8), (per_token_quant_int8, torch.int8)],
                         ids=["fp8", "int8"])
def test_per_token_quant(dtype, rows, hidden, fn, out_dtype):
    x = _data(rows, hidden, dtype=dtype, seed=rows * hidden)
    out = _poisoned((rows, hidden), out_dtype)
    q, s = fn(x, out=out)
    ref_q, ref_s = _ref_groups(x, hidden, 0.0, out_dtype)
    _assert_same(q, ref_q)
    assert s.shape == (rows, 1)
    _assert_scales(s, ref_s)


@pytest.mark.parametrize("fn,out_dtype", [(per_token_quant_fp8, FP8), (per_token_quant_int8, torch.int8)],
                         ids=["fp8", "int8"])
def test_per_token_quant_zero_row_and_strides(fn, out_dtype):
    base = _data(9, 1030, dtype=torch.float16, seed=5)
    x = base[:, 3:1027]  # unaligned start, row stride 1030
    x[4] = 0
    q, s = fn(x)
    ref_q, ref_s = _ref_groups(x, 1024, 0.0, out_dtype)
    _assert_same(q, ref_q)
    _assert_scales(s, ref_s)
    assert s[4].item() == 0.0 and torch.all(_bits(q[4]) == 0)


# -------------------------------------------------------------------------------- per-tensor


def _ref_tensor(x, scale=None):
    xf = x.float().reshape(-1, x.shape[-1])
    if scale is None:
        scale = _div(xf.abs().amax(), FP8_MAX)
    return _quantize(xf, scale, FP8), scale.reshape(1)


@pytest.mark.parametrize("dtype", DTYPES, ids=_ids)
# One block up to 2048 vectors ((1, 128), (1, 7), (3, 5, 96)); one cluster of 8 blocks on sm_90+
# up to 32768 (for fp16/bf16, 8 elements a vector: (64, 4096) fills it, (65, 2048) leaves blocks
# idle; (7, 1001) is element-wise for every dtype); the two passes beyond (fp32's (64, 4096),
# (128, 4096), element-wise (333, 1000)); from 2^17 16-byte vectors the one-launch kernel on
# sm_90+ ((2048, 16384); more in test_per_tensor_dynamic_one_launch), the two passes before.
@pytest.mark.parametrize("shape", [(1, 128), (1, 7), (64, 4096), (65, 2048), (7, 1001), (128, 4096), (333, 1000),
                                   (2048, 16384), (3, 5, 96)],
                         ids=lambda s: "x".join(map(str, s)))
def test_per_tensor_dynamic(dtype, shape):
    x = _data(*shape, dtype=dtype, seed=sum(shape))
    out = _poisoned(shape, FP8)
    q, scale = per_tensor_quant_fp8(x, out=out)
    assert q is out and scale.shape == (1,) and scale.dtype == torch.float32
    ref_q, ref_s = _ref_tensor(x)
    _assert_scales(scale, ref_s)
    _assert_same(q.reshape(-1, shape[-1]), ref_q)


# The one-launch kernel on sm_90+ (contiguous, from 2^17 16-byte vectors). On an H100 a tile is
# 264 blocks x 1024 vectors and 7 tiles stay in shared memory: (256, 4096) bf16 is less than one
# tile (most threads have nothing); (1031, 2056) ends inside its last tile; (4096, 4096) bf16
# streams one tile past the stash, fp32 (four elements a vector) 24, the last 7 kept in L2.
@pytest.mark.parametrize("dtype", DTYPES, ids=_ids)
@pytest.mark.parametrize("shape", [(256, 4096), (1031, 2056), (4096, 4096)], ids=lambda s: "x".join(map(str, s)))
def test_per_tensor_dynamic_one_launch(dtype, shape):
    x = _data(*shape, dtype=dtype, seed=shape[0])
    q, scale = per_tensor_quant_fp8(x, out=_poisoned(shape, FP8))
    ref_q, ref_s = _ref_tensor(x)
    _assert_scales(scale, ref_s)
    _assert_same(q, ref_q)


def test_per_tensor_dynamic_without_room_for_partials_takes_two_passes():
    """The one-launch kernel needs a partial maximum per block in the workspace the wrapper
    allocates; given less, the op takes the two passes and is just as right."""
    x = _data(1024, 4096, dtype=torch.bfloat16, seed=12)
    module = find_module("per_tensor_quant_fp8", ("bf16_t", "false"), "cuda").load()
    out, scale = _poisoned(x.shape, FP8), torch.full((1,), float("nan"), device="cuda")
    module.per_tensor_quant_fp8(out, scale, torch.empty(1, device="cuda"), x, True)
    ref_q, ref_s = _ref_tensor(x)
    _assert_scales(scale, ref_s)
    _assert_same(out, ref_q)


def test_per_tensor_dynamic_grid_barrier_is_left_for_the_next_call():
    """The one-launch kernel's grid barrier counter is the module's and is never reset: call
    after call (odd and even, so the counter's top bit both ways), each with other data, gets its
    own scale, also when a CUDA graph replays a captured call between them."""
    xs = [_data(1024, 4096, dtype=torch.bfloat16, seed=13 + i) * (i + 1) for i in range(5)]  # 4M elements each
    for x in xs:
        q, scale = per_tensor_quant_fp8(x, out=_poisoned(x.shape, FP8))
        ref_q, ref_s = _ref_tensor(x)
        _assert_scales(scale, ref_s)
        _assert_same(q, ref_q)
    out = _poisoned(xs[0].shape, FP8)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        _, captured = per_tensor_quant_fp8(xs[0], out=out)
    for x in xs[1:3]:
        graph.replay()
        q, scale = per_tensor_quant_fp8(x, out=_poisoned(x.shape, FP8))
        ref_q, ref_s = _ref_tensor(x)
        _assert_scales(scale, ref_s)
        _assert_same(q, ref_q)
    torch.cuda.synchronize()
    ref_q, ref_s = _ref_tensor(xs[0])
    _assert_scales(captured, ref_s)
    _assert_same(out, ref_q)


@pytest.mark.parametrize("where", ["first", "middle", "last"])
@pytest.mark.parametrize("layout", ["contiguous", "strided", "cluster"])
def test_per_tensor_dynamic_finds_the_peak_anywhere(layout, where):
    """[8192, 8192] bf16 (128 MB: the stash, the streamed tiles and the L2-kept ones of the
    one-launch kernel), the same with strided rows (the two passes: more than L2 keeps for the
    second) and [64, 4096], one cluster: the single largest value sits in the first, a middle or
    the last block's part."""
    shape = (64, 4096) if layout == "cluster" else (8192, 8192)
    x = _data(*shape, dtype=torch.bfloat16, seed=5)
    if layout == "strided":
        x = torch.cat([x, x[:, :8]], dim=1)[:, :8192]  # rows 16400 bytes apart
    row, col = {"first": (0, 3), "middle": (shape[0] // 2, 11), "last": (shape[0] - 1, shape[1] - 1)}[where]
    x[row, col] = -1000.0
    out = _poisoned(x.shape, FP8)
    q, scale = per_tensor_quant_fp8(x, out=out)
    ref_q, ref_s = _ref_tensor(x)
    _assert_scales(scale, ref_s)
    _assert_same(q, ref_q)


@pytest.mark.parametrize("rows", [64, 128, 4096])
def test_per_tensor_dynamic_under_cuda_graph(rows):
    """Dynamic quantization replays in a CUDA graph (64 rows: the cluster kernel; 128: the scale
    reset and the two passes; 4096: the one-launch kernel on sm_90+), each replay computing the
    scale of the input's current contents."""
    x = _data(rows, 4096, dtype=torch.bfloat16, seed=rows)
    out = _poisoned(x.shape, FP8)
    scale = torch.full((1,), float("nan"), device="cuda")
    per_tensor_quant_fp8(x, out=out)  # build outside the capture
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.stream(stream), torch.cuda.graph(graph, stream=stream):
        _, s = per_tensor_quant_fp8(x, out=out)
        scale.copy_(s)
    torch.cuda.current_stream().wait_stream(stream)
    for factor in (3.0, 0.5):
        x.mul_(factor)
        out.view(torch.uint8).fill_(0x7F)
        graph.replay()
        torch.cuda.synchronize()
        ref_q, ref_s = _ref_tensor(x)
        _assert_scales(scale, ref_s)
        _assert_same(out, ref_q)


@pytest.mark.parametrize("shape", [(16, 256), (128, 4096), (512, 4096)], ids=str)
def test_per_tensor_dynamic_repeated_calls_reset_the_scale(shape):
    """Nothing of a call's amax survives into the next (one block, the two passes' zeroed scale,
    the one-launch kernel's partials): a smaller tensor after a larger one gets its own scale."""
    big = _data(*shape, dtype=torch.bfloat16, seed=1) * 100
    small = _data(*shape, dtype=torch.bfloat16, seed=2)
    per_tensor_quant_fp8(big)
    q, s = per_tensor_quant_fp8(small)
    ref_q, ref_s = _ref_tensor(small)
    _assert_scales(s, ref_s)
    _assert_same(q, ref_q)


# Static quantization takes 2-element vectors up to 2^18 elements ([64, 4096] is the last),
# 16-byte vectors beyond, and single elements when rows are not vector-aligned.
@pytest.mark.parametrize("shape", [(1, 4096), (65, 2048), (64, 4096), (3, 2), (520, 512), (7, 1001)], ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=_ids)
@pytest.mark.parametrize("scale_value", [0.01, 1.0, 0.0])
def test_per_tensor_static(dtype, scale_value, shape):
    x = _data(*shape, dtype=dtype, seed=9)
    scale = torch.tensor([scale_value], dtype=torch.float32, device="cuda")
    given = scale.clone()
    out = _poisoned(shape, FP8)
    q, s = per_tensor_quant_fp8(x, scale, out=out)
    assert q is out and s is scale and torch.equal(s, given), "a static scale must be returned unchanged"
    ref_q, _ = _ref_tensor(x, scale)
    _assert_same(q, ref_q)  # 0.01 saturates the outliers at +-448; 0.0 gives zeros


# Rows 16-byte aligned (a stride of 1104 elements), so the vector kernels take strided rows; the
# static kernel uses 2-element vectors for 50 rows and 16-byte ones for 300. An unaligned stride
# (1100) takes the element-wise kernels.
@pytest.mark.parametrize("rows, width", [(50, 1104), (300, 1104), (50, 1100), (20, 1100)])
def test_per_tensor_strided_rows(rows, width):
    base = _data(rows, width, dtype=torch.bfloat16, seed=4)
    x = base[:, 8:1032]
    q, s = per_tensor_quant_fp8(x, out=_poisoned(x.shape, FP8))
    ref_q, ref_s = _ref_tensor(x)
    _assert_scales(s, ref_s)
    _assert_same(q, ref_q)
    given = torch.tensor([0.02], device="cuda")
    q, _ = per_tensor_quant_fp8(x, given, out=_poisoned(x.shape, FP8))
    _assert_same(q, _ref_tensor(x, given)[0])


# Every kernel of every op, with each launch flag: None (the default, PDL on sm_90+), True, False.
_PATH_SHAPES = {
    "group": [(1, 128), (8192, 512)],  # one vector a lane, two (more groups than one wave holds)
    "per_token": [(3, 1001), (5, 4096), (2, 16384)],  # element-wise, in registers, the two-pass loop
    # One block, one cluster (sm_90+), the two passes, the one-launch kernel (sm_90+).
    "dynamic": [(4, 256), (64, 4096), (300, 1024), (512, 4096)],
    "static": [(1, 4096), (2048, 4096), (7, 1001)],  # narrow vectors, 16-byte vectors, element-wise
}


@pytest.mark.parametrize("enable_pdl", [None, True, False], ids=["default", "pdl", "no_pdl"])
@pytest.mark.parametrize("path", list(_PATH_SHAPES))
def test_every_path_with_each_launch_flag(path, enable_pdl):
    for shape in _PATH_SHAPES[path]:
        x = _data(*shape, dtype=torch.bfloat16, seed=shape[0])
        if path == "group":
            q, s = per_token_group_quant_fp8(x, 128, out=_poisoned(shape, FP8), enable_pdl=enable_pdl)
            ref_q, ref_s = _ref_groups(x, 128, 1e-10, FP8)
            qi, si = per_token_group_quant_int8(x, 64, out=_poisoned(shape, torch.int8), enable_pdl=enable_pdl)
            ref_qi, ref_si = _ref_groups(x, 64, 1e-10, torch.int8)
            _assert_same(qi, ref_qi)
            _assert_scales(si, ref_si)
        elif path == "per_token":
            qi, si = per_token_quant_int8(x, out=_poisoned(shape, torch.int8), enable_pdl=enable_pdl)
            ref_qi, ref_si = _ref_groups(x, shape[1], 0.0, torch.int8)
            _assert_same(qi, ref_qi)
            _assert_scales(si, ref_si)
            q, s = per_token_quant_fp8(x, out=_poisoned(shape, FP8), enable_pdl=enable_pdl)
            ref_q, ref_s = _ref_groups(x, shape[1], 0.0, FP8)
        elif path == "dynamic":
            q, s = per_tensor_quant_fp8(x, out=_poisoned(shape, FP8), enable_pdl=enable_pdl)
            ref_q, ref_s = _ref_tensor(x)
        else:
            s = torch.tensor([0.03], device="cuda")
            q, _ = per_tensor_quant_fp8(x, s, out=_poisoned(shape, FP8), enable_pdl=enable_pdl)
            ref_q, ref_s = _ref_tensor(x, s)
        _assert_same(q, ref_q)
        _assert_scales(s, ref_s)


def test_launch_flag_type_is_checked():
    x = _data(2, 128, dtype=torch.bfloat16)
    with pytest.raises(TypeError, match=re.escape("Mismatched type on argument #3")):
        per_token_quant_fp8(x, enable_pdl="yes")
    _assert_same(per_token_quant_fp8(x, enable_pdl=0)[0], _ref_groups(x, 128, 0.0, FP8)[0])  # ints convert


def test_nan_input_stays_nan_fp8():
    x = _data(4, 128, dtype=torch.float32, seed=8)
    x[1, 5] = float("nan")
    q, _ = per_token_group_quant_fp8(x, 128, scale_ue8m0=False)
    assert torch.isnan(q[1, 5].float())


# ------------------------------------------------------------------------------ bad inputs


def _raises(message, fn, *args, **kwargs):
    with pytest.raises(ValueError, match=message):
        fn(*args, **kwargs)


@pytest.mark.parametrize("fn", [per_token_quant_fp8, per_token_quant_int8, per_tensor_quant_fp8,
                                per_token_group_quant_fp8, per_token_group_quant_int8])
def test_zero_dim_input_raises(fn):
    scalar = torch.tensor(1.5, device="cuda", dtype=torch.bfloat16)
    _raises(re.escape(f"{fn.__name__}: input: must have at least 1 dim, got a 0-dim tensor"), fn, scalar)


def test_bad_inputs_group():
    op = "per_token_group_quant_fp8"
    x = _data(4, 256, dtype=torch.bfloat16)
    _raises(re.escape(f"{op}: input: dtype must be one of float32, float16, bfloat16, got int32"),
            per_token_group_quant_fp8, x.to(torch.int32))
    _raises(re.escape(f"{op}: group_size must be 32, 64 or 128, got 48"), per_token_group_quant_fp8, x, 48)
    _raises(re.escape(f"{op}: group_size must be 32, 64 or 128, got 256"), per_token_group_quant_fp8, x, 256)
    _raises(re.escape(f"{op}: hidden size 96 is not divisible by group_size 64"),
            per_token_group_quant_fp8, _data(4, 96, dtype=torch.bfloat16), 64)
    _raises(re.escape("per_token_group_quant_int8: hidden size 100 is not divisible by group_size 32"),
            per_token_group_quant_int8, _data(2, 100, dtype=torch.float32), 32)
    _raises(re.escape(f"{op}: input: device must be cuda, got cpu"), per_token_group_quant_fp8, x.cpu())
    _raises(re.escape(f"{op}: input must not be empty, got shape [0, 256]"),
            per_token_group_quant_fp8, x[:0])
    _raises(re.escape(f"{op}: eps must be non-negative, got -1"), per_token_group_quant_fp8, x, 128, -1.0)
    _raises(re.escape(f"{op}: input: stride 1 must be 1, got 2"), per_token_group_quant_fp8,
            _data(4, 512, dtype=torch.bfloat16)[:, ::2])
    _raises(re.escape(f"{op}: out: dtype must be float8_e4m3fn, got int8"), per_token_group_quant_fp8, x,
            out=torch.empty(4, 256, dtype=torch.int8, device="cuda"))
    _raises(re.escape(f"{op}: out: dim 1 (hidden) must be 256 as bound by input, got 128"),
            per_token_group_quant_fp8, x, out=torch.empty(4, 128, dtype=FP8, device="cuda"))
    _raises(re.escape("per_token_group_quant_int8: out: dtype must be int8, got float8_e4m3fn"),
            per_token_group_quant_int8, x, out=torch.empty(4, 256, dtype=FP8, device="cuda"))


def test_bad_inputs_per_token_and_tensor():
    x = _data(4, 256, dtype=torch.float16)
    _raises(re.escape("per_token_quant_fp8: input must not be empty, got shape [4, 0]"), per_token_quant_fp8,
            x[:, :0])
    _raises(re.escape("per_token_quant_int8: out: dtype must be int8, got float16"), per_token_quant_int8, x,
            out=torch.empty_like(x))
    op = "per_tensor_quant_fp8"
    _raises(re.escape(f"{op}: scale: dtype must be float32, got float16"), per_tensor_quant_fp8, x,
            torch.ones(1, dtype=torch.float16, device="cuda"))
    _raises(re.escape(f"{op}: scale: dim 0 must be 1, got 2"), per_tensor_quant_fp8, x,
            torch.ones(2, dtype=torch.float32, device="cuda"))
    _raises(re.escape(f"{op}: scale: device must be cuda:0 as bound by input, got cpu"), per_tensor_quant_fp8, x,
            torch.ones(1, dtype=torch.float32))
    _raises(re.escape(f"{op}: input: dtype must be one of float32, float16, bfloat16, got float64"),
            per_tensor_quant_fp8, x.double())
    _raises(re.escape(f"{op}: input must not be empty, got shape [0, 256]"), per_tensor_quant_fp8, x[:0])


def test_bad_workspace_of_the_module_function():
    """The module function takes the dynamic path's float32 workspace from the wrapper; called
    directly with a wrong one, it names it."""
    x = _data(4, 256, dtype=torch.bfloat16)
    module = find_module("per_tensor_quant_fp8", ("bf16_t", "false"), "cuda").load()
    out, scale = torch.empty(x.shape, dtype=FP8, device="cuda"), torch.empty(1, device="cuda")
    _raises(re.escape("workspace: dtype must be float32, got float16"), module.per_tensor_quant_fp8, out, scale,
            torch.empty(8, dtype=torch.float16, device="cuda"), x, True)
    _raises(re.escape("workspace: device must be cuda, got cpu"), module.per_tensor_quant_fp8, out,
            scale, torch.empty(8), x, True)
