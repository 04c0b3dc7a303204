"""Cold JIT builds: how long a first call waits for the compiler, and where that time goes.

Every figure is a fresh process with an empty cache (torch import not counted):
  - ``nvcc -c`` of a one-line kernel (the floor any CUDA build pays);
  - a user's small kernel written in the seed style (a template in an anonymous namespace, a
    host ``run()`` with TensorMatcher and LaunchKernel, tvm::ffi::TensorView parameters) through
    ``load_cuda_jit`` (nvcc's host and device chains at once, against the stand-in for tvm-ffi's
    tensor header); again with what its first build leaves in the cache (the host runtime); the
    same kernel against tvm-ffi's own header (a call the stand-in lacks), cold and again (with the
    host compile's precompiled prefix, or not); the same kernel on ``mllm_kernel::TensorView``;
    and the one on tvm-ffi's header built by plain nvcc (one phase after another), with its
    phase times;
  - the first ``ops.rmsnorm`` call on CUDA (bf16), when a GPU is there;
  - each library CUDA module alone (bf16 where a module has a dtype; one CUTLASS GEMM module
    of each family);
  - the CPU rmsnorm module, beside the module the same op compiled before it was built for this
    CPU only and split per op (every Highway target, the four norm ops in one module); alone
    (the host runtime cached) without and with the CPU precompiled header (``cpu_pch.py``).

    python benchmarks/bench_jit_cold.py [--half cpu|cuda] [--part builds|modules] [--all-modules] [--json PATH]

The library's modules are a table section of their own (``<half>/jit_cold_modules``), rendered
after the other builds in one table, so that ``--part`` can measure either alone (the whole run
outlasts a 10-minute call on a 16-core GPU host with ``--samples 3``).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import results

REPO = Path(__file__).resolve().parent.parent

SEED_KERNEL = """
#pragma once
#include <mllm_kernel/tensor.hpp>
#include <mllm_kernel/utils.cuh>
#include <mllm_kernel/utils.hpp>
#include <dlpack/dlpack.h>
#include <tvm/ffi/container/tensor.h>
#include <cstdint>

namespace {

template <typename T>
__global__ void scale_kernel(T* __restrict__ out, const T* __restrict__ in, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = static_cast<T>(static_cast<float>(in[i]) * 2.0f);
}

template <typename T>
struct ScaleKernel {
  static void run(tvm::ffi::TensorView input, tvm::ffi::TensorView output) {
    using namespace mllm_kernel::host;
    SymbolicSize n{"num_elements"};
    SymbolicDevice device;
    (void)TensorMatcher({n}).template with_dtype<T>().template with_device<kDLCUDA>(device).verify(input, "input");
    (void)TensorMatcher({n}).template with_dtype<T>().with_device(device).verify(output, "output");
    RuntimeCheck(n.unwrap() > 0, "num_elements must be positive, got ", n.unwrap());
    LaunchKernel(static_cast<int>(div_ceil(n.unwrap(), 256)), 256, device.unwrap())(
        scale_kernel<T>, static_cast<T*>(output.data_ptr()), static_cast<const T*>(input.data_ptr()), n.unwrap());
  }
};

}  // namespace
"""

#: The same kernel calling into tvm-ffi's tensor header beyond TensorView, so that it builds
#: against the real header, not the stand-in (jit_utils/standin.py).
REAL_HEADER_KERNEL = SEED_KERNEL.replace("    LaunchKernel(", "    (void)tvm::ffi::GetDataSize(input);\n    LaunchKernel(")
#: The same kernel in the library's own style: mllm_kernel::TensorView, no tvm-ffi C++ headers.
LIGHT_KERNEL = SEED_KERNEL.replace("#include <tvm/ffi/container/tensor.h>\n", "").replace(
    "tvm::ffi::TensorView", "mllm_kernel::TensorView")

TRIVIAL_KERNEL = "__global__ void one_line(float* x) { x[0] = 1.0f; }\n"

#: The modules timed one by one: each name with the start of the template arguments of the
#: variants timed (bf16 where a module has a dtype; every kernel of the Marlin GEMM for bf16
#: activations and 4-bit weights); --all-modules times all.
CUDA_MODULES = {
    **{name: ("bf16_t",) for name in ("rmsnorm", "fused_add_rmsnorm", "qknorm", "qknorm_across_heads", "silu_and_mul",
                                      "gelu_and_mul", "rope", "rms_norm_gated", "per_tensor_quant_fp8",
                                      "per_token_quant_fp8", "per_token_group_quant_fp8", "per_token_quant_int8",
                                      "per_token_group_quant_int8", "gdn_decode", "gdn_extend_chunkwise",
                                      "column_gather")},
    "kv_cache": (), "kv_cache_fp8": (), "create_kv_indices": (), "add_constant": ("16",), "marlin_repack": (),
    "marlin_gemm": ("bf16_t", "4", "false"), "marlin_gemv": ("bf16_t", "4", "false"),
    "marlin_wgmma": ("bf16_t", "4", "false"),
    "marlin_dequant": ("bf16_t", "4"), "scaled_mm_gemv": ("fp8_e4m3_t", "bf16_t"),
}
#: One CUTLASS GEMM module of each family (W8A8 on Hopper, block-scaled FP8, W8A8 on Ampere).
CUTLASS_MODULES = {"scaled_mm_sm90_128x128x128_c1x1_coop": ("fp8_e4m3_t", "bf16_t"),
                   "scaled_mm_blockwise_sm90_128x128x128_c1x1_coop": ("bf16_t",),
                   "scaled_mm_sm80_128x128x64_w64x64x64_s4": ("int8_t", "bf16_t")}


def _env(cache: Path, **extra: str) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["MLLM_KERNEL_CACHE_DIR"] = str(cache)
    env.pop("MLLM_KERNEL_PREBUILT_PATH", None)
    env.pop("MLLM_KERNEL_DISABLE_JIT", None)
    env.update(extra)
    return env


def _child(code: str, cache: Path, *, keep: str | None = None, **extra: str) -> dict:
    """Runs ``code`` in a fresh Python with an empty cache; its last line is a JSON dict. With
    ``keep`` (a glob of cache folders to drop), the cache is filled by a first run and the
    second runs with only those folders gone: a module built with the host runtime cached."""
    shutil.rmtree(cache, ignore_errors=True)
    if keep is not None:
        _child(code, cache, **extra)
        for folder in cache.glob(keep):
            shutil.rmtree(folder)
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=_env(cache, **extra),
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"benchmark child failed:\n{out.stdout}\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def trivial_nvcc(work: Path, arch: str) -> float:
    from mllm_kernel.jit_utils import toolchain

    source = work / "one_line.cu"
    source.write_text(TRIVIAL_KERNEL)
    num = arch.replace(".", "")
    start = time.perf_counter()
    subprocess.run([toolchain.find_nvcc(), "-std=c++20", "-O3", f"-gencode=arch=compute_{num},code=sm_{num}", "-c",
                    str(source), "-o", str(work / "one_line.o")], check=True)
    return time.perf_counter() - start


def seed_kernel(work: Path, source: str = SEED_KERNEL, *, phases: bool = False, again: bool = False,
                **env: str) -> tuple[float, dict[str, float]]:
    """The seed-style kernel (or `source`) through load_cuda_jit; with `phases`, built by plain
    nvcc (its phases one after another, no nvcc_pipeline) with the phase times (ms) it reports;
    with `again`, its module built once and dropped, what a first build left kept (the host
    runtime, and the precompiled host prefix unless `env` turns it off: jit_utils/cuda_pch.py)."""
    (work / "scale.cuh").write_text(source)
    timing = work / "nvcc_time.csv"
    timing.unlink(missing_ok=True)
    extra = f'["--time", {str(timing)!r}]' if phases else "[]"
    r = _child(f"""
        import json, time, torch
        from mllm_kernel.jit_utils import load_cuda_jit, make_cpp_args
        t = time.perf_counter()
        load_cuda_jit("bench_seed_scale", cuda_files=[{str(work / 'scale.cuh')!r}],
                      cuda_wrappers=[("run", f"ScaleKernel<{{make_cpp_args(torch.bfloat16)}}>::run")],
                      extra_cuda_cflags={extra})
        print(json.dumps({{"seconds": time.perf_counter() - t}}))
    """, work / "cache-seed", keep="cuda_bench_seed_scale_*" if again else None, **env)
    if not phases:
        return r["seconds"], {}
    times: dict[str, float] = {}
    with open(timing) as f:
        for row in csv.reader(f):
            try:
                ms = float(row[-2])
            except (IndexError, ValueError):  # the header row
                continue
            name = row[1].strip()
            times[name] = times.get(name, 0.0) + ms
    return r["seconds"], times


def first_rmsnorm_cuda(work: Path) -> float:
    return _child("""
        import json, time, torch
        from mllm_kernel import ops
        x = torch.randn(8, 4096, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
        torch.cuda.synchronize()
        t = time.perf_counter()
        ops.rmsnorm(x, w)
        torch.cuda.synchronize()
        print(json.dumps({"seconds": time.perf_counter() - t}))
    """, work / "cache-rmsnorm")["seconds"]


def cuda_modules(work: Path, every: bool) -> dict:
    """Build seconds of each library CUDA module, one after the other in one process
    (``times``), and which of them are CUTLASS GEMMs (``cutlass``, as their build says)."""
    names = "None" if every else repr({**CUDA_MODULES, **CUTLASS_MODULES})
    return _child(f"""
        import json, time
        import mllm_kernel.cuda.jit
        from mllm_kernel.jit_utils import precompile, registered_kernels
        wanted = {names}
        times, cutlass = {{}}, []
        for record in registered_kernels():
            if "cuda" not in record.devices or record.name.startswith("test_"):
                continue
            if wanted is not None and (record.name not in wanted
                                       or tuple(record.args[:len(wanted[record.name])]) != wanted[record.name]):
                continue
            t = time.perf_counter()
            assert precompile(record.kernel, device="cuda", jobs=1), record.name
            name = record.name + "[" + ", ".join(record.args) + "]"
            times[name] = time.perf_counter() - t
            if record.kernel.spec("cuda").cutlass:
                cutlass.append(name)
        print(json.dumps({{"times": times, "cutlass": cutlass}}))
    """, work / "cache-modules")


CPU_NOW = """
    import json, time, torch
    from mllm_kernel import ops
    x, w = torch.randn(8, 4096), torch.randn(4096)
    t = time.perf_counter()
    ops.rmsnorm(x, w)
    print(json.dumps({"seconds": time.perf_counter() - t}))
"""
#: The same first call with the CPU precompiled header built beforehand (jit_utils/cpu_pch.py).
CPU_NOW_PCH = """
    import mllm_kernel.cpu.jit
    from mllm_kernel.jit_utils import cpu_pch, find_module
    assert cpu_pch.build(find_module("cpu_rmsnorm", (), "cpu").spec("cpu"))
""" + CPU_NOW
CPU_BEFORE = """
    import json, time
    from mllm_kernel.jit_utils import load_cpu_jit
    ops = ("rmsnorm", "fused_add_rmsnorm", "qknorm", "qknorm_across_heads")
    t = time.perf_counter()
    load_cpu_jit("bench_cpu_norm_family", cpp_files=["norm.cpp"],
                 cpp_wrappers=[(op, f"mllm_kernel::cpu::{op}") for op in ops])
    print(json.dumps({"seconds": time.perf_counter() - t}))
"""


def cpu_rmsnorm(work: Path, samples: int) -> dict[str, float]:
    """First CPU rmsnorm call now, and the same op's module as it was built before (every
    Highway target, all four norm ops: the family module): each with an empty cache, and with
    the host runtime already built (the module alone: without and with the precompiled header);
    medians of ``samples`` runs."""
    before = {"MLLM_KERNEL_CPU_TARGET": "portable"}
    runs = {"now": lambda: _child(CPU_NOW, work / "cache-cpu"),
            "before": lambda: _child(CPU_BEFORE, work / "cache-cpu-before", **before),
            "now_module": lambda: _child(CPU_NOW, work / "cache-cpu", keep="cpu_cpu_rmsnorm_*",
                                         MLLM_KERNEL_CPU_PCH="0"),
            "now_module_pch": lambda: _child(CPU_NOW_PCH, work / "cache-cpu-pch", keep="cpu_cpu_rmsnorm_*"),
            "before_module": lambda: _child(CPU_BEFORE, work / "cache-cpu-before", keep="cpu_bench_cpu_norm_family_*",
                                            **before)}
    return {name: statistics.median(run()["seconds"] for _ in range(samples)) for name, run in runs.items()}


def has_nvcc() -> bool:
    from mllm_kernel.jit_utils import toolchain

    try:
        toolchain.find_nvcc()
        return True
    except Exception:  # noqa: BLE001 - no CUDA toolkit: the CPU rows only
        return False


def measure_builds(samples: int) -> list[dict]:
    """The user kernels' builds against nvcc's floor, the first CUDA call, and the CPU rmsnorm's."""
    import torch

    from mllm_kernel.jit_utils import toolchain

    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="mllm-jit-cold-") as tmp:
        work = Path(tmp)
        if has_nvcc():
            arch = toolchain.cuda_arch_list()[-1]
            trivial = statistics.median(trivial_nvcc(work, arch) for _ in range(samples))
            rows.append({"what": "nvcc -c, one-line kernel", "seconds": trivial})
            seed_s = statistics.median(seed_kernel(work)[0] for _ in range(samples))
            rows.append({"what": "seed-style user kernel, load_cuda_jit", "seconds": seed_s,
                         "ratio": seed_s / trivial, "target": "<= 3x nvcc -c"})
            again = statistics.median(seed_kernel(work, again=True)[0] for _ in range(samples))
            rows.append({"what": "  again, host runtime built", "seconds": again, "ratio": again / trivial,
                         "target": "<= 3x nvcc -c"})
            real = statistics.median(seed_kernel(work, REAL_HEADER_KERNEL)[0] for _ in range(samples))
            rows.append({"what": "the same kernel on tvm-ffi's own tensor header, load_cuda_jit", "seconds": real,
                         "ratio": real / trivial})
            for what, env in (("no precompiled prefix", {"MLLM_KERNEL_CUDA_PCH": "0"}),
                              ("its host prefix precompiled", {})):
                again = statistics.median(seed_kernel(work, REAL_HEADER_KERNEL, again=True, **env)[0]
                                          for _ in range(samples))
                rows.append({"what": f"  again, host runtime built, {what}", "seconds": again,
                             "ratio": again / trivial})
            light = statistics.median(seed_kernel(work, LIGHT_KERNEL)[0] for _ in range(samples))
            rows.append({"what": "the same kernel on mllm_kernel::TensorView, load_cuda_jit", "seconds": light,
                         "ratio": light / trivial, "target": "<= 3x nvcc -c"})
            plain, phases = seed_kernel(work, REAL_HEADER_KERNEL, phases=True)
            rows.append({"what": "that kernel on tvm-ffi's own header through plain nvcc (one phase after another)",
                         "seconds": plain, "ratio": plain / trivial})
            for name, ms in phases.items():
                if ms >= 10:
                    rows.append({"what": f"  nvcc phase: {name}", "seconds": ms / 1e3})
            if torch.cuda.is_available():
                first = statistics.median(first_rmsnorm_cuda(work) for _ in range(samples))
                rows.append({"what": "first ops.rmsnorm, CUDA bf16, new process", "seconds": first,
                             "target": "< 3 s (H100 host)"})
        cpu = cpu_rmsnorm(work, samples)
        rows.append({"what": "CPU rmsnorm, before: all targets, 4-op module", "seconds": cpu["before"]})
        rows.append({"what": "first ops.rmsnorm, CPU, new process", "seconds": cpu["now"],
                     "ratio": cpu["before"] / cpu["now"], "target": ">= 3x faster"})
        rows.append({"what": "  the same two, host runtime already built: before", "seconds": cpu["before_module"]})
        rows.append({"what": "  the same two, host runtime already built: now", "seconds": cpu["now_module"],
                     "ratio": cpu["before_module"] / cpu["now_module"], "target": ">= 3x faster"})
        rows.append({"what": "  now, the CPU precompiled header built too", "seconds": cpu["now_module_pch"],
                     "ratio": cpu["before_module"] / cpu["now_module_pch"], "target": ">= 3x faster"})
    return rows


def measure_modules(every: bool) -> list[dict]:
    """Each library CUDA module's build (none without a CUDA toolkit)."""
    if not has_nvcc():
        return []
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="mllm-jit-cold-") as tmp:
        built = cuda_modules(Path(tmp), every)
    modules = built["times"]
    cutlass = {name: modules[name] for name in built["cutlass"]}
    for name, seconds in modules.items():
        if name not in cutlass:
            rows.append({"what": f"  module {name}", "seconds": seconds})
    rows.append({"what": "slowest library CUDA module, CUTLASS GEMMs aside",
                 "seconds": max(t for name, t in modules.items() if name not in cutlass),
                 "target": "< 5 s (H100 host)"})
    for name, seconds in cutlass.items():
        rows.append({"what": f"  CUTLASS module {name}", "seconds": seconds})
    if cutlass:
        rows.append({"what": "slowest CUTLASS GEMM module", "seconds": max(cutlass.values()),
                     "target": "< 5 s (H100 host)"})
    return rows


COLUMNS = [("what", "build", "{}"), ("seconds", "seconds", "{:.2f}"), ("ratio", "ratio", "{:.2f}x"),
           ("target", "target", "{}")]


def modules_section(half: str, device: str, rows: list[dict]) -> dict:
    return results.section(f"{half}/jit_cold_modules", "jit_cold", "the library's CUDA modules", device, COLUMNS,
                           rows, notes=["Modules: each built alone, one after another in one process with an empty "
                                        "cache (bf16 where a module has a dtype; one CUTLASS GEMM module of each "
                                        "family)."])


def section(half: str, device: str, rows: list[dict]) -> dict:
    return results.section(f"{half}/jit_cold", "jit_cold", "cold JIT builds (empty cache, new process)", device,
                           COLUMNS, rows,
                           notes=["Ratios: the user kernel over nvcc -c of a one-line kernel; the CPU module "
                                  "before over now. The seed-style kernel takes tvm::ffi::TensorView parameters "
                                  "and builds against the stand-in for tvm-ffi's tensor header "
                                  "(jit_utils/standin.py); the same kernel calling tvm::ffi::GetDataSize builds "
                                  "against tvm-ffi's own header, as any source beyond the stand-in does. "
                                  "load_cuda_jit runs nvcc's host and device chains at once "
                                  "(jit_utils/nvcc_pipeline.py); the phases are nvcc --time's, from a build by "
                                  "plain nvcc, which runs them one after another. Again: the kernel's module "
                                  "dropped and built in a new process, with what its first build left in the "
                                  "cache: the host runtime, and for the real header the host compile's "
                                  "precompiled prefix of tvm-ffi's headers (jit_utils/cuda_pch.py), which any "
                                  "kernel with the same includes reads."])


def print_rows(title: str, rows: list[dict]) -> None:
    print(f"{title}:")
    for r in rows:
        ratio = f"{r['ratio']:6.2f}x" if "ratio" in r else " " * 7
        print(f"  {r['what']:<52} {r['seconds']:7.2f} s {ratio}  {r.get('target', '')}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--half", choices=("cpu", "cuda"), default=None,
                        help="which results half the table belongs to (default: cuda when a GPU is there)")
    parser.add_argument("--part", choices=("builds", "modules"), default=None,
                        help="measure (and write) only the user kernels' and first calls' builds, or only the "
                             "library's modules (default: both)")
    parser.add_argument("--all-modules", action="store_true", help="time every CUDA module, not one per family")
    parser.add_argument("--samples", type=int, default=1,
                        help="runs of the cheap builds, the first CUDA call and the CPU rmsnorm builds (median)")
    results.add_json_argument(parser)
    args = parser.parse_args()
    import torch

    half = args.half or ("cuda" if torch.cuda.is_available() else "cpu")
    device = results.cpu_name()
    if torch.cuda.is_available():
        device = f"{torch.cuda.get_device_name()} box: {device}"
    written = []
    if args.part in (None, "builds"):
        rows = measure_builds(args.samples)
        print_rows("cold JIT builds (empty cache, new process)", rows)
        written.append(section(half, device, rows))
    if args.part in (None, "modules"):
        rows = measure_modules(args.all_modules)
        print_rows("the library's CUDA modules, each alone", rows)
        if rows:
            written.append(modules_section(half, device, rows))
    results.write(args.json, *written)


if __name__ == "__main__":
    main()
