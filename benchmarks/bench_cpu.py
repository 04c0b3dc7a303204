"""Every CPU benchmark; first the CPU kernels (mllm_kernel.cpu.jit) against PyTorch eager and torch.compile.

For each op, dtype (float32, bfloat16) and shape (4096 rows and 1 row) it prints the time per
call and the effective bandwidth (bytes the op must read and write / time) of this kernel,
PyTorch eager (the reference formula), and torch.compile of that same formula (Inductor's C++
backend), plus the machine's copy bandwidth for scale. Threads = the core count unless
--threads says otherwise. Then, unless ``--sections`` leaves them out, the host time per eager
call on the CPU (bench_call_overhead.py), the cached JIT module load (bench_jit_load.py) and
tvm-ffi's tensor passing (bench_ffi_call.py). ``--json PATH`` writes every section into a
results file (report.py renders BENCHMARKS.md from it); ``CI=true`` shrinks everything.

    python benchmarks/bench_cpu.py --json benchmarks/results/cpu.json   # the CPU half of BENCHMARKS.md
    python benchmarks/bench_cpu.py --sections kernels --ops rmsnorm,softmax --repeats 10 --no-compile
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout without installing

import mllm_kernel.cpu.jit as K  # noqa: E402
import results  # noqa: E402

CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
SECTIONS = ("kernels", "host_time", "jit_load", "ffi_call")

HIDDEN = 4096
ROWS = 4096
HEADS_Q, HEADS_K, HEAD_DIM = 32, 8, 128


def median_seconds(fn, repeats: int) -> float:
    """Median seconds per call over `repeats` timed calls (after warm-up)."""
    for _ in range(3):
        fn()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


# ---------------------------------------------------------------- eager references
def ref_rmsnorm(x, w, eps=1e-6):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * w.float()).to(x.dtype)


def ref_fused_add_rmsnorm(x, r, w, eps=1e-6):
    s = (x.float() + r.float()).to(x.dtype)
    r.copy_(s)
    x.copy_(ref_rmsnorm(s, w, eps))


def ref_fused_add_rmsnorm_out_of_place(x, r, w, eps=1e-6):
    """The same op returning (normed, new residual): Inductor's C++ backend fails on the in-place
    form above (KeyError 'buf1'), so the torch.compile column times this one. It writes fresh
    outputs, which costs it page faults the in-place kernel does not pay."""
    s = (x.float() + r.float()).to(x.dtype)
    return ref_rmsnorm(s, w, eps), s


#: References timed under torch.compile where the eager one cannot be compiled.
COMPILE_REFS = {ref_fused_add_rmsnorm: ref_fused_add_rmsnorm_out_of_place}


def ref_qknorm(q, k, qw, kw, eps=1e-6):
    q.copy_(ref_rmsnorm(q, qw, eps))
    k.copy_(ref_rmsnorm(k, kw, eps))


def ref_rope(pos, q, k, cache):
    rot = cache.shape[1]
    c = cache[pos]
    cos, sin = c[:, None, : rot // 2], c[:, None, rot // 2 :]
    for x in (q, k):
        xf = x.float()
        x1, x2 = xf[..., : rot // 2], xf[..., rot // 2 :]
        x.copy_(torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1))


def ref_silu_and_mul(x):
    d = x.shape[-1] // 2
    xf = x.float()
    return (F.silu(xf[..., :d]) * xf[..., d:]).to(x.dtype)


def ref_gelu_and_mul(x):
    d = x.shape[-1] // 2
    xf = x.float()
    return (F.gelu(xf[..., :d]) * xf[..., d:]).to(x.dtype)


def ref_per_token_quant_int8(x):
    xf = x.float()
    s = xf.abs().amax(-1, keepdim=True) / 127.0
    return (xf / s).round().clamp(-128, 127).to(torch.int8), s


def ref_group_quant_int8(x, group=128, eps=1e-10):
    xf = x.float().view(x.shape[0], -1, group)
    s = xf.abs().amax(-1, keepdim=True).clamp_min(eps) / 127.0
    return (xf / s).round().clamp(-128, 127).to(torch.int8).view(x.shape), s.squeeze(-1)


def ref_group_quant_fp8(x, group=128, eps=1e-10):
    xf = x.float().view(x.shape[0], -1, group)
    s = xf.abs().amax(-1, keepdim=True).clamp_min(eps) / 448.0
    return (xf / s).clamp(-448, 448).to(torch.float8_e4m3fn).view(x.shape), s.squeeze(-1)


def ref_softmax(x):
    return torch.softmax(x.float(), dim=-1).to(x.dtype)


def ref_store_kv_cache(k, v, kc, vc, slots):
    kc[slots] = k
    vc[slots] = v


def ref_store_kv_cache_fp8(k, v, kc, vc, slots, k_scale, v_scale):
    kc[slots] = (k.float() / k_scale).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)
    vc[slots] = (v.float() / v_scale).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)


# ---------------------------------------------------------------- cases
def make_case(op: str, dtype: torch.dtype, rows: int):
    """(kernel thunk, eager fn, eager args, bytes moved) for one op/dtype/row count."""
    e = torch.tensor([], dtype=dtype).element_size()
    g = torch.Generator().manual_seed(0)

    def rnd(*shape):
        return torch.randn(*shape, generator=g).to(dtype)

    if op == "rmsnorm":
        x, w = rnd(rows, HIDDEN), rnd(HIDDEN)
        out = torch.empty_like(x)
        return (lambda: K.rmsnorm(x, w, out=out)), ref_rmsnorm, (x, w), 2 * rows * HIDDEN * e
    if op == "fused_add_rmsnorm":
        x, r, w = rnd(rows, HIDDEN), rnd(rows, HIDDEN), torch.ones(HIDDEN, dtype=dtype)  # see qknorm
        return (lambda: K.fused_add_rmsnorm(x, r, w)), ref_fused_add_rmsnorm, (x, r, w), 4 * rows * HIDDEN * e
    if op == "qknorm":
        q, k = rnd(rows, HEADS_Q, HEAD_DIM), rnd(rows, HEADS_K, HEAD_DIM)
        # Unit weights keep repeated in-place calls from drifting into denormals (which would
        # time the FPU's slow path, not the kernel).
        qw, kw = torch.ones(HEAD_DIM, dtype=dtype), torch.ones(HEAD_DIM, dtype=dtype)
        return (lambda: K.qknorm(q, k, qw, kw)), ref_qknorm, (q, k, qw, kw), 2 * (q.numel() + k.numel()) * e
    if op == "apply_rope":
        q, k = rnd(rows, HEADS_Q, HEAD_DIM), rnd(rows, HEADS_K, HEAD_DIM)
        angles = torch.rand(8192, HEAD_DIM // 2, generator=g) * 6.28  # a true rotation: norms stay put
        cache = torch.cat([angles.cos(), angles.sin()], dim=-1)
        pos = torch.randint(0, 8192, (rows,), generator=g)
        return (lambda: K.apply_rope(pos, q, k, cache)), ref_rope, (pos, q, k, cache), 2 * (q.numel() + k.numel()) * e
    if op in ("silu_and_mul", "gelu_and_mul"):
        x = rnd(rows, 2 * HIDDEN)
        out = torch.empty(rows, HIDDEN, dtype=dtype)
        kern = K.silu_and_mul if op == "silu_and_mul" else K.gelu_and_mul
        ref = ref_silu_and_mul if op == "silu_and_mul" else ref_gelu_and_mul
        return (lambda: kern(x, out=out)), ref, (x,), 3 * rows * HIDDEN * e
    if op == "per_token_quant_int8":
        x = rnd(rows, HIDDEN)
        return (lambda: K.per_token_quant_int8(x)), ref_per_token_quant_int8, (x,), rows * HIDDEN * (e + 1)
    if op == "per_token_group_quant_int8":
        x = rnd(rows, HIDDEN)
        return (lambda: K.per_token_group_quant_int8(x)), ref_group_quant_int8, (x,), rows * HIDDEN * (e + 1)
    if op == "per_token_group_quant_fp8":
        x = rnd(rows, HIDDEN)
        return (lambda: K.per_token_group_quant_fp8(x)), ref_group_quant_fp8, (x,), rows * HIDDEN * (e + 1)
    if op == "softmax":
        x = rnd(rows, HIDDEN)
        out = torch.empty_like(x)
        return (lambda: K.softmax(x, out=out)), ref_softmax, (x,), 2 * rows * HIDDEN * e
    if op == "store_kv_cache":
        k, v = rnd(rows, HEADS_K, HEAD_DIM), rnd(rows, HEADS_K, HEAD_DIM)
        kc = torch.zeros(2 * rows, HEADS_K, HEAD_DIM, dtype=dtype)
        vc = torch.zeros_like(kc)
        slots = torch.randperm(2 * rows, generator=g)[:rows]
        return (lambda: K.store_kv_cache(k, v, kc, vc, slots)), ref_store_kv_cache, (k, v, kc, vc, slots), \
            4 * k.numel() * e
    if op == "store_kv_cache_fp8":
        k, v = rnd(rows, HEADS_K, HEAD_DIM), rnd(rows, HEADS_K, HEAD_DIM)
        kc = torch.zeros(2 * rows, HEADS_K, HEAD_DIM, dtype=torch.float8_e4m3fn)
        vc = torch.zeros_like(kc)
        slots = torch.randperm(2 * rows, generator=g)[:rows]
        ks, vs = torch.tensor([0.02]), torch.tensor([0.03])
        return (lambda: K.store_kv_cache(k, v, kc, vc, slots, k_scale=ks, v_scale=vs)), ref_store_kv_cache_fp8, \
            (k, v, kc, vc, slots, ks, vs), 2 * k.numel() * (e + 1)
    raise ValueError(f"unknown op {op!r}")


OPS = ["rmsnorm", "fused_add_rmsnorm", "qknorm", "apply_rope", "silu_and_mul", "gelu_and_mul", "per_token_quant_int8",
       "per_token_group_quant_int8", "per_token_group_quant_fp8", "softmax", "store_kv_cache", "store_kv_cache_fp8"]


def copy_bandwidth(repeats: int) -> tuple[float, float]:
    """GB/s (read + write) of torch.clone of 256 MiB (fresh pages each time) and of copy_
    into a preallocated buffer."""
    x = torch.empty(64 * 1024 * 1024, dtype=torch.float32).normal_()
    y = torch.empty_like(x)
    t_clone = median_seconds(lambda: x.clone(), max(3, repeats // 4))
    t_copy = median_seconds(lambda: y.copy_(x), max(3, repeats // 4))
    return 2 * x.nbytes / t_clone / 1e9, 2 * x.nbytes / t_copy / 1e9


COLUMNS = [
    ("op", "op", "{}"), ("dtype", "dtype", "{}"), ("rows", "rows", "{}"),
    ("ours_us", "ours µs", "{:.1f}"), ("ours_gbps", "GB/s", "{:.1f}"),
    ("eager_us", "eager µs", "{:.1f}"), ("eager_gbps", "GB/s", "{:.1f}"),
    ("compile_us", "compile µs", "{:.1f}"), ("compile_gbps", "GB/s", "{:.1f}"),
    ("vs_eager", "vs eager", "{:.2f}x"), ("vs_compile", "vs compile", "{:.2f}x"),
]
NOTES = [
    f"Norms, quantization and softmax take [rows, {HIDDEN}]; the activations [rows, 2 x {HIDDEN}]; qknorm and "
    f"rope {HEADS_Q} q heads and {HEADS_K} k heads of {HEAD_DIM}; the cache stores {HEADS_K} heads of {HEAD_DIM} "
    "into a cache of 2 x rows slots at random slots (store_kv_cache_fp8: a float8_e4m3fn cache with per-tensor "
    "scales). GB/s counts inputs read once and outputs written once; times are medians of single calls.",
    "The torch.compile column of fused_add_rmsnorm times the out-of-place form of the op (Inductor's C++ "
    "backend fails on the in-place reference); it allocates two outputs per call, which the in-place kernel "
    "does not.",
    "Working sets of 32-128 MB: where the last-level cache holds them, a kernel can pass the copy_ figure.",
]


def run_kernels(ops: list[str], dtypes: list[str], row_counts: list[int], repeats: int, compile_: bool) -> list[dict]:
    """Times every case, printing its line as it goes; returns the results rows."""
    head = f"{'op':28s} {'dtype':9s} {'rows':>5s} | {'kernel us':>10s} {'GB/s':>6s} | {'eager us':>10s} {'GB/s':>6s} | " \
           f"{'compile us':>10s} {'GB/s':>6s} | {'vs eager':>8s} {'vs comp':>7s}"
    print(head)
    print("-" * len(head))
    rows = []
    for op in ops:
        for dname in dtypes:
            dtype = getattr(torch, dname)
            for n in row_counts:
                kern, ref, ref_args, nbytes = make_case(op, dtype, n)
                reps = repeats if n > 1 else repeats * 20
                t_k = median_seconds(kern, reps)
                t_e = median_seconds(lambda: ref(*ref_args), reps)
                t_c = math.nan
                if compile_:
                    torch._dynamo.reset()
                    compiled = torch.compile(COMPILE_REFS.get(ref, ref), dynamic=False)
                    try:
                        t_c = median_seconds(lambda: compiled(*ref_args), reps)
                    except Exception as error:  # an Inductor failure is a result too, not a crash
                        print(f"  torch.compile failed for {op}/{dname}/{n}: {type(error).__name__}: "
                              f"{str(error).splitlines()[0][:100]}")
                gbs = lambda t: nbytes / t / 1e9  # noqa: E731
                print(f"{op:28s} {dname:9s} {n:5d} | {t_k * 1e6:10.1f} {gbs(t_k):6.1f} | {t_e * 1e6:10.1f} "
                      f"{gbs(t_e):6.1f} | {t_c * 1e6:10.1f} {gbs(t_c):6.1f} | {t_e / t_k:7.2f}x {t_c / t_k:6.2f}x",
                      flush=True)
                row = {"op": op, "dtype": dname, "rows": n, "ours_us": t_k * 1e6, "ours_gbps": gbs(t_k),
                       "eager_us": t_e * 1e6, "eager_gbps": gbs(t_e), "vs_eager": t_e / t_k}
                if not math.isnan(t_c):
                    row.update(compile_us=t_c * 1e6, compile_gbps=gbs(t_c), vs_compile=t_c / t_k)
                rows.append(row)
    return rows


def _unique(items):
    return list(dict.fromkeys(items))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sections", default=",".join(SECTIONS), help=f"comma-separated, from: {', '.join(SECTIONS)}")
    parser.add_argument("--ops", default=",".join(OPS))
    parser.add_argument("--dtypes", default="float32,bfloat16")
    parser.add_argument("--rows", default=f"{64 if CI else ROWS},1")
    parser.add_argument("--repeats", type=int, default=3 if CI else 50)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    results.add_json_argument(parser)
    args = parser.parse_args()
    sections = args.sections.split(",")
    unknown = sorted(set(sections) - set(SECTIONS))
    if unknown:
        parser.error(f"unknown sections: {', '.join(unknown)}")
    torch.set_num_threads(args.threads)
    device = results.cpu_name()
    written = []

    if "kernels" in sections:
        print(f"threads={torch.get_num_threads()}  torch {torch.__version__}  repeats={args.repeats}")
        clone_bw, copy_bw = copy_bandwidth(args.repeats)
        print(f"memory bandwidth, 256 MiB: torch.clone {clone_bw:.1f} GB/s, copy_ into a preallocated buffer "
              f"{copy_bw:.1f} GB/s")
        rows = run_kernels(args.ops.split(","), args.dtypes.split(","), [int(r) for r in args.rows.split(",")],
                           args.repeats, not args.no_compile)
        notes = [f"{torch.get_num_threads()} threads, PyTorch {torch.__version__}; device copy bandwidth = copy_ of "
                 f"256 MiB into a preallocated buffer (torch.clone, fresh pages every call: {clone_bw:.1f} GB/s).",
                 *NOTES] + (["CI=true: reduced shapes and repetitions, a smoke test only."] if CI else [])
        # One section per op, so that a run of a few ops (--ops) replaces only their rows.
        for op in _unique(r["op"] for r in rows):
            written.append(results.section(f"cpu/kernels/{op}", "cpu_kernels", op, device, COLUMNS,
                                           [r for r in rows if r["op"] == op], copy_gbps=copy_bw, notes=notes))
    if "host_time" in sections:
        import bench_call_overhead

        measured = bench_call_overhead.run_cpu(200 if CI else 20000)
        print()
        bench_call_overhead.print_cpu(measured)
        written.append(bench_call_overhead.cpu_section(measured))
    if "jit_load" in sections:
        import bench_jit_load

        samples = 3 if CI else 15
        rows = bench_jit_load.measure(samples)
        print()
        bench_jit_load.print_rows(samples, rows)
        written.append(bench_jit_load.section("cpu", device, samples, rows))
    if "ffi_call" in sections:
        import bench_ffi_call

        rows = bench_ffi_call.measure("cpu")
        print()
        bench_ffi_call.print_rows("cpu", rows)
        written.append(bench_ffi_call.section("cpu", device, rows))
    results.write(args.json, *written)


if __name__ == "__main__":
    main()
