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


def main() -> None:
    harness.require_cuda()
    harness.print_table("qknorm bf16", run(), harness.copy_bandwidth_gbps())


if __name__ == "__main__":
    main()
