"""store_kv_cache on the CPU against its bound: a contiguous ``copy_`` of the same bytes.

The op scatters whole cache slots, so no implementation can beat copying k and v into
contiguous memory; this prints ours (random slots), ours (slots in order), that copy, and
PyTorch's indexed assignment, in µs (median of 40 calls), for 4096 tokens of 8 heads of 128
into a cache of 8192 slots.

    python benchmarks/bench_cpu_store_bound.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout without installing

import mllm_kernel.cpu.jit as K  # noqa: E402
from bench_cpu import median_seconds  # noqa: E402

TOKENS, HEADS, HEAD_DIM = 4096, 8, 128


def main() -> None:
    g = torch.Generator().manual_seed(0)
    print(f"threads={torch.get_num_threads()}; us per call, median of 40")
    print(f"{'dtype':9s} {'case':34s} {'median':>8s}")
    for dtype in (torch.float32, torch.bfloat16):
        k, v = (torch.randn(TOKENS, HEADS, HEAD_DIM, generator=g).to(dtype) for _ in range(2))
        k_cache = torch.zeros(2 * TOKENS, HEADS, HEAD_DIM, dtype=dtype)
        v_cache = torch.zeros_like(k_cache)
        slots = torch.randperm(2 * TOKENS, generator=g)[:TOKENS]
        in_order = torch.arange(TOKENS)

        def indexed():
            k_cache[slots] = k
            v_cache[slots] = v

        cases = {
            "store_kv_cache, random slots": lambda: K.store_kv_cache(k, v, k_cache, v_cache, slots),
            "store_kv_cache, slots in order": lambda: K.store_kv_cache(k, v, k_cache, v_cache, in_order),
            "copy_ of k and v, contiguous": lambda: (k_cache[:TOKENS].copy_(k), v_cache[:TOKENS].copy_(v)),
            "eager k_cache[slots] = k": indexed,
        }
        for name, fn in cases.items():
            print(f"{str(dtype).removeprefix('torch.'):9s} {name:34s} {median_seconds(fn, 40) * 1e6:8.0f}")


if __name__ == "__main__":
    main()
