"""CPU gated DeltaNet: ``gdn_decode`` and ``gdn_extend_chunkwise`` with the arguments of the CUDA
ops (``mllm_kernel.cuda.jit.gdn_decode``), float32/float16/bfloat16 inputs and a float32 state
pool. Every cache index and ``cu_seqlens`` is checked before anything is written; (sequence,
value head) pairs split over the module's threads (``mllm_kernel/cpu/csrc/gdn.cpp``).
"""

from __future__ import annotations

import torch

from mllm_kernel.cpu.jit._threads import num_threads
from mllm_kernel.jit_utils import KernelTable, jit_module
from mllm_kernel.jit_utils import precompile as jit_precompile

_DECODE = KernelTable("gdn_decode", jit_module("cpu_gdn_decode", device="cpu", cpp_files=["gdn.cpp"],
                                               cpp_wrappers=[("gdn_decode", "mllm_kernel::cpu::gdn_decode")]), arg="q")
_EXTEND = KernelTable("gdn_extend_chunkwise",
                      jit_module("cpu_gdn_extend", device="cpu", cpp_files=["gdn.cpp"],
                                 cpp_wrappers=[("gdn_extend_chunkwise", "mllm_kernel::cpu::gdn_extend")]), arg="q")


def precompile(*, wait: bool = True):
    """Builds (or loads) both modules now; see ``jit_utils.precompile``."""
    return jit_precompile(_DECODE, _EXTEND, wait=wait)


def gdn_decode(q, k, v, a, b, A_log, dt_bias, state_pool, cache_indices) -> torch.Tensor:
    """One decode step; see ``mllm_kernel.cuda.jit.gdn_decode.gdn_decode``."""
    out = torch.empty(v.shape, dtype=v.dtype)
    _DECODE[q.dtype](q, k, v, a, b, A_log, dt_bias, state_pool, cache_indices, out, num_threads())
    return out


def gdn_extend_chunkwise(q, k, v, a, b, A_log, dt_bias, state_pool, cache_indices, cu_seqlens) -> torch.Tensor:
    """The sequences of ``cu_seqlens``; see ``mllm_kernel.cuda.jit.gdn_extend_chunkwise``."""
    out = torch.empty(v.shape, dtype=v.dtype)
    _EXTEND[q.dtype](q, k, v, a, b, A_log, dt_bias, state_pool, cache_indices, cu_seqlens, out, num_threads())
    return out
