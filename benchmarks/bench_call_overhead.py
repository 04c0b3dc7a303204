"""Host time of one eager call, direct path vs custom-op path (issue: PyTorch integration).

For a 1-token rmsnorm (bf16 [1, 4096] on CUDA, float32 [1, 4096] on CPU), a loop of calls
synchronised once at the end; the cases are interleaved over 5 rounds and each reports its best
(``harness.host_us_per_call``):
- ``device package``: ``mllm_kernel.cuda.jit.rmsnorm`` / ``mllm_kernel.cpu.jit.rmsnorm``;
- ``mllm_kernel.ops``: the device-dispatching op in eager mode (a direct call underneath);
- ``torch.ops.mllm_kernel``: the same kernel through PyTorch's custom-op dispatcher (the path
  ``torch.compile`` uses);
- a PyTorch eager op (``torch.mul(out=)``), and on CUDA the ctypes launch floor.
Run: ``python benchmarks/bench_call_overhead.py [--device cuda|cpu]``.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import torch

import harness  # noqa: F401  (puts the checkout on sys.path)
from mllm_kernel import ops

FLOOR = "ctypes launch floor"


def run(device: str, iters: int) -> list[tuple[str, float]]:
    package = __import__(f"mllm_kernel.{device}.jit", fromlist=["rmsnorm"])
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    x = torch.randn(1, 4096, device=device, dtype=dtype)
    w = torch.randn(4096, device=device, dtype=dtype)
    out, y = torch.empty_like(x), torch.empty_like(x)
    custom = torch.ops.mllm_kernel.rmsnorm
    cases = [
        (f"mllm_kernel.{device}.jit.rmsnorm", lambda: package.rmsnorm(x, w, 1e-6, out=out)),
        ("mllm_kernel.ops.rmsnorm", lambda: ops.rmsnorm(x, w, 1e-6, out=out)),
        ("torch.ops.mllm_kernel.rmsnorm", lambda: custom(x, w, 1e-6)),
        ("torch.mul(out=) (eager op)", lambda: torch.mul(x, 2, out=y)),
    ]
    if device != "cuda":
        return harness.host_us_per_call(cases, iters)
    from bench_launch_overhead import _build_floor

    with tempfile.TemporaryDirectory() as tmp:
        dll = _build_floor(Path(tmp))
        buf = torch.zeros(32, device="cuda")
        stream = torch.cuda.current_stream().cuda_stream
        cases.append((FLOOR, lambda: dll.launch_floor(buf.data_ptr(), 32, stream)))
        return harness.host_us_per_call(cases, iters, sync=torch.cuda.synchronize)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--iters", type=int, default=2000 if harness.ci() else 20000)
    args = parser.parse_args()
    print(f"== host time per eager call, 1-token rmsnorm on {args.device}")
    results = run(args.device, args.iters)
    for name, us in results:
        print(f"{name:<34} {us:7.2f} us")
    times = dict(results)
    if FLOOR in times:
        direct, via_ops = times[f"mllm_kernel.{args.device}.jit.rmsnorm"], times["mllm_kernel.ops.rmsnorm"]
        print(f"direct / floor = {direct / times[FLOOR]:.2f}x, ops / floor = {via_ops / times[FLOOR]:.2f}x")


if __name__ == "__main__":
    main()
