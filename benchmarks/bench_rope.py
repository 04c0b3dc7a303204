"""Rotary embedding (NeoX, full rotary): mllm_kernel (in place) vs eager vs torch.compile
(bf16 q/k with 32 + 8 heads of 128, int64 positions, fp32 cos/sin cache)."""

from __future__ import annotations

import torch

import harness

HQ, HK, D = 32, 8, 128
MAX_POS = 32768
DTYPE = torch.bfloat16


def _cache():
    inv_freq = 1.0 / 10000.0 ** (torch.arange(0, D, 2, dtype=torch.float32, device="cuda") / D)
    freqs = torch.outer(torch.arange(MAX_POS, dtype=torch.float32, device="cuda"), inv_freq)
    return torch.cat([freqs.cos(), freqs.sin()], dim=-1)


def reference(positions, q, k, cache):
    """In place like the kernel (see bench_fused_add_rmsnorm.reference for why)."""
    cos, sin = cache[positions].chunk(2, dim=-1)
    cos, sin = cos.unsqueeze(-2), sin.unsqueeze(-2)

    def rot(x):
        x1, x2 = x.float().chunk(2, dim=-1)
        return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1).to(x.dtype)

    q.copy_(rot(q))
    k.copy_(rot(k))


def run() -> list:
    from mllm_kernel.cuda.jit import apply_rope

    rows = []
    cache = _cache()
    for t in harness.token_counts():
        nbytes = 2 * t * (HQ + HK) * D * 2 + t * 8 + t * D * 4

        def make():
            return (torch.randint(0, MAX_POS, (t,), device="cuda"),
                    torch.randn(t, HQ, D, device="cuda", dtype=DTYPE),
                    torch.randn(t, HK, D, device="cuda", dtype=DTYPE), cache)

        rows.append(harness.measure("rope", f"[{t}, {HQ}+{HK}, {D}] neox", nbytes, make,
                                    lambda p, q, k, c: apply_rope(p, q, k, c, True), reference,
                                    ours_no_pdl=lambda p, q, k, c: apply_rope(p, q, k, c, True, enable_pdl=False)))
    return rows


NOTE = (f"apply_rope: NeoX, full rotary, bf16 q and k of {HQ} + {HK} heads of {D}, int64 positions, fp32 cos/sin "
        f"cache of {MAX_POS} positions, in place on both sides; bytes: q and k read and written once, the "
        "positions and the cache rows read once.")


def section(rows: list, copy_gbps: float) -> dict:
    return harness.cuda_section("rope", "rope", "apply_rope neox bf16 [T, 32+8, 128]", rows, copy_gbps, [NOTE])


def main() -> None:
    harness.bench_main(__doc__, "apply_rope bf16", run, section)


if __name__ == "__main__":
    main()
