"""Gated DeltaNet: mllm_kernel's gdn_decode and gdn_extend_chunkwise beside
flash-linear-attention's Triton kernels (fla-core: fused_recurrent_gated_delta_rule for decode,
chunk_gated_delta_rule for prefill) in the same run, at 32 heads of 128 x 128 (q, k, v heads
equal), bf16 inputs, float32 states.

    python benchmarks/bench_gdn.py [--json benchmarks/results/cuda.json]      # H100 (needs fla-core)
    python benchmarks/bench_gdn.py --device cpu [--json benchmarks/results/cpu.json]

fla is called with the same work fused in: q/k L2 norm, the gate from A_log and dt_bias, the
sigmoid of beta, the state in [V, K] layout (state_v_first) read from an initial state and
written back as the final state; ours also gathers the states from a pool by index. CUDA times:
the median of CUDA-graph replays over rotated input sets (benchmarks/harness.py), for both.
Decode GB/s: the state bytes read and written. "decode x T" is our decode kernel's time at
batch 1 times the sequence's tokens, the cost of running a prefill token by token. CPU: ours
against mllm_kernel.reference.gdn in float32 (PyTorch, vectorised over heads), on the same
machine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402
import results  # noqa: E402

HEADS, DK, DV = 32, 128, 128
CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def _inputs(tokens: int, seqs: int, device: str, dtype=torch.bfloat16):
    g = torch.Generator(device="cpu").manual_seed(tokens + seqs)

    def r(*shape, scale=1.0):
        return (torch.randn(*shape, generator=g) * scale).to(dtype).to(device)

    q, k, v = r(tokens, HEADS, DK), r(tokens, HEADS, DK), r(tokens, HEADS, DV)
    a, b = r(tokens, HEADS), r(tokens, HEADS)
    A_log = (torch.rand(HEADS, generator=g) * 2 - 1).to(device)
    dt_bias = torch.randn(HEADS, generator=g).to(device)
    pool = (torch.randn(seqs, HEADS, DV, DK, generator=g) * 0.1).to(device)
    indices = torch.randperm(seqs, generator=g).to(device)
    return q, k, v, a, b, A_log, dt_bias, pool, indices


def _fla(fn, q, k, v, a, b, A_log, dt_bias, state, cu_seqlens, cu_cpu=None):
    extra = {"cu_seqlens_cpu": cu_cpu} if cu_cpu is not None else {}
    return fn(q[None], k[None], v[None], g=a[None], beta=b[None], initial_state=state, output_final_state=True,
              use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True, A_log=A_log, dt_bias=dt_bias,
              use_beta_sigmoid_in_kernel=True, state_v_first=True, cu_seqlens=cu_seqlens, **extra)


def _sets(tokens: int, seqs: int, nbytes: int) -> list[tuple]:
    """Input sets (each with its own pool) to rotate through a timed graph, so that L2 holds none
    of them from one call to its next: ``harness.num_sets`` of them for calls of ``nbytes``."""
    sets = []
    for _ in range(harness.num_sets(nbytes)):
        q, k, v, a, b, A_log, dt_bias, pool, idx = _inputs(tokens, seqs, "cuda")
        cu_cpu = torch.linspace(0, tokens, seqs + 1).round().long()
        sets.append((q, k, v, a, b, A_log, dt_bias, pool, idx, cu_cpu.cuda(), cu_cpu))
    return sets


def run_cuda() -> list[dict]:
    from fla.ops.gated_delta_rule import chunk_gated_delta_rule, fused_recurrent_gated_delta_rule

    from mllm_kernel.cuda.jit import gdn_decode, gdn_extend_chunkwise

    def ours_decode(q, k, v, a, b, A_log, dt_bias, pool, idx, cu, cu_cpu):
        gdn_decode(q, k, v, a, b, A_log, dt_bias, pool, idx, validate=False)

    def fla_decode(q, k, v, a, b, A_log, dt_bias, pool, idx, cu, cu_cpu):
        _fla(fused_recurrent_gated_delta_rule, q, k, v, a, b, A_log, dt_bias, pool, cu)

    def ours_extend(q, k, v, a, b, A_log, dt_bias, pool, idx, cu, cu_cpu):
        gdn_extend_chunkwise(q, k, v, a, b, A_log, dt_bias, pool, idx, cu, validate=False)

    def fla_extend(q, k, v, a, b, A_log, dt_bias, pool, idx, cu, cu_cpu):
        _fla(chunk_gated_delta_rule, q, k, v, a, b, A_log, dt_bias, pool, cu, cu_cpu)

    def timed(row: dict, ours: harness.Timing, fla: harness.Timing) -> dict:
        row.update(ours_us=ours.us, peer_us=fla.us, speedup=fla.us / ours.us,
                   timing="graph" if ours.graph and fla.graph else "eager")
        return row

    rows = []
    decode_b1 = None
    for bs in ([1, 64] if CI else [1, 16, 64, 256]):
        nbytes = 2 * bs * HEADS * DV * DK * 4
        sets = _sets(bs, bs, nbytes)
        ours = harness.time_calls(ours_decode, sets)
        fla = harness.time_calls(fla_decode, sets)
        decode_b1 = ours.us if bs == 1 else decode_b1
        rows.append(timed({"case": "decode", "shape": f"batch {bs}", "gbps": ours.gbps(nbytes)}, ours, fla))
    cases = [(256, 1), (4096, 1)] if CI else [(64, 1), (65, 1), (256, 1), (1024, 1), (4096, 1), (16384, 8),
                                               (65536, 16)]
    for tokens, seqs in cases:
        sets = _sets(tokens, seqs, tokens * HEADS * (2 * DK + 2 * DV) * 2 + 2 * seqs * HEADS * DV * DK * 4)
        row = {"case": "prefill", "shape": f"{tokens} tokens, {seqs} seq",
               "token_by_token_us": decode_b1 * tokens / seqs}
        rows.append(timed(row, harness.time_calls(ours_extend, sets), harness.time_calls(fla_extend, sets)))
        del sets
    return rows


def run_cpu() -> list[dict]:
    from mllm_kernel.cpu.jit import gdn_decode, gdn_extend_chunkwise
    from mllm_kernel.reference import gdn as reference

    def best_us(fn, reps):
        fn()
        times = []
        for _ in range(reps):
            t = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t) * 1e6)
        return statistics.median(times)

    rows = []
    for bs in ([1, 8] if CI else [1, 8, 32]):
        q, k, v, a, b, A_log, dt_bias, pool, idx = _inputs(bs, bs, "cpu")
        ours = best_us(lambda: gdn_decode(q, k, v, a, b, A_log, dt_bias, pool, idx), 20)
        ref = best_us(lambda: reference(q, k, v, a, b, A_log, dt_bias, pool, idx, dtype=torch.float32), 3)
        nbytes = 2 * bs * HEADS * DV * DK * 4
        rows.append({"case": "decode", "shape": f"batch {bs}", "ours_us": ours, "peer_us": ref, "speedup": ref / ours,
                     "gbps": nbytes / ours / 1e3})
    for tokens, seqs in ([(64, 1)] if CI else [(64, 1), (256, 2)]):
        q, k, v, a, b, A_log, dt_bias, pool, idx = _inputs(tokens, seqs, "cpu")
        cu = torch.linspace(0, tokens, seqs + 1).round().long()
        ours = best_us(lambda: gdn_extend_chunkwise(q, k, v, a, b, A_log, dt_bias, pool, idx, cu), 5)
        ref = best_us(lambda: reference(q, k, v, a, b, A_log, dt_bias, pool, idx, cu, dtype=torch.float32), 1)
        rows.append({"case": "prefill", "shape": f"{tokens} tokens, {seqs} seq", "ours_us": ours, "peer_us": ref,
                     "speedup": ref / ours})
    return rows


CUDA_NOTE = ("fla is called with the same work fused in: q/k L2 norm, the gate from A_log and dt_bias, the sigmoid "
             "of beta, the state in [V, K] layout (state_v_first) read from an initial state and written back as the "
             "final state; ours also gathers the states from a pool by index. Times: median of CUDA-graph replays "
             "over input sets rotated so that L2 cannot hold them (timing: graph), for both, so that neither's "
             "host overhead counts (fla's Python launches cost more than its decode kernel at small batches); ours "
             "with its default launch (PDL). State GB/s: the state bytes read and written. Decode x T: our decode "
             "at batch 1 times the tokens of a sequence, the cost of a prefill run token by token.")
CPU_NOTE = ("PyTorch: mllm_kernel.reference.gdn in float32 (token by token, vectorised over heads), the reference "
            "the tests use; median of repeated calls on the module's threads. State GB/s: the state bytes read and "
            "written.")


def section(half: str, device: str, rows: list[dict], copy_gbps: float | None = None) -> dict:
    peer = "fla µs" if half == "cuda" else "PyTorch µs"
    notes = [CUDA_NOTE if half == "cuda" else CPU_NOTE]
    if half == "cuda":
        notes += harness.copy_note()
    if CI:
        notes.append("CI=true: reduced shapes and repetitions, a smoke test only.")
    columns = [("case", "case", "{}"), ("shape", "shape", "{}"), ("ours_us", "ours µs", "{:.1f}"),
               ("peer_us", peer, "{:.1f}"), ("speedup", "vs peer", "{:.2f}x"), ("gbps", "state GB/s", "{:.0f}")]
    if half == "cuda":
        columns += [("token_by_token_us", "decode x T µs", "{:.0f}"), ("timing", "timing", "{}")]
    return results.section(f"{half}/gdn", "gdn", "gated DeltaNet, 32 heads of 128 x 128, bf16", device, columns, rows,
                           copy_gbps=copy_gbps, notes=notes)


def print_rows(rows: list[dict]) -> None:
    for r in rows:
        extra = f"  decode x T {r['token_by_token_us']:8.0f}" if "token_by_token_us" in r else ""
        gbps = f"  {r['gbps']:6.0f} GB/s" if "gbps" in r else ""
        print(f"{r['case']:<8} {r['shape']:<22} ours {r['ours_us']:9.1f} us  peer {r['peer_us']:9.1f} us  "
              f"{r['speedup']:5.2f}x{gbps}{extra}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    results.add_json_argument(parser)
    args = parser.parse_args()
    if args.device == "cuda":
        import harness

        rows = run_cuda()
        device, copy = torch.cuda.get_device_name(), harness.copy_bandwidth_gbps()
    else:
        import bench_cpu

        rows = run_cpu()
        device, copy = results.cpu_name(), bench_cpu.copy_bandwidth(8)[1]
    print_rows(rows)
    print(f"copy bandwidth: {copy:.0f} GB/s")
    results.write(args.json, section(args.device, device, rows, copy))


if __name__ == "__main__":
    main()
