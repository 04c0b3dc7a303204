"""RMSNorm: mllm_kernel vs PyTorch eager vs torch.compile (bf16, hidden 4096)."""

from __future__ import annotations

import torch

import harness

HIDDEN = 4096
DTYPE = torch.bfloat16


def reference(x, w, eps=1e-6):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * w


def run() -> list:
    from mllm_kernel.cuda.jit import rmsnorm

    rows = []
    w = torch.randn(HIDDEN, device="cuda", dtype=DTYPE)
    for t in harness.token_counts():
        nbytes = (2 * t * HIDDEN + HIDDEN) * 2

        def make():
            return torch.randn(t, HIDDEN, device="cuda", dtype=DTYPE), w

        # Out of place on both sides: each call allocates its output, as the reference does.
        rows.append(harness.measure("rmsnorm", f"[{t}, {HIDDEN}]", nbytes, make,
                                    lambda x, w: rmsnorm(x, w, 1e-6),
                                    lambda x, w: reference(x, w),
                                    ours_no_pdl=lambda x, w: rmsnorm(x, w, 1e-6, enable_pdl=False)))
    return rows


NOTE = ("rmsnorm: bf16 [T, 4096], out of place on both sides (each call allocates its output); "
        "bytes: the input read and the output written once, plus the weight.")


def section(rows: list, copy_gbps: float) -> dict:
    return harness.cuda_section("rmsnorm", "norms", "rmsnorm bf16 [T, 4096]", rows, copy_gbps, [NOTE])


def main() -> None:
    harness.bench_main(__doc__, "rmsnorm bf16", run, section)


if __name__ == "__main__":
    main()
