"""What bench_silu_and_mul.py and bench_gelu_and_mul.py share: the shapes ([T, 2 x 11008] bf16
in, [T, 11008] out, into a preallocated output) and the timing of one gated activation."""

from __future__ import annotations

from typing import Callable

import torch

import harness

D = 11008
DTYPE = torch.bfloat16


def run(op: str, label: str, call: Callable[[torch.Tensor, torch.Tensor, bool], object],
        reference: Callable[[torch.Tensor], torch.Tensor]) -> list:
    """Rows for ``call(x, out, enable_pdl)`` against ``reference(x)`` at every token count."""
    rows = []
    for t in harness.token_counts():
        nbytes = 3 * t * D * 2

        def make():
            x = torch.randn(t, 2 * D, device="cuda", dtype=DTYPE)
            return x, torch.empty(t, D, device="cuda", dtype=DTYPE)

        rows.append(harness.measure(op, f"[{t}, 2x{D}]{label}", nbytes, make,
                                    lambda x, o: call(x, o, False), lambda x, o: reference(x),
                                    ours_pdl=lambda x, o: call(x, o, True)))
    return rows
