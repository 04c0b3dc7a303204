"""``python -m mllm_kernel demo``: compile, load and run every kernel, checked against PyTorch.

Builds into a fresh cache folder (so the compile time is real), loads each module again in a
new process (the cached-load time), times calls, and prints one table row per kernel.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Callable

import torch

from mllm_kernel.jit_utils.registry import find_module

# A child process measures how long a cached module takes to load: the wall time of the first
# `.module()` call, after torch, tvm-ffi and the package (which declares every module) are imported.
_LOAD_PROBE = """
import json, sys, time, torch, tvm_ffi
import mllm_kernel.ops
from mllm_kernel.jit_utils.registry import find_module
name, args, device = sys.argv[1], tuple(json.loads(sys.argv[2])), sys.argv[3]
module = find_module(name, args, device)
start = time.perf_counter()
module.module(device)
print(json.dumps({"ms": (time.perf_counter() - start) * 1e3}))
"""


@dataclass
class DemoCase:
    """One row: a kernel module (its registered name and variant, so that a new process can
    find it) and one call of it."""

    label: str
    device: str
    where: tuple[str, tuple[str, ...]]  # (module name, variant args) as registered
    run: Callable[[], torch.Tensor]
    reference: Callable[[], torch.Tensor]
    tolerance: float = 0.0  # max abs error allowed against the float64 reference

    @property
    def kernel(self):
        return find_module(*self.where, self.device)


def _rms_ref(x, w, eps=1e-6):
    x64 = x.double()
    return x64 * torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + eps) * w.double()


def _silu_ref(x):
    d = x.shape[-1] // 2
    return torch.nn.functional.silu(x[..., :d].double()) * x[..., d:].double()


def _rope_ref(positions, q, cache):
    half = cache.shape[-1] // 2
    cos, sin = cache[positions, :half].double()[:, None], cache[positions, half:].double()[:, None]
    x1, x2 = q[..., :half].double(), q[..., half:].double()
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


def _cases(device: str) -> list[DemoCase]:
    """The example kernels and the LLM ops, on one device, with PyTorch float64 references."""
    from mllm_kernel import ops

    gen = torch.Generator(device=device).manual_seed(0)
    dtype, tol = (torch.float32, 1e-4) if device == "cpu" else (torch.bfloat16, 6e-2)
    rand = lambda *shape: torch.randn(*shape, device=device, generator=gen).to(dtype)  # noqa: E731
    cases = []
    if device == "cpu":
        from mllm_kernel.cpu.jit import add_constant, add_constant_runtime

        x = torch.randn(1 << 20, generator=gen)
        for c in (1, 16):
            cases.append(DemoCase(f"add_constant<{c}> [1048576]", "cpu", ("add_constant", (str(c),)),
                                  lambda c=c: add_constant(x, c), lambda c=c: x + c))
        cases.append(DemoCase("add_constant_runtime [1048576]", "cpu", ("add_constant_runtime", ()),
                              lambda: add_constant_runtime(x, 3.14159), lambda: x + torch.tensor(3.14159)))
        where = {k: (f"cpu_{k}", ()) for k in ("rmsnorm", "silu_and_mul", "rope")}
    else:
        from mllm_kernel.cuda.jit import add_constant

        xi = torch.randint(-1000, 1000, (1 << 20,), dtype=torch.int32, device="cuda")
        for c in (1, 16):
            cases.append(DemoCase(f"add_constant<{c}> int32 [1048576]", "cuda", ("add_constant", (str(c),)),
                                  lambda c=c: add_constant(xi, c), lambda c=c: xi + c))
        where = {k: (k, ("bf16_t",)) for k in ("rmsnorm", "silu_and_mul", "rope")}
    name = str(dtype).removeprefix("torch.")
    hidden, w = rand(64, 4096), rand(4096)
    cases.append(DemoCase(f"rmsnorm {name} [64, 4096]", device, where["rmsnorm"], lambda: ops.rmsnorm(hidden, w),
                          lambda: _rms_ref(hidden, w), tol))
    gate_up = rand(64, 2 * 4096)
    cases.append(DemoCase(f"silu_and_mul {name} [64, 8192]", device, where["silu_and_mul"],
                          lambda: ops.silu_and_mul(gate_up), lambda: _silu_ref(gate_up), tol))
    q, k = rand(64, 32, 128), rand(64, 8, 128)
    positions = torch.randint(0, 4096, (64,), device=device, generator=gen)
    inv = 1.0 / (10000 ** (torch.arange(0, 128, 2, dtype=torch.float64) / 128))
    freqs = torch.outer(torch.arange(4096, dtype=torch.float64), inv)
    cache = torch.cat([freqs.cos(), freqs.sin()], dim=-1).float().to(device)

    def rope():
        qq, kk = q.clone(), k.clone()
        ops.apply_rope(positions, qq, kk, cache)
        return qq

    cases.append(DemoCase(f"apply_rope {name} q[64, 32, 128]", device, where["rope"], rope,
                          lambda: _rope_ref(positions, q, cache), tol))
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
    name, args = case.where
    out = subprocess.run([sys.executable, "-c", _LOAD_PROBE, name, json.dumps(args), case.device],
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
            ok = err <= case.tolerance
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
