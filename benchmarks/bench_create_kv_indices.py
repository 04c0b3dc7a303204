"""create_kv_indices: mllm_kernel vs eager vs torch.compile of the same gather written in
PyTorch (every request padded to the longest, padding scattered to a spare slot), for decode
batches of 1 to 256 requests over a page table of 4096 rows x 8192 tokens; requests hold
random pool rows and lengths up to the context given.

Bytes counted: the indices read from the page table and written to kv_indices, once each.
"""

from __future__ import annotations

import torch

import harness

POOL, MAX_CONTEXT = 4096, 8192


def reference(table, rows, lens, indptr, start, out):
    """The gather in PyTorch with static shapes (torch.compile traces it whole): positions
    past a request's length write into out's last entry, a spare slot the caller leaves free."""
    positions = torch.arange(table.shape[1], device=table.device)
    valid = positions[None, :] < lens[:, None]
    source = table[rows.long()[:, None], (start[:, None] + positions[None, :]).clamp(max=table.shape[1] - 1)]
    target = torch.where(valid, indptr[:-1, None].long() + positions[None, :], out.numel() - 1)
    out.index_put_((target.reshape(-1),), source.reshape(-1))


def cases() -> list[tuple[int, int]]:
    return [(1, 1024), (64, 1024), (64, 8192)] if harness.ci() else [(1, 1024), (1, 8192), (64, 4096), (256, 4096),
                                                                      (256, 8192)]


def run() -> list:
    from mllm_kernel.cuda.jit import create_kv_indices

    rows = []
    # One page table for every input set (only the requests' rows are touched, as in serving).
    table = torch.randint(0, POOL * MAX_CONTEXT, (POOL, MAX_CONTEXT), device="cuda", dtype=torch.int32)
    for batch, context in cases():
        def make():
            pool_rows = torch.randperm(POOL, device="cuda")[:batch].to(torch.int32)
            lens = torch.randint(context // 2, context + 1, (batch,), device="cuda", dtype=torch.int32)
            start = torch.zeros(batch, device="cuda", dtype=torch.int32)
            indptr = torch.zeros(batch + 1, device="cuda", dtype=torch.int32)
            indptr[1:] = torch.cumsum(lens, 0)
            out = torch.empty(batch * context + 1, device="cuda", dtype=torch.int32)
            return table[:, :context], pool_rows, lens, indptr, start, out

        nbytes = 2 * 4 * batch * (3 * context // 4)  # mean length 3/4 of the context
        rows.append(harness.measure(
            "create_kv_indices", f"{batch} requests, up to {context} tokens", nbytes, make,
            lambda t, r, n, p, s, o: create_kv_indices(t, r, n, p, s, o, validate=False), reference,
            ours_no_pdl=lambda t, r, n, p, s, o: create_kv_indices(t, r, n, p, s, o, validate=False,
                                                                  enable_pdl=False)))
    return rows


NOTES = [
    f"A page table of {POOL} rows x up to 8192 int32 tokens; each request a random row and a length drawn "
    "uniformly between half the context and the context; bytes: the gathered indices read and written once "
    "(counted at the mean length).",
]


def section(rows: list, copy_gbps: float) -> dict:
    return harness.cuda_section("create_kv_indices", "serving", "create_kv_indices, int32", rows, copy_gbps, NOTES)


def main() -> None:
    harness.bench_main(__doc__, "create_kv_indices, int32", run, section)


if __name__ == "__main__":
    main()
