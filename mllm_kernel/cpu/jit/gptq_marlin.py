"""CPU ``gptq_marlin_gemm``, ``gptq_marlin_repack`` and ``awq_marlin_repack``: the weight-only
quantized GEMM on Marlin-format weights with the CUDA functions' signatures, so that serving
code prepares a layer once and runs it on either device (format:
``mllm_kernel/include/mllm_kernel/marlin.hpp``; body: ``mllm_kernel/cpu/marlin_gemm.hpp``).

The CPU GEMM takes the CUDA one's weight types (``uint4b8``, GPTQ 4-bit; ``uint4`` with zero
points, AWQ; ``uint8b128``, GPTQ 8-bit) with channel-wise, grouped or act-order scales, and
float16, bfloat16 or float32 activations; the repacks take 4 and 8 bits like CUDA's. Any M (the
speed is tuned for decode, M of a few rows).
"""

from __future__ import annotations

import torch

from mllm_kernel.cpu.jit._threads import num_threads
from mllm_kernel.jit_utils import KernelTable, jit_module
from mllm_kernel.jit_utils import precompile as jit_precompile
from mllm_kernel.op_args import marlin_gemm_operands, marlin_perm, marlin_repack_out
from mllm_kernel.scalar_type import scalar_types

_OP = "gptq_marlin_gemm"
DTYPES = (torch.float16, torch.bfloat16, torch.float32)
#: Weight types the CPU GEMM takes: type id -> (bits, whether zero points come with it).
WEIGHT_TYPES = {scalar_types.uint4b8.id: (4, False), scalar_types.uint4.id: (4, True),
                scalar_types.uint8b128.id: (8, False)}

_MODULE = jit_module("cpu_marlin", device="cpu", cpp_files=["marlin.cpp"],
                     cpp_wrappers=[("marlin_gemm", "mllm_kernel::cpu::marlin_gemm"),
                                   ("gptq_marlin_repack", "mllm_kernel::cpu::gptq_marlin_repack"),
                                   ("awq_marlin_repack", "mllm_kernel::cpu::awq_marlin_repack")])
_GEMM = KernelTable(_OP, _MODULE, arg="a", export="marlin_gemm")
_GPTQ = KernelTable("gptq_marlin_repack", _MODULE, arg="b_q_weight", export="gptq_marlin_repack")
_AWQ = KernelTable("awq_marlin_repack", _MODULE, arg="b_q_weight", export="awq_marlin_repack")


def precompile(*, wait: bool = True):
    """Builds (or loads) the module now; see ``jit_utils.precompile``."""
    return jit_precompile(_GEMM, wait=wait)


def gptq_marlin_gemm(a: torch.Tensor, c: torch.Tensor | None, b_q_weight: torch.Tensor, b_scales: torch.Tensor,
                     global_scale: torch.Tensor | None, b_zeros: torch.Tensor | None, g_idx: torch.Tensor | None,
                     perm: torch.Tensor | None, workspace: torch.Tensor | None, b_q_type_id: int, size_m: int,
                     size_n: int, size_k: int, is_k_full: bool = True, use_atomic_add: bool = False,
                     use_fp32_reduce: bool = False, is_zp_float: bool = False) -> torch.Tensor:
    """``c[size_m, size_n] = a @ dequant(b_q_weight)`` on CPU tensors; returns c (allocated when
    None). The arguments mean what they mean for ``mllm_kernel.cuda.jit.gptq_marlin_gemm``
    (``uint4b8``, ``uint4`` with ``b_zeros``, ``uint8b128``), with float32 activations allowed
    too. ``workspace``, ``is_k_full``, ``use_atomic_add`` and
    ``use_fp32_reduce`` are accepted and not needed (sums are float32)."""
    a, c, zeros, bits = marlin_gemm_operands(_OP, a, c, global_scale, b_zeros, perm, b_q_type_id, size_m, size_n,
                                             size_k, is_zp_float, DTYPES, "cpu", WEIGHT_TYPES)
    g_idx = g_idx if g_idx is not None and g_idx.numel() > 0 else torch.empty(0, dtype=torch.int32)
    _GEMM[None](a, c, b_q_weight, b_scales, zeros, g_idx, size_m, size_n, size_k, bits, num_threads())
    return c


def gptq_marlin_repack(b_q_weight: torch.Tensor, perm: torch.Tensor | None, size_k: int, size_n: int,
                       num_bits: int) -> torch.Tensor:
    """As ``mllm_kernel.cuda.jit.gptq_marlin_repack``, on CPU tensors (4 or 8 bits)."""
    op = "gptq_marlin_repack"
    size_k, size_n, num_bits, out = marlin_repack_out(op, b_q_weight, size_k, size_n, num_bits)
    _GPTQ[None](b_q_weight, marlin_perm(op, perm, size_k, out.device), out, size_k, size_n, num_bits, num_threads())
    return out


def awq_marlin_repack(b_q_weight: torch.Tensor, size_k: int, size_n: int, num_bits: int) -> torch.Tensor:
    """As ``mllm_kernel.cuda.jit.awq_marlin_repack``, on CPU tensors (4 or 8 bits)."""
    op = "awq_marlin_repack"
    size_k, size_n, num_bits, out = marlin_repack_out(op, b_q_weight, size_k, size_n, num_bits)
    _AWQ[None](b_q_weight, out, size_k, size_n, num_bits, num_threads())
    return out
