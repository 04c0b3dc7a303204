"""FP8 quantizer variants on [T, 4096] bf16 against the library and torch.compile (H100 tuning aid).

For static per-tensor, per-token and group-128 quantization, times under the harness's CUDA
graphs the library op, ``torch.compile`` of the reference and the kernels of
``quant_variants.cuh``: each division (IEEE per element, a multiply by the reciprocal as a
speed bound, ``ScaleDivisor``) with a few block shapes. Shows what the small-token cases
spend their time on.

    python benchmarks/tuning/tune_quant.py [--tokens 1,64,1024,16384] [--ops dynamic,static,token,group]
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import bench_quant  # noqa: E402
import harness  # noqa: E402

HIDDEN = 4096
OPS = ("dynamic", "static", "token", "group", "group_int8")  # the --ops names of _cases, in its order
FP8 = torch.float8_e4m3fn
DIVISIONS = {0: "ieee", 1: "recip", 2: "divisor"}
STATIC_THREADS = (128, 256)
TOKEN_THREADS = (128, 256, 512)
GROUP_LANES = (4, 8, 16)
# Group 128 into fp8 and int8 with the library's conversion: (lanes a group, min blocks an SM).
GROUP_OUT = [(8, 1), (8, 8), (16, 1), (16, 8), (4, 1)]
# The library's per-tensor kernels: vectors a thread of static quantization; (amax-pass loads in
# flight, vectors a thread of the quantization pass) of the dynamic two-pass path.
STATIC_ITEMS = (1, 2, 4)
# Static quantization in narrower vectors: (elements a vector, vectors a thread).
STATIC_VECS = [(2, 1), (4, 1), (2, 2), (4, 2)]
TWO_PASS_ITEMS = [(1, 1), (4, 1), (4, 2), (8, 1)]
# The resident one-launch path (an experiment): (threads a block, loads in flight a thread, blocks
# an SM, MB of the streamed part marked evict_last, KB of shared memory a block at most (-1: all
# it can have)).
RESIDENT = [(1024, 2, 1, 32, -1), (1024, 4, 1, 32, -1), (1024, 2, 1, 32, 0), (1024, 2, 1, 32, 96), (512, 2, 2, 32, -1),
            (512, 4, 2, 32, -1), (256, 4, 4, 32, -1)]


def _module():
    from mllm_kernel.jit_utils import load_cuda_jit

    wrappers = []
    for d in DIVISIONS:
        wrappers += [(f"static_{t}_{d}", f"run_static<{t}, {d}>") for t in STATIC_THREADS]
        wrappers += [(f"token_{t}_{d}", f"run_token<{t}, {d}>") for t in TOKEN_THREADS]
        wrappers += [(f"group_{lanes}_{d}", f"run_group<{lanes}, {d}>") for lanes in GROUP_LANES]
    wrappers += [(f"group_out_{out}_{lanes}_{b}", f"run_group_out<{str(out == 'int8').lower()}, {lanes}, {b}>")
                 for out in ("fp8", "int8") for lanes, b in GROUP_OUT]
    return load_cuda_jit("tune_quant_variants", cuda_files=[Path(__file__).resolve().parent / "quant_variants.cuh"],
                         cuda_wrappers=wrappers)


def _resident_name(threads, unroll, blocks, keep_mb, stash_kb):
    return f"resident_{threads}x{blocks}_u{unroll}_keep{keep_mb}{'' if stash_kb < 0 else f'_stash{stash_kb}k'}"


# The amax pass through the bulk-copy unit (an experiment): (chunk bytes, stages); alone and with
# the quantization pass.
BULK = [(8192, 4), (16384, 4), (16384, 6), (32768, 3)]
# Walk orders (an experiment): (amax pass backwards, MB it marks evict_last), quantization forwards.
ORDERED = [(1, 32), (1, 40), (1, 24), (0, 32)]


def _tensor_module():
    from mllm_kernel.jit_utils import load_cuda_jit

    wrappers = ([(f"static_items_{i}", f"run_static_vec<8, {i}>") for i in STATIC_ITEMS]
                + [(f"static_vec_{v}_{i}", f"run_static_vec<{v}, {i}>") for v, i in STATIC_VECS]
                + [(f"two_pass_{a}_{i}", f"run_two_pass<{a}, {i}>") for a, i in TWO_PASS_ITEMS]
                + [(_resident_name(*r), f"run_resident<{', '.join(map(str, r))}>")
                   for r in RESIDENT]
                + [("amax_only", "run_amax_only")]
                + [(f"bulk_{c}x{n}_{q}", f"run_bulk_amax<{c}, {n}, {str(q == 'quant').lower()}>")
                   for c, n in BULK for q in ("amax", "quant")]
                + [(f"ordered_{r}_{k}", f"run_ordered<{str(bool(r)).lower()}, {k}>") for r, k in ORDERED])
    return load_cuda_jit("tune_quant_tensor", cuda_files=[Path(__file__).resolve().parent / "tensor_variants.cuh"],
                         cuda_wrappers=wrappers)


def _cases(module, tensor, t: int):
    """(op, library fn, reference fn, {variant: fn}, scales per row, out dtype); every fn takes (x,
    out, scales), a variant fn (out, scales, x)."""
    from mllm_kernel.cuda.jit import (
        per_tensor_quant_fp8,
        per_token_group_quant_fp8,
        per_token_group_quant_int8,
        per_token_quant_fp8,
    )

    def variants(kind, shapes):
        return {f"{kind} {s} {name}": getattr(module, f"{kind}_{s}_{d}") for s in shapes for d, name in DIVISIONS.items()}

    def group_out(out):
        return {f"{out} {lanes} lanes, {b} blocks/SM": getattr(module, f"group_out_{out}_{lanes}_{b}")
                for lanes, b in GROUP_OUT}

    return [
        ("per_tensor dynamic", lambda x, o, s: per_tensor_quant_fp8(x, out=o),
         lambda x, o, s: bench_quant.ref_per_tensor_dynamic(x),
         {**{f"two_pass amax {a} quant {i}": getattr(tensor, f"two_pass_{a}_{i}") for a, i in TWO_PASS_ITEMS},
          **{_resident_name(*r): getattr(tensor, _resident_name(*r)) for r in RESIDENT},
          "amax pass alone": tensor.amax_only,
          **{f"bulk amax {c}x{n} {q}": getattr(tensor, f"bulk_{c}x{n}_{q}") for c, n in BULK for q in ("amax", "quant")},
          **{f"amax {'backwards' if r else 'forwards'} keep {k} MB, quant forwards": getattr(tensor, f"ordered_{r}_{k}")
             for r, k in ORDERED}},
         0, FP8),
        ("per_tensor static", lambda x, o, s: per_tensor_quant_fp8(x, s, out=o),
         lambda x, o, s: bench_quant.ref_per_tensor_static(x, s),
         {**variants("static", STATIC_THREADS),
          **{f"static items {i}": getattr(tensor, f"static_items_{i}") for i in STATIC_ITEMS},
          **{f"static {v} elements x {i}": getattr(tensor, f"static_vec_{v}_{i}") for v, i in STATIC_VECS}}, 0, FP8),
        ("per_token", lambda x, o, s: per_token_quant_fp8(x, out=o),
         lambda x, o, s: bench_quant.ref_per_token_fp8(x), variants("token", TOKEN_THREADS), 1, FP8),
        ("group128", lambda x, o, s: per_token_group_quant_fp8(x, 128, out=o),
         lambda x, o, s: bench_quant.ref_group_fp8(x),
         {"library enable_pdl=False": lambda o, s, x: per_token_group_quant_fp8(x, 128, out=o, enable_pdl=False),
          **variants("group", GROUP_LANES), **group_out("fp8")},
         HIDDEN // 128, FP8),
        ("group128 int8", lambda x, o, s: per_token_group_quant_int8(x, 128, out=o),
         lambda x, o, s: bench_quant.ref_group_int8(x),
         {"library enable_pdl=False": lambda o, s, x: per_token_group_quant_int8(x, 128, out=o, enable_pdl=False),
          **group_out("int8")},
         HIDDEN // 128, torch.int8),
    ]


def main() -> None:
    tokens, ops = harness.tuning_options(__doc__, "1,64,1024,16384", OPS)
    module, tensor = _module(), _tensor_module()
    print(f"device: {torch.cuda.get_device_name()}  copy {harness.copy_bandwidth_gbps():.0f} GB/s")
    for t in tokens:
        nbytes = 3 * t * HIDDEN
        for key, (op, library, reference, variants, scales_per_row, out_dtype) in zip(OPS, _cases(module, tensor, t)):
            if key not in ops:
                continue
            def make(scales_per_row=scales_per_row, out_dtype=out_dtype):
                x = torch.randn(t, HIDDEN, device="cuda", dtype=torch.bfloat16)
                s = (torch.full((1,), 0.05, device="cuda") if scales_per_row == 0
                     else torch.empty(t * scales_per_row, device="cuda"))
                return x, torch.empty(t, HIDDEN, device="cuda", dtype=out_dtype), s

            sets = [make() for _ in range(harness.num_sets(nbytes))]
            comp = harness.time_calls(harness.compiled(reference), sets)
            print(f"\n== {op} [{t}, {HIDDEN}]  compile {comp.us:.2f} us ({comp.gbps(nbytes):.0f} GB/s)")
            x, o, s = sets[0]
            # The variants take (out, scales, input); each must write the library's output.
            cases = {"library": library, **{name: (lambda x, o, s, fn=fn: fn(o, s, x)) for name, fn in variants.items()}}

            def written(fn, x=x, o=o, s=s):
                o.fill_(0x7F)
                fn(x, o, s)
                return o.view(torch.uint8)

            harness.time_variants(cases, sets, comp, nbytes, 24, written)
            del sets
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
