"""CUDA ``create_kv_indices``: the page-table gather that builds flashinfer's ``kv_indices``.

``kv_indices[kv_indptr[i] + j] = req_to_token[req_pool_indices[i], start_i + j]`` for every
request ``i`` and ``j < page_kernel_lens[i]``, with ``start_i = kv_start_idx[i]`` when that
tensor is given and non-empty, else 0. All int32 (``mllm_kernel/cuda/csrc/create_kv_indices.cuh``).
"""

from __future__ import annotations

import torch

from mllm_kernel.jit_utils import KernelTable, jit_module
from mllm_kernel.jit_utils import precompile as jit_precompile
from mllm_kernel.op_args import resolve_pdl, start_or_empty

_OP = "create_kv_indices"
_CREATE = KernelTable(_OP, jit_module(_OP, device="cuda", cuda_files=["create_kv_indices.cuh"],
                                      cuda_wrappers=[(_OP, "create_kv_indices")]), arg="kv_indices")


def precompile(*, wait: bool = True):
    """Builds (or loads) the module now; see ``jit_utils.precompile``."""
    return jit_precompile(_CREATE, wait=wait)


def _check_requests(req_to_token, req_pool_indices, page_kernel_lens, kv_indptr, kv_start_idx, kv_indices):
    """ValueError naming the first request that would leave req_to_token or kv_indices (the
    kernel's own messages). One device-to-host sync, more only when a request is bad; tensors
    the kernel's checks will refuse anyway (types, dtypes, shapes, devices) are left to them."""
    tensors = (req_to_token, req_pool_indices, page_kernel_lens, kv_indptr, kv_start_idx, kv_indices)
    if not all(isinstance(t, torch.Tensor) and t.dtype == torch.int32 for t in tensors):
        return
    if len({t.device for t in tensors}) != 1 or req_to_token.dim() != 2 or req_to_token.stride(1) != 1:
        return
    batch = req_pool_indices.numel()
    if any(t.dim() != 1 for t in tensors[1:]) or page_kernel_lens.numel() != batch or kv_indptr.numel() < batch:
        return
    if kv_start_idx.numel() not in (0, batch) or batch == 0:
        return
    rows, columns = req_to_token.shape
    row, length = req_pool_indices.long(), page_kernel_lens.long()
    first = kv_start_idx.long() if kv_start_idx.numel() else torch.zeros_like(length)
    at = kv_indptr[:batch].long()
    bad = (row < 0) | (row >= rows) | (length < 0) | (first < 0) | (first + length > columns) | (at < 0)
    bad |= at + length > kv_indices.numel()
    if not bool(bad.any()):
        return
    i = int(torch.nonzero(bad)[0, 0])
    r, n, s, a = int(row[i]), int(length[i]), int(first[i]), int(at[i])
    if not 0 <= r < rows:
        message = f"req_pool_indices[{i}] = {r} is out of range for req_to_token with {rows} rows"
    elif n < 0:
        message = f"page_kernel_lens[{i}] = {n} is negative"
    elif s < 0 or s + n > columns:
        message = f"request {i} reads columns [{s}, {s + n}) of req_to_token, which has {columns}"
    else:
        message = f"request {i} writes kv_indices[{a}, {a + n}), which has {kv_indices.numel()} entries"
    raise ValueError(f"{_OP}: {message}")


def create_kv_indices(
    req_to_token: torch.Tensor,
    req_pool_indices: torch.Tensor,
    page_kernel_lens: torch.Tensor,
    kv_indptr: torch.Tensor,
    kv_start_idx: torch.Tensor | None,
    kv_indices: torch.Tensor,
    *,
    validate: bool = True,
    enable_pdl: bool | None = None,
) -> None:
    """Fills ``kv_indices`` in place (see the module docstring).

    ``req_to_token``: int32 ``[pool_size, max_context_len]`` (any row stride);
    ``req_pool_indices``, ``page_kernel_lens``: int32 ``[batch]``; ``kv_indptr``: int32
    ``[>= batch]`` (usually ``[batch + 1]``); ``kv_start_idx``: int32 ``[batch]``, empty or None;
    ``kv_indices``: int32 ``[N]``, written at ``kv_indptr[i] .. kv_indptr[i] + len_i`` only.

    The kernel never reads or writes outside these tensors: a request that would is skipped.
    With ``validate=True`` (the default) the wrapper first checks the values on the device and
    reads one flag back (a device-to-host sync), raising ValueError naming the first bad
    request, with nothing written. Serving loops that guarantee their indices pass
    ``validate=False``; validation is skipped while a CUDA graph is being captured.
    """
    kv_start_idx = start_or_empty(kv_start_idx, page_kernel_lens)
    if validate and not torch.cuda.is_current_stream_capturing():
        _check_requests(req_to_token, req_pool_indices, page_kernel_lens, kv_indptr, kv_start_idx, kv_indices)
    _CREATE[None](req_to_token, req_pool_indices, page_kernel_lens, kv_indptr, kv_start_idx, kv_indices,
                  resolve_pdl(enable_pdl))
