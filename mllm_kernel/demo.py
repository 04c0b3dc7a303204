"""``python -m mllm_kernel demo``: compile, load and run every kernel, checked against PyTorch.

Builds into a fresh cache folder (so the compile time is real), loads each module again in a
new process (the cached-load time), times calls, and prints one table row per kernel.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Callable

import torch

# A child process measures how long a cached module takes to load: the wall time of the first
# `.module()` call, after torch, tvm-ffi and the package are imported.
_LOAD_PROBE = """
import importlib, json, sys, time, torch, tvm_ffi
module_name, expression, device = sys.argv[1:4]
kernel = eval(expression, vars(importlib.import_module(module_name)))
start = time.perf_counter()
kernel.module(device)
print(json.dumps({"ms": (time.perf_counter() - start) * 1e3}))
"""


@dataclass
class DemoCase:
    """One row: a @jit kernel, where a new process finds it, and how to exercise it."""

    label: str
    device: str
    kernel: object  # a JitKernel
    where: tuple[str, str]  # (module, expression) naming the kernel for the load probe
    run: Callable[[], torch.Tensor]
    reference: Callable[[], torch.Tensor]


def _cases(device: str) -> list[DemoCase]:
    gen = torch.Generator().manual_seed(0)
    cases = []
    if device == "cpu":
        cpu = importlib.import_module("mllm_kernel.cpu.jit.add_constant")

        x = torch.randn(1 << 20, generator=gen)
        for c in (1, 16):
            out = torch.empty_like(x)
            kernel = cpu._KERNELS[c]
            cases.append(DemoCase(f"add_constant<{c}>", "cpu", kernel, (cpu.__name__, f"_KERNELS[{c}]"),
                                  lambda k=kernel, out=out: (k(out, x), out)[1], lambda c=c: x + c))
        out_rt = torch.empty_like(x)
        cases.append(DemoCase("add_constant_runtime", "cpu", cpu._runtime_kernel, (cpu.__name__, "_runtime_kernel"),
                              lambda: (cpu._runtime_kernel(out_rt, x, 3.14159), out_rt)[1],
                              lambda: x + torch.tensor(3.14159)))
    else:
        cuda = importlib.import_module("mllm_kernel.cuda.jit.add_constant")

        xi = torch.randint(-1000, 1000, (1 << 20,), dtype=torch.int32, device="cuda")
        for c in (1, 16):
            out = torch.empty_like(xi)
            kernel = cuda._KERNELS[c]
            cases.append(DemoCase(f"add_constant<{c}>", "cuda", kernel, (cuda.__name__, f"_KERNELS[{c}]"),
                                  lambda k=kernel, out=out: (k(out, xi), out)[1], lambda c=c: xi + c))
    return cases


def _time_call(fn: Callable, device: str, min_seconds: float = 0.2) -> float:
    fn()
    if device == "cuda":
        torch.cuda.synchronize()
    iters, start = 0, time.perf_counter()
    while True:
        for _ in range(10):
            fn()
        iters += 10
        if device == "cuda":
            torch.cuda.synchronize()
        elapsed = time.perf_counter() - start
        if elapsed > min_seconds:
            return elapsed / iters * 1e6


def _cached_load_ms(case: DemoCase, env: dict) -> float:
    out = subprocess.run([sys.executable, "-c", _LOAD_PROBE, *case.where, case.device],
                         capture_output=True, text=True, env=env, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])["ms"]


def run_demo(cache_dir: str | None = None) -> int:
    cache_dir = cache_dir or tempfile.mkdtemp(prefix="mllm_kernel_demo_")
    os.environ["MLLM_KERNEL_CACHE_DIR"] = cache_dir
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    rows, failed = [], False
    for device in devices:
        for case in _cases(device):
            start = time.perf_counter()
            case.kernel.module(device)
            compile_s = time.perf_counter() - start
            result = case.run()
            expected = case.reference()
            err = (result.double() - expected.double()).abs().max().item()
            ok = torch.equal(result, expected) if not result.is_floating_point() else err <= 1e-6
            failed |= not ok
            rows.append((case.label, device, f"{compile_s:.2f}", f"{_cached_load_ms(case, env):.1f}",
                         f"{_time_call(case.run, device):.1f}", f"{err:.2e}", "ok" if ok else "MISMATCH"))
    header = ("kernel", "device", "compile s", "cached load ms", "us/call", "max error", "check")
    widths = [max(len(r[i]) for r in rows + [header]) for i in range(len(header))]
    print(f"mllm-kernel demo (cache: {cache_dir}); GPU: "
          f"{torch.cuda.get_device_name(0) if 'cuda' in devices else 'none, CUDA rows skipped'}")
    for row in [header] + rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)))
    return 1 if failed else 0
