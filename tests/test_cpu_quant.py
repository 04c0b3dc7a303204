"""CPU quantization (mllm_kernel.cpu.jit): per_token_quant_int8, per_token_group_quant_int8 and
per_token_group_quant_fp8, bit-exact against float32 PyTorch references of the same formula."""

import re

import pytest
import torch

from mllm_kernel.cpu.jit import per_token_group_quant_fp8, per_token_group_quant_int8, per_token_quant_int8

DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def _rand(*shape, dtype, seed=0, scale=3.0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=g) * scale).to(dtype)


def _ref_int8(x, group, eps):
    xf = x.float().view(x.shape[0], -1, group)
    amax = xf.abs().amax(-1, keepdim=True).clamp_min(eps)
    scale = amax / 127.0
    q = torch.where(scale == 0, torch.zeros_like(xf), (xf / scale).round()).clamp(-128, 127).to(torch.int8)
    return q.view(x.shape), scale.squeeze(-1)


def _ref_fp8(x, group, eps, ue8m0):
    xf = x.float().view(x.shape[0], -1, group)
    scale = xf.abs().amax(-1, keepdim=True).clamp_min(eps) / 448.0
    if ue8m0:
        scale = torch.exp2(torch.ceil(torch.log2(scale)))
    q = (xf / scale).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)
    return q.view(x.shape), scale.squeeze(-1)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows,hidden", [(1, 1), (3, 7), (5, 33), (4, 1000), (2, 4099), (1, 16384), (2000, 256)])
def test_per_token_quant_int8(dtype, rows, hidden):
    x = _rand(rows, hidden + 3, dtype=dtype)[:, :hidden]  # strided rows
    x[0, :] = 0  # an all-zero row: scale 0, zeros
    q, s = per_token_quant_int8(x)
    ref_q, ref_s = _ref_int8(x, hidden, 0.0)
    assert q.dtype == torch.int8 and s.shape == (rows, 1) and s.dtype == torch.float32
    assert torch.equal(q, ref_q)
    assert torch.equal(s, ref_s)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows,hidden,group", [(1, 1, 1), (3, 14, 7), (4, 384, 128), (2, 16384, 128), (1500, 256, 64),
                                               (2, 4096, 4096)])
def test_per_token_group_quant_int8(dtype, rows, hidden, group):
    x = _rand(rows, hidden, dtype=dtype, seed=1)
    x[0, :group] = 0  # an all-zero group: scale eps / 127
    q, s = per_token_group_quant_int8(x, group_size=group, eps=1e-10)
    ref_q, ref_s = _ref_int8(x, group, 1e-10)
    assert s.shape == (rows, hidden // group)
    assert torch.equal(q, ref_q)
    assert torch.equal(s, ref_s)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows,hidden,group", [(1, 1, 1), (3, 14, 7), (5, 384, 128), (2, 16384, 128), (1500, 256, 64),
                                               (3, 99, 33)])
@pytest.mark.parametrize("column_major", [False, True])
@pytest.mark.parametrize("ue8m0", [False, True])
def test_per_token_group_quant_fp8(dtype, rows, hidden, group, column_major, ue8m0):
    x = _rand(rows, hidden, dtype=dtype, seed=2)
    x[0, :group] = 0
    if hidden >= 16:  # tiny values exercise e4m3 subnormals
        x[-1, :8] = torch.tensor([1e-3, -2e-3, 3e-4, 1e-5, 5e-3, -7e-3, 0.0, 2.5], dtype=dtype)
    q, s = per_token_group_quant_fp8(x, group_size=group, column_major_scales=column_major, scale_ue8m0=ue8m0)
    ref_q, ref_s = _ref_fp8(x, group, 1e-10, ue8m0)
    assert q.dtype == torch.float8_e4m3fn and s.shape == (rows, hidden // group)
    assert torch.equal(q.view(torch.uint8), ref_q.view(torch.uint8))
    assert torch.equal(s, ref_s)
    if column_major:
        assert s.stride() == (1, rows)
        assert s.t().is_contiguous()


@pytest.mark.parametrize("rows", [1, 3, 5, 8])
def test_per_token_group_quant_fp8_tma_aligned_scales(rows):
    """scale_tma_aligned: column-major scales in a buffer of rows padded to a multiple of 4, the
    same values; without column_major_scales it is refused."""
    x = _rand(rows, 384, dtype=torch.bfloat16, seed=rows)
    q, s = per_token_group_quant_fp8(x, 128, column_major_scales=True, scale_tma_aligned=True)
    ref_q, ref_s = _ref_fp8(x, 128, 1e-10, False)
    assert s.shape == (rows, 3) and s.stride() == (1, -(-rows // 4) * 4)
    assert torch.equal(q.view(torch.uint8), ref_q.view(torch.uint8)) and torch.equal(s, ref_s)
    with pytest.raises(ValueError, match="per_token_group_quant_fp8: scale_tma_aligned needs column_major_scales"):
        per_token_group_quant_fp8(x, 128, scale_tma_aligned=True)


def test_fp8_every_code():
    # Every finite e4m3 magnitude, its midpoints to the next (ties round to even), and 448 itself.
    codes = torch.arange(0, 127, dtype=torch.uint8).view(torch.float8_e4m3fn).float()
    mids = (codes[:-1] + codes[1:]) / 2
    vals = torch.cat([codes, mids, -codes, -mids])
    x = torch.cat([vals, torch.tensor([448.0])]).view(1, -1)  # amax 448 -> scale 1
    q, s = per_token_group_quant_fp8(x, group_size=x.shape[1])
    assert s.item() == 1.0
    ref_q, _ = _ref_fp8(x, x.shape[1], 1e-10, False)
    assert torch.equal(q.view(torch.uint8), ref_q.view(torch.uint8))


def test_3d_input():
    x = _rand(2, 3, 256, dtype=torch.bfloat16, seed=3)
    q, s = per_token_group_quant_fp8(x)
    assert q.shape == (2, 3, 256) and s.shape == (2, 3, 2)
    ref_q, ref_s = _ref_fp8(x.view(6, 256), 128, 1e-10, False)
    assert torch.equal(q.view(6, 256).view(torch.uint8), ref_q.view(torch.uint8))
    assert torch.equal(s.view(6, 2), ref_s)
    q, s = per_token_quant_int8(x)
    assert s.shape == (2, 3, 1)


def _msg(text):
    return "^" + re.escape(text)


def test_bad_inputs():
    x = _rand(4, 256, dtype=torch.float32)
    with pytest.raises(ValueError, match=_msg("per_token_group_quant_fp8: hidden size 256 is not divisible by group_size 96")):
        per_token_group_quant_fp8(x, group_size=96)
    with pytest.raises(ValueError, match=_msg("per_token_group_quant_int8: hidden size 256 is not divisible by group_size 96")):
        per_token_group_quant_int8(x, group_size=96)
    with pytest.raises(ValueError, match=_msg("per_token_group_quant_fp8: group_size must be a positive int, got 0")):
        per_token_group_quant_fp8(x, group_size=0)
    with pytest.raises(ValueError, match=_msg("per_token_group_quant_int8: group_size must be a positive int, got -128")):
        per_token_group_quant_int8(x, group_size=-128)
    with pytest.raises(ValueError, match=_msg("per_token_group_quant_fp8: eps must be non-negative, got -1")):
        per_token_group_quant_fp8(x, eps=-1.0)
    with pytest.raises(ValueError, match=_msg("per_token_quant_int8: input: dtype must be one of float32, float16, bfloat16, got float64")):
        per_token_quant_int8(x.double())
    with pytest.raises(ValueError, match=_msg("per_token_quant_int8: input must not be empty, got shape [0, 256]")):
        per_token_quant_int8(x[:0])
    with pytest.raises(ValueError, match=_msg("per_token_group_quant_fp8: input: stride 1 must be 1, got 2")):
        per_token_group_quant_fp8(_rand(4, 512, dtype=torch.float32)[:, ::2])
