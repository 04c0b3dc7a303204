"""Which KV-cache store a call asks for (shared by the CPU and CUDA wrappers): a plain copy into
caches of k's dtype, or, with ``k_scale`` and ``v_scale``, quantization into float8_e4m3fn
caches. The kernels check every tensor; this only turns a missing or half-given pair of scales
into a message that says what to pass."""

from __future__ import annotations

import torch


def wants_fp8_store(op: str, k: torch.Tensor, k_cache: torch.Tensor, k_scale, v_scale) -> bool:
    """True for the quantizing store (both scales given); False for the copy (neither given).

    Raises ValueError when only one scale is given, or when the caches are float8_e4m3fn, k is
    not, and the scales are missing."""
    if (k_scale is None) != (v_scale is None):
        raise ValueError(f"{op}: k_scale and v_scale go together: pass both (float8 cache) or neither")
    if k_scale is not None:
        return True
    cache_dtype = getattr(k_cache, "dtype", None)
    k_dtype = getattr(k, "dtype", None)
    if cache_dtype == torch.float8_e4m3fn and k_dtype not in (None, torch.float8_e4m3fn):
        raise ValueError(f"{op}: a float8_e4m3fn cache of {str(k_dtype).removeprefix('torch.')} k and v needs "
                         "k_scale and v_scale (float32 [1] tensors: the cache holds k / k_scale)")
    return False
