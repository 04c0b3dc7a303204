"""CPU weight-only quantized GEMM (gptq_marlin_gemm on CPU tensors) beside PyTorch on the same
machine, at Llama-3-8B's linear shapes (N x K = 4096 x 4096, 14336 x 4096, 4096 x 14336) and
M = 1, 4, 16 tokens, bfloat16 activations:

    ours        gptq_marlin_gemm, GPTQ 4-bit (uint4b8) and 8-bit (uint8b128), group 128, Marlin-format weights
    int4pack    torch.ops.aten._weight_int4pack_mm_for_cpu (PyTorch's own int4 kernel, group 128)
    bf16 mm     torch.mm of the bfloat16 activation and weight (the unquantized layer)

Times: each case's contenders take turns for a few rounds, and each gets the median of its
rounds' medians of single calls (bench_int8_scaled_mm_cpu.rounds_us); each call reads the next of
several weight copies, together larger than the last-level cache, as a decode step reads weights
that other layers have evicted.
GB/s: the quantized weight bytes per call, beside the machine's copy_ bandwidth (read + write).

    python benchmarks/bench_marlin_cpu.py [--quick] [--threads N] [--json PATH]
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout without installing

from bench_int8_scaled_mm_cpu import cpu_rounds, rounds_us, start_cpu_bench  # noqa: E402
from mllm_kernel.cpu.jit import gptq_marlin_gemm  # noqa: E402
from mllm_kernel.scalar_type import scalar_types  # noqa: E402
import results  # noqa: E402

WEIGHTS = [(4096, 4096), (14336, 4096), (4096, 14336)]
TOKENS = [1, 4, 16]
GROUP = 128
#: Weight copies per case are enough to exceed this, so the last-level cache cannot hold them.
ROTATE_BYTES = 128 * 2**20


def _int4pack(n: int, k: int, g: torch.Generator):
    """PyTorch's CPU int4 layout, or None where this build lacks the kernel."""
    try:
        packed = torch.ops.aten._convert_weight_to_int4pack_for_cpu(
            torch.randint(0, 16, (n, k), dtype=torch.int32, generator=g), 1)
        sz = torch.rand(k // GROUP, n, 2, generator=g).bfloat16()
        torch.ops.aten._weight_int4pack_mm_for_cpu(torch.ones(1, k, dtype=torch.bfloat16), packed, GROUP, sz)
        return packed, sz
    except (AttributeError, RuntimeError):
        return None


def run(tokens: list[int], weights: list[tuple[int, int]], repeats: int, rounds: int) -> list[dict]:
    rows = []
    g = torch.Generator().manual_seed(0)
    for n, k in weights:
        copies = max(2, math.ceil(ROTATE_BYTES / (n * k // 2)))
        qs = [torch.randint(-2**31, 2**31 - 1, (k // 16, n * 2), dtype=torch.int32, generator=g) for _ in range(copies)]
        q8s = [torch.randint(-2**31, 2**31 - 1, (k // 16, n * 4), dtype=torch.int32, generator=g)
               for _ in range(max(2, math.ceil(ROTATE_BYTES / (n * k))))]
        scales = torch.rand(k // GROUP, n, generator=g).bfloat16() / 64
        packs = [p for p in (_int4pack(n, k, g) for _ in range(copies)) if p is not None]
        wb = [torch.randn(n, k, generator=g).bfloat16() for _ in range(max(2, math.ceil(ROTATE_BYTES / (2 * n * k))))]
        for m in tokens:
            x = torch.randn(m, k, generator=g).bfloat16()
            row = {"shape": f"{m} x {n} x {k}", "m": m, "n": n, "k": k}
            contenders = {
                "ours": [lambda q=q: gptq_marlin_gemm(x, None, q, scales, None, None, None, None, None,
                                                      scalar_types.uint4b8.id, m, n, k) for q in qs],
                "w8": [lambda q=q: gptq_marlin_gemm(x, None, q, scales, None, None, None, None, None,
                                                    scalar_types.uint8b128.id, m, n, k) for q in q8s]}
            if packs:
                contenders["int4pack"] = [lambda p=p: torch.ops.aten._weight_int4pack_mm_for_cpu(x, p[0], GROUP, p[1])
                                          for p in packs]
            contenders["bf16"] = [lambda w=w: torch.mm(x, w.t()) for w in wb]
            us = rounds_us(contenders, repeats, rounds)
            ours, w8 = us["ours"], us["w8"]
            row.update(ours_us=ours, ours_gbps=n * k / 2 / ours / 1e3, w8_us=w8, w8_gbps=n * k / w8 / 1e3)
            if packs:
                row.update(int4pack_us=us["int4pack"], vs_int4pack=us["int4pack"] / ours)
            t = us["bf16"]
            row.update(bf16_us=t, vs_bf16=t / ours, w8_vs_bf16=t / w8)
            rows.append(row)
            print(results.format_row(COLUMNS, row), flush=True)
        del qs, q8s, packs, wb
    return rows


COLUMNS = [
    ("shape", "M x N x K", "{}"), ("ours_us", "W4 µs", "{:.0f}"), ("ours_gbps", "W4 weight GB/s", "{:.1f}"),
    ("int4pack_us", "int4pack µs", "{:.0f}"), ("bf16_us", "bf16 mm µs", "{:.0f}"),
    ("vs_int4pack", "W4 vs int4pack", "{:.2f}x"), ("vs_bf16", "W4 vs bf16", "{:.2f}x"),
    ("w8_us", "W8 µs", "{:.0f}"), ("w8_gbps", "W8 weight GB/s", "{:.1f}"), ("w8_vs_bf16", "W8 vs bf16", "{:.2f}x"),
]


def main() -> None:
    args, quick, repeats, bandwidth = start_cpu_bench(__doc__, "M = 1 and 4 at 4096 x 4096 only, fewer repeats")
    rows = run(TOKENS[:2] if quick else TOKENS, WEIGHTS[:1] if quick else WEIGHTS, repeats, cpu_rounds(quick))
    notes = [f"{torch.get_num_threads()} threads, PyTorch {torch.__version__}; bfloat16 activations and output, GPTQ "
             f"4-bit (W4) and 8-bit (W8) weights with group {GROUP} scales. Each call reads the next of several weight copies (together "
             f"over {ROTATE_BYTES >> 20} MiB); a case's contenders take turns for {cpu_rounds(quick)} rounds, each "
             "timed by the median of its rounds. int4pack: torch.ops.aten._weight_int4pack_mm_for_cpu; bf16 mm: "
             "torch.mm of bfloat16 operands. Weight GB/s: quantized weight bytes per call."]
    title = "Weight-only quantized GEMM on CPU: gptq_marlin_gemm (Llama-3-8B shapes)"
    results.write(args.json, results.section("cpu/marlin", "marlin", title, results.cpu_name(), COLUMNS, rows,
                                              copy_gbps=bandwidth, notes=notes))


if __name__ == "__main__":
    main()
