"""CPU kernels (Highway SIMD, multithreaded on one reusable pool per module), compiled on first call."""

from mllm_kernel.cpu.jit.activation import gelu_and_mul, silu_and_mul
from mllm_kernel.cpu.jit.add_constant import add_constant, add_constant_runtime
from mllm_kernel.cpu.jit.create_kv_indices import create_kv_indices
from mllm_kernel.cpu.jit.gdn import gdn_decode, gdn_extend_chunkwise
from mllm_kernel.cpu.jit.gptq_marlin import awq_marlin_repack, gptq_marlin_gemm, gptq_marlin_repack
from mllm_kernel.cpu.jit.int8_scaled_mm import int8_scaled_mm
from mllm_kernel.cpu.jit.kv_cache import store_kv_cache
from mllm_kernel.cpu.jit.norm import fused_add_rmsnorm, qknorm, qknorm_across_heads, rmsnorm
from mllm_kernel.cpu.jit.quant import per_token_group_quant_fp8, per_token_group_quant_int8, per_token_quant_int8
from mllm_kernel.cpu.jit.rms_norm_gated import rms_norm_gated
from mllm_kernel.cpu.jit.rope import apply_rope
from mllm_kernel.cpu.jit.store_cache import can_use_store_cache, store_cache
from mllm_kernel.cpu.jit.softmax import softmax

__all__ = [
    "add_constant",
    "add_constant_runtime",
    "apply_rope",
    "awq_marlin_repack",
    "can_use_store_cache",
    "create_kv_indices",
    "fused_add_rmsnorm",
    "gdn_decode",
    "gdn_extend_chunkwise",
    "gelu_and_mul",
    "gptq_marlin_gemm",
    "gptq_marlin_repack",
    "int8_scaled_mm",
    "per_token_group_quant_fp8",
    "per_token_group_quant_int8",
    "per_token_quant_int8",
    "precompile",
    "qknorm",
    "qknorm_across_heads",
    "rms_norm_gated",
    "rmsnorm",
    "silu_and_mul",
    "softmax",
    "store_cache",
    "store_kv_cache",
]


def precompile(*, wait: bool = True):
    """Builds (or loads) every CPU module of the package now, several at a time: for an
    engine's start-up, so no first call waits for a compiler. Returns True when all are ready
    (False, with a warning per failure, otherwise); ``wait=False`` returns a Future of that."""
    from mllm_kernel.jit_utils.precompile import precompile_library

    return precompile_library("cpu", wait=wait)
