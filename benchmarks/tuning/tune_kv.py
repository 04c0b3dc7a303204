"""Launch-shape sweep for store_kv_cache on bf16 [T, 32, 128] k and v (H100 tuning aid).

For every token count, times under the harness's CUDA graphs the library op, ``torch.compile``
of the reference, the library kernel launched with each block size of ``kv_shapes.cuh`` (a
token's 512 16-byte units spread over 512 / threads blocks), and the minimal kernels of that
file (16- or 8-byte units; k and v by one thread, or split over alternate blocks), checking
that each writes what the library writes. The library picks its block size from the head size;
this shows which size wins where, and what the library's generality costs. The FP8 sweep
(``--ops fp8``) times the quantizing store into float8_e4m3fn caches against the lean kernels
of that file with several vectors of k and v a thread, with a block for k or for v, with
blocks of whole tokens, and as a persistent grid that loads the next token before storing one.

    python benchmarks/tuning/tune_kv.py [--tokens 1,16,64,1024,16384] [--ops bf16,fp8]
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import bench_kv_cache  # noqa: E402
import harness  # noqa: E402

THREADS = [512, 256, 128, 64, 32]
LEAN = [(16, False), (16, True), (8, False), (8, True)]  # (unit bytes, k and v split over blocks)
# (threads a block, vectors a thread, streaming loads and stores)
FP8_LEAN = [(256, 1, False), (256, 2, False), (512, 1, False), (256, 1, True), (512, 1, True)]
# (threads a block, every k then every v): a block for k or for v of a token
FP8_SPLIT = [(512, False), (512, True), (256, False), (256, True)]
FP8_TOKENS = [512, 1024]  # threads a block of whole tokens
FP8_PERSISTENT = [(512, 3), (512, 4), (512, 2)]  # (threads a block, blocks an SM) of a persistent grid
DTYPE = torch.bfloat16


def _lean_name(unit_bytes: int, split: bool) -> str:
    return f"lean_{unit_bytes}{'_split' if split else ''}"


def _module():
    from mllm_kernel.jit_utils import load_cuda_jit

    wrappers = [(f"kv_{t}", f"run_kv_shape<{t}>") for t in THREADS]
    wrappers += [(_lean_name(b, s), f"run_kv_lean<{b}, {str(s).lower()}>") for b, s in LEAN]
    wrappers += [(f"fp8_lean_{t}_{i}_{int(c)}", f"run_kv_fp8_lean<{t}, {i}, {str(c).lower()}>") for t, i, c in FP8_LEAN]
    wrappers += [(f"fp8_split_{t}_{int(h)}", f"run_kv_fp8_split<{t}, {str(h).lower()}>") for t, h in FP8_SPLIT]
    wrappers += [(f"fp8_tokens_{t}", f"run_kv_fp8_tokens<{t}>") for t in FP8_TOKENS]
    wrappers += [(f"fp8_persistent_{t}_{b}", f"run_kv_fp8_persistent<{t}, {b}>") for t, b in FP8_PERSISTENT]
    return load_cuda_jit("tune_kv_shapes", cuda_files=[Path(__file__).resolve().parent / "kv_shapes.cuh"],
                         cuda_wrappers=wrappers)


def main() -> None:
    tokens, ops = harness.tuning_options(__doc__, "1,16,64,1024,16384", ("bf16", "fp8"))
    module = _module()
    print(f"device: {torch.cuda.get_device_name()}  copy {harness.copy_bandwidth_gbps():.0f} GB/s")
    for op in ops:
        _sweep(module, tokens, op == "fp8")


def _cases(module, fp8: bool) -> dict:
    """The library's store and the variants of kv_shapes.cuh; each takes one input set."""
    from mllm_kernel.cuda.jit.kv_cache import store_kv_cache

    if fp8:
        cases = {"library": lambda k, v, kc, vc, s, ks, vs: store_kv_cache(k, v, kc, vc, s, validate=False,
                                                                          k_scale=ks, v_scale=vs),
                 "library, no PDL": lambda k, v, kc, vc, s, ks, vs: store_kv_cache(
                     k, v, kc, vc, s, validate=False, k_scale=ks, v_scale=vs, enable_pdl=False)}
        cases.update({f"lean {th} x {i}{' stream' if c else ''}": getattr(module, f"fp8_lean_{th}_{i}_{int(c)}")
                      for th, i, c in FP8_LEAN})
        cases.update({f"split {th}{', k then v' if h else ''}": getattr(module, f"fp8_split_{th}_{int(h)}")
                      for th, h in FP8_SPLIT})
        cases.update({f"whole tokens, {th} threads": getattr(module, f"fp8_tokens_{th}") for th in FP8_TOKENS})
        cases.update({f"persistent {th} x {b} an SM": getattr(module, f"fp8_persistent_{th}_{b}")
                      for th, b in FP8_PERSISTENT})
        return cases
    cases = {"library": lambda k, v, kc, vc, s: store_kv_cache(k, v, kc, vc, s, validate=False)}
    cases.update({f"{th} threads": getattr(module, f"kv_{th}") for th in THREADS})
    cases.update({f"lean {b}B{' split' if s else ''}": getattr(module, _lean_name(b, s)) for b, s in LEAN})
    return cases


def _sweep(module, tokens: list[int], fp8: bool) -> None:
    """bf16 k and v into bf16 caches, or (fp8) into float8_e4m3fn caches with device scales."""
    heads, head_dim = bench_kv_cache.HEADS, bench_kv_cache.HEAD_DIM
    cache_dtype = torch.float8_e4m3fn if fp8 else DTYPE
    suffix = " -> fp8" if fp8 else ""
    reference = bench_kv_cache.reference_fp8 if fp8 else bench_kv_cache.reference
    cases = _cases(module, fp8)
    print(f"\n== store_kv_cache bf16 [T, {heads}, {head_dim}]{suffix}: us per call "
          "(vs compile: compile time / this time)")
    for t in tokens:
        nbytes = 2 * t * heads * head_dim * (3 if fp8 else 4) + 8 * t

        def make():
            k, v = (torch.randn(t, heads, head_dim, device="cuda", dtype=DTYPE) for _ in range(2))
            k_cache, v_cache = (torch.empty(2 * t, heads, head_dim, device="cuda", dtype=cache_dtype) for _ in range(2))
            scales = (torch.full((1,), 0.02, device="cuda"), torch.full((1,), 0.03, device="cuda")) if fp8 else ()
            return k, v, k_cache, v_cache, torch.randperm(2 * t, device="cuda")[:t], *scales

        sets = [make() for _ in range(harness.num_sets(nbytes))]
        comp = harness.time_calls(harness.compiled(reference), sets)
        print(f"[{t}, {heads}, {head_dim}]{suffix}  compile {comp.us:.2f} us ({comp.gbps(nbytes):.0f} GB/s)")
        args = sets[0]
        k_cache, v_cache, slots = args[2], args[3], args[4]

        def written(fn, args=args, k_cache=k_cache, v_cache=v_cache, slots=slots):
            for cache in (k_cache, v_cache):  # NaN poison (0x7F is NaN in float8_e4m3fn)
                if fp8:
                    cache.view(torch.uint8).fill_(0x7F)
                else:
                    cache.fill_(float("nan"))
            fn(*args)
            stored = torch.cat([k_cache[slots], v_cache[slots]])
            return stored.view(torch.uint8) if fp8 else stored

        harness.time_variants(cases, sets, comp, nbytes, 14 if fp8 else 12, written)
        del sets
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
