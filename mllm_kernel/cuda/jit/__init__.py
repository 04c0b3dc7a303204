"""CUDA kernels, compiled with nvcc on first call. Importing needs no GPU."""

from mllm_kernel.cuda.jit.activation import gelu_and_mul, silu_and_mul
from mllm_kernel.cuda.jit.add_constant import add_constant
from mllm_kernel.cuda.jit.create_kv_indices import create_kv_indices
from mllm_kernel.cuda.jit.fp8_blockwise_scaled_mm_cutlass import fp8_blockwise_scaled_mm
from mllm_kernel.cuda.jit.fp8_scaled_mm_cutlass import fp8_scaled_mm
from mllm_kernel.cuda.jit.gdn_decode import gdn_decode
from mllm_kernel.cuda.jit.gdn_extend_chunkwise import gdn_extend_chunkwise
from mllm_kernel.cuda.jit.gptq_marlin import gptq_marlin_gemm
from mllm_kernel.cuda.jit.int8_scaled_mm_cutlass import int8_scaled_mm
from mllm_kernel.cuda.jit.kv_cache import store_kv_cache
# Through the submodules named like the functions, so that importing them later (the import
# paths serving code uses) cannot rebind these names to the modules.
from mllm_kernel.cuda.jit.awq_marlin_repack import awq_marlin_repack
from mllm_kernel.cuda.jit.gptq_marlin_repack import gptq_marlin_repack
from mllm_kernel.cuda.jit.norm import fused_add_rmsnorm, qknorm, qknorm_across_heads, rmsnorm
from mllm_kernel.cuda.jit.quant import (
    per_tensor_quant_fp8,
    per_token_group_quant_fp8,
    per_token_group_quant_int8,
    per_token_quant_fp8,
    per_token_quant_int8,
)
from mllm_kernel.cuda.jit.rms_norm_gated import rms_norm_gated
from mllm_kernel.cuda.jit.rope import apply_rope
from mllm_kernel.cuda.jit.store_cache import can_use_store_cache, store_cache

__all__ = [
    "add_constant",
    "apply_rope",
    "awq_marlin_repack",
    "can_use_store_cache",
    "create_kv_indices",
    "fp8_blockwise_scaled_mm",
    "fp8_scaled_mm",
    "fused_add_rmsnorm",
    "gdn_decode",
    "gdn_extend_chunkwise",
    "gelu_and_mul",
    "gptq_marlin_gemm",
    "gptq_marlin_repack",
    "int8_scaled_mm",
    "per_tensor_quant_fp8",
    "per_token_group_quant_fp8",
    "per_token_group_quant_int8",
    "per_token_quant_fp8",
    "per_token_quant_int8",
    "precompile",
    "qknorm",
    "qknorm_across_heads",
    "rms_norm_gated",
    "rmsnorm",
    "silu_and_mul",
    "store_cache",
    "store_kv_cache",
]


def precompile(*, wait: bool = True):
    """Builds (or loads) every CUDA module of the package now, several at a time: for an
    engine's start-up, so no first call waits for a compiler. Returns True when all are ready
    (False, with a warning per failure, otherwise); ``wait=False`` returns a Future of that."""
    from mllm_kernel.jit_utils.precompile import precompile_library

    return precompile_library("cuda", wait=wait)
