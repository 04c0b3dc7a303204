"""``python -m mllm_kernel``: show-env, show-config, show-clangd-recommend-config, demo, prebuild."""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

from mllm_kernel import env_info

# Importing these registers every built-in @jit kernel.
KERNEL_PACKAGES = ("mllm_kernel.cpu.jit", "mllm_kernel.cuda.jit")


def cmd_show_env(args: argparse.Namespace) -> int:
    print(env_info.format_sections(env_info.environment(probe_targets=not args.no_probe)))
    return 0


def _human_size(num: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if num < 1024 or unit == "GiB":
            return f"{num:.0f} {unit}" if unit == "B" else f"{num:.1f} {unit}"
        num /= 1024
    return str(num)


def cmd_show_config(args: argparse.Namespace) -> int:
    from mllm_kernel.jit_utils import registered_kernels
    from mllm_kernel.jit_utils.paths import cache_root
    from mllm_kernel.jit_utils.registry import folder_size

    print(env_info.format_sections(env_info.environment(probe_targets=not args.no_probe)))
    for package in KERNEL_PACKAGES:
        importlib.import_module(package)
    kernels = registered_kernels()
    print(f"\n[JIT kernels] {len(kernels)} registered; cache root {cache_root()}")
    for device in ("cpu", "cuda"):
        rows = [k for k in kernels if device in k.devices]
        print(f"  {device}: {len(rows)} kernels")
        for kernel in rows:
            folders = kernel.cache_folders(device)
            variant = f"[{', '.join(kernel.args)}]" if kernel.args else ""
            if folders:
                size = sum(folder_size(f) for f in folders)
                status = f"cached ({len(folders)} build{'s' if len(folders) > 1 else ''}, {_human_size(size)})"
            else:
                status = "not compiled yet"
            print(f"    {kernel.name + variant:<36} {status}")
    return 0


def cmd_clangd(args: argparse.Namespace) -> int:
    from mllm_kernel import clangd

    try:
        path = clangd.write_config(Path(args.directory))
    except FileExistsError:
        print(f"error: {Path(args.directory) / '.clangd'} already exists; not overwriting it "
              "(remove it first to regenerate)", file=sys.stderr)
        return 1
    print(f"wrote {path}; restart clangd to pick it up")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from mllm_kernel.demo import run_demo

    return run_demo(args.cache_dir)


def cmd_prebuild(args: argparse.Namespace) -> int:
    import os
    import time
    from concurrent.futures import ThreadPoolExecutor

    from mllm_kernel.jit_utils import registered_kernels, toolchain
    from mllm_kernel.jit_utils.errors import ToolchainNotFoundError

    for package in KERNEL_PACKAGES:
        importlib.import_module(package)
    devices = ["cpu", "cuda"] if args.device == "all" else [args.device]
    if args.device == "all":
        try:
            toolchain.find_nvcc()
        except ToolchainNotFoundError:
            devices = ["cpu"]
            print("prebuild: no nvcc, building CPU kernels only")
    jobs = [(k, d) for k in registered_kernels() for d in devices if d in k.devices]
    start = time.perf_counter()

    def build(job):
        record, device = job
        t = time.perf_counter()
        record.kernel.module(device)
        return f"{device:<5} {record.name}[{', '.join(record.args)}] {time.perf_counter() - t:6.1f} s"

    with ThreadPoolExecutor(max_workers=args.jobs or os.cpu_count() or 1) as pool:
        for line in pool.map(build, jobs):
            print(line)
    print(f"prebuild: {len(jobs)} modules ready in {time.perf_counter() - start:.1f} s")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m mllm_kernel", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("show-env", help="CUDA, GPU, CPU, Highway and tvm-ffi details of this machine",
                       description="Print CUDA toolkit/driver hints, CUDA versions, GPUs, OS, Python, CPU, "
                                   "the Highway version and SIMD targets, and the tvm-ffi version.")
    p.add_argument("--no-probe", action="store_true", help="do not compile the Highway target probe")
    p.set_defaults(func=cmd_show_env)
    p = sub.add_parser("show-config", help="show-env plus every registered JIT kernel and its cache state",
                       description="Print the environment summary, every registered JIT kernel grouped by "
                                   "device with whether (and how much) it is cached, and the cache root.")
    p.add_argument("--no-probe", action="store_true", help="do not compile the Highway target probe")
    p.set_defaults(func=cmd_show_config)
    p = sub.add_parser("show-clangd-recommend-config", help="write a .clangd for editing kernel sources",
                       description="Write .clangd with include paths for tvm-ffi, DLPack, mllm-kernel and "
                                   "Highway, --cuda-gpu-arch from nvidia-smi and --cuda-path from CUDA_HOME/"
                                   "CUDA_PATH or detection. Refuses to overwrite an existing .clangd.")
    p.add_argument("--directory", default=".", help="where to write .clangd (default: current folder)")
    p.set_defaults(func=cmd_clangd)
    p = sub.add_parser("demo", help="compile, load and run every kernel, checked against PyTorch",
                       description="Build every kernel into a fresh cache (CPU, and CUDA when a GPU is there), "
                                   "reload it in a new process, time it, compare with PyTorch, print a table.")
    p.add_argument("--cache-dir", default=None, help="cache folder to build into (default: a new temp folder)")
    p.set_defaults(func=cmd_demo)
    p = sub.add_parser("prebuild", help="compile every registered kernel now (warms the cache)",
                       description="Build (or load from the cache) every registered JIT kernel, several at a "
                                   "time, e.g. in a container build or before starting many ranks.")
    p.add_argument("--device", choices=["cpu", "cuda", "all"], default="all",
                   help="which kernels to build (default: all; CUDA ones only where nvcc exists)")
    p.add_argument("--jobs", type=int, default=0, help="parallel builds (default: the CPU count)")
    p.set_defaults(func=cmd_prebuild)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
