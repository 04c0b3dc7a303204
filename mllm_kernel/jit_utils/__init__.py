"""The JIT layer: compile a kernel on first call, load it from the disk cache afterwards.

Public API: ``jit``, ``load_cpu_jit``, ``load_cuda_jit``, ``make_cpp_args``, ``cache_once``,
and the exceptions ``JitCompileError`` and ``ToolchainNotFoundError``.
"""

from mllm_kernel.jit_utils.cache_once import cache_once
from mllm_kernel.jit_utils.compile import load_cpu_jit, load_cuda_jit
from mllm_kernel.jit_utils.cpp_args import make_cpp_args
from mllm_kernel.jit_utils.errors import JitCompileError, ToolchainNotFoundError
from mllm_kernel.jit_utils.jit import jit
from mllm_kernel.jit_utils.paths import cache_root
from mllm_kernel.jit_utils.registry import registered_kernels

__all__ = [
    "cache_once",
    "cache_root",
    "jit",
    "JitCompileError",
    "load_cpu_jit",
    "load_cuda_jit",
    "make_cpp_args",
    "registered_kernels",
    "ToolchainNotFoundError",
]
