"""FP8/INT8 activation quantization: mllm_kernel vs eager vs torch.compile of the same formula
(bf16 input, hidden 4096).

Bytes counted: the input read once and the output written once (3 bytes per element for bf16
to fp8/int8) plus the scales; the dynamic per-tensor op reads its input twice (an amax pass and
a quantization pass), which the count leaves out, as it does for the references.
"""

from __future__ import annotations

import torch

import harness

HIDDEN = 4096
DTYPE = torch.bfloat16
FP8 = torch.float8_e4m3fn
GROUP = 128


def _div(a, b: float):
    return a / torch.full_like(a, b)


def ref_per_tensor_dynamic(x):
    xf = x.float()
    scale = _div(xf.abs().amax(), 448.0)
    return (xf / scale).clamp(-448.0, 448.0).to(FP8), scale.reshape(1)


def ref_per_tensor_static(x, scale):
    return (x.float() / scale).clamp(-448.0, 448.0).to(FP8)


def ref_per_token_fp8(x):
    xf = x.float()
    scale = _div(xf.abs().amax(-1, keepdim=True), 448.0)
    return (xf / scale).clamp(-448.0, 448.0).to(FP8), scale


def ref_group_fp8(x):
    t, h = x.shape
    xf = x.float().view(t, h // GROUP, GROUP)
    scale = _div(xf.abs().amax(-1, keepdim=True).clamp_min(1e-10), 448.0)
    q = (xf / scale).clamp(-448.0, 448.0).to(FP8)
    return q.view(t, h), scale.view(t, h // GROUP)


def ref_group_int8(x):
    t, h = x.shape
    xf = x.float().view(t, h // GROUP, GROUP)
    scale = _div(xf.abs().amax(-1, keepdim=True).clamp_min(1e-10), 127.0)
    q = (xf / scale).clamp(-128.0, 127.0).round().to(torch.int8)
    return q.view(t, h), scale.view(t, h // GROUP)


def token_counts() -> list[int]:
    return [1, 64, 2048] if harness.ci() else [1, 64, 16384]


def run() -> list:
    from mllm_kernel.cuda.jit import (
        per_tensor_quant_fp8,
        per_token_group_quant_fp8,
        per_token_group_quant_int8,
        per_token_quant_fp8,
    )

    rows = []
    for t in token_counts():
        n = t * HIDDEN
        shape = f"[{t}, {HIDDEN}]"

        # Out of place on both sides: each call allocates its outputs, as the reference does.
        def make():
            return (torch.randn(t, HIDDEN, device="cuda", dtype=DTYPE),)

        rows.append(harness.measure("per_tensor dynamic", shape, 3 * n + 4, make,
                                    lambda x: per_tensor_quant_fp8(x),
                                    lambda x: ref_per_tensor_dynamic(x),
                                    ours_no_pdl=lambda x: per_tensor_quant_fp8(x, enable_pdl=False)))

        def make_static():
            return make() + (torch.full((1,), 0.05, device="cuda", dtype=torch.float32),)

        rows.append(harness.measure("per_tensor static", shape, 3 * n, make_static,
                                    lambda x, s: per_tensor_quant_fp8(x, s),
                                    lambda x, s: ref_per_tensor_static(x, s),
                                    ours_no_pdl=lambda x, s: per_tensor_quant_fp8(x, s, enable_pdl=False)))
        rows.append(harness.measure("per_token fp8", shape, 3 * n + 4 * t, make,
                                    lambda x: per_token_quant_fp8(x),
                                    lambda x: ref_per_token_fp8(x),
                                    ours_no_pdl=lambda x: per_token_quant_fp8(x, enable_pdl=False)))
        rows.append(harness.measure("group128 fp8", shape, 3 * n + 4 * n // GROUP, make,
                                    lambda x: per_token_group_quant_fp8(x, GROUP),
                                    lambda x: ref_group_fp8(x),
                                    ours_no_pdl=lambda x: per_token_group_quant_fp8(x, GROUP, enable_pdl=False)))
        rows.append(harness.measure("group128 fp8 col-major ue8m0", shape, 3 * n + 4 * n // GROUP, make,
                                    lambda x: per_token_group_quant_fp8(x, GROUP, 1e-10, True, True),
                                    None))
        rows.append(harness.measure("group128 int8", shape, 3 * n + 4 * n // GROUP,
                                    make,
                                    lambda x: per_token_group_quant_int8(x, GROUP),
                                    lambda x: ref_group_int8(x),
                                    ours_no_pdl=lambda x: per_token_group_quant_int8(x, GROUP, enable_pdl=False)))
    return rows


NOTES = [
    "bf16 [T, 4096] input; bytes: 2 read and 1 written an element, plus the scales. Dynamic per-tensor "
    "reads its input twice (amax, then quantization), which the count leaves out, as it does for the "
    "references. The col-major UE8M0 row (column-major scales, powers of two) has no reference.",
]


def section(rows: list, copy_gbps: float) -> dict:
    return harness.cuda_section("quant", "quant", "FP8/INT8 quantization, bf16 [T, 4096]", rows, copy_gbps, NOTES)


def main() -> None:
    harness.bench_main(__doc__, "FP8/INT8 quantization, bf16 input", run, section)


if __name__ == "__main__":
    main()
