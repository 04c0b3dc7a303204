"""Host time of one eager call, direct path vs custom-op path, on CUDA or the CPU.

For a 1-token rmsnorm, a loop of calls synchronised once at the end; the cases are interleaved
over 5 rounds and each reports its best (``harness.host_us_per_call``). On CUDA (bf16
[1, 4096]) this is ``bench_launch_overhead.py``: the direct path, its breakdown, the ops and
custom-op paths, a PyTorch eager op and the ctypes launch floor. On CPU (float32 [1, 4096]):
- ``mllm_kernel.cpu.jit.rmsnorm``: the direct path;
- ``mllm_kernel.ops.rmsnorm``: the device-dispatching op in eager mode (a direct call underneath);
- ``torch.ops.mllm_kernel.rmsnorm``: the same kernel through PyTorch's custom-op dispatcher (the
  path ``torch.compile`` uses);
- a PyTorch eager op (``torch.mul(out=)``).
The times include the kernel itself.

    python benchmarks/bench_call_overhead.py [--device cuda|cpu] [--json PATH]
"""

from __future__ import annotations

import argparse

import torch

import harness
import results


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


def print_cpu(measured: list[tuple[str, float]]) -> None:
    print("== host time per eager call, 1-token rmsnorm on cpu")
    for name, us in measured:
        print(f"{name:<34} {us:7.2f} us")


def section(device_kind: str, device: str, what: str, measured: list[tuple[str, float]],
            notes: list[str] = ()) -> dict:
    """A host-time table (case, µs per call) as the results section ``<device_kind>/host_time``."""
    return results.section(f"{device_kind}/host_time", "host_time", f"host time per eager call, {what}", device,
                           [("case", "case", "{}"), ("us", "µs per call", "{:.2f}")],
                           [{"case": name, "us": us} for name, us in measured],
                           notes=[*notes, f"PyTorch {torch.__version__}"])


def cuda_section(measured: list[tuple[str, float]]) -> dict:
    import bench_launch_overhead

    return section("cuda", harness.device_name(), "1-token rmsnorm, bf16 [1, 4096]", measured,
                   bench_launch_overhead.breakdown(measured))


def cpu_section(measured: list[tuple[str, float]]) -> dict:
    return section("cpu", results.cpu_name(), "1-token rmsnorm, float32 [1, 4096]", measured,
                   [f"{torch.get_num_threads()} threads."])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--iters", type=int, default=2000 if harness.ci() else 20000)
    results.add_json_argument(parser)
    args = parser.parse_args()
    if args.device == "cuda":
        import bench_launch_overhead

        harness.require_cuda()
        measured = bench_launch_overhead.run(args.iters)
        bench_launch_overhead.print_results(measured)
        results.write(args.json, cuda_section(measured))
        return
    measured = run_cpu(args.iters)
    print_cpu(measured)
    results.write(args.json, cpu_section(measured))


if __name__ == "__main__":
    main()
