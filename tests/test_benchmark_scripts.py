"""The benchmark scripts keep working: the CPU ones run on tiny shapes, every one compiles.

Timings are not checked (speed is measured by the benchmarks, not asserted in tests); what is
checked is that each script runs to the end and prints a row for every case it was asked for.
"""

from __future__ import annotations

import importlib.util
import os
import py_compile
import subprocess
import sys

import pytest
import torch

from conftest import REPO_ROOT

BENCHMARKS = REPO_ROOT / "benchmarks"


def _run(script: str, *args: str) -> str:
    out = subprocess.run([sys.executable, str(BENCHMARKS / script), *args], capture_output=True, text=True,
                         timeout=900)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


@pytest.mark.parametrize("path", sorted(BENCHMARKS.rglob("*.py")), ids=lambda p: str(p.relative_to(BENCHMARKS)))
def test_benchmark_script_compiles(path, tmp_path):
    py_compile.compile(str(path), cfile=str(tmp_path / "out.pyc"), doraise=True)


def _bench_module_at(path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _bench_cpu_ops() -> list[str]:
    return _bench_module_at(BENCHMARKS / "bench_cpu.py").OPS


def test_harness_graphs_hold_several_calls_over_two_input_sets_at_least(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    monkeypatch.delenv("MLLM_BENCH_GRAPH_CALLS", raising=False)
    harness = importlib.reload(importlib.import_module("harness"))  # the defaults, whatever was imported before
    assert harness.GRAPH_CALLS == 8
    assert harness.num_sets(1 << 30) == 2  # a large call: two sets, so no call re-reads the last input
    assert harness.num_sets(1) == harness.MAX_SETS  # a tiny call: as many sets as allowed
    sets = [(1,), (2,), (3,)]
    assert harness.graph_calls(sets) == sets * 3  # round the sets until at least 8 calls
    assert harness.graph_calls([(i,) for i in range(10)]) == [(i,) for i in range(10)]


def test_harness_measures_one_call_a_graph_on_request():
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import harness; "
            "print(harness.GRAPH_CALLS, harness.num_sets(1 << 30), len(harness.graph_calls([()])))")
    out = subprocess.run([sys.executable, "-c", code, str(BENCHMARKS)], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "MLLM_BENCH_GRAPH_CALLS": "1"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["1", "1", "1"]


def test_bench_cpu_prints_a_row_per_op_dtype_and_row_count():
    stdout = _run("bench_cpu.py", "--rows", "3,1", "--repeats", "1", "--no-compile", "--dtypes", "float32,bfloat16")
    rows = [line.split() for line in stdout.splitlines() if "|" in line and not line.startswith("op ")]
    seen = {(r[0], r[1], r[2]) for r in rows}
    expected = {(op, dtype, n) for op in _bench_cpu_ops() for dtype in ("float32", "bfloat16") for n in ("3", "1")}
    assert seen == expected, stdout


def test_bench_cpu_store_bound_prints_every_case():
    stdout = _run("bench_cpu_store_bound.py")
    for dtype in ("float32", "bfloat16"):
        cases = [line for line in stdout.splitlines() if line.startswith(dtype)]
        assert len(cases) == 4, stdout


def _bench_module(name: str):
    """A CUDA benchmark script as a module (importing it needs no GPU; `harness` sits beside it)."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        return _bench_module_at(BENCHMARKS / f"{name}.py")
    finally:
        sys.path.remove(str(BENCHMARKS))


def test_cuda_bench_in_place_references_match_the_ops():
    """The in-place references the CUDA benchmarks time against compute what the kernels do
    (checked on CPU tensors against the CPU kernels), and write into their inputs as they do."""
    from mllm_kernel import ops

    g = torch.Generator().manual_seed(0)
    x, r, w = torch.randn(5, 256, generator=g), torch.randn(5, 256, generator=g), torch.randn(256, generator=g)
    xr, rr = x.clone(), r.clone()
    assert _bench_module("bench_fused_add_rmsnorm").reference(xr, rr, w) is None
    ops.fused_add_rmsnorm(x, r, w)
    torch.testing.assert_close(rr, r)
    torch.testing.assert_close(xr, x, rtol=1e-5, atol=1e-5)

    q, k = torch.randn(3, 4, 128, generator=g), torch.randn(3, 2, 128, generator=g)
    qw, kw = torch.randn(128, generator=g), torch.randn(128, generator=g)
    qr, kr = q.clone(), k.clone()
    _bench_module("bench_qknorm").reference(qr, kr, qw, kw)
    ops.qknorm(q, k, qw, kw)
    torch.testing.assert_close(qr, q, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(kr, k, rtol=1e-5, atol=1e-5)

    positions = torch.randint(0, 64, (3,), generator=g)
    inv_freq = 1.0 / 10000.0 ** (torch.arange(0, 128, 2, dtype=torch.float32) / 128)
    freqs = torch.outer(torch.arange(64, dtype=torch.float32), inv_freq)
    cache = torch.cat([freqs.cos(), freqs.sin()], dim=-1)
    qr, kr = q.clone(), k.clone()
    _bench_module("bench_rope").reference(positions, qr, kr, cache)
    ops.apply_rope(positions, q, k, cache, True)
    torch.testing.assert_close(qr, q, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(kr, k, rtol=1e-5, atol=1e-5)


def _tuning_module(name: str):
    """benchmarks/tuning/<name>.py imported and its kernels built (skips without nvcc)."""
    from mllm_kernel.jit_utils import toolchain
    from mllm_kernel.jit_utils.errors import ToolchainNotFoundError

    try:
        toolchain.find_nvcc()
    except ToolchainNotFoundError:
        pytest.skip("nvcc not found")
    sys.path.insert(0, str(BENCHMARKS))
    try:
        script = _bench_module_at(BENCHMARKS / "tuning" / f"{name}.py")
        return script, script._module()
    finally:
        sys.path.remove(str(BENCHMARKS))


def test_norm_tuning_kernels_build():
    """benchmarks/tuning/tune_norm.py's kernels compile (the sweep itself needs a GPU)."""
    tune_norm, module = _tuning_module("tune_norm")
    for threads, items in tune_norm.SHAPES:
        assert callable(getattr(module, f"rms_{threads}x{items}"))
        assert callable(getattr(module, f"fused_{threads}x{items}"))


def test_act_tuning_kernels_build():
    """benchmarks/tuning/tune_act.py's kernels compile (the sweep itself needs a GPU)."""
    tune_act, module = _tuning_module("tune_act")
    for elems, threads in tune_act.SHAPES:
        assert callable(getattr(module, f"act_{elems}x{threads}"))


def test_kv_tuning_kernels_build():
    """benchmarks/tuning/tune_kv.py's kernels compile (the sweep itself needs a GPU)."""
    tune_kv, module = _tuning_module("tune_kv")
    for threads in tune_kv.THREADS:
        assert callable(getattr(module, f"kv_{threads}"))
    for unit_bytes, split in tune_kv.LEAN:
        assert callable(getattr(module, tune_kv._lean_name(unit_bytes, split)))
    for threads, items, stream in tune_kv.FP8_LEAN:
        assert callable(getattr(module, f"fp8_lean_{threads}_{items}_{int(stream)}"))
    for threads, blocks in tune_kv.FP8_PERSISTENT:
        assert callable(getattr(module, f"fp8_persistent_{threads}_{blocks}"))


def test_quant_tuning_kernels_build():
    """benchmarks/tuning/tune_quant.py's kernels compile (the timing itself needs a GPU)."""
    tune_quant, module = _tuning_module("tune_quant")
    tensor = tune_quant._tensor_module()
    for items in tune_quant.STATIC_ITEMS:
        assert callable(getattr(tensor, f"static_items_{items}"))
    for amax_items, items in tune_quant.TWO_PASS_ITEMS:
        assert callable(getattr(tensor, f"two_pass_{amax_items}_{items}"))
    for vec, items in tune_quant.STATIC_VECS:
        assert callable(getattr(tensor, f"static_vec_{vec}_{items}"))
    for shape in tune_quant.RESIDENT:
        assert callable(getattr(tensor, tune_quant._resident_name(*shape)))
    for chunk, stages in tune_quant.BULK:
        assert callable(getattr(tensor, f"bulk_{chunk}x{stages}_amax"))
        assert callable(getattr(tensor, f"bulk_{chunk}x{stages}_quant"))
    for reverse, keep_mb in tune_quant.ORDERED:
        assert callable(getattr(tensor, f"ordered_{reverse}_{keep_mb}"))
    assert callable(tensor.amax_only)
    for d in tune_quant.DIVISIONS:
        for threads in tune_quant.STATIC_THREADS:
            assert callable(getattr(module, f"static_{threads}_{d}"))
        for threads in tune_quant.TOKEN_THREADS:
            assert callable(getattr(module, f"token_{threads}_{d}"))
        for lanes in tune_quant.GROUP_LANES:
            assert callable(getattr(module, f"group_{lanes}_{d}"))


def test_tuning_ops_refuses_an_unknown_op():
    out = subprocess.run([sys.executable, str(BENCHMARKS / "tuning" / "tune_quant.py"), "--ops", "dynamic,bogus"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 2
    assert "unknown ops: bogus" in out.stderr


def test_bench_call_overhead_cpu_prints_every_path():
    stdout = _run("bench_call_overhead.py", "--device", "cpu", "--iters", "50")
    for name in ("mllm_kernel.cpu.jit.rmsnorm", "mllm_kernel.ops.rmsnorm", "torch.ops.mllm_kernel.rmsnorm",
                 "torch.mul(out=) (eager op)"):
        assert any(line.startswith(name) and line.endswith(" us") for line in stdout.splitlines()), stdout


def test_stash_timeline_kernels_build():
    """benchmarks/tuning/stash_timeline.py's stamped kernels compile (the timing needs a GPU)."""
    stash_timeline, module = _tuning_module("stash_timeline")
    assert callable(module.two_pass)
    for shape in stash_timeline.STASH.values():
        assert callable(getattr(module, stash_timeline._symbol(shape)))
