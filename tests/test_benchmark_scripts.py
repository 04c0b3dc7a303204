"""The benchmark scripts keep working: the CPU ones run on tiny shapes, every one compiles.

Timings are not checked (speed is measured by the benchmarks, not asserted in tests); what is
checked is that each script runs to the end and prints a row for every case it was asked for.
"""

from __future__ import annotations

import importlib.util
import py_compile
import subprocess
import sys

import pytest

from conftest import REPO_ROOT

BENCHMARKS = REPO_ROOT / "benchmarks"


def _run(script: str, *args: str) -> str:
    out = subprocess.run([sys.executable, str(BENCHMARKS / script), *args], capture_output=True, text=True,
                         timeout=900)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


@pytest.mark.parametrize("path", sorted(BENCHMARKS.glob("*.py")), ids=lambda p: p.name)
def test_benchmark_script_compiles(path, tmp_path):
    py_compile.compile(str(path), cfile=str(tmp_path / "out.pyc"), doraise=True)


def _bench_cpu_ops() -> list[str]:
    spec = importlib.util.spec_from_file_location("bench_cpu", BENCHMARKS / "bench_cpu.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.OPS


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
