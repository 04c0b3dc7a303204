"""mllm-kernel: JIT-compiled C++ kernels (CUDA and Highway CPU) for LLM inference, called from PyTorch.

Importing the package is cheap: the kernels compile on first call (see ``mllm_kernel.jit_utils``)
and load from ``~/.cache/mllm_kernel`` afterwards.
"""

__version__ = "0.1.0"
