"""store_kv_cache: mllm_kernel vs eager vs torch.compile of indexed assignment (bf16, 32 KV
heads x 128 = hidden 4096; slots a random permutation of a cache twice the token count), into a
bf16 cache and, quantizing with per-tensor scales, into a float8_e4m3fn cache.

Bytes counted: k and v read once, their cache slots written once.
"""

from __future__ import annotations

import torch

import harness

HEADS, HEAD_DIM = 32, 128
DTYPE = torch.bfloat16


def reference(k, v, k_cache, v_cache, slots):
    k_cache[slots] = k
    v_cache[slots] = v


def reference_fp8(k, v, k_cache, v_cache, slots, k_scale, v_scale):
    k_cache[slots] = (k.float() / k_scale).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)
    v_cache[slots] = (v.float() / v_scale).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)


def token_counts() -> list[int]:
    return [1, 64, 2048] if harness.ci() else [1, 64, 16384]


def run() -> list:
    from mllm_kernel.cuda.jit import store_kv_cache

    rows = []
    for t in token_counts():
        slots_total = 2 * t

        def make():
            k = torch.randn(t, HEADS, HEAD_DIM, device="cuda", dtype=DTYPE)
            v = torch.randn(t, HEADS, HEAD_DIM, device="cuda", dtype=DTYPE)
            k_cache = torch.empty(slots_total, HEADS, HEAD_DIM, device="cuda", dtype=DTYPE)
            v_cache = torch.empty_like(k_cache)
            slots = torch.randperm(slots_total, device="cuda")[:t]
            return k, v, k_cache, v_cache, slots

        nbytes = 4 * t * HEADS * HEAD_DIM * 2 + 8 * t
        rows.append(harness.measure("store_kv_cache", f"[{t}, {HEADS}, {HEAD_DIM}]", nbytes, make,
                                    lambda k, v, kc, vc, s: store_kv_cache(k, v, kc, vc, s, validate=False),
                                    reference,
                                    ours_no_pdl=lambda k, v, kc, vc, s: store_kv_cache(k, v, kc, vc, s, validate=False,
                                                                                       enable_pdl=False)))

        def make_fp8():
            k, v, _, _, slots = make()
            k_cache = torch.empty(slots_total, HEADS, HEAD_DIM, device="cuda", dtype=torch.float8_e4m3fn)
            scales = torch.full((1,), 0.02, device="cuda"), torch.full((1,), 0.03, device="cuda")
            return k, v, k_cache, torch.empty_like(k_cache), slots, *scales

        nbytes = 2 * t * HEADS * HEAD_DIM * 3 + 8 * t
        rows.append(harness.measure("store_kv_cache fp8", f"[{t}, {HEADS}, {HEAD_DIM}] -> fp8", nbytes, make_fp8,
                                    lambda k, v, kc, vc, s, ks, vs: store_kv_cache(k, v, kc, vc, s, validate=False,
                                                                                   k_scale=ks, v_scale=vs),
                                    reference_fp8,
                                    ours_no_pdl=lambda k, v, kc, vc, s, ks, vs: store_kv_cache(
                                        k, v, kc, vc, s, validate=False, k_scale=ks, v_scale=vs, enable_pdl=False)))
    return rows


NOTES = [
    f"bf16 k and v [T, {HEADS}, {HEAD_DIM}] stored at random slots of a cache of 2T slots: a bf16 cache, and "
    "a float8_e4m3fn cache with per-tensor scales ('-> fp8'); bytes: k and v read once, their slots written once.",
]


def section(rows: list, copy_gbps: float) -> dict:
    return harness.cuda_section("kv_cache", "kv_cache", "store_kv_cache, bf16 k and v", rows, copy_gbps, NOTES)


def main() -> None:
    harness.bench_main(__doc__, "store_kv_cache, bf16 k and v", run, section)


if __name__ == "__main__":
    main()
