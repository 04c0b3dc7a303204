"""Launch-shape sweep for RMSNorm and fused add+RMSNorm on [T, 4096] bf16 (H100 tuning aid).

For every token count, times under the harness's CUDA graphs: the library op, ``torch.compile``
of the reference, and the CTA building block run with each (threads per row, vectors per
thread) shape that covers 4096 elements, each without PDL and with PDL releasing the next
kernel at the end or right after the wait. The library picks one shape per row length; this
shows which shape wins at which token count, and what PDL buys back to back.

    python benchmarks/tuning/tune_norm.py [--tokens 1,16,64,1024,16384]
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import bench_fused_add_rmsnorm  # noqa: E402
import bench_rmsnorm  # noqa: E402
import harness  # noqa: E402

HIDDEN = 4096
DTYPE = torch.bfloat16
SHAPES = [(64, 8), (128, 4), (256, 2), (512, 1)]  # (threads per row, 16-byte vectors per thread)
PDL_MODES = {0: "", 1: " pdl@end", 2: " pdl@start"}


def _module():
    from mllm_kernel.jit_utils import load_cuda_jit

    wrappers = [(f"{'fused' if fused else 'rms'}_{t}x{i}", f"run_shape<{t}, {i}, {'true' if fused else 'false'}>")
                for t, i in SHAPES for fused in (False, True)]
    return load_cuda_jit("tune_norm_shapes", cuda_files=[Path(__file__).resolve().parent / "norm_shapes.cuh"],
                         cuda_wrappers=wrappers)


def _sweep(fused: bool, tokens: list[int], module) -> None:
    from mllm_kernel.cuda.jit import fused_add_rmsnorm, rmsnorm

    w = torch.randn(HIDDEN, device="cuda", dtype=DTYPE)
    op = "fused_add_rmsnorm" if fused else "rmsnorm"
    print(f"\n== {op} bf16 [T, {HIDDEN}]: us per call (vs compile: compile time / this time)")
    for t in tokens:
        elems = t * HIDDEN
        nbytes = ((4 if fused else 2) * elems + HIDDEN) * 2
        sets = [(torch.randn(t, HIDDEN, device="cuda", dtype=DTYPE), torch.randn(t, HIDDEN, device="cuda", dtype=DTYPE))
                for _ in range(harness.num_sets(nbytes))]
        if fused:
            cases = {"library": lambda x, r: fused_add_rmsnorm(x, r, w, 1e-6),
                     "library pdl": lambda x, r: fused_add_rmsnorm(x, r, w, 1e-6, enable_pdl=True)}
            reference = harness.compiled(lambda x, r: bench_fused_add_rmsnorm.reference(x, r, w))
        else:
            # r is the preallocated output here.
            cases = {"library": lambda x, o: rmsnorm(x, w, 1e-6, out=o),
                     "library pdl": lambda x, o: rmsnorm(x, w, 1e-6, out=o, enable_pdl=True)}
            reference = harness.compiled(lambda x, o: bench_rmsnorm.reference(x, w))
        for threads, items in SHAPES:
            fn = getattr(module, f"{'fused' if fused else 'rms'}_{threads}x{items}")
            for mode, label in PDL_MODES.items():
                # Fused: in place like the library (out is the input); plain: out is r.
                cases[f"{threads}x{items}{label}"] = (
                    (lambda x, r, fn=fn, mode=mode: fn(x, x, r, w, 1e-6, mode)) if fused
                    else (lambda x, o, fn=fn, mode=mode: fn(o, x, o, w, 1e-6, mode)))
        comp = harness.time_calls(reference, sets)
        print(f"[{t}, {HIDDEN}]  {nbytes / 2**20:.2f} MB   compile {comp.us:.2f} us ({comp.gbps(nbytes):.0f} GB/s)")
        for name, fn in cases.items():
            timing = harness.time_calls(fn, sets)
            harness.print_variant(name, timing, comp, nbytes, 22)
        del sets
        torch.cuda.empty_cache()


def main() -> None:
    tokens = harness.tuning_tokens(__doc__, "1,16,64,256,1024,16384")
    module = _module()
    print(f"device: {torch.cuda.get_device_name()}  copy {harness.copy_bandwidth_gbps():.0f} GB/s")
    for fused in (False, True):
        _sweep(fused, tokens, module)


if __name__ == "__main__":
    main()
