"""GELU(tanh)-and-mul: mllm_kernel vs eager vs torch.compile (bf16, d = 11008)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

import harness

D = 11008
DTYPE = torch.bfloat16


def reference(x):
    d = x.shape[-1] // 2
    return F.gelu(x[..., :d], approximate="tanh") * x[..., d:]


def run() -> list:
    from mllm_kernel.cuda.jit import gelu_and_mul

    rows = []
    for t in harness.token_counts():
        nbytes = 3 * t * D * 2

        def make():
            x = torch.randn(t, 2 * D, device="cuda", dtype=DTYPE)
            return x, torch.empty(t, D, device="cuda", dtype=DTYPE)

        rows.append(harness.measure("gelu_and_mul", f"[{t}, 2x{D}] tanh", nbytes, make,
                                    lambda x, o: gelu_and_mul(x, "tanh", out=o), lambda x, o: reference(x)))
    return rows


def main() -> None:
    harness.require_cuda()
    harness.print_table("gelu_and_mul (tanh) bf16", run(), harness.copy_bandwidth_gbps())


if __name__ == "__main__":
    main()
