"""Every op of ``mllm_kernel.ops`` as a PyTorch custom op, ``torch.ops.mllm_kernel.<op>``.

Registered once per process when ``mllm_kernel.ops`` is imported. Each op has a fake (meta)
implementation giving the real output shapes, dtypes and strides, so ``torch.compile`` traces
through it with no graph break, and the in-place ops declare what they mutate so that
functionalization and re-inplacing are correct. The eager path of ``mllm_kernel.ops`` calls the
kernels directly; these ops are what it routes to while ``torch.compile`` traces.

The kernels have no backward: an op whose inputs require grad raises at backward time (and the
eager path refuses such inputs up front).
"""

from __future__ import annotations

import torch
from torch import Tensor

from mllm_kernel.ops_dispatch import kernel_for

_NAMESPACE = "mllm_kernel"


def _no_backward(op: str):
    def backward(ctx, *grads):
        raise RuntimeError(f"{op}: mllm-kernel ops have no backward; run them under torch.no_grad() or "
                           "torch.inference_mode(), or detach their inputs")

    return backward


def _register(op: str, mutates: tuple[str, ...], fake):
    """Defines ``torch.ops.mllm_kernel.<op>`` from the schema of ``fake``'s signature."""

    def decorate(impl):
        custom = torch.library.custom_op(f"{_NAMESPACE}::{op}", mutates_args=mutates)(impl)
        custom.register_fake(fake)
        if not mutates:  # PyTorch takes autograd formulas for functional ops only
            custom.register_autograd(_no_backward(op), setup_context=lambda ctx, inputs, output: None)
        return custom

    return decorate


# --- fakes: shapes, dtypes and strides of what the kernels return ------------------------------------------------
def _like(input: Tensor) -> Tensor:
    return input.new_empty(input.shape)


def _half_last(input: Tensor) -> Tensor:
    return input.new_empty((*input.shape[:-1], input.shape[-1] // 2))


def _quant_pair(input: Tensor, dtype: torch.dtype, scale_cols: int) -> tuple[Tensor, Tensor]:
    return (input.new_empty(input.shape, dtype=dtype),
            input.new_empty((*input.shape[:-1], scale_cols), dtype=torch.float32))


def _group_quant_fp8_fake(input: Tensor, group_size: int, eps: float, column_major_scales: bool,
                          scale_ue8m0: bool) -> tuple[Tensor, Tensor]:
    groups = input.shape[-1] // group_size
    out = input.new_empty(input.shape, dtype=torch.float8_e4m3fn)
    if column_major_scales:
        rows = input.numel() // input.shape[-1] if input.dim() else 1
        return out, input.new_empty((groups, rows), dtype=torch.float32).t()
    return out, input.new_empty((*input.shape[:-1], groups), dtype=torch.float32)


# --- the ops --------------------------------------------------------------------------------------------------------
@_register("rmsnorm", (), lambda input, weight, eps: _like(input))
def rmsnorm(input: Tensor, weight: Tensor, eps: float) -> Tensor:
    return kernel_for("rmsnorm", input)(input, weight, eps)


@_register("fused_add_rmsnorm", ("input", "residual"), lambda input, residual, weight, eps: None)
def fused_add_rmsnorm(input: Tensor, residual: Tensor, weight: Tensor, eps: float) -> None:
    kernel_for("fused_add_rmsnorm", input)(input, residual, weight, eps)


@_register("qknorm", ("q", "k"), lambda q, k, q_weight, k_weight, eps: None)
def qknorm(q: Tensor, k: Tensor, q_weight: Tensor, k_weight: Tensor, eps: float) -> None:
    kernel_for("qknorm", q)(q, k, q_weight, k_weight, eps)


@_register("qknorm_across_heads", ("q", "k"), lambda q, k, q_weight, k_weight, eps: None)
def qknorm_across_heads(q: Tensor, k: Tensor, q_weight: Tensor, k_weight: Tensor, eps: float) -> None:
    kernel_for("qknorm_across_heads", q)(q, k, q_weight, k_weight, eps)


@_register("silu_and_mul", (), lambda input: _half_last(input))
def silu_and_mul(input: Tensor) -> Tensor:
    return kernel_for("silu_and_mul", input)(input)


@_register("gelu_and_mul", (), lambda input, approximate: _half_last(input))
def gelu_and_mul(input: Tensor, approximate: str) -> Tensor:
    return kernel_for("gelu_and_mul", input)(input, approximate=approximate)


@_register("apply_rope", ("q", "k"), lambda positions, q, k, cos_sin_cache, is_neox: None)
def apply_rope(positions: Tensor, q: Tensor, k: Tensor, cos_sin_cache: Tensor, is_neox: bool) -> None:
    kernel_for("apply_rope", q)(positions, q, k, cos_sin_cache, is_neox=is_neox)


@_register("softmax", (), lambda input, dim: _like(input))
def softmax(input: Tensor, dim: int) -> Tensor:
    return kernel_for("softmax", input)(input, dim=dim)


@_register("per_token_quant_int8", (), lambda input: _quant_pair(input, torch.int8, 1))
def per_token_quant_int8(input: Tensor) -> tuple[Tensor, Tensor]:
    return kernel_for("per_token_quant_int8", input)(input)


@_register("per_token_group_quant_int8", (),
           lambda input, group_size, eps: _quant_pair(input, torch.int8, input.shape[-1] // group_size))
def per_token_group_quant_int8(input: Tensor, group_size: int, eps: float) -> tuple[Tensor, Tensor]:
    return kernel_for("per_token_group_quant_int8", input)(input, group_size=group_size, eps=eps)


@_register("per_token_group_quant_fp8", (), _group_quant_fp8_fake)
def per_token_group_quant_fp8(input: Tensor, group_size: int, eps: float, column_major_scales: bool,
                              scale_ue8m0: bool) -> tuple[Tensor, Tensor]:
    return kernel_for("per_token_group_quant_fp8", input)(
        input, group_size=group_size, eps=eps, column_major_scales=column_major_scales, scale_ue8m0=scale_ue8m0)


@_register("per_token_quant_fp8", (), lambda input: _quant_pair(input, torch.float8_e4m3fn, 1))
def per_token_quant_fp8(input: Tensor) -> tuple[Tensor, Tensor]:
    return kernel_for("per_token_quant_fp8", input)(input)


@_register("per_tensor_quant_fp8", (),
           lambda input, scale: (input.new_empty(input.shape, dtype=torch.float8_e4m3fn),
                                 input.new_empty((1,), dtype=torch.float32)))
def per_tensor_quant_fp8(input: Tensor, scale: Tensor | None) -> tuple[Tensor, Tensor]:
    out, scale_out = kernel_for("per_tensor_quant_fp8", input)(input, scale=scale)
    # A custom op may not return an input: hand back a copy of a given (static) scale.
    return out, scale_out.clone() if scale is not None and scale_out is scale else scale_out


@_register("store_kv_cache", ("k_cache", "v_cache"),
           lambda k, v, k_cache, v_cache, slot_mapping, k_scale=None, v_scale=None: None)
def store_kv_cache(k: Tensor, v: Tensor, k_cache: Tensor, v_cache: Tensor, slot_mapping: Tensor,
                   k_scale: Tensor | None = None, v_scale: Tensor | None = None) -> None:
    kernel_for("store_kv_cache", k)(k, v, k_cache, v_cache, slot_mapping, k_scale=k_scale, v_scale=v_scale)
