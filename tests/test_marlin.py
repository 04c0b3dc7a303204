"""Weight-only quantized GEMM on Marlin-format weights (W4A16 / W8A16, GPTQ and AWQ).

The format helpers and type ids are checked here on any machine against the published
construction, written out as loops; the CUDA repacks against that construction applied to the
checkpoint's unpacked values; the GEMM against a float64 product with the dequantized weights,
on weights prepared exactly as serving code prepares them (repack, permuted scales and zero
points, sorted g_idx for act-order).
"""

from __future__ import annotations

import functools
import re

import pytest
import torch

from mllm_kernel import marlin, reference
from mllm_kernel.scalar_type import NanRepr, ScalarType, scalar_types

HAS_CUDA = torch.cuda.is_available() and torch.cuda.get_device_capability()[0] >= 8
cuda = pytest.mark.skipif(not HAS_CUDA, reason="needs an sm_80+ GPU")


# --- the published format, written as loops ---------------------------------------------------------
def _weight_perm(num_bits: int) -> list[int]:
    """Marlin's order of a 16x64 tile's 1024 values (index 256 j + 16 row + col, j the
    16-column sub-tile), interleaved for the dequantizer."""
    order = []
    for thread in range(32):
        run = []
        for half in (0, 1):
            for row in (2 * (thread % 4), 2 * (thread % 4) + 1, 2 * (thread % 4 + 4), 2 * (thread % 4 + 4) + 1):
                run.append(16 * row + thread // 4 + 8 * half)
        for j in range(4):
            order.extend(p + 256 * j for p in run)
    interleave = marlin.INTERLEAVE[num_bits]
    return [order[i - i % len(interleave) + interleave[i % len(interleave)]] for i in range(len(order))]


def _marlin_weights(q: torch.Tensor, num_bits: int) -> torch.Tensor:
    """Unpacked values [K, N] to Marlin's packed [K / 16, N * 16 * bits / 32]."""
    k, n = q.shape
    tiles = q.reshape(k // 16, 16, n // 16, 16).permute(0, 2, 1, 3).reshape(k // 16, n * 16)
    perm = torch.tensor(_weight_perm(num_bits))
    tiles = tiles.reshape(-1, 1024)[:, perm].reshape(k // 16, n * 16)
    per_word = 32 // num_bits
    words = torch.zeros(k // 16, n * 16 // per_word, dtype=torch.int64)
    for i in range(per_word):
        words |= tiles[:, i::per_word].to(torch.int64) << (num_bits * i)
    return marlin.to_int32_bits(words)


def _unpack_gptq(qweight: torch.Tensor, num_bits: int) -> torch.Tensor:
    per_word = 32 // num_bits
    rows = [(qweight.to(torch.int64) >> (num_bits * i)) & ((1 << num_bits) - 1) for i in range(per_word)]
    return torch.stack(rows, 1).reshape(-1, qweight.shape[1])


def _unpack_awq(qweight: torch.Tensor) -> torch.Tensor:
    k, words = qweight.shape
    out = torch.empty(k, words * 8, dtype=torch.int64)
    for i, column in enumerate(reference.AWQ_ORDER):
        out[:, column::8] = (qweight.to(torch.int64) >> (4 * i)) & 0xF
    return out


# --- type ids and format helpers (any machine) ------------------------------------------------------
def test_scalar_type_ids_pack_the_fields():
    assert scalar_types.uint4b8.id == 4 << 8 | 8 << 17 | 1 << 50
    assert scalar_types.uint4.id == 4 << 8 | 1 << 50
    assert scalar_types.uint8b128.id == 8 << 8 | 128 << 17 | 1 << 50
    assert scalar_types.float8_e4m3fn.id == 4 | 3 << 8 | 1 << 16 | 1 << 49 | 2 << 50
    for t in (scalar_types.uint4b8, scalar_types.uint4, scalar_types.uint8b128, scalar_types.float8_e4m3fn,
              scalar_types.int8, scalar_types.bfloat16):
        assert ScalarType.from_id(t.id) == t
    assert str(scalar_types.uint4b8) == "uint4b8" and str(scalar_types.float8_e4m3fn) == "float8_e4m3fn"
    assert scalar_types.uint8b128.size_bits == 8 and scalar_types.float8_e4m3fn.nan_repr == NanRepr.EXTD_RANGE_MAX_MIN


@pytest.mark.parametrize("bad", [-1, 1 << 58, 3 << 50, "x", True])
def test_scalar_type_from_bad_id(bad):
    with pytest.raises(ValueError, match="not a ScalarType id"):
        ScalarType.from_id(bad)


def test_scale_permutations_are_the_published_tables():
    assert marlin.scale_perm() == [i + 8 * j for i in range(8) for j in range(8)]
    single = []
    for i in range(4):
        single.extend([2 * i + j for j in [0, 1, 8, 9, 16, 17, 24, 25]])
    assert marlin.scale_perm_single() == single


def test_pack_fp8_to_int32_and_the_exponent_bias():
    """pack_fp8_to_int32 packs four float8 rows of K a word, the lowest in the low byte (as GPTQ
    packs 8-bit values), from [K, N] or [N, K]; the scales gain 2^8 (float16) or 2^120 (bfloat16),
    the power of two the kernel's float8 conversion leaves out, exactly."""
    g = torch.Generator().manual_seed(0)
    w = (torch.randn(12, 5, generator=g) * 100).to(torch.float8_e4m3fn)  # [K, N]
    packed = marlin.pack_fp8_to_int32(w)
    assert packed.shape == (3, 5) and packed.dtype == torch.int32
    raw = w.view(torch.uint8).to(torch.int64)
    words = raw[0::4] | raw[1::4] << 8 | raw[2::4] << 16 | raw[3::4] << 24
    assert torch.equal(marlin.to_int32_bits(words), packed)
    assert torch.equal(marlin.pack_fp8_to_int32(w.t().contiguous(), size_k_first=False), packed.t())
    with pytest.raises(ValueError, match="K must be a multiple of 4, got 6"):
        marlin.pack_fp8_to_int32(w[:6])
    with pytest.raises(ValueError, match="must be a 2-D float8_e4m3fn tensor"):
        marlin.pack_fp8_to_int32(w.float())
    s = torch.rand(2, 64, generator=g) + 0.01
    assert torch.equal(marlin.fp8_fused_exponent_bias_into_scales(s.half()).double(), s.half().double() * 2.0**8)
    assert torch.equal(marlin.fp8_fused_exponent_bias_into_scales(s.bfloat16()).double(), s.bfloat16().double() * 2.0**120)
    with pytest.raises(ValueError, match="scales must be float16 or bfloat16 .the activations' dtype., got float32"):
        marlin.fp8_fused_exponent_bias_into_scales(s)


@pytest.mark.parametrize("group_size", [-1, 64, 128])
def test_marlin_permute_scales(group_size):
    k, n = 256, 192
    groups = 1 if group_size == -1 else k // group_size
    s = torch.randn(groups, n)
    out = marlin.marlin_permute_scales(s, k, n, group_size)
    table = marlin.scale_perm() if groups > 1 else marlin.scale_perm_single()
    expected = s.reshape(-1, len(table))[:, table].reshape(groups, n)
    assert torch.equal(out, expected)


def test_awq_to_marlin_zero_points():
    groups, n = 3, 128
    zp = torch.randint(0, 16, (groups, n))
    packed_awq = reference.quantize_awq(torch.randn(groups * 32, n), 32)["qzeros"]
    unpacked = _unpack_awq(packed_awq)
    out = marlin.awq_to_marlin_zero_points(packed_awq, groups, n, 4)
    # The published recipe: permute like grouped scales, interleave each run of 8, pack.
    z = unpacked.reshape(-1, 64)[:, marlin.scale_perm()].reshape(-1, 8)[:, list(marlin.INTERLEAVE[4])]
    z = z.reshape(groups, n // 8, 8)
    expected = marlin.to_int32_bits(sum(z[..., i] << (4 * i) for i in range(8)))
    assert torch.equal(out, expected)
    direct = zp.reshape(-1, 64)[:, marlin.scale_perm()].reshape(-1, 8)[:, list(marlin.INTERLEAVE[4])]
    direct = direct.reshape(groups, n // 8, 8)
    assert torch.equal(marlin.marlin_zero_points(zp, groups, n, 4),
                       marlin.to_int32_bits(sum(direct[..., i] << (4 * i) for i in range(8))))


def test_marlin_sort_g_idx():
    g_idx = torch.tensor([2, 0, 1, 0, 2, 1], dtype=torch.int32)
    sorted_g, perm = marlin.marlin_sort_g_idx(g_idx)
    assert sorted_g.tolist() == [0, 0, 1, 1, 2, 2] and perm.dtype == torch.int32
    assert torch.equal(g_idx[perm.long()], sorted_g)


# --- CUDA -------------------------------------------------------------------------------------------
def _gptq_weights(k, n, bits, group_size, act_order, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(k, n, generator=g).to(dtype)
    return reference.quantize_gptq(w, bits, group_size, act_order, generator=g)


@cuda
@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("act_order", [False, True])
def test_gptq_marlin_repack_matches_the_published_layout(bits, act_order):
    from mllm_kernel.cuda.jit import gptq_marlin_repack

    k, n = 256, 192
    ckpt = _gptq_weights(k, n, bits, 64, act_order, torch.float16)
    values = _unpack_gptq(ckpt["qweight"], bits)
    perm = None
    if act_order:
        _, perm = marlin.marlin_sort_g_idx(ckpt["g_idx"])
        values = values[perm.long()]
    out = gptq_marlin_repack(ckpt["qweight"].cuda(), None if perm is None else perm.cuda(), k, n, bits)
    assert out.shape == (k // 16, n * 16 * bits // 32) and out.dtype == torch.int32
    assert torch.equal(out.cpu(), _marlin_weights(values, bits))


@cuda
def test_awq_marlin_repack_matches_the_published_layout():
    from mllm_kernel.cuda.jit import awq_marlin_repack

    k, n = 128, 256
    ckpt = reference.quantize_awq(torch.randn(k, n), 64)
    out = awq_marlin_repack(ckpt["qweight"].cuda(), k, n, 4)
    assert torch.equal(out.cpu(), _marlin_weights(_unpack_awq(ckpt["qweight"]), 4))


def _ops(device: str):
    """The module with gptq_marlin_gemm and the repacks for a device."""
    if device == "cpu":
        from mllm_kernel.cpu import jit as ops
    else:
        from mllm_kernel.cuda import jit as ops
    return ops


def _prepare(kind, k, n, group_size, act_order, dtype, seed, device="cuda"):
    """A checkpoint quantized from random weights and prepared as serving code does."""
    ops = _ops(device)
    awq_marlin_repack, gptq_marlin_repack = ops.awq_marlin_repack, ops.gptq_marlin_repack
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(k, n, generator=g).to(dtype) * 0.1
    groups_size = k if group_size == -1 else group_size
    if kind == "awq":
        ckpt = reference.quantize_awq(w, group_size, generator=g)
        q = awq_marlin_repack(ckpt["qweight"].to(device), k, n, 4)
        zeros = marlin.awq_to_marlin_zero_points(ckpt["qzeros"], k // groups_size, n, 4).to(device)
        return dict(q=q, s=marlin.marlin_permute_scales(ckpt["scales"], k, n, group_size).to(device), zeros=zeros,
                    g_idx=None, perm=None, type_id=scalar_types.uint4.id, w_ref=ckpt["w_ref"])
    if kind == "fp8":
        ckpt = reference.quantize_fp8(w, group_size)
        q = gptq_marlin_repack(marlin.pack_fp8_to_int32(ckpt["weight"]).to(device), None, k, n, 8)
        s = marlin.fp8_fused_exponent_bias_into_scales(marlin.marlin_permute_scales(ckpt["scales"], k, n, group_size))
        return dict(q=q, s=s.to(device), zeros=None, g_idx=None, perm=None, type_id=scalar_types.float8_e4m3fn.id,
                    w_ref=ckpt["w_ref"])
    bits = 8 if kind == "gptq8" else 4
    ckpt = reference.quantize_gptq(w, bits, group_size, act_order, generator=g)
    g_idx = perm = None
    if act_order:
        g_idx, perm = marlin.marlin_sort_g_idx(ckpt["g_idx"])
        g_idx, perm = g_idx.to(device), perm.to(device)
    q = gptq_marlin_repack(ckpt["qweight"].to(device), perm, k, n, bits)
    type_id = scalar_types.uint8b128.id if bits == 8 else scalar_types.uint4b8.id
    return dict(q=q, s=marlin.marlin_permute_scales(ckpt["scales"], k, n, group_size).to(device), zeros=None,
                g_idx=g_idx, perm=perm, type_id=type_id, w_ref=ckpt["w_ref"])


#: The weights key of the kernels' tables for each kind of _prepare.
_KIND_WEIGHTS = {"gptq4": 4, "awq": 4, "gptq8": 8, "fp8": "fp8"}


def _run(prep, a, n, k, c=None, workspace="make"):
    gptq_marlin_gemm = _ops(a.device.type).gptq_marlin_gemm
    ws = marlin.marlin_make_workspace(a.device) if workspace == "make" else workspace
    return gptq_marlin_gemm(a, c, prep["q"], prep["s"], None, prep["zeros"], prep["g_idx"], prep["perm"], ws,
                            prep["type_id"], a.shape[0], n, k)


#: gptq_marlin_gemm's positional arguments, by the names the bad-input tests change them with.
GEMM_ARGS = ["a", "c", "q", "s", "global_scale", "zeros", "g_idx", "perm", "workspace", "type", "m", "n", "k"]


def _caller(gemm, args):
    """call(name=value, ...): gemm with those of its positional ``args`` replaced."""

    def call(**changes):
        values = list(args)
        for name, value in changes.items():
            values[GEMM_ARGS.index(name)] = value
        return gemm(*values)

    return call


def _check(out, a, w_ref, dtype):
    ref = a.double().cpu() @ w_ref
    bound = a.double().abs().cpu() @ w_ref.abs()
    eps = torch.finfo(dtype).eps
    err = (out.double().cpu() - ref).abs()
    # Dequantized weights rounded to the activation dtype, float32 sums, the output rounded.
    assert bool((err <= eps * bound + eps * ref.abs() + 1e-6).all()), float((err - eps * bound).max())


def _check_bf16_within_float32_error(out, a, w_ref):
    """out (bf16) within its rounding and 2^-15 of the sum of |a w| of the exact product a @ w_ref:
    128 times tighter than _check's bound for bf16."""
    exact = a.double().cpu() @ w_ref
    rounding = exact.abs().to(torch.bfloat16).double() * 2.0 ** -8
    bound = (a.double().abs().cpu() @ w_ref.abs()) * 2.0 ** -15
    excess = (out.double().cpu() - exact).abs() - rounding - bound
    assert bool((excess <= 0).all()), float(excess.max())


CASES = [("gptq4", -1, False), ("gptq4", 32, False), ("gptq4", 128, False), ("gptq4", 64, True), ("gptq8", 128, False),
         ("gptq8", -1, False), ("gptq8", 64, True), ("awq", 64, False), ("awq", 128, False), ("awq", 32, False),
         ("fp8", -1, False), ("fp8", 128, False)]


@cuda
@pytest.mark.parametrize("kind,group_size,act_order", CASES)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("m", [1, 7, 16, 33, 128, 1000])
def test_gptq_marlin_gemm(kind, group_size, act_order, dtype, m):
    k, n = 512, 320
    prep = _prepare(kind, k, n, group_size, act_order, dtype, seed=m)
    a = torch.randn(m, k, device="cuda").to(dtype)
    out = _run(prep, a, n, k)
    assert out.shape == (m, n) and out.dtype == dtype
    _check(out, a, prep["w_ref"], dtype)


@cuda
@pytest.mark.parametrize("m,n,k", [(1, 64, 16), (3, 64, 48), (16, 4096, 4096), (5, 14336, 1024), (200, 576, 2048),
                                   (128, 576, 2048), (128, 192, 256), (129, 192, 256), (300, 64, 48),
                                   (300, 192, 1040)])
def test_gptq_marlin_gemm_shapes(m, n, k):
    dtype = torch.bfloat16
    prep = _prepare("gptq4", k, n, 128 if k % 128 == 0 else -1, False, dtype, seed=k)
    a = torch.randn(m, k, device="cuda").to(dtype)
    c = torch.full((m, n), float("nan"), dtype=dtype, device="cuda")
    out = _run(prep, a, n, k, c=c)
    assert out.data_ptr() == c.data_ptr()
    _check(out, a, prep["w_ref"], dtype)


@cuda
@pytest.mark.parametrize("kind,group_size,act_order,dtype", [("gptq4", 80, False, torch.bfloat16),
                                                            ("awq", 80, False, torch.float16),
                                                            ("gptq8", -1, False, torch.bfloat16),
                                                            ("gptq4", 208, True, torch.float16),
                                                            ("gptq8", 208, True, torch.bfloat16),
                                                            ("fp8", 208, False, torch.float16),
                                                            ("fp8", -1, False, torch.bfloat16)])
def test_marlin_dequant_is_the_rounded_product(kind, group_size, act_order, dtype):
    """The large-M path's dequantization: (q - zero) * scale rounded once to the activation
    dtype, bit for bit, over K of 65 steps (blocks of 8 steps and a short last one); with
    act-order, K in the repacked (perm) order; float8 weights times the scale whose exponent
    bias was folded in, the same product."""
    from mllm_kernel.cuda.jit import gptq_marlin

    k, n = 1040, 192
    prep = _prepare(kind, k, n, group_size, act_order, dtype, seed=3)
    empty = torch.empty(0, dtype=torch.int32, device="cuda")
    out = torch.full((n, k), float("nan"), dtype=dtype, device="cuda")
    gptq_marlin._DEQUANT[(dtype, {"gptq8": 8, "fp8": gptq_marlin.FP8}.get(kind, 4))](
        prep["q"], prep["s"], prep["zeros"] if prep["zeros"] is not None else empty,
        prep["g_idx"] if prep["g_idx"] is not None else empty, out, n, k)
    w = prep["w_ref"][prep["perm"].long().cpu()] if act_order else prep["w_ref"]
    assert torch.equal(out.cpu(), w.t().to(dtype))


@cuda
@pytest.mark.parametrize("kind,group_size,act_order", [("gptq4", 80, False), ("awq", 80, False), ("awq", -1, False),
                                                      ("gptq4", 208, True), ("gptq8", 208, True), ("gptq8", -1, False),
                                                      ("fp8", 208, False)])
@pytest.mark.parametrize("m", [1, 8, 12, 20, 70])
def test_marlin_kernel_over_any_split_of_k(kind, group_size, act_order, m):
    """The kernel's module function over splits of K from none to one 16-row step a block
    (65 steps: splits that leave the last block short, or with nothing), groups that straddle
    splits and pipeline stages, the output poisoned first; and its bad split-K arguments. Up to
    8 rows without act-order the kernel swaps its MMA operands; 12 rows take the plain
    16-row tile, 20 and 70 the 32- and 64-row ones."""
    from mllm_kernel.cuda.jit import gptq_marlin

    k, n, dtype = 1040, 768, torch.bfloat16
    prep = _prepare(kind, k, n, group_size, act_order, dtype, seed=m)
    a = torch.randn(m, k, device="cuda").to(dtype)
    a_in = a[:, prep["perm"].long()].contiguous() if prep["perm"] is not None else a
    weights = {"gptq8": 8, "fp8": gptq_marlin.FP8}.get(kind, 4)
    empty = torch.empty(0, dtype=torch.int32, device="cuda")
    zeros = prep["zeros"] if prep["zeros"] is not None else empty
    g_idx = prep["g_idx"] if prep["g_idx"] is not None else empty
    m_tiles, blocks = gptq_marlin.m_tiles_for(m), gptq_marlin.output_blocks(m, n)
    module = gptq_marlin._GEMM[(dtype, weights, gptq_marlin.gemm_kernel(m, m_tiles, act_order))]
    locks = torch.zeros(blocks, dtype=torch.int32, device="cuda")
    for splits in (1, 2, 3, 5, 9, 64, 65):
        c = torch.full((m, n), float("nan"), dtype=dtype, device="cuda")
        partials = torch.full((splits * m * n,) if splits > 1 else (0,), float("nan"), device="cuda")
        module(a_in, c, prep["q"], prep["s"], zeros, g_idx, partials, locks, m, n, k, m_tiles, splits, splits % 2 == 1)
        _check(c, a, prep["w_ref"], dtype)
        assert int(locks.abs().sum()) == 0, splits
    with pytest.raises(ValueError, match=r"splits must be in \[1, 65\], got 66"):
        module(a_in, c, prep["q"], prep["s"], zeros, g_idx, partials, locks, m, n, k, m_tiles, 66, True)
    with pytest.raises(ValueError, match="partials"):
        module(a_in, c, prep["q"], prep["s"], zeros, g_idx, partials[1:], locks, m, n, k, m_tiles, 65, True)
    with pytest.raises(ValueError, match=f"locks needs {blocks} entries, got {blocks - 1}"):
        module(a_in, c, prep["q"], prep["s"], zeros, g_idx, partials, locks[1:], m, n, k, m_tiles, 65, True)
    with pytest.raises(ValueError, match="m_tiles must be 1, 2 or 4, got 3"):
        module(a_in, c, prep["q"], prep["s"], zeros, g_idx, partials, locks, m, n, k, 3, 65, True)
    # Each module holds one kernel: a call that needs another is refused.
    other, order = 4 if m_tiles != 4 else 2, " with act-order" if act_order else ""
    swapped = gptq_marlin.gemm_kernel(m, m_tiles, act_order).swapped
    runs = f"{m_tiles}-tile blocks{order}" + (", swapped" if swapped else "")
    with pytest.raises(ValueError, match=re.escape(f"this marlin_gemm module runs {runs}; the call needs "
                                                   f"{other}-tile blocks{order}")):
        module(a_in, c, prep["q"], prep["s"], zeros, g_idx, partials, locks, m, n, k, other, 65, True)
    with pytest.raises(ValueError, match="c: must start 16-byte aligned"):
        shifted = torch.empty(m * n + 1, dtype=dtype, device="cuda")[1:].view(m, n)
        module(a_in, shifted, prep["q"], prep["s"], zeros, g_idx, partials, locks, m, n, k, m_tiles, 65, True)


@cuda
@pytest.mark.parametrize("kind,group_size", [("gptq4", 128), ("gptq4", 64), ("gptq4", 256), ("awq", 128), ("awq", 64),
                                             ("awq", -1), ("gptq8", 32), ("gptq8", -1), ("fp8", 128), ("fp8", -1)])
@pytest.mark.parametrize("m,n,k", [(1, 768, 1280), (3, 832, 1280), (8, 768, 1280), (9, 768, 1280), (13, 832, 1280),
                                   (16, 320, 4096), (8, 320, 4096), (1, 256, 8192)])
def test_marlin_gemv_over_any_split_of_k(kind, group_size, m, n, k):
    """The GEMV kernel's module function (decoding, up to 16 rows; one or two 8-row blocks of a):
    splits of K from none to one 16-row step a block, which the kernel rounds up to whole stages
    for both K-halves (80 steps: some splits come out fewer or with a short last one; 256 and
    512 steps: 16 and 32 splits, whose fix-up asks for 16 at once), 832 columns (a block with a
    tile past N), the output and the partial sums poisoned first; its counters left zero."""
    from mllm_kernel.cuda.jit import gptq_marlin

    dtype = torch.float16 if m == 3 else torch.bfloat16
    prep = _prepare(kind, k, n, group_size, False, dtype, seed=m + n)
    # 3 rows: a row stride of k + 2, rows 4-byte aligned only (the kernel copies a 4 bytes a lane,
    # else 16).
    a = torch.randn(m, k + 2, device="cuda").to(dtype)[:, 2:] if m == 3 else torch.randn(m, k, device="cuda").to(dtype)
    weights = {"gptq8": 8, "fp8": gptq_marlin.FP8}.get(kind, 4)
    empty = torch.empty(0, dtype=torch.int32, device="cuda")
    zeros = prep["zeros"] if prep["zeros"] is not None else empty
    module = gptq_marlin._GEMV[(dtype, weights, False)]
    locks = torch.zeros(gptq_marlin.gemv_blocks(n), dtype=torch.int32, device="cuda")
    for splits in (1, 2, 3, 5, 7, 16, 32, k // 16):
        c = torch.full((m, n), float("nan"), dtype=dtype, device="cuda")
        partials = torch.full((splits * m * n,) if splits > 1 else (0,), float("nan"), device="cuda")
        module(a, c, prep["q"], prep["s"], zeros, empty, partials, locks, m, n, k, splits, splits % 2 == 1)
        _check(c, a, prep["w_ref"], dtype)
        assert int(locks.abs().sum()) == 0, splits


@cuda
@pytest.mark.parametrize("kind,group_size", [("gptq4", 128), ("gptq4", -1), ("awq", 128), ("awq", -1)])
@pytest.mark.parametrize("splits", [1, 4])
def test_marlin_gemv_bf16_within_float32_error(kind, group_size, splits):
    """The GEMV's bf16 path on 4-bit weights (which feeds the MMAs 128 + q and takes 128 times the
    sums of a off, every 128 rows at least): within the output's rounding and 2^-15 of the sum
    of |a w| of the exact product (128 times tighter than the other tests' bound), over a long K
    and channel-wise groups, the longest sums."""
    from mllm_kernel.cuda.jit import gptq_marlin

    k, n, m = 4096, 256, 3
    prep = _prepare(kind, k, n, group_size, False, torch.bfloat16, seed=5)
    a = (torch.randn(m, k, generator=torch.Generator().manual_seed(11)) * 4).to(torch.bfloat16).cuda()
    empty = torch.empty(0, dtype=torch.int32, device="cuda")
    zeros = prep["zeros"] if prep["zeros"] is not None else empty
    c = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device="cuda")
    partials = torch.empty(splits * m * n if splits > 1 else 0, device="cuda")
    locks = torch.zeros(gptq_marlin.gemv_blocks(n), dtype=torch.int32, device="cuda")
    gptq_marlin._GEMV[(torch.bfloat16, 4, False)](a, c, prep["q"], prep["s"], zeros, empty, partials, locks, m, n, k,
                                                  splits, True)
    _check_bf16_within_float32_error(c, a, prep["w_ref"])


@cuda
@pytest.mark.parametrize("kind,group_size", [("gptq4", 128), ("gptq4", 32), ("gptq4", 80), ("gptq8", 32), ("gptq8", 80),
                                             ("gptq8", 256)])
@pytest.mark.parametrize("m", [1, 8, 16])
def test_marlin_gemv_act_order(kind, group_size, m):
    """GPTQ act-order through the GEMV kernel: a's columns in perm order, g_idx sorted by it
    (stages of one group where the groups are a multiple of a stage's rows, 64 for 4-bit and 32
    for 8-bit weights; stages across groups otherwise), then random ids (nearly every stage across
    groups, and a run of whole stages in one), over splits of K."""
    from mllm_kernel.cuda.jit import gptq_marlin

    k, n, dtype = 1280, 512, torch.bfloat16
    prep = _prepare(kind, k, n, group_size, True, dtype, seed=m)
    a = torch.randn(m, k, device="cuda").to(dtype)
    a_in = a[:, prep["perm"].long()].contiguous()
    module = gptq_marlin._GEMV[(dtype, _KIND_WEIGHTS[kind], True)]
    empty = torch.empty(0, dtype=torch.int32, device="cuda")
    locks = torch.zeros(gptq_marlin.gemv_blocks(n), dtype=torch.int32, device="cuda")
    for splits in (1, 3, 80):
        c = torch.full((m, n), float("nan"), dtype=dtype, device="cuda")
        partials = torch.full((splits * m * n,) if splits > 1 else (0,), float("nan"), device="cuda")
        module(a_in, c, prep["q"], prep["s"], empty, prep["g_idx"], partials, locks, m, n, k, splits, True)
        _check(c, a, prep["w_ref"], dtype)
        assert int(locks.abs().sum()) == 0, splits
    # g_idx in any order (batches across groups, and a run of whole batches in one): the product
    # of the weights dequantized by the same g_idx (the dense path's dequantization).
    groups = prep["s"].shape[0]
    g_idx = torch.randint(0, groups, (k,), generator=torch.Generator().manual_seed(m), dtype=torch.int32).cuda()
    g_idx[:256] = groups - 1
    weight = torch.empty(n, k, dtype=dtype, device="cuda")
    with pytest.raises(ValueError, match="g_idx must start 16-byte aligned"):
        module(a_in, c, prep["q"], prep["s"], empty, torch.empty(k + 1, dtype=torch.int32, device="cuda")[1:], empty,
               empty, m, n, k, 1, True)
    gptq_marlin._DEQUANT[(dtype, _KIND_WEIGHTS[kind])](prep["q"], prep["s"], empty, g_idx, weight, n, k)
    for splits in (1, 5):
        c = torch.full((m, n), float("nan"), dtype=dtype, device="cuda")
        partials = torch.full((splits * m * n,) if splits > 1 else (0,), float("nan"), device="cuda")
        module(a_in, c, prep["q"], prep["s"], empty, g_idx, partials, locks, m, n, k, splits, True)
        _check(c, a_in, weight.t().double().cpu(), dtype)


@cuda
def test_marlin_gemv_bad_inputs():
    from mllm_kernel.cuda.jit import gptq_marlin

    k, n, dtype = 1280, 256, torch.bfloat16
    empty = torch.empty(0, dtype=torch.int32, device="cuda")
    locks = torch.zeros(1, dtype=torch.int32, device="cuda")
    prep = _prepare("gptq4", k, n, 32, False, dtype, seed=2)
    module = gptq_marlin._GEMV[(dtype, 4, False)]
    a = torch.randn(17, k, device="cuda").to(dtype)
    c = torch.empty(17, n, dtype=dtype, device="cuda")
    with pytest.raises(ValueError, match="marlin_gemv takes at most 16 rows, got 17"):
        module(a, c, prep["q"], prep["s"], empty, empty, empty, empty, 17, n, k, 1, True)
    with pytest.raises(ValueError, match=r"marlin_gemv takes groups of a multiple of 64 rows \(or channel-wise scales\), "
                                         r"got groups of 32"):
        module(a[:1], c[:1], prep["q"], prep["s"], empty, empty, empty, empty, 1, n, k, 1, True)
    prep = _prepare("gptq4", k, n, 128, False, dtype, seed=2)
    partials = torch.empty(80 * n, device="cuda")
    with pytest.raises(ValueError, match=r"splits must be in \[1, 80\], got 81"):
        module(a[:1], c[:1], prep["q"], prep["s"], empty, empty, partials, locks, 1, n, k, 81, True)
    with pytest.raises(ValueError, match="partials"):
        module(a[:1], c[:1], prep["q"], prep["s"], empty, empty, partials[:n], locks, 1, n, k, 3, True)
    with pytest.raises(ValueError, match="zero points are supported for 4-bit weights only"):
        q8 = _prepare("gptq8", k, n, 128, False, dtype, 2)["q"]
        gptq_marlin._GEMV[(dtype, 8, False)](a[:1], c[:1], q8, prep["s"],
                                             torch.zeros(k // 128, n // 4, dtype=torch.int32, device="cuda"), empty,
                                             empty, empty, 1, n, k, 1, True)
    g_idx = (torch.arange(k, device="cuda", dtype=torch.int32) // 128)
    with pytest.raises(ValueError, match="marlin_gemv takes no zero points with g_idx"):
        module(a[:1], c[:1], prep["q"], prep["s"], torch.zeros(k // 128, n // 8, dtype=torch.int32, device="cuda"),
               g_idx, empty, empty, 1, n, k, 1, True)
    with pytest.raises(ValueError, match=re.escape("this marlin_gemv module is built without act-order (g_idx with "
                                                   "more than one group); the call has it")):
        module(a[:1], c[:1], prep["q"], prep["s"], empty, g_idx, empty, empty, 1, n, k, 1, True)
    with pytest.raises(ValueError, match=re.escape("this marlin_gemv module is built for act-order (g_idx with "
                                                   "more than one group); the call has none")):
        gptq_marlin._GEMV[(dtype, 4, True)](a[:1], c[:1], prep["q"], prep["s"], empty, empty, empty, empty, 1, n, k, 1,
                                            True)


@cuda
@pytest.mark.parametrize("kind,group_size", [("gptq4", 128), ("awq", 128), ("gptq8", -1), ("fp8", 128), ("gptq4", 32)])
@pytest.mark.parametrize("m,n", [(1, 1024), (5, 1024), (8, 1024), (9, 1024), (16, 1024), (17, 1024), (1, 448)])
def test_gptq_marlin_gemm_decodes_with_the_gemv(monkeypatch, kind, group_size, m, n):
    """gptq_marlin_gemm runs the GEMV kernel for up to 16 rows on layers of GEMV_MIN_WEIGHTS
    weights with groups it takes (on sm_90+), from 17 rows of 4-bit weights the Hopper kernel
    (on sm_90), the general kernel otherwise (4-bit groups of 32 rows, 8-bit weights, 448 x 1024
    weights); the answer is right either way."""
    from mllm_kernel.cuda.jit import gptq_marlin

    k, dtype = 1024, torch.bfloat16
    prep = _prepare(kind, k, n, group_size, False, dtype, seed=m)
    a = torch.randn(m, k, device="cuda").to(dtype)
    calls = []
    monkeypatch.setattr(gptq_marlin, "_GEMV", _Spy(gptq_marlin._GEMV, "_GEMV", calls))
    monkeypatch.setattr(gptq_marlin, "_GEMM", _Spy(gptq_marlin._GEMM, "_GEMM", calls))
    monkeypatch.setattr(gptq_marlin, "_WGMMA", _Spy(gptq_marlin._WGMMA, "_WGMMA", calls))
    c = torch.full((m, n), float("nan"), dtype=dtype, device="cuda")
    out = _run(prep, a, n, k, c=c)
    _check(out, a, prep["w_ref"], dtype)
    gemv = (m <= 16 and n * k >= gptq_marlin.GEMV_MIN_WEIGHTS and group_size != 32
            and torch.cuda.get_device_capability() >= (9, 0))
    wgmma = (m > 16 and group_size != 32 and n % 128 == 0
             and torch.cuda.get_device_capability() == (9, 0))
    assert [name for name, _ in calls] == ["_GEMV" if gemv else "_WGMMA" if wgmma else "_GEMM"]


@cuda
@pytest.mark.parametrize("kind", ["gptq4", "gptq8"])
@pytest.mark.parametrize("m", [1, 8, 16])
def test_gptq_marlin_gemm_decodes_act_order_with_the_gemv(monkeypatch, kind, m):
    """GPTQ act-order up to 16 rows: the activations gathered by perm, then the GEMV kernel with
    g_idx (on sm_90+)."""
    from mllm_kernel.cuda.jit import gptq_marlin

    k, n, dtype = 2048, 1024, torch.float16
    prep = _prepare(kind, k, n, 128, True, dtype, seed=m)
    a = torch.randn(m, k, device="cuda").to(dtype)
    calls = []
    monkeypatch.setattr(gptq_marlin, "_GEMV", _Spy(gptq_marlin._GEMV, "_GEMV", calls))
    monkeypatch.setattr(gptq_marlin, "_GEMM", _Spy(gptq_marlin._GEMM, "_GEMM", calls))
    _check(_run(prep, a, n, k), a, prep["w_ref"], dtype)
    gemv = torch.cuda.get_device_capability() >= (9, 0)
    assert [name for name, _ in calls] == ["_GEMV" if gemv else "_GEMM"]


@cuda
@pytest.mark.parametrize("kind", ["gptq4", "gptq8"])
@pytest.mark.parametrize("m", [17, 40, 128, 300])
def test_gptq_marlin_gemm_act_order_from_17_rows(monkeypatch, kind, m):
    """GPTQ act-order (4- and 8-bit) from 17 rows: the activations gathered by perm, then the
    Hopper kernel with g_idx (on sm_90; the general kernel, or dequantization and cuBLAS,
    elsewhere), the output poisoned, against the float64 product."""
    from mllm_kernel.cuda.jit import gptq_marlin

    k, n, dtype = 2048, 1024, torch.bfloat16
    prep = _prepare(kind, k, n, 128, True, dtype, seed=m)
    a = torch.randn(m, k, device="cuda").to(dtype)
    calls = []
    monkeypatch.setattr(gptq_marlin, "_WGMMA", _Spy(gptq_marlin._WGMMA, "_WGMMA", calls))
    c = torch.full((m, n), float("nan"), dtype=dtype, device="cuda")
    _check(_run(prep, a, n, k, c=c), a, prep["w_ref"], dtype)
    wgmma = torch.cuda.get_device_capability() == (9, 0)
    assert [key for _, key in calls] == ([(dtype, _KIND_WEIGHTS[kind], True)] if wgmma else [])


def test_gemv_splits_only_where_blocks_leave_sms_idle():
    from mllm_kernel.cuda.jit.gptq_marlin import gemv_splits

    # 132 SMs: 96 blocks of 64 columns (6144) or more run unsplit; 64 (4096) split in 4, one wave
    # of two blocks an SM; 16 (1024) in 8 where each split keeps 32 steps, else fewer.
    assert gemv_splits(6144, 4096, 132) == 1
    assert gemv_splits(14336, 4096, 132) == 1
    assert gemv_splits(4096, 4096, 132) == 4
    assert gemv_splits(4096, 14336, 132) == 4
    assert gemv_splits(1024, 4096, 132) == 8
    assert gemv_splits(1024, 1024, 132) == 2
    assert gemv_splits(1024, 512, 132) == 1


@functools.lru_cache(maxsize=None)
def _three_stage_module(dtype, bits, kernel):
    """A GEMM module built with three pipeline stages, as for GPUs whose blocks have 99 KB."""
    from mllm_kernel.jit_utils import load_cuda_jit, make_cpp_args
    from mllm_kernel.jit_utils.paths import CUDA_CSRC_DIR

    args = make_cpp_args(dtype, bits, False, *kernel)
    return load_cuda_jit("marlin_gemm_3_stages", args, cuda_files=[CUDA_CSRC_DIR / "marlin_gemm.cuh"],
                         extra_cuda_cflags=["-DMLLM_MARLIN_STAGES=3"],
                         cuda_wrappers=[("marlin_gemm", f"marlin_gemm<{args}>"),
                                        ("marlin_blocks_per_sm", f"marlin_blocks_per_sm<{args}>")])


@cuda
@pytest.mark.parametrize("kind,group_size,act_order", [("gptq4", 64, False), ("awq", 32, False), ("gptq4", 128, True),
                                                       ("gptq8", -1, False)])
@pytest.mark.parametrize("m", [1, 12, 20, 70])
def test_marlin_kernel_with_three_pipeline_stages(kind, group_size, act_order, m):
    """The kernels sm_86 and sm_89 run (three pipeline stages, MLLM_MARLIN_STAGES=3 here), on
    every tile, over splits of K that leave stages short, the output poisoned first; the module
    sizes their shared memory from the same stage count."""
    from mllm_kernel.cuda.jit import gptq_marlin

    k, n, dtype = 1152, 768, torch.bfloat16  # 72 steps, 9 stages
    prep = _prepare(kind, k, n, group_size, act_order, dtype, seed=m)
    a = torch.randn(m, k, device="cuda").to(dtype)
    a_in = a[:, prep["perm"].long()].contiguous() if prep["perm"] is not None else a
    empty = torch.empty(0, dtype=torch.int32, device="cuda")
    zeros = prep["zeros"] if prep["zeros"] is not None else empty
    g_idx = prep["g_idx"] if prep["g_idx"] is not None else empty
    m_tiles, blocks = gptq_marlin.m_tiles_for(m), gptq_marlin.output_blocks(m, n)
    module = _three_stage_module(dtype, _KIND_WEIGHTS[kind], gptq_marlin.gemm_kernel(m, m_tiles, act_order))
    assert module.marlin_blocks_per_sm(0) >= 1
    locks = torch.zeros(blocks, dtype=torch.int32, device="cuda")
    for splits in (1, 3, 13, 72):
        c = torch.full((m, n), float("nan"), dtype=dtype, device="cuda")
        partials = torch.full((splits * m * n,) if splits > 1 else (0,), float("nan"), device="cuda")
        module.marlin_gemm(a_in, c, prep["q"], prep["s"], zeros, g_idx, partials, locks, m, n, k, m_tiles, splits,
                           True)
        _check(c, a, prep["w_ref"], dtype)
        assert int(locks.abs().sum()) == 0, splits


def test_marlin_splits_fill_one_wave():
    """splits_for: the K splits of a small-M call fill the SMs once with the blocks each holds,
    never into a second wave; each split keeps four pipeline stages unless that leaves more than
    half the SMs idle, and then one stage at least. At Llama-3-8B's shapes on 132 SMs holding
    one block each (8-bit weights on an H100), and at small layers' shapes holding two (4-bit),
    these are the splits that measured fastest there (or within a few percent)."""
    from mllm_kernel.cuda.jit import gptq_marlin

    sms = 132
    for m in (1, 8, 16, 17, 64):
        for per_sm in (1, 2):
            for n, k in ((4096, 4096), (14336, 4096), (4096, 14336), (6144, 4096), (256, 1024), (128, 64), (896, 896),
                         (1024, 4096), (4864, 896), (64, 16)):
                steps, blocks = k // 16, gptq_marlin.output_blocks(m, n)
                splits = gptq_marlin.splits_for(m, n, k, sms, per_sm)
                assert 1 <= splits <= max(1, steps // gptq_marlin.STAGE_STEPS)
                assert splits == 1 or splits * blocks <= sms * per_sm
                if splits > max(1, steps // (4 * gptq_marlin.STAGE_STEPS)):  # below four stages a split
                    assert (splits - 1) * blocks < sms // 2, (m, n, k, per_sm)
    picks = {(n, k): gptq_marlin.splits_for(1, n, k, sms, 1) for n, k in ((4096, 4096), (14336, 4096), (4096, 14336),
                                                                        (6144, 4096))}
    assert picks == {(4096, 4096): 8, (14336, 4096): 2, (4096, 14336): 8, (6144, 4096): 5}
    small = {(n, k): gptq_marlin.splits_for(1, n, k, sms, 2) for n, k in ((896, 896), (4864, 896), (1536, 1536),
                                                                        (2048, 2048), (8960, 1536))}
    assert small == {(896, 896): 7, (4864, 896): 4, (1536, 1536): 11, (2048, 2048): 9, (8960, 1536): 3}


@cuda
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
def test_marlin_blocks_per_sm_is_the_kernels_occupancy(dtype):
    """The split rule's blocks an SM: what the occupancy calculator gives for the kernel a call
    launches (the swapped, plain and act-order 16-row kernels, the larger tiles; 0 where a
    GPU's blocks lack the kernel's shared memory); on an H100 (228 KB of shared memory an SM),
    two of the 4-bit 16-row kernels and one of every other (8-bit stages, the larger tiles'
    registers)."""
    from mllm_kernel.cuda.jit import gptq_marlin

    a = torch.empty(1, 16, dtype=dtype, device="cuda")
    got = {(bits, m, act): gptq_marlin.kernel_blocks_per_sm(a, bits, m, act)
           for bits in (4, 8) for m in (1, 16, 64) for act in (False, True)}
    assert all(isinstance(v, int) and v >= 0 for v in got.values()), got
    if torch.cuda.get_device_capability() == (9, 0):
        assert {key for key, v in got.items() if v == 2} == {(4, 1, False), (4, 16, False), (4, 1, True),
                                                             (4, 16, True)}, got
        assert set(got.values()) == {1, 2}, got


@cuda
@pytest.mark.parametrize("m", [1, 12, 40])
def test_marlin_act_order_takes_g_idx_in_any_order(m):
    """Act-order reads each row's group from g_idx: with a g_idx the caller did not sort (groups
    change inside steps, so the kernel reads the scales row by row there), the product is the one
    of the weights dequantized by the same g_idx (the dense path's dequantization), whatever
    the split of K."""
    from mllm_kernel.cuda.jit import gptq_marlin

    k, n, dtype, group = 512, 256, torch.bfloat16, 64
    prep = _prepare("gptq4", k, n, group, True, dtype, seed=7)
    g_idx = torch.randint(0, k // group, (k,), generator=torch.Generator().manual_seed(m), dtype=torch.int32).cuda()
    g_idx[:64] = 3  # a run of whole steps in one group as well
    empty = torch.empty(0, dtype=torch.int32, device="cuda")
    weight = torch.empty(n, k, dtype=dtype, device="cuda")
    gptq_marlin._DEQUANT[(dtype, 4)](prep["q"], prep["s"], empty, g_idx, weight, n, k)
    a = torch.randn(m, k, device="cuda").to(dtype)
    m_tiles, blocks = gptq_marlin.m_tiles_for(m), gptq_marlin.output_blocks(m, n)
    module = gptq_marlin._GEMM[(dtype, 4, gptq_marlin.gemm_kernel(m, m_tiles, True))]
    locks = torch.zeros(blocks, dtype=torch.int32, device="cuda")
    for splits in (1, 3):
        c = torch.full((m, n), float("nan"), dtype=dtype, device="cuda")
        partials = torch.full((splits * m * n,) if splits > 1 else (0,), float("nan"), device="cuda")
        module(a, c, prep["q"], prep["s"], empty, g_idx, partials, locks, m, n, k, m_tiles, splits, True)
        _check(c, a, weight.t().double().cpu(), dtype)
    # The kernel reads g_idx 16 bytes at a time: a misaligned one is refused there, and copied by
    # the public function.
    shifted = torch.empty(k + 4, dtype=torch.int32, device="cuda")[1:k + 1]
    shifted.copy_(prep["g_idx"])
    with pytest.raises(ValueError, match=re.escape("b_scales, b_zeros and g_idx must start 16-byte aligned")):
        module(a, c, prep["q"], prep["s"], empty, shifted, partials, locks, m, n, k, m_tiles, 3, True)
    assert torch.equal(_run(dict(prep, g_idx=shifted), a, n, k), _run(prep, a, n, k))


@cuda
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("m,k,pad", [(1, 16, 0), (1, 14336, 0), (3, 4104, 8), (300, 14336, 0), (2, 32768, 0),
                                      (2, 32776, 0)])
def test_gather_columns_is_index_select(dtype, m, k, pad):
    """Act-order's gather of the activations' columns: a[:, perm] bit for bit, rows padded or
    not, the output poisoned first; past GATHER_MAX_K (and for misaligned rows) it is
    index_select itself."""
    from mllm_kernel.cuda.jit import gptq_marlin

    g = torch.Generator().manual_seed(m + k)
    a = torch.randn(m, k + pad, generator=g).to(dtype).cuda()[:, :k]
    perm = torch.randperm(k, generator=g).to(torch.int32).cuda()
    torch.cuda.empty_cache()
    torch.full((m * k * 2,), float("nan"), dtype=dtype, device="cuda")  # poison what the allocator hands out next
    assert torch.equal(gptq_marlin.gather_columns(a, perm), a.index_select(1, perm))
    shifted = torch.empty(m * k + 1, dtype=dtype, device="cuda")[1:].view(m, k)
    shifted.copy_(a)
    assert torch.equal(gptq_marlin.gather_columns(shifted, perm), a.index_select(1, perm))


@cuda
def test_column_gather_module_function():
    """The kernel clamps indices to the row (a wrapper never passes such), and refuses what it
    cannot read 16 bytes at a time."""
    from mllm_kernel.cuda.jit import gptq_marlin

    function = gptq_marlin._GATHER[torch.bfloat16]
    a = torch.randn(4, 64, device="cuda").to(torch.bfloat16)
    index = torch.arange(64, dtype=torch.int32, device="cuda").flip(0)
    index[0], index[1] = -5, 64
    out = torch.full_like(a, float("nan"))
    function(a, index, out, True)
    assert torch.equal(out, a[:, index.clamp(0, 63).long()])
    with pytest.raises(ValueError, match=re.escape("index: dtype must be int32, got int64")):
        function(a, index.long(), out, True)
    with pytest.raises(ValueError, match=re.escape("K must be a multiple of 8, got 60")):
        function(a[:, :60], index[:60], out[:, :60].contiguous(), True)
    wide = torch.randn(4, 68, device="cuda").to(torch.bfloat16)[:, :64]  # rows 136 bytes apart
    with pytest.raises(ValueError, match=re.escape("a's rows, index and out must start 16-byte aligned")):
        function(wide, index, out, True)


@cuda
def test_gptq_marlin_gemm_strided_a_and_workspace_left_zero():
    dtype = torch.float16
    k, n, m = 256, 128, 9
    prep = _prepare("awq", k, n, 64, False, dtype, seed=3)
    big = torch.randn(m, k + 24, device="cuda").to(dtype)
    a = big[:, 8:8 + k]  # row stride k + 24, 16-byte aligned rows
    ws = marlin.marlin_make_workspace(a.device)
    out = _run(prep, a, n, k, workspace=ws)
    _check(out, a, prep["w_ref"], dtype)
    assert int(ws.abs().sum()) == 0
    odd = big[:, 3:3 + k]  # misaligned rows are copied first
    _check(_run(prep, odd, n, k), odd, prep["w_ref"], dtype)


@cuda
@pytest.mark.parametrize("workspace", [None, "small", "float"])
def test_gptq_marlin_gemm_split_k_without_a_usable_workspace(workspace):
    # K = 4096 over 4 x 256 columns is split at M = 1; the split-K counters then come from the
    # module when the caller's workspace is absent, too small or not int32.
    from mllm_kernel.cuda.jit import gptq_marlin

    dtype = torch.bfloat16
    k, n = 4096, 1024
    prep = _prepare("gptq4", k, n, 128, False, dtype, seed=11)
    assert gptq_marlin.splits_for(1, n, k, torch.cuda.get_device_properties(0).multi_processor_count, 2) > 1
    ws = {None: None, "small": torch.zeros(1, dtype=torch.int32, device="cuda"),
          "float": torch.zeros(4096, dtype=torch.float32, device="cuda")}[workspace]
    for _ in range(2):  # the counters are left zero for the next call
        a = torch.randn(1, k, device="cuda").to(dtype)
        _check(_run(prep, a, n, k, workspace=ws), a, prep["w_ref"], dtype)


@cuda
@pytest.mark.parametrize("largest", [2, 1, 0])
@pytest.mark.parametrize("kind,m", [("gptq8", 70), ("awq", 40), ("gptq4", 3)])
def test_gptq_marlin_gemm_on_gpus_whose_blocks_lack_the_tiles_shared_memory(monkeypatch, kind, m, largest):
    """Where a GPU's blocks lack a tile's shared memory (the occupancy calculator then counts 0
    blocks an SM: 8-bit weights' larger tiles on sm_80/87, every tile on sm_86/89), a call runs
    on the largest tile that fits, or dequantizes and multiplies with cuBLAS when none does;
    simulated here by counting 0 for the tiles above ``largest``."""
    from mllm_kernel.cuda.jit import gptq_marlin

    real = gptq_marlin._kernel_blocks_per_sm.__wrapped__
    monkeypatch.setattr(gptq_marlin, "gemv_applies", lambda *args: False)  # (3 rows: else the GEMV on sm_90)
    monkeypatch.setattr(gptq_marlin, "wgmma_applies", lambda *args: False)  # (40 rows: else the Hopper kernel)
    monkeypatch.setattr(gptq_marlin, "_kernel_blocks_per_sm",
                        lambda device, dtype, bits, m_tiles, *rest: 0 if m_tiles > largest else
                        real(device, dtype, bits, m_tiles, *rest))
    launched = []
    for name in ("_GEMM", "_DEQUANT"):
        table = getattr(gptq_marlin, name)
        monkeypatch.setattr(gptq_marlin, name, _Spy(table, name, launched))
    dtype, k, n = torch.float16, 1024, 768
    prep = _prepare(kind, k, n, 64, False, dtype, seed=m)
    a = torch.randn(m, k, device="cuda").to(dtype)
    c = torch.full((m, n), float("nan"), dtype=dtype, device="cuda")
    _check(_run(prep, a, n, k, c=c), a, prep["w_ref"], dtype)
    want = min(largest, gptq_marlin.m_tiles_for(m)) if largest else 0
    if want:
        assert launched == [("_GEMM", want)]
    else:
        assert [name for name, _ in launched] == ["_DEQUANT"]


class _Spy:
    """A kernel table whose calls are recorded as (its name, the m_tiles argument of a GEMM or
    the key of any other)."""

    def __init__(self, table, name, calls):
        self.table, self.name, self.calls = table, name, calls

    def __getitem__(self, key):
        function = self.table[key]

        def call(*args):
            self.calls.append((self.name, args[11] if self.name == "_GEMM" else key))
            return function(*args)

        return call


@cuda
@pytest.mark.parametrize("m", [4, 300])  # the Marlin kernel; dequantization and cuBLAS
def test_gptq_marlin_gemm_is_deterministic_and_graph_safe(m):
    dtype = torch.bfloat16
    k, n = 4096, 1024
    prep = _prepare("gptq4", k, n, 128, False, dtype, seed=5)
    a = torch.randn(m, k, device="cuda").to(dtype)
    first = _run(prep, a, n, k)
    assert all(torch.equal(first, _run(prep, a, n, k)) for _ in range(3))
    static_out = torch.empty_like(first)
    _run(prep, a, n, k, c=static_out)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        _run(prep, a, n, k, c=static_out)
    static_out.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(static_out, first)


@cuda
def test_gptq_marlin_gemm_bad_inputs():
    from mllm_kernel.cuda.jit import gptq_marlin_gemm

    k, n, m = 128, 64, 2
    prep = _prepare("gptq4", k, n, 64, False, torch.float16, seed=1)
    a = torch.randn(m, k, device="cuda", dtype=torch.float16)
    args = [a, None, prep["q"], prep["s"], None, None, None, None, None, scalar_types.uint4b8.id, m, n, k]

    call = _caller(gptq_marlin_gemm, args)

    with pytest.raises(ValueError, match="weight type int8 is not supported"):
        call(type=scalar_types.int8.id)
    with pytest.raises(ValueError, match="uint4 weights need zero points"):
        call(type=scalar_types.uint4.id)
    with pytest.raises(ValueError, match="takes no zero points"):
        call(zeros=torch.zeros(2, 8, dtype=torch.int32, device="cuda"))
    with pytest.raises(ValueError, match="a: dtype must be one of float16, bfloat16, got float32"):
        call(a=a.float())
    with pytest.raises(ValueError, match="global_scale is for NVFP4"):
        call(global_scale=torch.ones(1, device="cuda"))
    with pytest.raises(ValueError, match="size_n = 96 must be a positive multiple of 64"):
        call(n=96)
    with pytest.raises(ValueError, match="size_k = 120 must be a positive multiple of 16"):
        call(k=120)
    with pytest.raises(ValueError, match="b_scales"):
        call(s=prep["s"].float())
    with pytest.raises(ValueError, match="b_q_weight"):
        call(q=prep["q"][:, :-1])
    with pytest.raises(ValueError, match="a"):
        call(m=3)


@cuda
def test_repack_bad_inputs():
    from mllm_kernel.cuda.jit import awq_marlin_repack, gptq_marlin_repack

    q = torch.zeros(16, 64, dtype=torch.int32, device="cuda")
    with pytest.raises(ValueError, match="num_bits must be 4 or 8, got 3"):
        gptq_marlin_repack(q, None, 128, 64, 3)
    with pytest.raises(ValueError, match="size_n = 32 must be a positive multiple of 64"):
        gptq_marlin_repack(q, None, 128, 32, 4)
    with pytest.raises(ValueError, match="size_k = 8 must be a positive multiple of 16"):
        awq_marlin_repack(q, 8, 64, 4)
    with pytest.raises(ValueError, match=r"perm: values must lie in \[0, 128\), got \[1, 128\]"):
        gptq_marlin_repack(q, torch.arange(1, 129, device="cuda") % 129, 128, 64, 4)
    with pytest.raises(ValueError, match="b_q_weight"):
        gptq_marlin_repack(q, None, 256, 64, 4)


# --- CPU: the same functions on CPU tensors (4- and 8-bit GEMM and repacks) -------------------------
@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("act_order", [False, True])
def test_cpu_gptq_marlin_repack_matches_the_published_layout(bits, act_order):
    from mllm_kernel.cpu.jit import gptq_marlin_repack

    k, n = 256, 192
    ckpt = _gptq_weights(k, n, bits, 64, act_order, torch.float16)
    values = _unpack_gptq(ckpt["qweight"], bits)
    perm = None
    if act_order:
        _, perm = marlin.marlin_sort_g_idx(ckpt["g_idx"])
        values = values[perm.long()]
    out = gptq_marlin_repack(ckpt["qweight"], perm, k, n, bits)
    assert out.shape == (k // 16, n * 16 * bits // 32) and out.dtype == torch.int32
    assert torch.equal(out, _marlin_weights(values, bits))


@pytest.mark.parametrize("bits", [4, 8])
def test_cpu_awq_marlin_repack_matches_the_published_layout(bits):
    from mllm_kernel.cpu.jit import awq_marlin_repack

    k, n = 128, 256
    per_word = 32 // bits
    values = torch.randint(0, 1 << bits, (k, n), generator=torch.Generator().manual_seed(bits), dtype=torch.int32)
    packed = torch.zeros(k, n // per_word, dtype=torch.int32)
    for c in range(n):  # AWQ packs along N, interleaved like Marlin's words
        slot = marlin.INTERLEAVE[bits].index(c % per_word)
        packed[:, c // per_word] |= values[:, c] << (bits * slot)
    assert torch.equal(awq_marlin_repack(packed, k, n, bits), _marlin_weights(values, bits))


#: The CPU GEMM takes the integer weight types (float8 weights are for GPUs without FP8 MMAs).
CPU_CASES = [case for case in CASES if case[0] != "fp8"] + [("gptq4", 16, False), ("awq", -1, False),
                                                            ("gptq8", 16, False), ("gptq8", 32, True)]


@pytest.mark.parametrize("kind,group_size,act_order", CPU_CASES)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
@pytest.mark.parametrize("m", [1, 7, 16, 33])
def test_cpu_gptq_marlin_gemm(kind, group_size, act_order, dtype, m):
    k, n = 256, 320
    prep = _prepare(kind, k, n, group_size, act_order, dtype, seed=m, device="cpu")
    a = torch.randn(m, k).to(dtype)
    c = torch.full((m, n), float("nan"), dtype=dtype)
    out = _run(prep, a, n, k, c=c)
    assert out.data_ptr() == c.data_ptr() and out.dtype == dtype
    _check(out, a, prep["w_ref"], torch.bfloat16 if dtype == torch.float32 else dtype)


@pytest.mark.parametrize("kind", ["awq", "gptq8"])
@pytest.mark.parametrize("m,n,k", [(1, 64, 16), (3, 64, 48), (5, 2112, 1024), (130, 128, 512)])
def test_cpu_gptq_marlin_gemm_shapes(kind, m, n, k):
    dtype = torch.bfloat16
    prep = _prepare(kind, k, n, -1 if k < 128 else 128, False, dtype, seed=k, device="cpu")
    a = torch.randn(m, k).to(dtype)
    out = _run(prep, a, n, k)
    assert out.shape == (m, n)
    _check(out, a, prep["w_ref"], dtype)


@pytest.mark.parametrize("bits", [4, 8])
def test_cpu_gptq_marlin_gemm_groups_split_inside_a_block(bits):
    """Act-order groups of unequal sizes meet inside 16-row blocks: each run is scaled by its own group."""
    from mllm_kernel.cpu.jit import gptq_marlin_gemm, gptq_marlin_repack

    k, n, m = 96, 128, 3
    bias = 1 << (bits - 1)
    g = torch.Generator().manual_seed(7)
    g_idx = torch.sort(torch.randint(0, 5, (k,), generator=g, dtype=torch.int32)).values
    values = torch.randint(0, 1 << bits, (k, n), generator=g, dtype=torch.int64)
    scales = torch.rand(5, n, generator=g) + 0.5
    w_ref = (values.double() - bias) * scales.double()[g_idx.long()]
    qweight = marlin.pack_columns(values.t(), bits).t().contiguous()  # GPTQ packs along K
    q = gptq_marlin_repack(qweight, None, k, n, bits)
    a = torch.randn(m, k, generator=g)
    type_id = scalar_types.uint8b128.id if bits == 8 else scalar_types.uint4b8.id
    out = gptq_marlin_gemm(a, None, q, marlin.marlin_permute_scales(scales, k, n, 16), None, None, g_idx, None, None,
                           type_id, m, n, k)
    torch.testing.assert_close(out.double(), a.double() @ w_ref, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("kind,group_size", [("gptq4", 128), ("gptq4", -1), ("awq", 128), ("awq", -1)])
def test_cpu_gptq_marlin_gemm_bf16_within_float32_error(kind, group_size):
    """bf16 activations on 4-bit weights (the CPU's bf16 dot products where it has them, which
    carry 128 + q and take 128 times the sums of a off, every 128 rows at least): within the
    output's rounding and 2^-15 of the sum of |a w| of the exact product (128 times tighter than
    the other tests' bound), over a long K and channel-wise groups, the longest sums. (Seen over
    25 draws: AWQ channel-wise 2^-16.8 beyond the rounding, the float32 path 2^-18.8; the other
    three 2^-22 or less.)"""
    k, n, m = 4096, 256, 3
    prep = _prepare(kind, k, n, group_size, False, torch.bfloat16, seed=5, device="cpu")
    a = (torch.randn(m, k, generator=torch.Generator().manual_seed(11)) * 4).to(torch.bfloat16)
    _check_bf16_within_float32_error(_run(prep, a, n, k), a, prep["w_ref"])


def test_cpu_gptq_marlin_gemm_strided_a_and_threads():
    k, n, m = 512, 1024, 6
    prep = _prepare("gptq4", k, n, 128, False, torch.bfloat16, seed=9, device="cpu")
    big = torch.randn(m, k + 40).to(torch.bfloat16)
    a = big[:, 8:8 + k]
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = _run(prep, a, n, k)
        torch.set_num_threads(max(2, threads))
        assert torch.equal(_run(prep, a, n, k), one)
    finally:
        torch.set_num_threads(threads)
    _check(one, a, prep["w_ref"], torch.bfloat16)


@pytest.mark.parametrize("kind", ["gptq4", "awq", "gptq8"])
@pytest.mark.parametrize("m", [1, 3])
def test_cpu_gptq_marlin_gemm_decode_splits_k_over_threads(kind, m, monkeypatch):
    """Up to 4 rows, K is split across threads (each streams its run of whole rows of the
    weights) and the parts are added after."""
    from mllm_kernel.cpu.jit import _threads

    monkeypatch.setattr(_threads, "_ENV_THREADS", None)  # the thread count follows torch's
    k, n = 1024, 512
    prep = _prepare(kind, k, n, 128, False, torch.float32, seed=m, device="cpu")
    a = torch.randn(m, k)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(max(2, threads))
        out = _run(prep, a, n, k, c=torch.full((m, n), float("nan")))
    finally:
        torch.set_num_threads(threads)
    _check(out, a, prep["w_ref"], torch.bfloat16)


def test_cpu_gptq_marlin_gemm_bad_inputs():
    from mllm_kernel.cpu.jit import gptq_marlin_gemm

    k, n, m = 128, 64, 2
    prep = _prepare("gptq4", k, n, 64, False, torch.float16, seed=1, device="cpu")
    a = torch.randn(m, k, dtype=torch.float16)
    args = [a, None, prep["q"], prep["s"], None, None, None, None, None, scalar_types.uint4b8.id, m, n, k]

    call = _caller(gptq_marlin_gemm, args)

    with pytest.raises(ValueError, match="weight type float8_e4m3fn is not supported"):
        call(type=scalar_types.float8_e4m3fn.id)
    with pytest.raises(ValueError, match=r"b_q_weight"):  # 4-bit words given as 8-bit ones
        call(type=scalar_types.uint8b128.id)
    with pytest.raises(ValueError, match="weight type uint8b128 takes no zero points"):
        call(type=scalar_types.uint8b128.id, zeros=torch.zeros(2, n * 8 // 32, dtype=torch.int32))
    with pytest.raises(ValueError, match="uint4 weights need zero points"):
        call(type=scalar_types.uint4.id)
    with pytest.raises(ValueError, match="a: dtype must be one of float16, bfloat16, float32, got int8"):
        call(a=a.to(torch.int8))
    with pytest.raises(ValueError, match="is_zp_float"):
        gptq_marlin_gemm(*args, is_zp_float=True)
    with pytest.raises(ValueError, match="size_n = 96 must be a positive multiple of 64"):
        call(n=96)
    with pytest.raises(ValueError, match="b_scales"):
        call(s=prep["s"].float())
    with pytest.raises(ValueError, match="b_q_weight"):
        call(q=prep["q"][:, :-1])
    with pytest.raises(ValueError, match="b_scales has 3 groups, which do not split size_k = 128"):
        call(s=torch.ones(3, n, dtype=torch.float16))
    with pytest.raises(ValueError, match="c"):
        call(c=torch.empty(m, n + 64, dtype=torch.float16))
    if HAS_CUDA:
        with pytest.raises(ValueError, match="a: must be a CPU tensor"):
            call(a=a.cuda())
    # The module itself (the wrapper refuses these first): zero points come with 4-bit weights only.
    from mllm_kernel.cpu.jit import gptq_marlin as cpu_marlin

    q8 = _prepare("gptq8", k, n, 64, False, torch.float16, seed=1, device="cpu")["q"]
    with pytest.raises(ValueError, match="zero points are supported for 4-bit weights only"):
        cpu_marlin._GEMM[None](a, torch.empty(m, n, dtype=torch.float16), q8, prep["s"],
                               torch.zeros(2, n * 8 // 32, dtype=torch.int32), torch.empty(0, dtype=torch.int32),
                               m, n, k, 8, 1)


def test_cpu_repack_bad_inputs():
    from mllm_kernel.cpu.jit import awq_marlin_repack, gptq_marlin_repack

    q = torch.zeros(16, 64, dtype=torch.int32)
    with pytest.raises(ValueError, match="num_bits must be 4 or 8, got 3"):
        gptq_marlin_repack(q, None, 128, 64, 3)
    with pytest.raises(ValueError, match="size_k = 8 must be a positive multiple of 16"):
        awq_marlin_repack(q, 8, 64, 4)
    with pytest.raises(ValueError, match=r"perm: values must lie in \[0, 128\), got \[1, 128\]"):
        gptq_marlin_repack(q, torch.arange(128, 0, -1, dtype=torch.int32), 128, 64, 4)
    with pytest.raises(ValueError, match="b_q_weight"):
        gptq_marlin_repack(q, None, 256, 64, 4)


def test_cuda_path_names_take_cpu_tensors():
    """Serving code calls mllm_kernel.cuda.jit's names; CPU tensors reach the CPU kernels."""
    from mllm_kernel.cuda.jit import gptq_marlin
    from mllm_kernel.cuda.jit.awq_marlin_repack import awq_marlin_repack
    from mllm_kernel.cuda.jit.gptq_marlin_repack import gptq_marlin_repack

    k, n, m = 128, 128, 2
    g = torch.Generator().manual_seed(11)
    ckpt = reference.quantize_gptq(torch.randn(k, n, generator=g), 4, 64, False, generator=g)
    q = gptq_marlin_repack(ckpt["qweight"], None, k, n, 4)
    assert torch.equal(q, _marlin_weights(_unpack_gptq(ckpt["qweight"], 4), 4))
    awq = reference.quantize_awq(torch.randn(k, n, generator=g), 64, generator=g)
    assert torch.equal(awq_marlin_repack(awq["qweight"], k, n, 4), _marlin_weights(_unpack_awq(awq["qweight"]), 4))
    a = torch.randn(m, k, generator=g)
    out = gptq_marlin.gptq_marlin_gemm(a, None, q, marlin.marlin_permute_scales(ckpt["scales"], k, n, 64), None, None,
                                       None, None, None, scalar_types.uint4b8.id, m, n, k)
    _check(out, a, ckpt["w_ref"], torch.bfloat16)


def test_ops_marlin_gemm_eager_and_compiled():
    """mllm_kernel.ops.gptq_marlin_gemm and the repacks: the device kernels eagerly, custom ops under
    torch.compile (c given is filled; c None is allocated)."""
    from mllm_kernel import ops

    k, n, m = 256, 128, 5
    g = torch.Generator().manual_seed(21)
    ckpt = reference.quantize_awq(torch.randn(k, n, generator=g), 64, generator=g)
    q = ops.awq_marlin_repack(ckpt["qweight"], k, n, 4)
    s = marlin.marlin_permute_scales(ckpt["scales"], k, n, 64)
    z = marlin.awq_to_marlin_zero_points(ckpt["qzeros"], k // 64, n, 4)
    a = torch.randn(m, k, generator=g)
    args = (q, s, None, z, None, None, None, scalar_types.uint4.id, m, n, k)
    eager = ops.gptq_marlin_gemm(a, None, *args)
    _check(eager, a, ckpt["w_ref"], torch.bfloat16)
    compiled = torch.compile(lambda a, c: ops.gptq_marlin_gemm(a, c, *args), fullgraph=True)
    c = torch.full((m, n), float("nan"))
    torch.testing.assert_close(compiled(a, c), eager, rtol=0, atol=0)
    torch.testing.assert_close(c, eager, rtol=0, atol=0)
    torch.testing.assert_close(compiled(a, None), eager, rtol=0, atol=0)
    gptq = reference.quantize_gptq(torch.randn(k, n, generator=g), 4, 64, False, generator=g)
    repack = torch.compile(lambda w: ops.gptq_marlin_repack(w, None, k, n, 4), fullgraph=True)
    assert torch.equal(repack(gptq["qweight"]), _marlin_weights(_unpack_gptq(gptq["qweight"], 4), 4))


@cuda
@pytest.mark.parametrize("m", [5, 300])  # the Marlin kernel; dequantization and cuBLAS
def test_cuda_ops_marlin_gemm_compiled(m):
    from mllm_kernel import ops

    k, n = 512, 256
    prep = _prepare("gptq4", k, n, 128, True, torch.bfloat16, seed=m)
    a = torch.randn(m, k, device="cuda").to(torch.bfloat16)
    ws = marlin.marlin_make_workspace(a.device)
    args = (prep["q"], prep["s"], None, None, prep["g_idx"], prep["perm"], ws, prep["type_id"], m, n, k)
    eager = ops.gptq_marlin_gemm(a, None, *args)
    _check(eager, a, prep["w_ref"], torch.bfloat16)
    compiled = torch.compile(lambda a, c: ops.gptq_marlin_gemm(a, c, *args), fullgraph=True)
    c = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device="cuda")
    torch.testing.assert_close(compiled(a, c), eager, rtol=0, atol=0)
    torch.testing.assert_close(c, eager, rtol=0, atol=0)
    torch.testing.assert_close(compiled(a, None), eager, rtol=0, atol=0)
    assert int(ws.abs().sum()) == 0


def test_import_paths_keep_the_package_names_functions():
    """Serving code imports mllm_kernel.cuda.jit.gptq_marlin_repack.gptq_marlin_repack; the package's
    gptq_marlin_repack must stay the function, not become that submodule."""
    import importlib

    import mllm_kernel.cuda.jit as jit

    for name in ("gptq_marlin_repack", "awq_marlin_repack"):
        module = importlib.import_module(f"mllm_kernel.cuda.jit.{name}")
        assert callable(getattr(module, name))
        assert getattr(jit, name) is getattr(module, name), name


# --- the Hopper kernel (csrc/marlin_wgmma.cuh) -------------------------------------------------------

HOPPER = HAS_CUDA and torch.cuda.get_device_capability() == (9, 0)
hopper = pytest.mark.skipif(not HOPPER, reason="needs an sm_90 GPU")


def test_wgmma_routing(monkeypatch):
    """Which calls take the Hopper kernel (any machine: the GPU's capability is patched)."""
    from mllm_kernel.cuda.jit import gptq_marlin

    monkeypatch.setattr(gptq_marlin, "_capability", lambda index: (9, 0))
    a = torch.empty(64, 1024, dtype=torch.bfloat16)
    none = torch.empty(0, dtype=torch.int32)
    scales = torch.empty(8, 384, dtype=torch.bfloat16)  # groups of 128

    def applies(m=112, n=384, k=1024, weights=4, s=scales, act_order=False, zeros=none, x=a):
        return gptq_marlin.wgmma_applies(x, m, n, k, weights, s, act_order, zeros)

    assert applies(m=17) and applies(m=128) and applies(m=1024) and applies(m=100, s=scales[:1])
    assert not applies(m=16) and not applies(m=1025)  # the GEMV; dequantization and cuBLAS
    assert applies(weights=8) and applies(weights=gptq_marlin.FP8)  # 8-bit GPTQ, float8
    awq_zeros = torch.zeros(8, 48, dtype=torch.int32)
    assert applies(zeros=awq_zeros) and applies(act_order=True)  # AWQ; act-order
    assert applies(weights=8, act_order=True)  # 8-bit GPTQ act-order
    assert not applies(weights=gptq_marlin.FP8, act_order=True)  # (act-order: GPTQ's integer weights)
    assert not applies(act_order=True, zeros=awq_zeros)  # (act-order takes no zero points)
    assert not applies(n=320) and not applies(k=1088)  # N and K multiples of 128
    assert not applies(s=torch.empty(32, 384, dtype=torch.bfloat16))  # groups of 32 rows
    assert not applies(x=torch.empty(64, 1030, dtype=torch.bfloat16)[:, :1024])  # rows not 16-byte aligned
    assert not applies(x=torch.empty(1, 1024, dtype=torch.bfloat16).expand(64, 1024))  # one row, repeated
    monkeypatch.setattr(gptq_marlin, "_capability", lambda index: (8, 0))
    assert not applies()
    monkeypatch.setattr(gptq_marlin, "_capability", lambda index: (10, 0))
    assert not applies()
    # Every tile split, doubling while the tiles fit one wave of 132 SMs (and K takes them) where
    # they fill half of it or less; else the tail past the last full wave likewise; else none.
    assert gptq_marlin.wgmma_split(112, 4096, 132) == (112, 1)  # 14336 x 4096, 128 rows
    assert gptq_marlin.wgmma_split(48, 4096, 132) == (0, 2)
    assert gptq_marlin.wgmma_split(32, 4096, 132) == (0, 4)
    assert gptq_marlin.wgmma_split(3, 1024, 132) == (0, 8)  # K 1024 takes 8 splits of 128
    assert gptq_marlin.wgmma_split(3, 256, 132) == (0, 2)
    assert gptq_marlin.wgmma_split(448, 4096, 132) == (396, 2)  # a tail of 52 tiles
    assert gptq_marlin.wgmma_split(448, 4096, 132, tail=False) == (448, 1)
    assert gptq_marlin.wgmma_split(192, 4096, 132) == (132, 2) and gptq_marlin.wgmma_split(150, 4096, 132) == (132, 4)
    assert gptq_marlin.wgmma_split(200, 4096, 132) == (200, 1)  # a tail of 68: more than half
    assert gptq_marlin.wgmma_split(264, 4096, 132) == (264, 1)  # no tail
    assert gptq_marlin.wgmma_split(140, 128, 132) == (140, 1)  # K takes no split
    assert gptq_marlin.wgmma_tiles(129, 4096, 128) == 64 and gptq_marlin.wgmma_tiles(257, 4096, 256) == 64
    assert gptq_marlin.wgmma_plan(256, 4096, 4096, 132) == (128, 0, 2, False)  # two rows of 32 tiles of 128
    # Up to 64 rows, one block of rows: the fewest of 32 and 64 that holds them (wgmma's N).
    assert [gptq_marlin.wgmma_block_rows(m) for m in (17, 32, 33, 64, 65)] == [(32,), (32,), (64,), (64,), (128, 256)]
    assert gptq_marlin.wgmma_plan(20, 4096, 4096, 132) == (32, 0, 4, False)
    assert gptq_marlin.wgmma_plan(32, 14336, 4096, 132) == (32, 112, 1, False)
    assert gptq_marlin.wgmma_plan(48, 6144, 4096, 132) == (64, 0, 2, False)
    assert gptq_marlin.wgmma_plan(200, 14336, 4096, 132, block_rows=128) == (128, 224, 1, False)
    # Splits run as clusters where every tile is split, in up to 8 splits, and the GPU runs a
    # cluster for every tile at once (an H100's counts for this kernel).
    at_once = {2: 66, 3: 39, 4: 30, 8: 15}
    assert gptq_marlin.wgmma_clusters(66, 0, 2, 66) and gptq_marlin.wgmma_clusters(15, 0, 8, 15)
    assert not gptq_marlin.wgmma_clusters(32, 0, 4, 30)  # a second wave of clusters
    assert not gptq_marlin.wgmma_clusters(4, 0, 16, 8) and not gptq_marlin.wgmma_clusters(4, 0, 1, 132)
    assert not gptq_marlin.wgmma_clusters(448, 396, 2, 66)
    plan = functools.partial(gptq_marlin.wgmma_plan, sm_count=132, clusters_at_once=lambda splits, rows: at_once[splits])
    assert plan(256, 4096, 4096) == (128, 0, 2, True)
    assert plan(128, 3584, 4096) == (128, 0, 4, True)
    # 32 tiles: not 32 clusters of 4, but 3 splits (20 or 22 stages of 64) in clusters; at K =
    # 14336 the longer splits cost more than the clusters save.
    assert plan(128, 4096, 4096) == (128, 0, 3, True) and plan(128, 4096, 14336) == (128, 0, 4, False)
    assert plan(64, 4096, 4096) == (64, 0, 4, False)  # half the partial sums: the ticket's fix-up is cheaper
    assert plan(128, 1024, 1024) == (128, 0, 4, True)  # 8 tiles, 16 stages: 4 stages a split, not 2
    assert plan(128, 512, 4096) == (128, 0, 8, True)  # 4 tiles: 8 splits in clusters, not 32 without
    assert gptq_marlin.wgmma_plan(128, 512, 4096, 132) == (128, 0, 32, False)
    assert plan(1024, 14336, 4096) == (256, 396, 2, False)  # a split tail: never clusters
    # Blocks of 256 rows where the cost model (waves of 1.65, a split tail 1 / splits + 0.4)
    # finds them shorter than blocks of 128 (waves of 1, a split tail 1 / splits + 0.25).
    assert gptq_marlin.wgmma_plan(128, 14336, 4096, 132).block_rows == 128  # one block of rows either way
    assert gptq_marlin.wgmma_plan(129, 14336, 4096, 132) == (256, 112, 1, False)  # 1.65 against 2 waves
    assert gptq_marlin.wgmma_plan(384, 14336, 4096, 132) == (128, 336, 1, False)  # 3 against 2 x 1.65
    assert gptq_marlin.wgmma_plan(512, 4096, 4096, 132) == (128, 128, 1, False)  # 1 against 1.65 x (1 / 2 + 0.4)
    assert gptq_marlin.wgmma_plan(640, 14336, 4096, 132) == (128, 528, 4, False)  # 4 + 1 / 4 + 0.25 against 3 x 1.65
    assert gptq_marlin.wgmma_plan(768, 4096, 4096, 132) == (256, 96, 1, False)  # 1.65 against 1 + 1 / 2 + 0.25
    assert gptq_marlin.wgmma_plan(1024, 14336, 4096, 132) == (256, 396, 2, False)  # 1.65 x 3.9 against 7
    assert gptq_marlin.wgmma_plan(1024, 6144, 4096, 132) == (128, 384, 1, False)  # 3 against 1.65 x 1.9
    assert gptq_marlin.wgmma_cost(gptq_marlin.WgmmaPlan(256, 396, 2), 448, 132) == pytest.approx(1.65 * 3.9)
    assert gptq_marlin.wgmma_cost(gptq_marlin.WgmmaPlan(128, 0, 2, True), 64, 132) == pytest.approx(0.64)
    # Every tile split, in stages of 64 rows of K: the longest split (pairs of stages) and the
    # fix-up, 10 + 1.2 a split in clusters, 8 + 5 a split for 128 rows of partial sums otherwise.
    stages = gptq_marlin.wgmma_split_stages
    assert stages(gptq_marlin.WgmmaPlan(128, 0, 3, True), 128, 4096) == pytest.approx(22 + 10 + 3.6)
    assert stages(gptq_marlin.WgmmaPlan(128, 0, 4), 128, 4096) == pytest.approx(16 + 8 + 20)
    assert stages(gptq_marlin.WgmmaPlan(128, 0, 4), 64, 4096) == pytest.approx(16 + 8 + 10)


@hopper
@pytest.mark.parametrize("kind", ["gptq4", "awq", "gptq8", "fp8"])
@pytest.mark.parametrize("group_size", [-1, 64, 128, 256])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("m", [17, 32, 40, 64, 100, 128, 129, 300, 1000])
def test_gptq_marlin_gemm_takes_the_wgmma_kernel(kind, group_size, dtype, m):
    """17 to 1024 rows (one block of 32, 64 or 128 rows to eight rows of blocks) of GPTQ and AWQ
    4-bit weights, 8-bit GPTQ and float8 ones, on sm_90, through the public entry point: the
    output poisoned, against the float64 product."""
    from mllm_kernel.cuda.jit import gptq_marlin

    k, n = 1024, 384
    prep = _prepare(kind, k, n, group_size, False, dtype, seed=m + group_size)
    a = torch.randn(m, k, device="cuda").to(dtype)
    zeros = prep["zeros"] if prep["zeros"] is not None else torch.empty(0)
    assert gptq_marlin.wgmma_applies(a, m, n, k, _KIND_WEIGHTS[kind], prep["s"], False, zeros)
    # 3 to 24 tiles, every one split: the splits run as clusters, but for 17 rows, whose few
    # partial sums make the global fix-up the shorter (wgmma_split_stages).
    at_once = functools.partial(gptq_marlin._wgmma_clusters_at_once, a.device, dtype)
    plan = gptq_marlin.wgmma_plan(m, n, k, gptq_marlin._sm_count(a.device.index), clusters_at_once=at_once)
    assert plan.cluster == (m > 17) and plan.whole == 0, plan
    c = torch.full((m, n), float("nan"), dtype=dtype, device="cuda")
    out = _run(prep, a, n, k, c=c)
    assert out.data_ptr() == c.data_ptr()
    _check(out, a, prep["w_ref"], dtype)


@hopper
@pytest.mark.parametrize("m,group_size,wgmma", [(1, 128, False), (20, 32, False), (20, 128, True), (600, 128, True)])
def test_gptq_marlin_gemm_with_c_off_16_bytes(m, group_size, wgmma):
    """An output c that starts off a 16-byte boundary (the kernels store 16-byte chunks), through
    the public entry point, for the GEMV, the general kernel (groups of 32 rows) and the wgmma
    kernel: filled in place all the same."""
    from mllm_kernel.cuda.jit import gptq_marlin

    k, n, dtype = 1024, 512, torch.bfloat16
    prep = _prepare("gptq4", k, n, group_size, False, dtype, seed=m)
    a = torch.randn(m, k, device="cuda").to(dtype)
    buffer = torch.full((m * n + 1,), float("nan"), dtype=dtype, device="cuda")
    c = buffer[1:].view(m, n)
    assert c.data_ptr() % 16 and gptq_marlin.wgmma_applies(a, m, n, k, 4, prep["s"], False, torch.empty(0)) == wgmma
    out = _run(prep, a, n, k, c=c)
    assert out.data_ptr() == c.data_ptr() and buffer[0].isnan()
    _check(out, a, prep["w_ref"], dtype)


@hopper
@pytest.mark.parametrize("kind", ["gptq4", "awq"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("m, plan", [(200, (256, 3, 1, False)), (700, (256, 8, 4, False)),
                                     (1000, (256, 12, 1, False)), (257, (128, 8, 4, False))])
def test_gptq_marlin_gemm_takes_each_wgmma_plan(monkeypatch, kind, dtype, m, plan):
    """Blocks of 256 rows, whole or with the tail past the last full wave split, and blocks of 128
    with a split tail, through the public entry point (the SM count patched down to 4 so the
    small weights take several waves): the output poisoned, against the float64 product."""
    from mllm_kernel.cuda.jit import gptq_marlin

    monkeypatch.setattr(gptq_marlin, "_sm_count", lambda index: 4)
    k, n = 1024, 384
    assert gptq_marlin.wgmma_plan(m, n, k, 4) == plan
    prep = _prepare(kind, k, n, 128, False, dtype, seed=m)
    a = torch.randn(m, k, device="cuda").to(dtype)
    zeros = prep["zeros"] if prep["zeros"] is not None else torch.empty(0)
    assert gptq_marlin.wgmma_applies(a, m, n, k, 4, prep["s"], False, zeros)
    c = torch.full((m, n), float("nan"), dtype=dtype, device="cuda")
    _check(_run(prep, a, n, k, c=c), a, prep["w_ref"], dtype)


@hopper
@pytest.mark.parametrize("kind", ["gptq4", "awq", "gptq8", "fp8"])
@pytest.mark.parametrize("group_size", [-1, 128])
@pytest.mark.parametrize("m", [1, 20, 128, 200, 300, 600])
def test_marlin_wgmma_over_splits_of_k(kind, group_size, m):
    """The kernel's module function (any rows, in blocks of 32, 64, 128 and 256: a last block of fewer
    rows copies them rounded up to 8, the rest of its stages holding what they held, and rows
    past M are never stored), every tile or only those past the first whole ones over 2
    to 8 splits of K (partial sums and output poisoned, the counters left zero), every tile's
    splits also as a cluster (bit for bit the same output: the same additions in the same
    order), rows strided in a wider tensor, and its bad arguments."""
    from mllm_kernel.cuda.jit import gptq_marlin

    k, n, dtype = 1024, 256, torch.bfloat16
    prep = _prepare(kind, k, n, group_size, False, dtype, seed=m)
    wide = torch.randn(m, k + 64, device="cuda").to(dtype)
    a = wide[:, :k]
    module = gptq_marlin._WGMMA[(dtype, _KIND_WEIGHTS[kind], False)]
    empty = torch.empty(0, dtype=torch.int32, device="cuda")
    zeros = prep["zeros"] if prep["zeros"] is not None else empty
    for rows in (32, 64, 128, 256):
        tiles = gptq_marlin.wgmma_tiles(m, n, rows)
        locks = torch.zeros(tiles, dtype=torch.int32, device="cuda")
        # (whole tiles, splits): none split (splits 1, or no tile past the whole ones), every tile
        # split, and only the tiles past the first or past all but one.
        # 3 splits: 4, 6 and 6 stages of K (pairs of stages).
        for whole, splits in ((tiles, 1), (tiles, 2), (0, 2), (0, 3), (0, 4), (0, 8), (1, 2), (tiles - 1, 3),
                              (tiles - 1, 4)):
            c = torch.full((m, n), float("nan"), dtype=dtype, device="cuda")
            count = (tiles - whole) * splits * min(rows, m) * 128 if splits > 1 else 0  # may be 0
            partials = torch.full((count,), float("nan"), device="cuda")
            module(a, c, prep["q"], prep["s"], zeros, empty, partials, locks, m, n, k, splits, rows, whole, False,
                   splits % 2 == 1)
            _check(c, a, prep["w_ref"], dtype)
            assert int(locks.abs().sum()) == 0, (rows, whole, splits)
            if whole == 0 and splits <= gptq_marlin.WGMMA_MAX_CLUSTER:
                clustered = torch.full((m, n), float("nan"), dtype=dtype, device="cuda")
                module(a, clustered, prep["q"], prep["s"], zeros, empty, empty.float(), empty, m, n, k, splits, rows,
                       whole, True, splits == 4)
                assert torch.equal(clustered, c), (rows, splits)
    partials = torch.zeros(2 * m * n, device="cuda")
    with pytest.raises(ValueError, match="the wgmma kernel needs size_k a multiple of 128 and as many rows a split "
                                         r"\(at least 1152 for 9 splits\), got 1024"):
        module(a, c, prep["q"], prep["s"], zeros, empty, partials, locks, m, n, k, 9, 128, 0, False, True)
    with pytest.raises(ValueError, match="the wgmma kernel takes blocks of 32, 64, 128 or 256 rows, got 48"):
        module(a, c, prep["q"], prep["s"], zeros, empty, partials, locks, m, n, k, 1, 48, 0, False, True)
    tiles = gptq_marlin.wgmma_tiles(m, n, 128)
    with pytest.raises(ValueError, match=f"the wgmma kernel's whole tiles must be 0 to its {tiles} tiles, got -1"):
        module(a, c, prep["q"], prep["s"], zeros, empty, partials, locks, m, n, k, 2, 128, -1, False, True)
    with pytest.raises(ValueError, match=f"partials: dim 0 must be {tiles * 2 * min(128, m) * 128}, got 5"):
        module(a, c, prep["q"], prep["s"], zeros, empty, partials[:5], locks, m, n, k, 2, 128, 0, False, True)
    partials = torch.zeros(tiles * 2 * min(128, m) * 128, device="cuda")
    with pytest.raises(ValueError, match=f"locks needs {tiles} entries, got {tiles - 1}"):
        short = torch.zeros(tiles - 1, dtype=torch.int32, device="cuda")
        module(a, c, prep["q"], prep["s"], zeros, empty, partials, short, m, n, k, 2, 128, 0, False, True)
    for whole, splits in ((1, 2), (0, 1), (0, 16)):
        with pytest.raises(ValueError, match="the wgmma kernel runs splits as clusters only where every tile is "
                                             f"split, in 2 to 8 splits, got whole {whole} and {splits} splits"):
            module(a, c, prep["q"], prep["s"], zeros, empty, partials, locks, m, n, k, splits, 128, whole, True, True)
    with pytest.raises(ValueError, match="c: must start 16-byte aligned"):
        shifted = torch.empty(m * n + 1, dtype=dtype, device="cuda")[1:].view(m, n)
        module(a, shifted, prep["q"], prep["s"], zeros, empty, partials, locks, m, n, k, 1, 128, 0, False, True)
    with pytest.raises(ValueError, match="a: rows must start 16-byte aligned"):
        odd = torch.randn(m, k + 4, device="cuda").to(dtype)[:, :k]
        module(odd, c, prep["q"], prep["s"], zeros, empty, partials, locks, m, n, k, 1, 128, 0, False, True)
    with pytest.raises(ValueError, match=r"a: the wgmma kernel reads rows that do not overlap \(row stride at least "
                                         r"size_k 1024\), got row stride 0"):
        repeated = torch.as_strided(a, (m, k), (0, 1))  # one row m times
        module(repeated, c, prep["q"], prep["s"], zeros, empty, partials, locks, m, n, k, 1, 128, 0, False, True)


@hopper
@pytest.mark.parametrize("kind", ["gptq4", "gptq8"])
@pytest.mark.parametrize("group_size", [64, 128, 256])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("m", [20, 128, 300])
def test_marlin_wgmma_act_order(kind, group_size, dtype, m):
    """GPTQ act-order (4- and 8-bit) through the Hopper kernel's module: a's columns in perm order
    and g_idx sorted by it (every 64-row stage in one group), in blocks of 32, 64, 128 and 256 rows,
    whole, split and in clusters; then a sorted g_idx of uneven groups (stages across two groups)
    and one in any order (nearly every stage across groups, and a run of whole stages in one),
    against the product of the weights dequantized by the same g_idx. Output and partial sums
    poisoned."""
    from mllm_kernel.cuda.jit import gptq_marlin

    k, n = 1024, 256
    weights = _KIND_WEIGHTS[kind]
    prep = _prepare(kind, k, n, group_size, True, dtype, seed=m + group_size)
    a = torch.randn(m, k, device="cuda").to(dtype)
    a_in = a[:, prep["perm"].long()].contiguous()
    module = gptq_marlin._WGMMA[(dtype, weights, True)]
    empty = torch.empty(0, dtype=torch.int32, device="cuda")

    def run(g_idx, rows, whole, splits, cluster):
        tiles = gptq_marlin.wgmma_tiles(m, n, rows)
        whole = tiles if whole is None else whole
        locks = torch.zeros(tiles, dtype=torch.int32, device="cuda")
        count = 0 if splits == 1 or cluster else (tiles - whole) * splits * min(rows, m) * 128
        partials = torch.full((count,), float("nan"), device="cuda")
        c = torch.full((m, n), float("nan"), dtype=dtype, device="cuda")
        module(a_in, c, prep["q"], prep["s"], empty, g_idx, partials, locks, m, n, k, splits, rows, whole, cluster,
               True)
        assert int(locks.abs().sum()) == 0
        return c

    for rows in (32, 64, 128, 256):
        for whole, splits, cluster in ((None, 1, False), (0, 3, False), (0, 2, True), (1, 4, False)):
            _check(run(prep["g_idx"], rows, whole, splits, cluster), a, prep["w_ref"], dtype)
    groups = prep["s"].shape[0]
    gen = torch.Generator().manual_seed(m)
    uneven = torch.randint(0, groups, (k,), generator=gen, dtype=torch.int32).sort().values.cuda()
    anyhow = torch.randint(0, groups, (k,), generator=gen, dtype=torch.int32).cuda()
    anyhow[:256] = groups - 1
    for g_idx in (uneven, anyhow):
        weight = torch.empty(n, k, dtype=dtype, device="cuda")
        gptq_marlin._DEQUANT[(dtype, weights)](prep["q"], prep["s"], empty, g_idx, weight, n, k)
        for rows, whole, splits, cluster in ((32, None, 1, False), (128, 0, 2, False), (256, 0, 4, True)):
            _check(run(g_idx, rows, whole, splits, cluster), a_in, weight.t().double().cpu(), dtype)


@hopper
def test_marlin_wgmma_clusters_at_once():
    """The clusters of 2, 4 and 8 blocks of the Hopper kernel the GPU runs at once: some, never
    more than its SMs hold, fewer for larger clusters; bad arguments named."""
    from mllm_kernel.cuda.jit import gptq_marlin

    at_once = gptq_marlin._WGMMA_CLUSTERS[torch.bfloat16]
    device = torch.cuda.current_device()
    sms = gptq_marlin._sm_count(device)
    for rows in (32, 64, 128, 256):
        counts = {splits: int(at_once(device, splits, rows)) for splits in (2, 4, 8)}
        assert 0 < counts[8] <= counts[4] <= counts[2], counts
        assert all(count * splits <= sms for splits, count in counts.items()), counts
    with pytest.raises(ValueError, match="clusters of 2 to 8 splits, got 16"):
        at_once(device, 16, 128)
    with pytest.raises(ValueError, match="the wgmma kernel takes blocks of 32, 64, 128 or 256 rows, got 48"):
        at_once(device, 2, 48)


@hopper
def test_marlin_wgmma_refuses_what_it_does_not_take():
    """Group sizes that are not a multiple of 64 rows, act-order g_idx to the plain module and none
    to the act-order one, zero points or misaligned g_idx with act-order, zero points with 8-bit
    weights, and N not a multiple of 128: named errors."""
    from mllm_kernel.cuda.jit import gptq_marlin

    dtype = torch.bfloat16
    module = gptq_marlin._WGMMA[(dtype, 4, False)]
    empty = torch.empty(0, dtype=torch.int32, device="cuda")
    k, n, m = 1024, 256, 32
    prep = _prepare("gptq4", k, n, 32, False, dtype, seed=1)
    a = torch.randn(m, k, device="cuda").to(dtype)
    c = torch.empty(m, n, dtype=dtype, device="cuda")
    with pytest.raises(ValueError, match="groups of a multiple of 64 rows or channel-wise scales, got group size 32"):
        module(a, c, prep["q"], prep["s"], empty, empty, empty.float(), empty, m, n, k, 1, 128, 0, False, True)
    prep = _prepare("gptq4", k, n, 128, True, dtype, seed=3)
    with pytest.raises(ValueError, match=re.escape("this marlin_wgmma module is built without act-order (g_idx "
                                                   "with more than one group); the call has it")):
        module(a, c, prep["q"], prep["s"], empty, prep["g_idx"], empty.float(), empty, m, n, k, 1, 128, 0, False, True)
    act_order = gptq_marlin._WGMMA[(dtype, 4, True)]
    with pytest.raises(ValueError, match=re.escape("this marlin_wgmma module is built for act-order (g_idx with "
                                                   "more than one group); the call has none")):
        act_order(a, c, prep["q"], prep["s"], empty, empty, empty.float(), empty, m, n, k, 1, 128, 0, False, True)
    zeros = torch.zeros(k // 128, n // 8, dtype=torch.int32, device="cuda")
    with pytest.raises(ValueError, match="the wgmma kernel takes no zero points with g_idx"):
        act_order(a, c, prep["q"], prep["s"], zeros, prep["g_idx"], empty.float(), empty, m, n, k, 1, 128, 0, False,
                  True)
    shifted = torch.empty(k + 4, dtype=torch.int32, device="cuda")[1:k + 1]
    shifted.copy_(prep["g_idx"])
    with pytest.raises(ValueError, match="g_idx must start 16-byte aligned and b_scales 4-byte aligned"):
        act_order(a, c, prep["q"], prep["s"], empty, shifted, empty.float(), empty, m, n, k, 1, 128, 0, False, True)
    w8 = gptq_marlin._WGMMA[(dtype, 8, False)]
    prep = _prepare("gptq8", k, n, 128, False, dtype, seed=4)
    zeros = torch.zeros(k // 128, n // 4, dtype=torch.int32, device="cuda")
    with pytest.raises(ValueError, match="zero points are supported for 4-bit weights only"):
        w8(a, c, prep["q"], prep["s"], zeros, empty, empty.float(), empty, m, n, k, 1, 128, 0, False, True)
    prep = _prepare("gptq4", k, 192, 128, False, dtype, seed=2)
    c = torch.empty(m, 192, dtype=dtype, device="cuda")
    with pytest.raises(ValueError, match="the wgmma kernel needs size_n a multiple of 128, got 192"):
        module(a, c, prep["q"], prep["s"], empty, empty, empty.float(), empty, m, 192, k, 1, 128, 0, False, True)
