"""SiLU-and-mul: mllm_kernel vs eager vs torch.compile (bf16, d = 11008)."""

from __future__ import annotations

import torch.nn.functional as F

import gated_activation
import harness


def reference(x):
    d = x.shape[-1] // 2
    return F.silu(x[..., :d]) * x[..., d:]


def run() -> list:
    from mllm_kernel.cuda.jit import silu_and_mul

    return gated_activation.run("silu_and_mul", "",
                                lambda x, pdl: silu_and_mul(x, enable_pdl=pdl), reference)


def section(rows: list, copy_gbps: float) -> dict:
    return gated_activation.section("silu_and_mul", rows, copy_gbps)


def main() -> None:
    harness.bench_main(__doc__, "silu_and_mul bf16", run, section)


if __name__ == "__main__":
    main()
