"""The JIT layer: compile a kernel on first call, load it from the disk cache afterwards.

Public API: ``jit_module`` and ``KernelTable`` (how every wrapper in the package declares its
modules and finds its functions), the ``@jit`` decorator, ``load_cpu_jit``, ``load_cuda_jit``,
``make_cpp_args``, ``cache_once``, ``precompile`` (build a family's modules ahead of its first
call), and the exceptions ``JitCompileError``, ``JitDisabledError`` and ``ToolchainNotFoundError``.
"""

from mllm_kernel.jit_utils.cache_once import cache_once
from mllm_kernel.jit_utils.cpp_args import make_cpp_args
from mllm_kernel.jit_utils.errors import JitCompileError, JitDisabledError, ToolchainNotFoundError
from mllm_kernel.jit_utils.jit import jit
from mllm_kernel.jit_utils.kernel_table import KernelTable
from mllm_kernel.jit_utils.load import load_cpu_jit, load_cuda_jit
from mllm_kernel.jit_utils.module import JitModule, jit_module
from mllm_kernel.jit_utils.paths import cache_root, prebuilt_dirs
from mllm_kernel.jit_utils.precompile import precompile
from mllm_kernel.jit_utils.registry import find_module, registered_kernels

__all__ = [
    "cache_once",
    "cache_root",
    "find_module",
    "jit",
    "jit_module",
    "JitCompileError",
    "JitDisabledError",
    "JitModule",
    "KernelTable",
    "load_cpu_jit",
    "load_cuda_jit",
    "make_cpp_args",
    "precompile",
    "prebuilt_dirs",
    "registered_kernels",
    "ToolchainNotFoundError",
]
