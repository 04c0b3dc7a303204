"""Device-dispatching public ops: each runs the CPU or CUDA kernel matching its tensors' device.

    from mllm_kernel import ops
    y = ops.rmsnorm(x, w)           # x on CPU -> Highway kernel, on CUDA -> CUDA kernel

The device-specific packages (``mllm_kernel.cpu.jit``, ``mllm_kernel.cuda.jit``) hold the
kernels and document their arguments; this module only picks one, so its call overhead is one
attribute lookup. Ops without a kernel for a device raise NotImplementedError saying so.
"""

from __future__ import annotations

import importlib
from types import ModuleType

import torch

_PACKAGES = {"cpu": "mllm_kernel.cpu.jit", "cuda": "mllm_kernel.cuda.jit"}
_loaded: dict[str, ModuleType] = {}


def _kernel(op: str, tensor: torch.Tensor):
    """The ``op`` function of the package for ``tensor``'s device."""
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"{op}: expected a torch.Tensor, got {type(tensor).__name__}")
    device = tensor.device.type
    package = _loaded.get(device)
    if package is None:
        if device not in _PACKAGES:
            raise ValueError(f"{op}: no kernels for device {tensor.device} (supported: cpu, cuda)")
        package = _loaded[device] = importlib.import_module(_PACKAGES[device])
    fn = getattr(package, op, None)
    if fn is None:
        raise NotImplementedError(f"{op}: mllm-kernel has no {device} kernel for this op yet")
    return fn


def rmsnorm(input: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6, out: torch.Tensor | None = None):
    """RMSNorm over the last dimension: ``input * rsqrt(mean(input^2) + eps) * weight``."""
    return _kernel("rmsnorm", input)(input, weight, eps, out=out)


def fused_add_rmsnorm(input: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> None:
    """In place: ``residual += input``; ``input = rmsnorm(residual) * weight``."""
    return _kernel("fused_add_rmsnorm", input)(input, residual, weight, eps)


def qknorm(q: torch.Tensor, k: torch.Tensor, q_weight: torch.Tensor, k_weight: torch.Tensor,
           eps: float = 1e-6) -> None:
    """In place RMSNorm of every head of q [T, Hq, D] and k [T, Hk, D] over head_dim."""
    return _kernel("qknorm", q)(q, k, q_weight, k_weight, eps)


def qknorm_across_heads(q: torch.Tensor, k: torch.Tensor, q_weight: torch.Tensor, k_weight: torch.Tensor,
                        eps: float = 1e-6) -> None:
    """In place RMSNorm of each token of q and k over all its heads together (weights of size H*D)."""
    return _kernel("qknorm_across_heads", q)(q, k, q_weight, k_weight, eps)


def silu_and_mul(input: torch.Tensor, out: torch.Tensor | None = None):
    """``silu(x[..., :d]) * x[..., d:]`` for input [..., 2d]."""
    return _kernel("silu_and_mul", input)(input, out=out)


def gelu_and_mul(input: torch.Tensor, approximate: str = "none", out: torch.Tensor | None = None):
    """``gelu(x[..., :d], approximate) * x[..., d:]`` for input [..., 2d]."""
    return _kernel("gelu_and_mul", input)(input, approximate=approximate, out=out)


def apply_rope(positions: torch.Tensor, q: torch.Tensor, k: torch.Tensor, cos_sin_cache: torch.Tensor,
               is_neox: bool = True) -> None:
    """In place rotary embedding of q [T, Hq, D] and k [T, Hk, D] (NeoX or GPT-J layout, partial rotary)."""
    return _kernel("apply_rope", q)(positions, q, k, cos_sin_cache, is_neox=is_neox)


def softmax(input: torch.Tensor, dim: int = -1, out: torch.Tensor | None = None):
    """Softmax over the last dimension."""
    return _kernel("softmax", input)(input, dim=dim, out=out)


def per_tensor_quant_fp8(input: torch.Tensor, scale: torch.Tensor | None = None, out: torch.Tensor | None = None):
    """FP8 (e4m3) quantization with one scale: dynamic (from the absolute maximum) or given."""
    return _kernel("per_tensor_quant_fp8", input)(input, scale=scale, out=out)


def per_token_quant_fp8(input: torch.Tensor, out: torch.Tensor | None = None):
    """FP8 (e4m3) quantization with one scale per row; returns (output, scales [T, 1])."""
    return _kernel("per_token_quant_fp8", input)(input, out=out)


def per_token_quant_int8(input: torch.Tensor):
    """INT8 quantization with one scale per row; returns (output, scales [T, 1])."""
    return _kernel("per_token_quant_int8", input)(input)


def per_token_group_quant_fp8(input: torch.Tensor, group_size: int = 128, eps: float = 1e-10,
                              column_major_scales: bool = False, scale_ue8m0: bool = False):
    """FP8 (e4m3) quantization with one scale per group of ``group_size`` features of a row."""
    return _kernel("per_token_group_quant_fp8", input)(input, group_size=group_size, eps=eps,
                                                       column_major_scales=column_major_scales,
                                                       scale_ue8m0=scale_ue8m0)


def per_token_group_quant_int8(input: torch.Tensor, group_size: int = 128, eps: float = 1e-10):
    """INT8 quantization with one scale per group of ``group_size`` features of a row."""
    return _kernel("per_token_group_quant_int8", input)(input, group_size=group_size, eps=eps)


def store_kv_cache(k: torch.Tensor, v: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                   slot_mapping: torch.Tensor) -> None:
    """Scatter k, v [T, H, D] into the caches [num_slots, H, D] at slot_mapping [T] (negative: skip)."""
    return _kernel("store_kv_cache", k)(k, v, k_cache, v_cache, slot_mapping)


__all__ = [
    "apply_rope", "fused_add_rmsnorm", "gelu_and_mul", "per_tensor_quant_fp8", "per_token_group_quant_fp8",
    "per_token_group_quant_int8", "per_token_quant_fp8", "per_token_quant_int8", "qknorm", "qknorm_across_heads",
    "rmsnorm", "silu_and_mul", "softmax", "store_kv_cache",
]
