"""Launch-shape sweep for silu_and_mul and gelu_and_mul (tanh) on bf16 [T, 2 x 11008] (H100 tuning aid).

For every token count, times under the harness's CUDA graphs the library op, ``torch.compile``
of the reference and the library kernel launched with each (vector width, block size) of
``act_shapes.cuh``, checking that each writes what the library writes. The library picks its
shape from the input size; this shows which shape wins where.

    python benchmarks/tuning/tune_act.py [--tokens 1,16,64,1024,16384]
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import bench_gelu_and_mul  # noqa: E402
import bench_silu_and_mul  # noqa: E402
import harness  # noqa: E402

D = 11008
DTYPE = torch.bfloat16
SHAPES = [(8, 256), (8, 128), (4, 256), (4, 128), (4, 64), (2, 256), (2, 128), (2, 64)]  # (elements, threads)


def _module():
    from mllm_kernel.jit_utils import load_cuda_jit

    wrappers = [(f"act_{v}x{t}", f"run_act_shape<{v}, {t}>") for v, t in SHAPES]
    return load_cuda_jit("tune_act_shapes", cuda_files=[Path(__file__).resolve().parent / "act_shapes.cuh"],
                         cuda_wrappers=wrappers)


def main() -> None:
    tokens = harness.tuning_tokens(__doc__, "1,16,64,1024,16384")
    module = _module()
    from mllm_kernel.cuda.jit import gelu_and_mul, silu_and_mul

    print(f"device: {torch.cuda.get_device_name()}  copy {harness.copy_bandwidth_gbps():.0f} GB/s")
    ops = [("silu_and_mul", 0, lambda x, o: silu_and_mul(x, out=o), bench_silu_and_mul.reference),
           ("gelu_and_mul tanh", 1, lambda x, o: gelu_and_mul(x, approximate="tanh", out=o),
            bench_gelu_and_mul.reference)]
    for op, act, library, reference in ops:
        print(f"\n== {op} bf16 [T, 2x{D}]: us per call (vs compile: compile time / this time)")
        for t in tokens:
            nbytes = 3 * t * D * 2
            sets = [(torch.randn(t, 2 * D, device="cuda", dtype=DTYPE), torch.empty(t, D, device="cuda", dtype=DTYPE))
                    for _ in range(harness.num_sets(nbytes))]
            comp = harness.time_calls(harness.compiled(lambda x, o: reference(x)), sets)
            # Both with a fresh output per call (from the graph's pool: the same buffer each call)
            # and both into the rotated preallocated outputs.
            comp_into = harness.time_calls(harness.compiled(lambda x, o: o.copy_(reference(x))), sets)
            ours_alloc = harness.time_calls(lambda x, o: library(x, None), sets)
            print(f"[{t}, 2x{D}]  compile {comp.us:.2f} us ({comp.gbps(nbytes):.0f} GB/s); with fresh outputs: "
                  f"library {ours_alloc.us:.2f} us ({comp.us / ours_alloc.us:.2f}x); into out: "
                  f"compile {comp_into.us:.2f} us")
            x, o = sets[0]
            cases = {"library": library}
            cases.update({f"{v} elems x {th}": (lambda x, o, fn=getattr(module, f"act_{v}x{th}"): fn(o, x, act))
                          for v, th in SHAPES})

            def written(fn, x=x, o=o):
                o.fill_(float("nan"))
                fn(x, o)
                return o

            harness.time_variants(cases, sets, comp, nbytes, 16, written)
            del sets
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
