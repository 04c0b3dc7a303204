"""CPU kernels (Highway SIMD), compiled on first call."""

from mllm_kernel.cpu.jit.add_constant import add_constant, add_constant_runtime

__all__ = ["add_constant", "add_constant_runtime"]
