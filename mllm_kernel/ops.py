"""Device-dispatching public ops: each runs the CPU or CUDA kernel matching its tensors' device.

    from mllm_kernel import ops
    y = ops.rmsnorm(x, w)           # x on CPU -> Highway kernel, on CUDA -> CUDA kernel

The device-specific packages (``mllm_kernel.cpu.jit``, ``mllm_kernel.cuda.jit``) hold the
kernels and document their arguments; this module only picks one. In eager mode it calls the
kernel directly (no custom-op dispatch); while ``torch.compile`` traces, it calls the same op
through ``torch.ops.mllm_kernel`` (see ``custom_ops``), so compiled graphs have no breaks. Ops
without a kernel for a device raise NotImplementedError saying so; inputs that require grad are
refused (the kernels have no backward). NumPy, CuPy and JAX arrays are accepted through DLPack
and results come back in the caller's framework (see ``interop``).
"""

from __future__ import annotations

import torch

from mllm_kernel import custom_ops  # noqa: F401  (registers torch.ops.mllm_kernel.*)
from mllm_kernel.interop import call_with_arrays
from mllm_kernel.ops_dispatch import kernel_for, refuse_grad

_compiling = torch.compiler.is_compiling
_grad_enabled = torch.is_grad_enabled
_library = torch.ops.mllm_kernel


def _into(out: torch.Tensor | None, result: torch.Tensor) -> torch.Tensor:
    """``result``, or ``out`` filled with it when the caller gave one (the traced path)."""
    if out is None:
        return result
    out.copy_(result)
    return out


def rmsnorm(input: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6, out: torch.Tensor | None = None):
    """RMSNorm over the last dimension: ``input * rsqrt(mean(input^2) + eps) * weight``."""
    if not isinstance(input, torch.Tensor):
        return call_with_arrays(rmsnorm, (), input=input, weight=weight, eps=eps, out=out)
    if _compiling():
        return _into(out, _library.rmsnorm(input, weight, eps))
    if _grad_enabled() and (input.requires_grad or weight.requires_grad):
        refuse_grad("rmsnorm")
    return kernel_for("rmsnorm", input)(input, weight, eps, out=out)


def fused_add_rmsnorm(input: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> None:
    """In place: ``residual += input``; ``input = rmsnorm(residual) * weight``."""
    if not isinstance(input, torch.Tensor):
        return call_with_arrays(fused_add_rmsnorm, ("input", "residual"), input=input, residual=residual,
                                weight=weight, eps=eps)
    if _compiling():
        return _library.fused_add_rmsnorm(input, residual, weight, eps)
    if _grad_enabled() and (input.requires_grad or residual.requires_grad or weight.requires_grad):
        refuse_grad("fused_add_rmsnorm")
    return kernel_for("fused_add_rmsnorm", input)(input, residual, weight, eps)


def qknorm(q: torch.Tensor, k: torch.Tensor, q_weight: torch.Tensor, k_weight: torch.Tensor,
           eps: float = 1e-6) -> None:
    """In place RMSNorm of every head of q [T, Hq, D] and k [T, Hk, D] over head_dim."""
    if not isinstance(q, torch.Tensor):
        return call_with_arrays(qknorm, ("q", "k"), q=q, k=k, q_weight=q_weight, k_weight=k_weight, eps=eps)
    if _compiling():
        return _library.qknorm(q, k, q_weight, k_weight, eps)
    if _grad_enabled() and (q.requires_grad or k.requires_grad or q_weight.requires_grad or k_weight.requires_grad):
        refuse_grad("qknorm")
    return kernel_for("qknorm", q)(q, k, q_weight, k_weight, eps)


def qknorm_across_heads(q: torch.Tensor, k: torch.Tensor, q_weight: torch.Tensor, k_weight: torch.Tensor,
                        eps: float = 1e-6) -> None:
    """In place RMSNorm of each token of q and k over all its heads together (weights of size H*D)."""
    if not isinstance(q, torch.Tensor):
        return call_with_arrays(qknorm_across_heads, ("q", "k"), q=q, k=k, q_weight=q_weight, k_weight=k_weight,
                                eps=eps)
    if _compiling():
        return _library.qknorm_across_heads(q, k, q_weight, k_weight, eps)
    if _grad_enabled() and (q.requires_grad or k.requires_grad or q_weight.requires_grad or k_weight.requires_grad):
        refuse_grad("qknorm_across_heads")
    return kernel_for("qknorm_across_heads", q)(q, k, q_weight, k_weight, eps)


def silu_and_mul(input: torch.Tensor, out: torch.Tensor | None = None):
    """``silu(x[..., :d]) * x[..., d:]`` for input [..., 2d]."""
    if not isinstance(input, torch.Tensor):
        return call_with_arrays(silu_and_mul, (), input=input, out=out)
    if _compiling():
        return _into(out, _library.silu_and_mul(input))
    if _grad_enabled() and (input.requires_grad):
        refuse_grad("silu_and_mul")
    return kernel_for("silu_and_mul", input)(input, out=out)


def gelu_and_mul(input: torch.Tensor, approximate: str = "none", out: torch.Tensor | None = None):
    """``gelu(x[..., :d], approximate) * x[..., d:]`` for input [..., 2d]."""
    if not isinstance(input, torch.Tensor):
        return call_with_arrays(gelu_and_mul, (), input=input, approximate=approximate, out=out)
    if _compiling():
        return _into(out, _library.gelu_and_mul(input, approximate))
    if _grad_enabled() and (input.requires_grad):
        refuse_grad("gelu_and_mul")
    return kernel_for("gelu_and_mul", input)(input, approximate=approximate, out=out)


def apply_rope(positions: torch.Tensor, q: torch.Tensor, k: torch.Tensor, cos_sin_cache: torch.Tensor,
               is_neox: bool = True) -> None:
    """In place rotary embedding of q [T, Hq, D] and k [T, Hk, D] (NeoX or GPT-J layout, partial rotary)."""
    if not isinstance(positions, torch.Tensor):
        return call_with_arrays(apply_rope, ("q", "k"), positions=positions, q=q, k=k, cos_sin_cache=cos_sin_cache,
                                is_neox=is_neox)
    if _compiling():
        return _library.apply_rope(positions, q, k, cos_sin_cache, is_neox)
    if _grad_enabled() and (q.requires_grad or k.requires_grad or cos_sin_cache.requires_grad):
        refuse_grad("apply_rope")
    return kernel_for("apply_rope", q)(positions, q, k, cos_sin_cache, is_neox=is_neox)


def softmax(input: torch.Tensor, dim: int = -1, out: torch.Tensor | None = None):
    """Softmax over the last dimension."""
    if not isinstance(input, torch.Tensor):
        return call_with_arrays(softmax, (), input=input, dim=dim, out=out)
    if _compiling():
        return _into(out, _library.softmax(input, dim))
    if _grad_enabled() and (input.requires_grad):
        refuse_grad("softmax")
    return kernel_for("softmax", input)(input, dim=dim, out=out)


def per_tensor_quant_fp8(input: torch.Tensor, scale: torch.Tensor | None = None):
    """FP8 (e4m3) quantization with one scale: dynamic (from the absolute maximum) or given."""
    if not isinstance(input, torch.Tensor):
        return call_with_arrays(per_tensor_quant_fp8, (), input=input, scale=scale)
    if _compiling():
        return _library.per_tensor_quant_fp8(input, scale)
    if _grad_enabled() and (input.requires_grad):
        refuse_grad("per_tensor_quant_fp8")
    return kernel_for("per_tensor_quant_fp8", input)(input, scale=scale)


def per_token_quant_fp8(input: torch.Tensor):
    """FP8 (e4m3) quantization with one scale per row; returns (output, scales [T, 1])."""
    if not isinstance(input, torch.Tensor):
        return call_with_arrays(per_token_quant_fp8, (), input=input)
    if _compiling():
        return _library.per_token_quant_fp8(input)
    if _grad_enabled() and (input.requires_grad):
        refuse_grad("per_token_quant_fp8")
    return kernel_for("per_token_quant_fp8", input)(input)


def per_token_quant_int8(input: torch.Tensor):
    """INT8 quantization with one scale per row; returns (output, scales [T, 1])."""
    if not isinstance(input, torch.Tensor):
        return call_with_arrays(per_token_quant_int8, (), input=input)
    if _compiling():
        return _library.per_token_quant_int8(input)
    if _grad_enabled() and (input.requires_grad):
        refuse_grad("per_token_quant_int8")
    return kernel_for("per_token_quant_int8", input)(input)


def per_token_group_quant_fp8(input: torch.Tensor, group_size: int = 128, eps: float = 1e-10,
                              column_major_scales: bool = False, scale_ue8m0: bool = False):
    """FP8 (e4m3) quantization with one scale per group of ``group_size`` features of a row."""
    if not isinstance(input, torch.Tensor):
        return call_with_arrays(per_token_group_quant_fp8, (), input=input, group_size=group_size, eps=eps,
                                column_major_scales=column_major_scales, scale_ue8m0=scale_ue8m0)
    if _compiling():
        return _library.per_token_group_quant_fp8(input, group_size, eps, column_major_scales, scale_ue8m0)
    if _grad_enabled() and (input.requires_grad):
        refuse_grad("per_token_group_quant_fp8")
    return kernel_for("per_token_group_quant_fp8", input)(input, group_size=group_size, eps=eps,
                                                          column_major_scales=column_major_scales,
                                                          scale_ue8m0=scale_ue8m0)


def per_token_group_quant_int8(input: torch.Tensor, group_size: int = 128, eps: float = 1e-10):
    """INT8 quantization with one scale per group of ``group_size`` features of a row."""
    if not isinstance(input, torch.Tensor):
        return call_with_arrays(per_token_group_quant_int8, (), input=input, group_size=group_size, eps=eps)
    if _compiling():
        return _library.per_token_group_quant_int8(input, group_size, eps)
    if _grad_enabled() and (input.requires_grad):
        refuse_grad("per_token_group_quant_int8")
    return kernel_for("per_token_group_quant_int8", input)(input, group_size=group_size, eps=eps)


def store_kv_cache(k: torch.Tensor, v: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                   slot_mapping: torch.Tensor, k_scale: torch.Tensor | None = None,
                   v_scale: torch.Tensor | None = None) -> None:
    """Scatter k, v [T, H, D] into the caches [num_slots, H, D] at slot_mapping [T] (negative: skip).
    With k_scale and v_scale (float32 [1]) the caches are float8_e4m3fn holding k / k_scale, v / v_scale."""
    if not isinstance(k, torch.Tensor):
        return call_with_arrays(store_kv_cache, ("k_cache", "v_cache"), k=k, v=v, k_cache=k_cache, v_cache=v_cache,
                                slot_mapping=slot_mapping, k_scale=k_scale, v_scale=v_scale)
    if _compiling():
        return _library.store_kv_cache(k, v, k_cache, v_cache, slot_mapping, k_scale, v_scale)
    return kernel_for("store_kv_cache", k)(k, v, k_cache, v_cache, slot_mapping, k_scale=k_scale, v_scale=v_scale)


__all__ = [
    "apply_rope", "fused_add_rmsnorm", "gelu_and_mul", "per_tensor_quant_fp8", "per_token_group_quant_fp8",
    "per_token_group_quant_int8", "per_token_quant_fp8", "per_token_quant_int8", "qknorm", "qknorm_across_heads",
    "rmsnorm", "silu_and_mul", "softmax", "store_kv_cache",
]
