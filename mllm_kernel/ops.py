"""Device-dispatching public ops: each runs the CPU or CUDA kernel matching its tensors' device.

    from mllm_kernel import ops
    y = ops.rmsnorm(x, w)           # x on CPU -> Highway kernel, on CUDA -> CUDA kernel

Each op is declared once below with ``register_op`` (see ``mllm_kernel.op_registration``): its
typed signature, the kernel of each device, what it mutates and its fake function. That gives
the eager function here (a direct kernel call), ``torch.ops.mllm_kernel.<op>`` for
``torch.compile``, NumPy/CuPy/JAX arrays through DLPack, and the refusal of inputs that require
grad. The device packages (``mllm_kernel.cpu.jit``, ``mllm_kernel.cuda.jit``) hold the kernels
and document their arguments and device knobs (``enable_pdl`` on CUDA). An op without a kernel
for a device raises NotImplementedError there.
"""

from __future__ import annotations

import torch
from torch import Tensor

from mllm_kernel.cpu import jit as cpu
from mllm_kernel.cuda import jit as cuda
from mllm_kernel.op_args import dtype_names, group_scales, row_shape
from mllm_kernel.op_registration import REGISTERED_OPS, register_op


# --- fakes: shapes, dtypes and strides of what the kernels return ---------------------------------
def _like(input: Tensor) -> Tensor:
    return input.new_empty(input.shape)


def _half_last(input: Tensor) -> Tensor:
    return input.new_empty((*input.shape[:-1], input.shape[-1] // 2))


def _quant_pair(input: Tensor, dtype: torch.dtype, scale_cols: int) -> tuple[Tensor, Tensor]:
    return (input.new_empty(input.shape, dtype=dtype),
            input.new_empty((*input.shape[:-1], scale_cols), dtype=torch.float32))


def _group_quant_fp8_fake(input: Tensor, group_size: int, eps: float, column_major_scales: bool,
                          scale_ue8m0: bool, *, scale_tma_aligned: bool = False) -> tuple[Tensor, Tensor]:
    op = "per_token_group_quant_fp8"
    rows, hidden = row_shape(input, op)
    scales, _ = group_scales(op, input, rows, hidden // group_size, column_major_scales, scale_tma_aligned)
    return input.new_empty(input.shape, dtype=torch.float8_e4m3fn), scales


# --- norms -------------------------------------------------------------------------------------------
@register_op(kernels={"cpu": cpu.rmsnorm, "cuda": cuda.rmsnorm}, fake=lambda input, weight, eps: _like(input),
             out=True)
def rmsnorm(input: Tensor, weight: Tensor, eps: float = 1e-6) -> Tensor:
    """RMSNorm over the last dimension: ``input * rsqrt(mean(input^2) + eps) * weight``."""


@register_op(kernels={"cpu": cpu.rms_norm_gated, "cuda": cuda.rms_norm_gated},
             fake=lambda x, weight, z, eps: _like(x), out=True)
def rms_norm_gated(x: Tensor, weight: Tensor, z: Tensor | None = None, eps: float = 1e-6) -> Tensor:
    """Gated DeltaNet's output norm: ``rmsnorm(x) * weight``, times ``silu(z)`` when z is given."""


@register_op(kernels={"cpu": cpu.fused_add_rmsnorm, "cuda": cuda.fused_add_rmsnorm}, mutates=("input", "residual"))
def fused_add_rmsnorm(input: Tensor, residual: Tensor, weight: Tensor, eps: float = 1e-6) -> None:
    """In place: ``residual += input``; ``input = rmsnorm(residual) * weight``."""


@register_op(kernels={"cpu": cpu.qknorm, "cuda": cuda.qknorm}, mutates=("q", "k"))
def qknorm(q: Tensor, k: Tensor, q_weight: Tensor, k_weight: Tensor, eps: float = 1e-6) -> None:
    """In place RMSNorm of every head of q [T, Hq, D] and k [T, Hk, D] over head_dim."""


@register_op(kernels={"cpu": cpu.qknorm_across_heads, "cuda": cuda.qknorm_across_heads}, mutates=("q", "k"))
def qknorm_across_heads(q: Tensor, k: Tensor, q_weight: Tensor, k_weight: Tensor, eps: float = 1e-6) -> None:
    """In place RMSNorm of each token of q and k over all its heads together (weights of size H*D)."""


# --- activations, rotary, softmax ---------------------------------------------------------------------
@register_op(kernels={"cpu": cpu.silu_and_mul, "cuda": cuda.silu_and_mul}, fake=_half_last, out=True)
def silu_and_mul(input: Tensor) -> Tensor:
    """``silu(x[..., :d]) * x[..., d:]`` for input [..., 2d]."""


@register_op(kernels={"cpu": cpu.gelu_and_mul, "cuda": cuda.gelu_and_mul},
             fake=lambda input, approximate: _half_last(input), out=True)
def gelu_and_mul(input: Tensor, approximate: str = "none") -> Tensor:
    """``gelu(x[..., :d], approximate) * x[..., d:]`` for input [..., 2d]."""


@register_op(kernels={"cpu": cpu.apply_rope, "cuda": cuda.apply_rope}, mutates=("q", "k"), dispatch="q")
def apply_rope(positions: Tensor, q: Tensor, k: Tensor, cos_sin_cache: Tensor, is_neox: bool = True) -> None:
    """In place rotary embedding of q [T, Hq, D] and k [T, Hk, D] (NeoX or GPT-J layout, partial rotary)."""


@register_op(kernels={"cpu": cpu.softmax}, fake=lambda input, dim: _like(input), out=True)
def softmax(input: Tensor, dim: int = -1) -> Tensor:
    """Softmax over the last dimension."""


# --- quantization --------------------------------------------------------------------------------------
@register_op(kernels={"cuda": cuda.per_tensor_quant_fp8},
             fake=lambda input, scale: (input.new_empty(input.shape, dtype=torch.float8_e4m3fn),
                                        input.new_empty((1,), dtype=torch.float32)))
def per_tensor_quant_fp8(input: Tensor, scale: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """FP8 (e4m3) quantization with one scale: dynamic (from the absolute maximum) or given."""


@register_op(kernels={"cuda": cuda.per_token_quant_fp8},
             fake=lambda input: _quant_pair(input, torch.float8_e4m3fn, 1))
def per_token_quant_fp8(input: Tensor) -> tuple[Tensor, Tensor]:
    """FP8 (e4m3) quantization with one scale per row; returns (output, scales [T, 1])."""


@register_op(kernels={"cpu": cpu.per_token_quant_int8, "cuda": cuda.per_token_quant_int8},
             fake=lambda input: _quant_pair(input, torch.int8, 1))
def per_token_quant_int8(input: Tensor) -> tuple[Tensor, Tensor]:
    """INT8 quantization with one scale per row; returns (output, scales [T, 1])."""


@register_op(kernels={"cpu": cpu.per_token_group_quant_fp8, "cuda": cuda.per_token_group_quant_fp8},
             fake=_group_quant_fp8_fake)
def per_token_group_quant_fp8(input: Tensor, group_size: int = 128, eps: float = 1e-10,
                              column_major_scales: bool = False, scale_ue8m0: bool = False, *,
                              scale_tma_aligned: bool = False) -> tuple[Tensor, Tensor]:
    """FP8 (e4m3) quantization with one scale per group of ``group_size`` features of a row;
    ``scale_tma_aligned`` pads column-major scales' rows to a multiple of 4."""


@register_op(kernels={"cpu": cpu.per_token_group_quant_int8, "cuda": cuda.per_token_group_quant_int8},
             fake=lambda input, group_size, eps: _quant_pair(input, torch.int8, input.shape[-1] // group_size))
def per_token_group_quant_int8(input: Tensor, group_size: int = 128, eps: float = 1e-10) -> tuple[Tensor, Tensor]:
    """INT8 quantization with one scale per group of ``group_size`` features of a row."""


# --- KV cache ---------------------------------------------------------------------------------------------
@register_op(kernels={"cpu": cpu.store_kv_cache, "cuda": cuda.store_kv_cache}, mutates=("k_cache", "v_cache"))
def store_kv_cache(k: Tensor, v: Tensor, k_cache: Tensor, v_cache: Tensor, slot_mapping: Tensor,
                   k_scale: Tensor | None = None, v_scale: Tensor | None = None) -> None:
    """Scatter k, v [T, H, D] into the caches [num_slots, H, D] at slot_mapping [T] (negative: skip).
    With k_scale and v_scale (float32 [1]) the caches are float8_e4m3fn holding k / k_scale, v / v_scale."""


@register_op(kernels={"cpu": cpu.store_cache, "cuda": cuda.store_cache}, mutates=("k_cache", "v_cache"))
def store_cache(k: Tensor, v: Tensor, k_cache: Tensor, v_cache: Tensor, indices: Tensor, *, row_bytes: int = 0,
                num_split: int = 0) -> None:
    """Scatter rows k, v [batch, row] into the caches [slots, row] at indices [batch] (int32/int64,
    each in [0, slots)); any dtype, rows a multiple of 4 bytes (see ``can_use_store_cache``)."""


# --- gated DeltaNet (linear attention) ------------------------------------------------------------
@register_op(kernels={"cpu": cpu.gdn_decode, "cuda": cuda.gdn_decode}, mutates=("state_pool",),
             fake=lambda q, k, v, a, b, A_log, dt_bias, state_pool, cache_indices: _like(v))
def gdn_decode(q: Tensor, k: Tensor, v: Tensor, a: Tensor, b: Tensor, A_log: Tensor, dt_bias: Tensor,
               state_pool: Tensor, cache_indices: Tensor) -> Tensor:
    """One gated DeltaNet decode step: returns o [bs, Hv, Dv]; state_pool updated at cache_indices."""


@register_op(kernels={"cpu": cpu.gdn_extend_chunkwise, "cuda": cuda.gdn_extend_chunkwise}, mutates=("state_pool",),
             fake=lambda q, k, v, a, b, A_log, dt_bias, state_pool, cache_indices, cu_seqlens: _like(v))
def gdn_extend_chunkwise(q: Tensor, k: Tensor, v: Tensor, a: Tensor, b: Tensor, A_log: Tensor, dt_bias: Tensor,
                         state_pool: Tensor, cache_indices: Tensor, cu_seqlens: Tensor) -> Tensor:
    """Gated DeltaNet over the sequences of cu_seqlens, each from and back to its pool state."""


# --- serving helpers -----------------------------------------------------------------------------------------
@register_op(kernels={"cpu": cpu.create_kv_indices, "cuda": cuda.create_kv_indices}, mutates=("kv_indices",),
             dispatch="kv_indices")
def create_kv_indices(req_to_token: Tensor, req_pool_indices: Tensor, page_kernel_lens: Tensor, kv_indptr: Tensor,
                      kv_start_idx: Tensor | None, kv_indices: Tensor) -> None:
    """kv_indices[kv_indptr[i] + j] = req_to_token[req_pool_indices[i], start_i + j] for j < page_kernel_lens[i]
    (start_i = kv_start_idx[i], or 0 when it is None or empty); all int32."""


# --- W8A8 scaled GEMMs -----------------------------------------------------------------------------------------
def _mm_fake(mat_a: Tensor, mat_b: Tensor, scales_a: Tensor, scales_b: Tensor, out_dtype: torch.dtype,
             bias: Tensor | None = None) -> Tensor:
    return mat_a.new_empty((mat_a.shape[0], mat_b.shape[1]), dtype=out_dtype)


@register_op(kernels={"cpu": cpu.int8_scaled_mm, "cuda": cuda.int8_scaled_mm}, fake=_mm_fake)
def int8_scaled_mm(mat_a: Tensor, mat_b: Tensor, scales_a: Tensor, scales_b: Tensor, out_dtype: torch.dtype,
                   bias: Tensor | None = None) -> Tensor:
    """(mat_a @ mat_b) * scales_a[:, None] * scales_b[None, :] + bias: int8 mat_a [M, K] row-major, int8 mat_b
    [K, N] column-major (a row-major [N, K] weight's .t()), float32 scales, out float16/bfloat16 [M, N]."""


@register_op(kernels={"cuda": cuda.fp8_scaled_mm}, fake=_mm_fake)
def fp8_scaled_mm(mat_a: Tensor, mat_b: Tensor, scales_a: Tensor, scales_b: Tensor, out_dtype: torch.dtype,
                  bias: Tensor | None = None) -> Tensor:
    """As int8_scaled_mm with float8_e4m3fn operands; scales per tensor [1] or per token [M, 1] x per channel
    [1, N], in any mix."""


@register_op(kernels={"cuda": cuda.fp8_blockwise_scaled_mm}, fake=_mm_fake)
def fp8_blockwise_scaled_mm(mat_a: Tensor, mat_b: Tensor, scales_a: Tensor, scales_b: Tensor,
                            out_dtype: torch.dtype) -> Tensor:
    """DeepSeek-V3 block-scaled FP8 GEMM: float8_e4m3fn mat_a [M, K] row-major and mat_b [K, N] column-major,
    float32 scales_a [M, ceil(K/128)] per token and 128-wide K group, scales_b [ceil(N/128), ceil(K/128)] per
    128 x 128 weight block; out float16/bfloat16 [M, N]."""


# --- weight-only quantized GEMM (Marlin format) ----------------------------------------------------------
def _marlin_fake(a: Tensor, c: Tensor | None, b_q_weight: Tensor, b_scales: Tensor, global_scale: Tensor | None,
                 b_zeros: Tensor | None, g_idx: Tensor | None, perm: Tensor | None, workspace: Tensor | None,
                 b_q_type_id: int, size_m: int, size_n: int, size_k: int, is_k_full: bool = True,
                 use_atomic_add: bool = False, use_fp32_reduce: bool = False, is_zp_float: bool = False) -> Tensor:
    return a.new_empty((size_m, size_n))


@register_op(kernels={"cpu": cpu.gptq_marlin_gemm, "cuda": cuda.gptq_marlin_gemm}, fake=_marlin_fake, out="c")
def gptq_marlin_gemm(a: Tensor, c: Tensor | None, b_q_weight: Tensor, b_scales: Tensor, global_scale: Tensor | None,
                     b_zeros: Tensor | None, g_idx: Tensor | None, perm: Tensor | None, workspace: Tensor | None,
                     b_q_type_id: int, size_m: int, size_n: int, size_k: int, is_k_full: bool = True,
                     use_atomic_add: bool = False, use_fp32_reduce: bool = False, is_zp_float: bool = False) -> Tensor:
    """c [size_m, size_n] = a @ dequant(b_q_weight) for Marlin-format GPTQ/AWQ weights (vLLM's signature; see
    mllm_kernel.cuda.jit.gptq_marlin_gemm and, on CPU, mllm_kernel.cpu.jit.gptq_marlin_gemm); c is written and
    returned when given, else allocated. b_q_type_id is the type's int id (ScalarType.id; the eager call also takes
    the ScalarType). The workspace's arrival counters are left zero (so the custom op does not declare it mutated)."""


@register_op(kernels={"cpu": cpu.gptq_marlin_repack, "cuda": cuda.gptq_marlin_repack},
             fake=lambda b_q_weight, perm, size_k, size_n, num_bits: b_q_weight.new_empty(
                 (size_k // 16, size_n * 16 * num_bits // 32)))
def gptq_marlin_repack(b_q_weight: Tensor, perm: Tensor | None, size_k: int, size_n: int, num_bits: int) -> Tensor:
    """GPTQ checkpoint weights [size_k * num_bits / 32, size_n] int32 to the Marlin layout (perm: act-order)."""


@register_op(kernels={"cpu": cpu.awq_marlin_repack, "cuda": cuda.awq_marlin_repack},
             fake=lambda b_q_weight, size_k, size_n, num_bits: b_q_weight.new_empty(
                 (size_k // 16, size_n * 16 * num_bits // 32)))
def awq_marlin_repack(b_q_weight: Tensor, size_k: int, size_n: int, num_bits: int) -> Tensor:
    """AWQ checkpoint weights [size_k, size_n * num_bits / 32] int32 to the Marlin layout."""


_W8A8 = {"int8": (torch.int8, per_token_quant_int8, int8_scaled_mm),
         "fp8": (torch.float8_e4m3fn, per_token_quant_fp8, fp8_scaled_mm)}


def w8a8_linear(x: Tensor, weight: Tensor, weight_scale: Tensor, bias: Tensor | None = None, *,
                dtype: str = "int8") -> Tensor:
    """A W8A8 linear layer: ``x @ weight.t() (+ bias)`` with x quantized per token on the fly
    (``per_token_quant_int8`` or ``per_token_quant_fp8``) and the GEMM's epilogue applying both
    scales. x ``[..., K]`` float16/bfloat16; weight ``[N, K]`` row-major, int8 (``dtype="int8"``)
    or float8_e4m3fn (``"fp8"``), quantized per output channel: weight_scale float32 ``[N]``,
    ``[N, 1]`` or ``[1]`` (``ops.per_token_quant_int8(w)`` of a float weight gives both);
    bias ``[N]`` of x's dtype. Returns ``[..., N]`` of x's dtype."""
    if dtype not in _W8A8:
        raise ValueError(f"w8a8_linear: dtype must be 'int8' or 'fp8', got {dtype!r}")
    operand, quantize, gemm = _W8A8[dtype]
    if not isinstance(x, Tensor) or x.dtype not in (torch.float16, torch.bfloat16) or x.dim() < 1:
        raise ValueError("w8a8_linear: x: must be a float16 or bfloat16 tensor [..., K], got "
                         f"{getattr(x, 'dtype', type(x).__name__)}")
    if not isinstance(weight, Tensor) or weight.dtype != operand or weight.dim() != 2:
        raise ValueError(f"w8a8_linear: weight: must be a 2-D {dtype_names(operand)} tensor [N, K] "
                         f"for dtype={dtype!r}, got {getattr(weight, 'dtype', type(weight).__name__)}")
    if weight.shape[1] != x.shape[-1]:
        raise ValueError(f"w8a8_linear: x has K = {x.shape[-1]} but weight is {list(weight.shape)}")
    if not isinstance(weight_scale, Tensor):
        raise ValueError(f"w8a8_linear: weight_scale: must be a torch.Tensor, got {type(weight_scale).__name__}")
    q, scales = quantize(x.reshape(-1, x.shape[-1]))
    out = gemm(q, weight.t(), scales, weight_scale.reshape(-1), x.dtype, bias)
    return out.view(*x.shape[:-1], weight.shape[0])


__all__ = sorted([*REGISTERED_OPS, "w8a8_linear"])
