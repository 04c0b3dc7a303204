"""The benchmark scripts keep working: the CPU ones run on tiny shapes, the CUDA ones import without
a GPU and reach the library through public entry points only, and report.py renders BENCHMARKS.md.

Timings are not checked (speed is measured by the benchmarks, not asserted in tests); what is
checked is that each script runs to the end, prints a row for every case it was asked for and
writes its results.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import py_compile
import re
import subprocess
import sys

import pytest
import torch

from conftest import REPO_ROOT

BENCHMARKS = REPO_ROOT / "benchmarks"
SCRIPTS = sorted(BENCHMARKS.glob("*.py"))
CUDA_SCRIPTS = ["bench_rmsnorm", "bench_rms_norm_gated", "bench_fused_add_rmsnorm", "bench_qknorm", "bench_silu_and_mul",
                "bench_gelu_and_mul",
                "bench_rope", "bench_quant", "bench_kv_cache", "bench_create_kv_indices", "bench_store_cache",
                "bench_launch_overhead", "run_all_cuda"]


def _run(script: str, *args: str, env: dict | None = None) -> str:
    out = subprocess.run([sys.executable, str(BENCHMARKS / script), *args], capture_output=True, text=True,
                         timeout=900, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


@pytest.fixture
def bench_path(monkeypatch):
    """benchmarks/ on sys.path, as it is for a script run from there."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))


def _module(name: str):
    return importlib.import_module(name)


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_benchmark_script_compiles(path, tmp_path):
    py_compile.compile(str(path), cfile=str(tmp_path / "out.pyc"), doraise=True)


def test_no_tuning_archive_left():
    assert not (BENCHMARKS / "tuning").exists()
    assert sorted(p.name for p in BENCHMARKS.iterdir() if p.is_dir() and p.name != "__pycache__") == ["results"]


# --- public entry points only ------------------------------------------------------------------

#: What the benchmarks may import from the library.
PUBLIC_MODULES = ("mllm_kernel.ops", "mllm_kernel.cuda.jit", "mllm_kernel.cpu.jit", "mllm_kernel.jit_utils",
                  "mllm_kernel.reference", "mllm_kernel.marlin", "mllm_kernel.scalar_type")
PRIVATE_PATTERNS = [r"_KERNELS", r"_RMSNORM", r"FunctionTable", r"\bpick\(", r"\.module\(", r"csrc",
                    r"mllm_kernel(\.\w+)*\._\w", r"from mllm_kernel[\w.]* import [^\n]*\b_\w",
                    r"\b(K|jit|ops|norm|quant|kv_cache)\._\w", r"include <mllm_kernel/(?!(utils\.cuh|utils\.hpp|tensor\.hpp)>)"]


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_benchmarks_use_public_entry_points_only(path):
    source = path.read_text()
    for pattern in PRIVATE_PATTERNS:
        assert not re.search(pattern, source), f"{path.name}: private access matching {pattern!r}"
    imported = re.findall(r"^\s*(?:from|import)\s+(mllm_kernel[\w.]*)", source, re.M)
    imported += re.findall(r"import_module\(\"(mllm_kernel[\w.]*)\"\)", source)
    for name in imported:
        assert name == "mllm_kernel" or name.startswith(PUBLIC_MODULES), f"{path.name} imports {name}"


@pytest.mark.parametrize("name", CUDA_SCRIPTS)
def test_cuda_benchmark_imports_without_a_gpu(name, bench_path):
    module = _module(name)
    assert callable(module.main)
    if name.startswith("bench_") and name != "bench_launch_overhead":
        assert callable(module.run) and callable(module.section)


def test_run_all_cuda_covers_every_cuda_benchmark(bench_path):
    run_all = _module("run_all_cuda")
    assert set(run_all.TABLES) == {"rmsnorm", "rms_norm_gated", "fused_add_rmsnorm", "qknorm", "silu_and_mul",
                                   "gelu_and_mul", "rope", "quant", "kv_cache", "create_kv_indices", "store_cache"}
    assert set(run_all.OTHERS) == {"host_time", "jit_load", "ffi_call"}


def test_run_all_cuda_refuses_an_unknown_part():
    out = subprocess.run([sys.executable, str(BENCHMARKS / "run_all_cuda.py"), "--only", "quant,bogus"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 2
    assert "unknown parts: bogus" in out.stderr


# --- the harness --------------------------------------------------------------------------------

def test_harness_graphs_hold_several_calls_over_two_input_sets_at_least(bench_path, monkeypatch):
    monkeypatch.delenv("MLLM_BENCH_GRAPH_CALLS", raising=False)
    harness = importlib.reload(_module("harness"))  # the defaults, whatever was imported before
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


def test_harness_records_rows_with_speedups(bench_path):
    harness = _module("harness")
    row = harness.Row("op", "[1, 8]", 2**20, harness.Timing(2.0, True), harness.Timing(8.0, True),
                      harness.Timing(3.0, False), ours_no_pdl=harness.Timing(4.0, True))
    rec = harness.record(row)
    assert rec["mb"] == 1.0 and rec["ours_us"] == 2.0 and rec["vs_eager"] == 4.0 and rec["vs_compile"] == 1.5
    assert rec["no_pdl_vs_compile"] == 0.75 and rec["compile_eager_timed"] is True
    assert {key for key, _, _ in harness.COLUMNS} >= {k for k in rec if not k.endswith("_eager_timed")}


def test_cuda_bench_in_place_references_match_the_ops(bench_path):
    """The in-place references the CUDA benchmarks time against compute what the kernels do
    (checked on CPU tensors against the CPU kernels), and write into their inputs as they do."""
    from mllm_kernel import ops

    g = torch.Generator().manual_seed(0)
    x, r, w = torch.randn(5, 256, generator=g), torch.randn(5, 256, generator=g), torch.randn(256, generator=g)
    xr, rr = x.clone(), r.clone()
    assert _module("bench_fused_add_rmsnorm").reference(xr, rr, w) is None
    ops.fused_add_rmsnorm(x, r, w)
    torch.testing.assert_close(rr, r)
    torch.testing.assert_close(xr, x, rtol=1e-5, atol=1e-5)

    q, k = torch.randn(3, 4, 128, generator=g), torch.randn(3, 2, 128, generator=g)
    qw, kw = torch.randn(128, generator=g), torch.randn(128, generator=g)
    qr, kr = q.clone(), k.clone()
    _module("bench_qknorm").reference(qr, kr, qw, kw)
    ops.qknorm(q, k, qw, kw)
    torch.testing.assert_close(qr, q, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(kr, k, rtol=1e-5, atol=1e-5)

    positions = torch.randint(0, 64, (3,), generator=g)
    inv_freq = 1.0 / 10000.0 ** (torch.arange(0, 128, 2, dtype=torch.float32) / 128)
    freqs = torch.outer(torch.arange(64, dtype=torch.float32), inv_freq)
    cache = torch.cat([freqs.cos(), freqs.sin()], dim=-1)
    qr, kr = q.clone(), k.clone()
    _module("bench_rope").reference(positions, qr, kr, cache)
    ops.apply_rope(positions, q, k, cache, True)
    torch.testing.assert_close(qr, q, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(kr, k, rtol=1e-5, atol=1e-5)


# --- the CPU benchmarks -------------------------------------------------------------------------

def test_bench_cpu_runs_every_section_and_writes_its_results(bench_path, tmp_path):
    path = tmp_path / "cpu.json"
    stdout = _run("bench_cpu.py", "--rows", "3,1", "--repeats", "1", "--no-compile", "--json", str(path),
                  env={**os.environ, "CI": "true"})
    rows = [line.split() for line in stdout.splitlines() if "|" in line and not line.startswith("op ")]
    ops = importlib.util.spec_from_file_location("bench_cpu_ops", BENCHMARKS / "bench_cpu.py")
    module = importlib.util.module_from_spec(ops)
    ops.loader.exec_module(module)
    expected = {(op, dtype, n) for op in module.OPS for dtype in ("float32", "bfloat16") for n in ("3", "1")}
    assert {(r[0], r[1], r[2]) for r in rows} == expected, stdout
    sections = {s["id"]: s for s in json.loads(path.read_text())["sections"]}
    assert set(sections) == {f"cpu/kernels/{op}" for op in module.OPS} | {"cpu/host_time", "cpu/jit_load",
                                                                           "cpu/ffi_call"}
    assert all(s["date"] and s["device"] and s["command"].startswith("python ") for s in sections.values())
    assert len(sections["cpu/kernels/rmsnorm"]["rows"]) == 4
    assert sections["cpu/kernels/rmsnorm"]["copy_gbps"] > 0
    assert "compile_us" not in sections["cpu/kernels/rmsnorm"]["rows"][0]  # --no-compile


def test_bench_cpu_refuses_an_unknown_section():
    out = subprocess.run([sys.executable, str(BENCHMARKS / "bench_cpu.py"), "--sections", "kernels,bogus"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 2
    assert "unknown sections: bogus" in out.stderr


def test_bench_call_overhead_cpu_prints_every_path(tmp_path):
    path = tmp_path / "r.json"
    stdout = _run("bench_call_overhead.py", "--device", "cpu", "--iters", "50", "--json", str(path))
    names = ("mllm_kernel.cpu.jit.rmsnorm", "mllm_kernel.ops.rmsnorm", "torch.ops.mllm_kernel.rmsnorm",
             "torch.mul(out=) (eager op)")
    for name in names:
        assert any(line.startswith(name) and line.endswith(" us") for line in stdout.splitlines()), stdout
    (section,) = json.loads(path.read_text())["sections"]
    assert section["id"] == "cpu/host_time" and [r["case"] for r in section["rows"]] == list(names)


# --- results files and report.py ----------------------------------------------------------------

def _section(results, id, family, device, rows, **kw):
    columns = [("op", "op", "{}"), ("ours_us", "ours µs", "{:.2f}"), ("eager_us", "eager µs", "{:.2f}"),
               ("vs_compile", "vs compile", "{:.2f}x")]
    return results.section(id, family, id, device, columns, rows, command="python benchmarks/x.py",
                           date="2026-01-02", **kw)


def test_results_write_replaces_sections_by_id_and_device(bench_path, tmp_path):
    results = _module("results")
    path = tmp_path / "r.json"
    results.write(path, _section(results, "cuda/a", "norms", "GPU", [{"op": "a", "ours_us": 1.0}]),
                  _section(results, "cuda/b", "quant", "GPU", [{"op": "b", "ours_us": 2.0}]))
    results.write(path, _section(results, "cuda/a", "norms", "GPU", [{"op": "a", "ours_us": 3.0}]))
    results.write(path, _section(results, "cuda/a", "norms", "GPU 2", [{"op": "a", "ours_us": 4.0}]))
    sections = {(s["id"], s["device"]): s for s in results.load(path)}
    assert list(sections) == [("cuda/b", "GPU"), ("cuda/a", "GPU"), ("cuda/a", "GPU 2")]
    assert sections["cuda/a", "GPU"]["rows"] == [{"op": "a", "ours_us": 3.0}]
    assert sections["cuda/a", "GPU 2"]["rows"] == [{"op": "a", "ours_us": 4.0}]
    assert sections["cuda/b", "GPU"]["rows"] == [{"op": "b", "ours_us": 2.0}]
    results.write(None, sections["cuda/a", "GPU"])  # no --json: nothing to do


def test_report_renders_a_table_per_family_and_device(bench_path, tmp_path):
    results = _module("results")
    gpu, cpu = tmp_path / "gpu.json", tmp_path / "cpu.json"
    results.write(gpu, _section(results, "cuda/rmsnorm", "norms", "GPU X", [{"op": "rmsnorm", "ours_us": 1.234}],
                                copy_gbps=2000.4),
                  _section(results, "cuda/qknorm", "norms", "GPU X", [{"op": "qknorm", "ours_us": 2.0, "vs_compile": 1.5}]),
                  _section(results, "cuda/quant", "quant", "GPU X", [{"op": "group", "ours_us": 3.0}],
                           source="transcribed from somewhere"))
    results.write(gpu, _section(results, "cuda/rmsnorm", "norms", "GPU Z", [{"op": "rmsnorm", "ours_us": 0.75}]))
    results.write(cpu, _section(results, "cpu/kernels/rmsnorm", "cpu_kernels", "CPU Y", [{"op": "rmsnorm", "ours_us": 5.0}]))
    out = subprocess.run([sys.executable, str(BENCHMARKS / "report.py"), str(gpu), str(cpu)], capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    headings = [line for line in text.splitlines() if line.startswith("## ")]
    assert headings == ["## Norms", "## Quantization", "## CPU kernels"]  # families without results left out
    assert text.count("### GPU X") == 2 and text.count("### CPU Y") == 1
    # the same benchmark on another device: a table of its own, after the first device's
    norms = text.split("## Norms")[1].split("## Quantization")[0]
    assert norms.index("### GPU X") < norms.index("### GPU Z") and "| rmsnorm | 0.75 |\n" in norms
    assert "| op | ours µs | vs compile |" in text  # the eager column: no row has it
    assert "| rmsnorm | 1.23 | - |" in text and "| qknorm | 2.00 | 1.50x |" in text
    assert "device copy bandwidth: 2000 GB/s" in text and "`python benchmarks/x.py`" in text
    assert "source: transcribed from somewhere" in text and "2026-01-02" in text
    only_cpu = subprocess.run([sys.executable, str(BENCHMARKS / "report.py"), str(cpu)], capture_output=True,
                              text=True, timeout=300).stdout
    assert [line for line in only_cpu.splitlines() if line.startswith("## ")] == ["## CPU kernels"]


def test_benchmarks_md_is_the_rendering_of_the_committed_results():
    out = subprocess.run([sys.executable, str(BENCHMARKS / "report.py")], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout == (REPO_ROOT / "BENCHMARKS.md").read_text(), "run: python benchmarks/report.py -o BENCHMARKS.md"


def test_committed_results_say_where_they_come_from(bench_path):
    results = _module("results")
    files = sorted(results.RESULTS_DIR.glob("*.json"))
    assert [f.name for f in files] == ["cpu.json", "cuda.json"]
    for f in files:
        for s in results.load(f):
            assert s["id"].startswith(f.stem + "/") and s["date"] and s["device"] and s["command"], s["id"]
            assert s["source"] == "measured" or s["source"].startswith("transcribed from BENCHMARKS.md"), s["id"]
