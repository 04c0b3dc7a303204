"""CPU ``create_kv_indices``: the page-table gather that builds flashinfer's ``kv_indices``
(the CUDA wrapper's docstring has the formula). Every request is checked against its buffers
before anything is written; requests split over the module's thread pool."""

from __future__ import annotations

import torch

from mllm_kernel.cpu.jit._threads import num_threads
from mllm_kernel.jit_utils import KernelTable, jit_module
from mllm_kernel.jit_utils import precompile as jit_precompile
from mllm_kernel.op_args import start_or_empty

_OP = "create_kv_indices"
_CREATE = KernelTable(_OP, jit_module(f"cpu_{_OP}", device="cpu", cpp_files=["create_kv_indices.cpp"],
                                      cpp_wrappers=[(_OP, "mllm_kernel::cpu::create_kv_indices")]), arg="kv_indices")


def precompile(*, wait: bool = True):
    """Builds (or loads) the module now; see ``jit_utils.precompile``."""
    return jit_precompile(_CREATE, wait=wait)


def create_kv_indices(
    req_to_token: torch.Tensor,
    req_pool_indices: torch.Tensor,
    page_kernel_lens: torch.Tensor,
    kv_indptr: torch.Tensor,
    kv_start_idx: torch.Tensor | None,
    kv_indices: torch.Tensor,
) -> None:
    """Fills ``kv_indices`` in place: ``kv_indices[kv_indptr[i] + j] =
    req_to_token[req_pool_indices[i], start_i + j]`` for ``j < page_kernel_lens[i]``, ``start_i``
    from ``kv_start_idx`` when given and non-empty, else 0. All int32; a request that would leave
    ``req_to_token`` or ``kv_indices`` raises ValueError with nothing written."""
    kv_start_idx = start_or_empty(kv_start_idx, page_kernel_lens)
    _CREATE[None](req_to_token, req_pool_indices, page_kernel_lens, kv_indptr, kv_start_idx, kv_indices,
                  num_threads())
