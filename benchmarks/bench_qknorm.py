"""Per-head q/k RMSNorm: mllm_kernel (in place, one launch) vs eager vs torch.compile
(bf16, 32 q heads, 8 k heads, head_dim 128)."""

from __future__ import annotations

import torch

import harness

HQ, HK, D = 32, 8, 128
DTYPE = torch.bfloat16


def _rms(x, w, eps=1e-6):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * w


def reference(q, k, qw, kw):
    """In place like the kernel (see bench_fused_add_rmsnorm.reference for why)."""
    q.copy_(_rms(q, qw))
    k.copy_(_rms(k, kw))


def run() -> list:
    from mllm_kernel.cuda.jit import qknorm

    rows = []
    qw = torch.randn(D, device="cuda", dtype=DTYPE)
    kw = torch.randn(D, device="cuda", dtype=DTYPE)
    for t in harness.token_counts():
        nbytes = (2 * t * (HQ + HK) * D + 2 * D) * 2

        def make():
            return (torch.randn(t, HQ, D, device="cuda", dtype=DTYPE),
                    torch.randn(t, HK, D, device="cuda", dtype=DTYPE), qw, kw)

        rows.append(harness.measure("qknorm", f"[{t}, {HQ}+{HK}, {D}]", nbytes, make,
                                    lambda q, k, qw, kw: qknorm(q, k, qw, kw, 1e-6), reference,
                                    ours_no_pdl=lambda q, k, qw, kw: qknorm(q, k, qw, kw, 1e-6, enable_pdl=False)))
    return rows


NOTE = ("qknorm: bf16 q [T, 32, 128] and k [T, 8, 128] normalised per head, in place on both sides "
        "(ours: one launch for q and k); bytes: q and k read and written once, plus the weights.")


def section(rows: list, copy_gbps: float) -> dict:
    return harness.cuda_section("qknorm", "norms", "qknorm bf16 [T, 32+8, 128]", rows, copy_gbps, [NOTE])


def main() -> None:
    harness.bench_main(__doc__, "qknorm bf16", run, section)


if __name__ == "__main__":
    main()
