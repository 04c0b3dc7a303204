"""Host time of one eager call, direct path vs custom-op path (issue: PyTorch integration).

For a 1-token rmsnorm, a loop of calls synchronised once at the end; the cases are interleaved
over 5 rounds and each reports its best (``harness.host_us_per_call``). On CUDA (bf16
[1, 4096]) this is ``bench_launch_overhead.py``: the direct path, its breakdown, the ops and
custom-op paths, a PyTorch eager op and the ctypes launch floor. On CPU (float32 [1, 4096]):
- ``mllm_kernel.cpu.jit.rmsnorm``: the direct path;
- ``mllm_kernel.ops.rmsnorm``: the device-dispatching op in eager mode (a direct call underneath);
- ``torch.ops.mllm_kernel.rmsnorm``: the same kernel through PyTorch's custom-op dispatcher (the
  path ``torch.compile`` uses);
- a PyTorch eager op (``torch.mul(out=)``).
Run: ``python benchmarks/bench_call_overhead.py [--device cuda|cpu]``.
"""

from __future__ import annotations

import argparse

import torch

import harness  # noqa: F401  (puts the checkout on sys.path)


def run_cpu(iters: int) -> list[tuple[str, float]]:
    from mllm_kernel import ops
    from mllm_kernel.cpu.jit import rmsnorm

    x = torch.randn(1, 4096)
    w = torch.randn(4096)
    out, y = torch.empty_like(x), torch.empty_like(x)
    custom = torch.ops.mllm_kernel.rmsnorm
    cases = [
        ("mllm_kernel.cpu.jit.rmsnorm", lambda: rmsnorm(x, w, 1e-6, out=out)),
        ("mllm_kernel.ops.rmsnorm", lambda: ops.rmsnorm(x, w, 1e-6, out=out)),
        ("torch.ops.mllm_kernel.rmsnorm", lambda: custom(x, w, 1e-6)),
        ("torch.mul(out=) (eager op)", lambda: torch.mul(x, 2, out=y)),
    ]
    return harness.host_us_per_call(cases, iters)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--iters", type=int, default=2000 if harness.ci() else 20000)
    args = parser.parse_args()
    if args.device == "cuda":
        import bench_launch_overhead

        bench_launch_overhead.print_results(bench_launch_overhead.run(args.iters))
        return
    print("== host time per eager call, 1-token rmsnorm on cpu")
    for name, us in run_cpu(args.iters):
        print(f"{name:<34} {us:7.2f} us")


if __name__ == "__main__":
    main()
