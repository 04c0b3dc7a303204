"""CUDA repacking of GPTQ and AWQ checkpoint weights into the Marlin tile layout that
``gptq_marlin_gemm`` reads (layout: ``mllm_kernel/include/mllm_kernel/marlin.hpp``; kernel:
``mllm_kernel/cuda/csrc/marlin_repack.cuh``). Public names: ``gptq_marlin_repack`` and
``awq_marlin_repack``, also at ``mllm_kernel.cuda.jit.{gptq,awq}_marlin_repack``. CPU tensors
are repacked by the CPU module, so the same names prepare a layer for either device.
"""

from __future__ import annotations

import torch

from mllm_kernel.jit_utils import KernelTable, jit_module
from mllm_kernel.jit_utils import precompile as jit_precompile
from mllm_kernel.op_args import marlin_perm, marlin_repack_out

_MODULE = jit_module("marlin_repack", device="cuda", cuda_files=["marlin_repack.cuh"],
                     cuda_wrappers=[("gptq_marlin_repack", "gptq_marlin_repack"),
                                    ("awq_marlin_repack", "awq_marlin_repack")])
_GPTQ = KernelTable("gptq_marlin_repack", _MODULE, arg="b_q_weight")
_AWQ = KernelTable("awq_marlin_repack", _MODULE, arg="b_q_weight")


def precompile(*, wait: bool = True):
    """Builds (or loads) the module now; see ``jit_utils.precompile``."""
    return jit_precompile(_GPTQ, wait=wait)


def _on_cpu(weight) -> bool:
    """CPU tensors go to the CPU repacks (``mllm_kernel.cpu.jit.gptq_marlin``), same results."""
    return isinstance(weight, torch.Tensor) and weight.device.type == "cpu"


def gptq_marlin_repack(b_q_weight: torch.Tensor, perm: torch.Tensor | None, size_k: int, size_n: int,
                       num_bits: int) -> torch.Tensor:
    """GPTQ weights ``[size_k * num_bits / 32, size_n]`` int32 (values packed along K, lowest
    bits first) to Marlin's ``[size_k / 16, size_n * 16 * num_bits / 32]`` int32. ``perm``
    (int32 or int64 ``[size_k]``, or empty/None) reorders K first: row k of the result is row
    ``perm[k]`` of the checkpoint (GPTQ act-order, with ``perm = argsort(g_idx)``); its values
    are checked (one sync). size_k a multiple of 16, size_n of 64, num_bits 4 or 8."""
    if _on_cpu(b_q_weight):
        from mllm_kernel.cpu.jit.gptq_marlin import gptq_marlin_repack as cpu_repack

        return cpu_repack(b_q_weight, perm, size_k, size_n, num_bits)
    op = "gptq_marlin_repack"
    size_k, size_n, num_bits, out = marlin_repack_out(op, b_q_weight, size_k, size_n, num_bits)
    _GPTQ[None](b_q_weight, marlin_perm(op, perm, size_k, out.device), out, size_k, size_n, num_bits)
    return out


def awq_marlin_repack(b_q_weight: torch.Tensor, size_k: int, size_n: int, num_bits: int) -> torch.Tensor:
    """AWQ weights ``[size_k, size_n * num_bits / 32]`` int32 (values packed along N in AWQ's
    interleaved order 0, 2, 4, 6, 1, 3, 5, 7) to Marlin's ``[size_k / 16, size_n * 16 *
    num_bits / 32]`` int32. size_k a multiple of 16, size_n of 64, num_bits 4 or 8."""
    if _on_cpu(b_q_weight):
        from mllm_kernel.cpu.jit.gptq_marlin import awq_marlin_repack as cpu_repack

        return cpu_repack(b_q_weight, size_k, size_n, num_bits)
    op = "awq_marlin_repack"
    size_k, size_n, num_bits, out = marlin_repack_out(op, b_q_weight, size_k, size_n, num_bits)
    _AWQ[None](b_q_weight, out, size_k, size_n, num_bits)
    return out
