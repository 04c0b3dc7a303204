"""Dynamic per-tensor FP8 quantization of [T, 4096] bf16: where each kernel's time goes (H100 tuning aid).

Times under the harness's CUDA graphs the library, ``torch.compile`` of the reference and the
stamped kernels of ``stash_timeline.cuh`` (the library's two passes, the one-launch stash kernel
in the shapes tried on the way to the library's and after it), checks that each writes the library's
output, then runs each alone a few times with per-block ``%globaltimer`` stamps and prints, in
microseconds from the first block's start, when blocks finished pass 1, knew the scale, finished
the static part of pass 2 and ended (earliest / median / latest block, median of 5 calls).

    python benchmarks/tuning/stash_timeline.py [--tokens 16384]
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import bench_quant  # noqa: E402
import harness  # noqa: E402

HIDDEN = 4096
FP8 = torch.float8_e4m3fn
# name: (threads a block, blocks an SM, stash by cp.async, pass-2 schedule, max stash tiles, shared-out tiles)
STASH = {
    "1024x1 cp.async stash (sixth session)": (1024, 1, True, 0, 99, 0),
    "1024x1 stash through registers": (1024, 1, False, 0, 99, 0),
    "1024x2 stash through registers (library)": (1024, 2, False, 0, 99, 0),
    "1024x2 no stash": (1024, 2, False, 0, 0, 0),
    "1024x2, last 16 tiles in block units": (1024, 2, False, 1, 99, 16),
    "1024x2, last 6 tiles in warp units": (1024, 2, False, 2, 99, 6),
    "1024x2, pass 2 shared from 64 counters": (1024, 2, False, 3, 99, 99),
    "1024x2, last 12 tiles from 64 counters": (1024, 2, False, 3, 99, 12),
    "1024x2, stash first, then 64 counters": (1024, 2, False, 4, 99, 99),
    "1024x2, 3 tiles before the kept ones first": (1024, 2, False, 5, 99, 3),
    "1024x2, 5 tiles before the kept ones first": (1024, 2, False, 5, 99, 5),
    "1024x2, 1 DRAM tile loaded before the barrier": (1024, 2, False, 6, 99, 0),
    "1024x2, 2 DRAM tiles loaded before the barrier": (1024, 2, False, 7, 99, 0),
}
# The library's shape launched with PDL (as the library launches it; the stamped kernels above
# are launched without).
LIBRARY_SHAPE = "1024x2 stash through registers (library)"
PDL = {f"{LIBRARY_SHAPE}, PDL": STASH[LIBRARY_SHAPE]}
# name: (threads a block, blocks an SM, tiles kept in registers, loads in flight a thread, max stash tiles)
REG_STASH = {
    "512x2, 4 tiles in registers, 4 loads": (512, 2, 4, 4, 99),
    "512x2, 5 tiles in registers, 4 loads": (512, 2, 5, 4, 99),
    "512x2, 6 tiles in registers, 2 loads": (512, 2, 6, 2, 99),
    "512x2, no register tiles, 4 loads": (512, 2, 0, 4, 99),
    "512x2, 4 tiles in registers, 8 loads": (512, 2, 4, 8, 99),
    "512x2, no register tiles, 8 loads": (512, 2, 0, 8, 99),
    "512x2, no stash at all, 4 loads": (512, 2, 0, 4, 0),
    "1024x2, no register tiles, 2 loads": (1024, 2, 0, 2, 99),
    "1024x2, no register tiles, 4 loads (24 B spilled)": (1024, 2, 0, 4, 99),
}
SLOTS = {"pass 1": 1, "scale": 2, "static": 3, "end": 4}


def _symbol(shape) -> str:
    threads, blocks, async_stash, schedule = shape[:4]
    return f"stash_{threads}_{blocks}_{int(async_stash)}_{schedule}"


def _reg_symbol(shape) -> str:
    return "reg_stash_{}_{}_{}_{}".format(*shape[:4])


def _module():
    from mllm_kernel.jit_utils import load_cuda_jit

    shapes = sorted({s[:4] for s in STASH.values()})
    wrappers = [("two_pass", "run_stamped_two_pass")] + [
        (_symbol(s), f"run_stamped_stash<{s[0]}, {s[1]}, {str(s[2]).lower()}, {s[3]}>") for s in shapes] + [
        (_reg_symbol(s), "run_reg_stash<{}, {}, {}, {}>".format(*s)) for s in sorted({s[:4] for s in REG_STASH.values()})] + [
        (_symbol(s) + "_pdl", f"run_stamped_stash_pdl<{s[0]}, {s[1]}, {str(s[2]).lower()}, {s[3]}>")
        for s in sorted({s[:4] for s in PDL.values()})]
    return load_cuda_jit("tune_stash_timeline", cuda_files=[Path(__file__).resolve().parent / "stash_timeline.cuh"],
                         cuda_wrappers=wrappers)


def _spread(stamps: torch.Tensor, slot: int) -> tuple[float, float, float]:
    """(earliest, median, latest) of a slot over blocks, us from the first block's start."""
    column = (stamps[:, slot] - stamps[:, 0].min()).double() / 1000.0
    return column.min().item(), column.median().item(), column.max().item()


def _gap(variant, sets) -> tuple[float, float]:
    """Medians over graph replays of two back-to-back calls of a stamped kernel: the idle time
    between them (the second call's first block start minus the first call's last block end)
    and the second call's span (its first block's start to its last block's end)."""
    fn, blocks = variant
    stamps = [torch.zeros(blocks * 8, dtype=torch.int64, device="cuda") for _ in range(2)]
    calls = [(sets[i % len(sets)], stamps[i]) for i in range(2)]
    for (x, o, s), tl in calls:  # warm up outside the capture
        fn(o, s, x, tl)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for (x, o, s), tl in calls:
            fn(o, s, x, tl)
    gaps = []
    for _ in range(6):  # the first replay warms up
        for tl in stamps:
            tl.zero_()
        graph.replay()
        torch.cuda.synchronize()
        first, second = (tl.view(-1, 8).cpu() for tl in stamps)
        gaps.append(((second[:, 0].min() - first[:, 4].max()).item() / 1000.0,
                     (second[:, 4].max() - second[:, 0].min()).item() / 1000.0))
    return tuple(statistics.median(g[i] for g in gaps[1:]) for i in range(2))


def main() -> None:
    from mllm_kernel.cuda.jit import per_tensor_quant_fp8

    tokens, _ = harness.tuning_options(__doc__, "16384")
    module = _module()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    print(f"device: {torch.cuda.get_device_name()}  copy {harness.copy_bandwidth_gbps():.0f} GB/s")
    off = torch.zeros(1, dtype=torch.int64, device="cuda")
    variants = {"two passes (the library's kernels)": (lambda o, s, x, tl: module.two_pass(o, s, x, tl), None)}
    # name: (wrapper, max stash tiles, the kernel's third int argument, blocks an SM)
    stamped = {name: (_symbol(shape), shape[4], shape[5], shape[1]) for name, shape in STASH.items()}
    stamped.update({name: (_symbol(shape) + "_pdl", shape[4], shape[5], shape[1]) for name, shape in PDL.items()})
    stamped.update({name: (_reg_symbol(shape), shape[4], 0, shape[1]) for name, shape in REG_STASH.items()})
    for name, (symbol, max_stash, extra, per_sm) in stamped.items():
        fn = getattr(module, symbol)
        variants[name] = (lambda o, s, x, tl, fn=fn, a=max_stash, b=extra: fn(o, s, x, tl, a, b), sms * per_sm)
    for t in tokens:
        nbytes = 3 * t * HIDDEN

        def make():
            return (torch.randn(t, HIDDEN, device="cuda", dtype=torch.bfloat16),
                    torch.empty(t, HIDDEN, device="cuda", dtype=FP8), torch.empty(1, device="cuda"))

        sets = [make() for _ in range(harness.num_sets(nbytes))]
        comp = harness.time_calls(harness.compiled(lambda x, o, s: bench_quant.ref_per_tensor_dynamic(x)), sets)
        print(f"\n== per_tensor dynamic [{t}, {HIDDEN}]  compile {comp.us:.2f} us ({comp.gbps(nbytes):.0f} GB/s)")
        x, o, s = sets[0]
        cases = {"library": lambda x, o, s: per_tensor_quant_fp8(x, out=o),
                 **{name: (lambda x, o, s, fn=fn: fn(o, s, x, off)) for name, (fn, _) in variants.items()}}

        def written(fn, x=x, o=o, s=s):
            o.fill_(0x7F)
            fn(x, o, s)
            return o.view(torch.uint8)

        harness.time_variants(cases, sets, comp, nbytes, 44, written)
        print(f"\n  when (us from the first block's start; earliest / median / latest block): "
              f"{' | '.join(SLOTS)}")
        stamps = torch.zeros(65536 * 8, dtype=torch.int64, device="cuda")
        for name, (fn, blocks) in variants.items():
            calls = []
            for r in range(6):  # the first call warms up; each on another input set (cold L2)
                xs, os_, ss = sets[(r + 1) % len(sets)]
                stamps.zero_()
                fn(os_, ss, xs, stamps)
                torch.cuda.synchronize()
                calls.append(stamps.clone().cpu())
            if blocks is None:  # two passes: the amax kernel's rows, then the quantization kernel's
                rows = [c.view(-1, 8) for c in calls[1:]]
                amax_blocks = int((rows[0][:, 2] != 0).nonzero()[0])  # the first row with a wait stamp
                amax_end = statistics.median(_spread(r[:amax_blocks], 1)[2] for r in rows)
                ends = [((r[amax_blocks:][:, 1] - r[:amax_blocks][:, 0].min()).max().item()) / 1000.0 for r in rows]
                print(f"  {name:44s} amax pass ends {amax_end:.1f}, quantization pass ends {statistics.median(ends):.1f}")
                continue
            rows = [c.view(-1, 8)[:blocks] for c in calls[1:]]
            cells = []
            for slot in SLOTS.values():
                spreads = [_spread(r, slot) for r in rows]
                cells.append("/".join(f"{statistics.median(sp[i] for sp in spreads):.1f}" for i in range(3)))
            print(f"  {name:44s} {' | '.join(cells)}")
        print("\n  two calls in one CUDA graph, median of 5 replays (us): the gap from the first call's last block "
              "end to the second call's first block start | the second call's span")
        for name in (LIBRARY_SHAPE, *PDL):
            print(f"  {name:44s} {' | '.join(f'{v:.2f}' for v in _gap(variants[name], sets))}")
        del sets, stamps
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
