"""rms_norm_gated: mllm_kernel vs PyTorch eager vs torch.compile (bf16), at gated DeltaNet's
output norm shape: every token's 32 value heads of 128 normalised per head and gated by z."""

from __future__ import annotations

import torch

import harness

HEADS, HEAD_DIM = 32, 128
DTYPE = torch.bfloat16


def reference(x, w, z, eps=1e-6):
    xf = x.float()
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * w.float()
    return (y * torch.nn.functional.silu(z.float())).to(x.dtype)


def run() -> list:
    from mllm_kernel.cuda.jit.rms_norm_gated import rms_norm_gated

    rows = []
    w = torch.randn(HEAD_DIM, device="cuda", dtype=DTYPE)
    for t in harness.token_counts():
        nbytes = 3 * t * HEADS * HEAD_DIM * 2 + HEAD_DIM * 2

        def make():
            x = torch.randn(t * HEADS, HEAD_DIM, device="cuda", dtype=DTYPE)
            return x, w, torch.randn_like(x)

        rows.append(harness.measure("rms_norm_gated", f"[{t} x {HEADS}, {HEAD_DIM}]", nbytes, make,
                                    lambda x, w, z: rms_norm_gated(x, w, z), reference,
                                    ours_no_pdl=lambda x, w, z: rms_norm_gated(x, w, z, enable_pdl=False)))
    return rows


NOTE = (f"rms_norm_gated: bf16 rows of {HEAD_DIM} ({HEADS} heads a token), out of place on both sides; bytes: x and "
        "z read and the output written once, plus the weight.")


def section(rows: list, copy_gbps: float) -> dict:
    return harness.cuda_section("rms_norm_gated", "norms", f"rms_norm_gated bf16 [T x {HEADS}, {HEAD_DIM}]", rows,
                                copy_gbps, [NOTE])


def main() -> None:
    harness.bench_main(__doc__, "rms_norm_gated bf16", run, section)


if __name__ == "__main__":
    main()
