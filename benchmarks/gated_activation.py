"""What bench_silu_and_mul.py and bench_gelu_and_mul.py share: the shapes ([T, 2 x 11008] bf16
in, [T, 11008] out), the timing of one gated activation and its results section. Out of place
on both sides: each call allocates its output, as the reference does (the caching allocator
hands back the same buffer call after call, still in L2, to both sides alike)."""

from __future__ import annotations

from typing import Callable

import torch

import harness

D = 11008
DTYPE = torch.bfloat16


def run(op: str, label: str, call: Callable[[torch.Tensor, bool | None], object],
        reference: Callable[[torch.Tensor], torch.Tensor]) -> list:
    """Rows for ``call(x, enable_pdl)`` against ``reference(x)`` at every token count."""
    rows = []
    for t in harness.token_counts():
        nbytes = 3 * t * D * 2

        def make():
            return (torch.randn(t, 2 * D, device="cuda", dtype=DTYPE),)

        rows.append(harness.measure(op, f"[{t}, 2x{D}]{label}", nbytes, make,
                                    lambda x: call(x, None), reference, ours_no_pdl=lambda x: call(x, False)))
    return rows


def note(op: str) -> str:
    return (f"{op}: bf16 [T, 2 x {D}] in, [T, {D}] out, out of place on both sides; "
            "bytes: the input read and the output written once.")


def section(op: str, rows: list, copy_gbps: float) -> dict:
    return harness.cuda_section(op, "activations", f"{op} bf16 [T, 2x{D}]", rows, copy_gbps, [note(op)])
