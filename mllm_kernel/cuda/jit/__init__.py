"""CUDA kernels, compiled with nvcc on first call. Importing needs no GPU."""

from mllm_kernel.cuda.jit.add_constant import add_constant

__all__ = ["add_constant"]
