"""CUDA ``gdn_extend_chunkwise``: gated DeltaNet over whole sequences (prefill, or extending
cached sequences), each starting from and writing back its state in a pool; the upstream
package's entry point. Kernel: ``gdn_extend`` in ``mllm_kernel/cuda/csrc/gdn.cuh``, one module
per dtype (float16, bfloat16), head_k_dim (64, 128) and block height of the chunked state pass
(``chunk_rows``), so that a first call compiles the kernels it runs only.
"""

from __future__ import annotations

import torch

from mllm_kernel.cuda.jit.device_info import block_smem, sm_count
from mllm_kernel.cuda.jit.gdn_decode import HALF_DTYPES, gdn_module
from mllm_kernel.jit_utils import KernelTable
from mllm_kernel.jit_utils import precompile as jit_precompile
from mllm_kernel.op_args import check_gdn_indices, resolve_pdl

_OP = "gdn_extend_chunkwise"
# Sequences of at least this many tokens run through the chunked (tensor-core) kernels, shorter
# ones through the recurrent kernel, which has less fixed work a sequence.
CHUNKED_MIN_TOKENS = 64
# The chunked kernels' geometry (mllm_kernel/impl/gdn_chunk.cuh): tokens a chunk, and the
# float32 workspace of one chunk of one head (T and P, 64 x 64 each, and 8 factors a token).
CHUNK = 64
CHUNK_WORK_FLOATS = 2 * CHUNK * CHUNK + 8 * CHUNK


def chunk_workspace(tokens: int, num_seqs: int, num_v_heads: int, device) -> torch.Tensor:
    """The chunked kernels' workspace for a call: a slot per chunk any sequence can have
    (``num_seqs + tokens // CHUNK + 1``), empty when no sequence can be chunked."""
    slots = num_seqs + tokens // CHUNK + 1 if tokens >= CHUNKED_MIN_TOKENS else 0
    return torch.empty((slots, num_v_heads, CHUNK_WORK_FLOATS), dtype=torch.float32, device=device)

HEAD_K_DIMS = (64, 128)
#: Value rows of a head that a block of the chunked state pass holds (csrc/gdn.cuh's kRows).
CHUNK_ROWS = (32, 64)
#: The modules by (head_k_dim, rows), then dtype.
_EXTEND = {(dk, rows): KernelTable(_OP, {dtype: gdn_module(_OP, "gdn_extend", dtype, dk, rows)
                                         for dtype in HALF_DTYPES}, arg="q")
           for dk in HEAD_K_DIMS for rows in CHUNK_ROWS}


def chunk_smem_bytes(head_k_dim: int, rows: int) -> int:
    """Shared memory of a block of the chunked state pass (``ChunkSmem`` in
    mllm_kernel/impl/gdn_chunked.cuh: the block's state rows, k, q or k^T, T, P, O, its rows of
    v^T and U^T, and 32 bytes of factors a token; rows padded by 4 floats; 128-byte aligned)."""
    ld_k, ld_c = head_k_dim + 4, CHUNK + 4
    floats = (rows * ld_k + CHUNK * ld_k + max(CHUNK * ld_k, head_k_dim * ld_c) + 3 * CHUNK * ld_c
              + 2 * rows * ld_c)
    return -(-(4 * floats + 32 * CHUNK) // 128) * 128


def chunk_rows(num_seqs: int, num_v_heads: int, head_v_dim: int, sm_count: int, head_k_dim: int = 128,
               block_smem: int | None = None) -> int:
    """Value rows a block of the chunked state pass takes: 64, or 32 where blocks of 64 rows (one
    a sequence, head and 64 value rows) would fill half the SMs or less. A block walks its
    sequence's chunks one after another, each chunk a chain of dependent products, so with so
    few blocks, twice as many of half the rows finish sooner; with more, the halves' shared work
    (staging each chunk's keys and queries) costs more than it saves. H100, 32 heads of 128 x
    128, against 64 rows, outputs bit-identical: one sequence of 1024 / 4096 tokens 1.26x /
    1.30x (4096: 626 -> 480 µs), 2 to 16 sequences 0.77-0.79x.

    Also 32 wherever a block may not take the shared memory of 64 rows (``block_smem``, the
    GPU's opt-in limit: an A100 or Jetson Orin at head_k_dim 128, 187 KB against 163), which
    would leave every sequence to the recurrent kernel; 32 rows take 153 KB there."""
    if block_smem is not None and block_smem < chunk_smem_bytes(head_k_dim, 64):
        return 32
    return 64 if 2 * num_seqs * num_v_heads * -(-head_v_dim // 64) > sm_count else 32


def precompile(*, wait: bool = True):
    """Builds (or loads) the modules now: True when ready; False, with a logged warning, when a
    build failed (``wait=False``: a Future of that bool). See ``jit_utils.precompile``."""
    return jit_precompile(*_EXTEND.values(), wait=wait)


def gdn_extend_chunkwise(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    a: torch.Tensor,
    b: torch.Tensor,
    A_log: torch.Tensor,
    dt_bias: torch.Tensor,
    state_pool: torch.Tensor,
    cache_indices: torch.Tensor,
    cu_seqlens: torch.Tensor,
    *,
    validate: bool = True,
    enable_pdl: bool | None = None,
) -> torch.Tensor:
    """Gated DeltaNet over the sequences of ``cu_seqlens``; returns ``o`` ``[total_tokens,
    num_v_heads, head_v_dim]`` in v's dtype.

    The arguments of ``gdn_decode`` with a leading ``total_tokens`` dimension, plus
    ``cu_seqlens`` (``[num_seqs + 1]`` int64: 0, then each sequence's end; a zero-length
    sequence leaves its state alone); ``cache_indices`` is ``[num_seqs]``. Sequence s starts
    from ``state_pool[cache_indices[s]]`` and writes its final state back there.

    Sequences of ``CHUNKED_MIN_TOKENS`` tokens or more run through the chunked kernels: the
    delta rule in its WY form, a chunk of 64 tokens at a time, with the products on tensor cores
    as TF32 and float32 accumulation (on GPUs with the shared memory for it: sm_90, and sm_80
    and sm_87 in blocks of 32 value rows at head_k_dim 128; not sm_86 or sm_89); shorter
    sequences through the recurrent kernel, float32 throughout. The
    chunked kernels hand each chunk's solved triangular system over in a float32 workspace the
    call allocates: 34 KiB per chunk of 64 tokens and value head (about 1.1 GiB for 65536
    tokens at 32 value heads), freed when the call returns; none when validation finds every
    sequence shorter than ``CHUNKED_MIN_TOKENS``.

    ``validate=True`` reads the cache indices' maximum and cu_seqlens' ends and smallest step
    back to the host (one sync) and raises ValueError for an index past the pool or a
    ``cu_seqlens`` that does not start at 0, decreases or does not end at ``total_tokens``.
    Without it (or under CUDA graph capture) such entries are skipped, never read or written; a
    cu_seqlens that decreases leaves the other sequences' outputs unspecified too (nothing is
    read or written out of bounds).
    """
    longest = None
    if validate and not torch.cuda.is_current_stream_capturing():
        longest = check_gdn_indices(_OP, state_pool, cache_indices, cu_seqlens,
                                    q.shape[0] if isinstance(q, torch.Tensor) else 0)
    out = torch.empty(v.shape, dtype=v.dtype, device=v.device)
    # Shapes the kernel refuses get an empty workspace: its checks name the tensor at fault.
    shapes_ok = v.dim() == 3 and cache_indices.dim() == 1
    tokens = v.shape[0] if shapes_ok else 0
    # A validated batch of short sequences only (speculative verification, many small extends)
    # skips the chunked kernels and their workspace.
    chunked = longest is None or longest >= CHUNKED_MIN_TOKENS
    workspace = chunk_workspace(tokens if chunked else 0, cache_indices.shape[0] if shapes_ok else 0,
                                v.shape[1] if shapes_ok else 0, v.device)
    # Another head size has no module: any module's checks then name it.
    head_k_dim = q.shape[-1] if isinstance(q, torch.Tensor) and q.dim() and q.shape[-1] in HEAD_K_DIMS else 128
    rows = 64
    if shapes_ok and v.is_cuda:
        index = v.device.index
        rows = chunk_rows(cache_indices.shape[0], v.shape[1], v.shape[2], sm_count(index), head_k_dim,
                          block_smem(index))
    _EXTEND[(head_k_dim, rows)][q.dtype](q, k, v, a, b, A_log, dt_bias, state_pool, cache_indices, cu_seqlens, out,
                                         workspace, CHUNKED_MIN_TOKENS if chunked else tokens + 1,
                                         resolve_pdl(enable_pdl))
    return out
