"""``python -m mllm_kernel``: show-env, show-config, show-clangd-recommend-config, demo, prebuild,
clear-cache."""

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


def _status(kernel, device: str) -> str:
    from mllm_kernel.jit_utils.cache import find_prebuilt
    from mllm_kernel.jit_utils.paths import prebuilt_dirs
    from mllm_kernel.jit_utils.registry import folder_size

    parts = []
    if prebuilt_dirs():
        library = find_prebuilt(kernel.kernel.spec(device))
        parts.append(f"prebuilt ({_human_size(folder_size(library.parent))}, {library.parent.parent})" if library
                     else "not prebuilt")
    folders = kernel.cache_folders(device)
    if folders:
        size = sum(folder_size(f) for f in folders)
        parts.append(f"cached ({len(folders)} build{'s' if len(folders) > 1 else ''}, {_human_size(size)})")
    else:
        parts.append("not cached")
    return ", ".join(parts)


def cmd_show_config(args: argparse.Namespace) -> int:
    from mllm_kernel.jit_utils import registered_kernels
    from mllm_kernel.jit_utils.paths import cache_root, jit_disabled, prebuilt_dirs
    from mllm_kernel.jit_utils.registry import folder_size

    print(env_info.format_sections(env_info.environment(probe_targets=not args.no_probe)))
    for package in KERNEL_PACKAGES:
        importlib.import_module(package)
    kernels = registered_kernels()
    print(f"\n[JIT kernels] {len(kernels)} registered")
    print(f"  prebuilt folders (MLLM_KERNEL_PREBUILT_PATH): {', '.join(map(str, prebuilt_dirs())) or 'none'}")
    print(f"  user cache: {cache_root()}")
    print(f"  compiling: {'disabled (MLLM_KERNEL_DISABLE_JIT)' if jit_disabled() else 'on first call'}")
    # cpu-pch_* and cuda-pch_* (jit_utils/cpu_pch.py, cuda_pch.py): made once, read by later builds.
    headers = [p for p in cache_root().glob("*-pch_*") if p.is_dir()] if cache_root().is_dir() else []
    print(f"  precompiled headers: {len(headers)} ({_human_size(sum(folder_size(p) for p in headers))})")
    for device in ("cpu", "cuda"):
        rows = [k for k in kernels if device in k.devices]
        print(f"  {device}: {len(rows)} kernels")
        for kernel in rows:
            variant = f"[{', '.join(kernel.args)}]" if kernel.args else ""
            print(f"    {kernel.name + variant:<40} {_status(kernel, device)}")
    return 0


def cmd_clear_cache(args: argparse.Namespace) -> int:
    from mllm_kernel.jit_utils.cache import clear_cache
    from mllm_kernel.jit_utils.paths import cache_root

    if not args.all and not args.names:
        print("clear-cache: name the modules to remove, or pass --all", file=sys.stderr)
        return 2
    removed = clear_cache(None if args.all else list(args.names))
    for path in removed:
        print(f"removed {path}")
    print(f"clear-cache: {len(removed)} folders removed from {cache_root()}")
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
    from mllm_kernel.jit_utils.cache import build_into, bundle_libraries, find_library
    from mllm_kernel.jit_utils.errors import ToolchainNotFoundError

    for package in (*KERNEL_PACKAGES, *args.imports):
        importlib.import_module(package)
    devices = ["cpu", "cuda"] if args.device == "all" else [args.device]
    if args.device == "all":
        try:
            toolchain.find_nvcc()
        except ToolchainNotFoundError:
            devices = ["cpu"]
            print("prebuild: no nvcc, building CPU kernels only")
    archs = toolchain.parse_arch_list(args.cuda_arch_list) if args.cuda_arch_list else None
    output = Path(args.output).expanduser().resolve() if args.output else None
    jobs = [(k, d) for k in registered_kernels() for d in devices
            if d in k.devices and k.kernel.builds_for(d, archs)]
    start = time.perf_counter()

    def build(job):
        record, device = job
        t = time.perf_counter()
        if output is None:
            # Warms the user cache with the builds the JIT itself would make.
            find_library(record.kernel.spec(device, cuda_archs=archs))
        else:
            # Runs on any machine of this architecture: every CPU target, the listed GPUs.
            spec = record.kernel.spec(device, cuda_archs=archs).prebuilt_variant()
            build_into(spec, lambda s: output / s.prebuilt_folder_name)
            bundle_libraries(spec, output)
        return f"{device:<5} {record.name}[{', '.join(record.args)}] {time.perf_counter() - t:6.1f} s"

    with ThreadPoolExecutor(max_workers=args.jobs or os.cpu_count() or 1) as pool:
        for line in pool.map(build, jobs):
            print(line)
    where = f" in {output} (use it with MLLM_KERNEL_PREBUILT_PATH={output})" if output else ""
    print(f"prebuild: {len(jobs)} modules ready{where} in {time.perf_counter() - start:.1f} s")
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
    p = sub.add_parser("prebuild", help="compile every registered kernel now (warms the cache, or --output DIR)",
                       description="Build (or find cached) every registered JIT kernel, several at a time, e.g. "
                                   "in a container build or before starting many ranks; with --output, into a "
                                   "folder that machines without a compiler use through MLLM_KERNEL_PREBUILT_PATH.")
    p.add_argument("--device", choices=["cpu", "cuda", "all"], default="all",
                   help="which kernels to build (default: all; CUDA ones only where nvcc exists)")
    p.add_argument("--jobs", type=int, default=0, help="parallel builds (default: the CPU count)")
    p.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE",
                   help="import MODULE first (repeatable), so the kernels it declares are built too")
    p.add_argument("--output", default=None, metavar="DIR",
                   help="build into DIR, a self-contained folder for MLLM_KERNEL_PREBUILT_PATH on other machines "
                        "(CPU modules for every SIMD target) instead of warming this machine's cache")
    p.add_argument("--cuda-arch-list", default=None, metavar="ARCHS",
                   help='CUDA architectures to build for, e.g. "8.0;8.7;9.0" (default: the visible GPUs, '
                        "or MLLM_KERNEL_CUDA_ARCH_LIST); needs nvcc, not a GPU")
    p.set_defaults(func=cmd_prebuild)
    p = sub.add_parser("clear-cache", help="remove cached builds from the user cache",
                       description="Remove the cached builds of the named modules (any device and variant), "
                                   "or of every module with --all, and the leftovers of builds that were "
                                   "killed. Prebuilt folders are never touched.")
    p.add_argument("names", nargs="*", metavar="NAME", help="module names as show-config lists them (e.g. rmsnorm)")
    p.add_argument("--all", action="store_true", help="remove every cached build")
    p.set_defaults(func=cmd_clear_cache)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
