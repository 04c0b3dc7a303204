"""Shared CUDA benchmark harness: CUDA-graph timing, L2-defeating input rotation, bandwidth.

Every case is timed three ways in the same process: our kernel, the PyTorch eager reference,
and ``torch.compile`` of that same reference. Each is captured in a CUDA graph that calls it
once per input set, cycling through enough independent input sets that the bytes touched
exceed twice the L2 size (so L2 does not flatter large shapes; small shapes measure latency),
and going round the sets until the graph holds at least ``GRAPH_CALLS`` calls (with at least
two sets, so that no call reads the input its predecessor just read): a graph replay costs a
few microseconds of launch before its first kernel starts, which one call a graph (as large
shapes had before 2026-11-24) adds to every call of ours and of the reference alike, where a
serving engine's graph of a whole layer pays it once. The graph is replayed several times and
the median per-call time reported, with the achieved bandwidth for ``bytes = inputs read once +
outputs written once``. ``MLLM_BENCH_GRAPH_CALLS=1`` in the environment measures as before.

``CI=true`` in the environment shrinks shapes and repetitions (the numbers are then only a
smoke test).
"""

from __future__ import annotations

import math
import os
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import torch

# Run from a checkout without installing: make `mllm_kernel` importable.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import results  # noqa: E402  (beside this file)

CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
#: Idle seconds before each row of a GEMM benchmark: products at large M slow the GPU's clocks for
#: a while, and a clock-bound kernel timed right after them would measure the throttle.
SETTLE_S = 1.0


def settle() -> None:
    """Waits SETTLE_S with the GPU idle (not under CI), so one row's clocks do not carry into the next."""
    torch.cuda.synchronize()
    time.sleep(0 if CI else SETTLE_S)


#: Rows of a GEMM from which every contender starts after the idle second, not only the row's
#: first: these products heat the GPU enough to slow the clocks of whichever runs next.
SETTLE_EACH_M = 1024


def settle_row(m: int) -> None:
    """At the start of a benchmark row of M rows: settle() where its contenders do not each."""
    if m < SETTLE_EACH_M:
        settle()


def contender_us(fn: Callable, arg_sets: Sequence[tuple], m: int = 0) -> float:
    """time_calls' µs per call for one contender of a GEMM row of M rows, which from
    SETTLE_EACH_M on starts after settle()."""
    if m >= SETTLE_EACH_M:
        settle()
    return time_calls(fn, arg_sets).us


#: Bytes the rotated input sets must exceed so L2 (50 MB on H100) cannot hold them.
ROTATE_BYTES = 100 * 2**20
#: Most input sets per case (small shapes: rotation matters little, latency dominates).
MAX_SETS = 64 if CI else 200
#: Fewest calls a timed graph holds (going round the input sets), so that the graph's own launch
#: is spread over them.
GRAPH_CALLS = max(1, int(os.environ.get("MLLM_BENCH_GRAPH_CALLS", "8")))
#: Fewest input sets: two where a graph holds several calls, so no call re-reads the last input.
MIN_SETS = 1 if GRAPH_CALLS == 1 else 2
REPLAYS = 5 if CI else 15


def ci() -> bool:
    return CI


@dataclass
class Timing:
    us: float  # median microseconds per call
    graph: bool  # measured under a CUDA graph (False: eager loop fallback)

    def gbps(self, nbytes: int) -> float:
        return nbytes / (self.us * 1e-6) / 1e9


def num_sets(bytes_per_call: int) -> int:
    """Input sets to rotate through for a call touching ``bytes_per_call`` bytes."""
    return max(MIN_SETS, min(MAX_SETS, math.ceil(ROTATE_BYTES / max(1, bytes_per_call))))


def _median_replay_us(run: Callable[[], None], calls: int, replays: int) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(replays):
        start.record()
        run()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / calls)
    return statistics.median(times)


def graph_calls(arg_sets: Sequence[tuple]) -> list[tuple]:
    """The argument sets of a timed graph's calls: ``arg_sets`` in turn, round as often as it
    takes to make at least GRAPH_CALLS calls."""
    return list(arg_sets) * math.ceil(GRAPH_CALLS / max(1, len(arg_sets)))


def time_calls(fn: Callable, arg_sets: Sequence[tuple], replays: int = REPLAYS) -> Timing:
    """Median time of ``fn(*args)`` per call, cycling through ``arg_sets`` inside one CUDA graph
    (round them as often as it takes to hold at least GRAPH_CALLS calls).

    Falls back to a timed eager loop (``graph=False``) when capture fails."""
    arg_sets = graph_calls(arg_sets)
    torch.cuda.synchronize()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for args in arg_sets[:3]:  # warm up (JIT builds, autotuning, lazy init) outside capture
            fn(*args)
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    try:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for args in arg_sets:
                fn(*args)
        graph.replay()
        torch.cuda.synchronize()
        return Timing(_median_replay_us(graph.replay, len(arg_sets), replays), True)
    except Exception as error:  # noqa: BLE001 - report and fall back to eager timing
        print(f"  [harness] CUDA graph capture failed ({type(error).__name__}: {error}); timing eagerly",
              file=sys.stderr)
        torch.cuda.synchronize()

        def loop():
            for args in arg_sets:
                fn(*args)

        return Timing(_median_replay_us(loop, len(arg_sets), replays), False)


_COMPILED: dict = {}


def compiled(fn: Callable) -> Callable:
    """``torch.compile(fn)`` once per function (static shapes: each shape gets its own kernels)."""
    if fn not in _COMPILED:
        import torch._dynamo

        torch._dynamo.config.cache_size_limit = max(torch._dynamo.config.cache_size_limit, 64)
        _COMPILED[fn] = torch.compile(fn, dynamic=False)
    return _COMPILED[fn]


@dataclass
class Row:
    op: str
    shape: str
    nbytes: int
    ours: Timing
    eager: Timing | None
    compiled: Timing | None
    notes: list = field(default_factory=list)
    ours_no_pdl: Timing | None = None  # ours with enable_pdl=False (the default launch uses PDL on sm_90+)


def measure(op: str, shape: str, nbytes: int, make_args: Callable[[], tuple], ours: Callable,
            reference: Callable | None, with_compile: bool = True, ours_no_pdl: Callable | None = None) -> Row:
    """Times ``ours`` (the op's default launch, with programmatic dependent launch on sm_90+)
    and (when given) ``ours_no_pdl``, the same call with ``enable_pdl=False``, and ``reference``
    eager and compiled, on fresh input sets. Back to back in a graph, PDL lets each call's launch
    overlap the previous call's tail, as it does between the ops of a decoder layer; the no-PDL
    column is the kernel without that overlap."""
    sets = [make_args() for _ in range(num_sets(nbytes))]
    t_ours = time_calls(ours, sets)
    t_no_pdl = time_calls(ours_no_pdl, sets) if ours_no_pdl is not None else None
    t_eager = time_calls(reference, sets) if reference is not None else None
    t_comp = time_calls(compiled(reference), sets) if reference is not None and with_compile else None
    del sets
    torch.cuda.empty_cache()
    return Row(op, shape, nbytes, t_ours, t_eager, t_comp, ours_no_pdl=t_no_pdl)


#: The last copy_bandwidth_gbps measurement of each way, GB/s (for copy_note).
_copy_measured: dict[str, float] = {}


def copy_bandwidth_gbps(nbytes: int = 1 << 30) -> float:
    """Device-to-device copy bandwidth (read + write counted), the practical ceiling: the faster
    of ``copy_`` (cudaMemcpy) and an elementwise kernel moving the same bytes (``torch.neg`` on
    float32): on some GPUs the memcpy path runs well below what a kernel reaches."""
    src = torch.randn(nbytes // 8, device="cuda")
    dst = torch.empty_like(src)
    _copy_measured["cudaMemcpy"] = time_calls(lambda: dst.copy_(src), [()], replays=REPLAYS).gbps(nbytes)
    _copy_measured["an elementwise kernel"] = time_calls(lambda: torch.neg(src, out=dst), [()],
                                                          replays=REPLAYS).gbps(nbytes)
    del src, dst
    torch.cuda.empty_cache()
    return max(_copy_measured.values())


def copy_note() -> list[str]:
    """A results note giving both ways of the last copy_bandwidth_gbps (none before one ran)."""
    if not _copy_measured:
        return []
    ways = " and ".join(f"{way} ({gbps:.0f} GB/s)" for way, gbps in _copy_measured.items())
    return [f"device copy bandwidth: the faster of {ways}."]


def _fmt(t: Timing | None, nbytes: int) -> str:
    if t is None:
        return f"{'-':>9} {'-':>7}"
    mark = "" if t.graph else "*"
    return f"{t.us:8.2f}{mark:1} {t.gbps(nbytes):7.0f}"


def _speedup(compiled_time: Timing | None, ours: Timing | None) -> str:
    return f"{compiled_time.us / ours.us:9.2f}x" if compiled_time and ours else f"{'-':>10}"


def print_table(title: str, rows: Sequence[Row], copy_gbps: float | None = None) -> None:
    """A short table: µs and GB/s for ours, eager and compiled, and our speedup over compile;
    plus ours without PDL and its speedup where the rows have it."""
    pdl = any(r.ours_no_pdl is not None for r in rows)
    print(f"\n== {title}" + (f"  (D2D copy: {copy_gbps:.0f} GB/s)" if copy_gbps else ""))
    print(f"{'shape':<28} {'MB':>8} | {'ours us':>9} {'GB/s':>7} | {'eager us':>9} {'GB/s':>7} | "
          f"{'compile us':>9} {'GB/s':>7} | {'vs compile':>10}" + (f" | {'no-PDL us':>9} {'GB/s':>7} | {'vs compile':>10}" if pdl else ""))
    for r in rows:
        line = (f"{r.shape:<28} {r.nbytes / 2**20:8.2f} | {_fmt(r.ours, r.nbytes)} | {_fmt(r.eager, r.nbytes)} | "
                f"{_fmt(r.compiled, r.nbytes)} | {_speedup(r.compiled, r.ours)}")
        if pdl:
            line += f" | {_fmt(r.ours_no_pdl, r.nbytes)} | {_speedup(r.compiled, r.ours_no_pdl)}"
        print(line)
    if any(not t.graph for r in rows for t in (r.ours, r.ours_no_pdl, r.eager, r.compiled) if t is not None):
        print("  * = timed eagerly (CUDA graph capture failed)")


#: The columns of a comparison table in the results files (report.py drops the ones no row has).
COLUMNS = [
    ("op", "op", "{}"), ("shape", "shape", "{}"), ("mb", "MB", "{:.2f}"),
    ("ours_us", "ours µs", "{:.2f}"), ("ours_gbps", "GB/s", "{:.0f}"),
    ("eager_us", "eager µs", "{:.2f}"), ("eager_gbps", "GB/s", "{:.0f}"),
    ("compile_us", "compile µs", "{:.2f}"), ("compile_gbps", "GB/s", "{:.0f}"),
    ("vs_eager", "vs eager", "{:.2f}x"), ("vs_compile", "vs compile", "{:.2f}x"),
    ("no_pdl_us", "no-PDL µs", "{:.2f}"), ("no_pdl_gbps", "GB/s", "{:.0f}"),
    ("no_pdl_vs_compile", "no-PDL vs compile", "{:.2f}x"),
]


def record(r: Row) -> dict:
    """A row of a results file: µs and GB/s of each timing the row has, and the speedups."""
    rec = {"op": r.op, "shape": r.shape, "mb": r.nbytes / 2**20}
    for key, t in (("ours", r.ours), ("eager", r.eager), ("compile", r.compiled), ("no_pdl", r.ours_no_pdl)):
        if t is not None:
            rec[f"{key}_us"], rec[f"{key}_gbps"] = t.us, t.gbps(r.nbytes)
            if not t.graph:
                rec[f"{key}_eager_timed"] = True
    if r.eager:
        rec["vs_eager"] = r.eager.us / r.ours.us
    if r.compiled:
        rec["vs_compile"] = r.compiled.us / r.ours.us
        if r.ours_no_pdl:
            rec["no_pdl_vs_compile"] = r.compiled.us / r.ours_no_pdl.us
    return rec


def device_name() -> str:
    return torch.cuda.get_device_name()


def cuda_section(op: str, family: str, title: str, rows: Sequence[Row], copy_gbps: float,
                 notes: Sequence[str] = ()) -> dict:
    """The results section ``cuda/<op>`` of a comparison table."""
    env = f"PyTorch {torch.__version__}, CUDA {torch.version.cuda}"
    notes = [env, *copy_note(), *notes]
    notes += ["CI=true: reduced shapes and repetitions, a smoke test only."] if CI else []
    if GRAPH_CALLS != 8:
        notes.append(f"MLLM_BENCH_GRAPH_CALLS={GRAPH_CALLS}.")
    return results.section(f"cuda/{op}", family, title, device_name(), COLUMNS, [record(r) for r in rows],
                           copy_gbps=copy_gbps, notes=notes)


def write_rows_section(json_path: str | None, op: str, family: str, title: str, columns: Sequence[results.Column],
                       rows: Sequence[dict], note: str) -> None:
    """For a script that prints its own columns (the GEMM comparisons): measures and prints the
    copy bandwidth, then writes ``rows`` as the results section ``cuda/<op>`` with ``note``."""
    copy = copy_bandwidth_gbps()
    print(f"copy bandwidth: {copy:.0f} GB/s")
    notes = [note, *copy_note()] + (["CI=true: reduced shapes and repetitions, a smoke test only."] if CI else [])
    results.write(json_path, results.section(f"cuda/{op}", family, title, device_name(), columns, rows,
                                             copy_gbps=copy, notes=notes))


def bench_main(doc: str, title: str, run: Callable[[], list], section: Callable[[list, float], dict]) -> None:
    """What a single CUDA benchmark script does: ``run()``, print the table, and with
    ``--json PATH`` write ``section(rows, copy_gbps)`` into that results file."""
    import argparse

    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    results.add_json_argument(parser)
    args = parser.parse_args()
    require_cuda()
    rows = run()
    copy = copy_bandwidth_gbps()
    print_table(title, rows, copy)
    results.write(args.json, section(rows, copy))


def host_us_per_call(cases: Sequence[tuple[str, Callable[[], object]]], iters: int, rounds: int = 5,
                     sync: Callable[[], None] = lambda: None) -> list[tuple[str, float]]:
    """Host time per call of each case, in µs: loops of ``iters`` calls synchronised once at the
    end. The cases are interleaved round by round, so a drift in the machine's speed (frequent
    on the GPU host) hits them all alike; each case reports its best round."""
    for _, fn in cases:
        for _ in range(100):
            fn()
    sync()
    best = {name: float("inf") for name, _ in cases}
    for _ in range(rounds):
        for name, fn in cases:
            start = time.perf_counter()
            for _ in range(iters):
                fn()
            sync()
            best[name] = min(best[name], (time.perf_counter() - start) / iters * 1e6)
    return [(name, best[name]) for name, _ in cases]


def token_counts() -> list[int]:
    """Token counts every op is measured at: decode-sized batches and a large prefill."""
    return [1, 64, 2048] if CI else [1, 16, 64, 1024, 16384]


def require_cuda() -> None:
    if not torch.cuda.is_available():
        print("CUDA is not available: nothing to benchmark.")
        raise SystemExit(0)
