"""store_cache: mllm_kernel vs eager vs torch.compile of the same scatter written in PyTorch
(``k_cache[indices] = k``, likewise v), rows of k and v scattered to random slots of caches of
65536 slots, bf16 rows of 8 x 128 (1024 elements, 2 KiB) and 2 x 128 (512 B), batches of 1 to
16384 rows.

Bytes counted: k and v read and the same bytes written to the caches (indices not counted).
"""

from __future__ import annotations

import torch

import harness

SLOTS = 65536


def reference(k, v, k_cache, v_cache, indices):
    k_cache[indices] = k
    v_cache[indices] = v


def cases() -> list[tuple[int, int]]:
    if harness.ci():
        return [(1, 1024), (256, 1024)]
    return [(1, 1024), (64, 1024), (1024, 1024), (16384, 1024), (16384, 256)]


def run() -> list:
    from mllm_kernel.cuda.jit.store_cache import store_cache

    rows = []
    for batch, row in cases():
        def make():
            k = torch.randn(batch, row, device="cuda", dtype=torch.bfloat16)
            v = torch.randn(batch, row, device="cuda", dtype=torch.bfloat16)
            k_cache = torch.empty(SLOTS, row, device="cuda", dtype=torch.bfloat16)
            v_cache = torch.empty_like(k_cache)
            indices = torch.randperm(SLOTS, device="cuda")[:batch]
            return k, v, k_cache, v_cache, indices

        nbytes = 2 * 2 * 2 * batch * row
        rows.append(harness.measure(
            "store_cache", f"{batch} rows x {row}", nbytes, make,
            lambda k, v, kc, vc, i: store_cache(k, v, kc, vc, i, validate=False), reference,
            ours_no_pdl=lambda k, v, kc, vc, i: store_cache(k, v, kc, vc, i, validate=False, enable_pdl=False)))
    return rows


NOTES = [
    f"bf16 rows into caches of {SLOTS} slots at distinct random slots (int64 indices); bytes: k and v read "
    "once and written once.",
]


def section(rows: list, copy_gbps: float) -> dict:
    return harness.cuda_section("store_cache", "serving", "store_cache, bf16", rows, copy_gbps, NOTES)


def main() -> None:
    harness.bench_main(__doc__, "store_cache, bf16", run, section)


if __name__ == "__main__":
    main()
