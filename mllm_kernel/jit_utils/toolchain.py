"""Finding the tools a build needs: the C++ compiler, the CUDA toolkit and its target
architectures, Google Highway and tvm-ffi.

Everything here runs on the cached-load path too, so it only stats and reads small files; no
subprocess is started unless a build needs one (pkg-config is a last resort for Highway).
"""

from __future__ import annotations

import functools
import importlib
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from mllm_kernel.jit_utils.errors import ToolchainNotFoundError

#: Architectures a CUDA module is built for when no GPU is visible and no override is set:
#: Hopper, the project's target, so CUDA kernels still compile (and are checked) anywhere.
DEFAULT_CUDA_ARCHS = ("9.0",)
CUDA_ARCH_ENV = "MLLM_KERNEL_CUDA_ARCH_LIST"
TVM_FFI_CUDA_ARCH_ENV = "TVM_FFI_CUDA_ARCH_LIST"
HWY_ROOT_ENV = "MLLM_KERNEL_HWY_ROOT"
CUTLASS_HOME_ENVS = ("MLLM_KERNEL_CUTLASS_HOME", "CUTLASS_HOME")

HIGHWAY_INSTALL_HINT = (
    "Google Highway was not found. Install it with `apt-get install libhwy-dev` (Debian/Ubuntu), "
    "`dnf install highway-devel` (Fedora) or `brew install highway` (macOS), or point "
    f"{HWY_ROOT_ENV} at a Highway install prefix or source tree."
)


def file_identity(path: str | Path) -> str:
    """A cheap fingerprint of a binary (resolved path, size, mtime) that changes when it is
    upgraded or replaced, without running it."""
    real = os.path.realpath(path)
    st = os.stat(real)
    return f"{real}:{st.st_size}:{st.st_mtime_ns}"


@functools.cache
def compiler_is_gcc(compiler: str) -> bool:
    """Whether ``compiler`` (a name on PATH or a path) is GCC, whose precompiled headers the
    JIT builds (cpu_pch.py, cuda_pch.py)."""
    try:
        out = subprocess.run([compiler, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return False
    return "Free Software Foundation" in out and "clang" not in out.lower()


@functools.lru_cache(maxsize=None)
def find_cxx() -> str:
    """The host C++ compiler: ``$CXX`` when set (and nothing else then), else ``c++``, ``g++``
    or ``clang++`` on PATH."""
    chosen = os.environ.get("CXX")
    if chosen:
        if path := shutil.which(chosen):
            return path
        raise ToolchainNotFoundError(f"CXX={chosen} is not an executable compiler; fix or unset CXX")
    for candidate in ("c++", "g++", "clang++"):
        if path := shutil.which(candidate):
            return path
    raise ToolchainNotFoundError(
        "no C++ compiler found: install g++ (`apt-get install g++`) or set CXX to a C++20 compiler"
    )


CPU_TARGET_ENV = "MLLM_KERNEL_CPU_TARGET"
#: The CPU target of a build that runs anywhere: every Highway target, chosen at run time.
PORTABLE_CPU_TARGET = "portable"


@functools.lru_cache(maxsize=None)
def native_cpu_target() -> str:
    """An id of this machine's CPU (architecture and feature flags, read from /proc/cpuinfo
    without a subprocess), or PORTABLE_CPU_TARGET where the compiler has no native switch."""
    import hashlib
    import platform

    machine = platform.machine().lower()
    if machine not in ("x86_64", "amd64", "aarch64", "arm64"):
        return PORTABLE_CPU_TARGET
    # x86 cores of one machine share their flags, so the first processor's block is read alone
    # (the kernel generates /proc/cpuinfo as it is read, slowly on many-core hosts); ARM
    # boards may mix core types, so every core's part counts there.
    first_only = machine in ("x86_64", "amd64")
    features = ""
    try:
        with open("/proc/cpuinfo", errors="replace") as cpuinfo:
            for line in cpuinfo:
                if first_only and not line.strip() and features:
                    break
                key = line.split(":", 1)[0].strip().lower()
                if key in ("flags", "features", "model name", "cpu part"):
                    features += line.rstrip("\n")
    except OSError:
        features = platform.processor()
    return f"native-{machine}-{hashlib.sha256(features.encode()).hexdigest()[:12]}"


def jit_cpu_target() -> str:
    """The CPU target of JIT builds: the running CPU alone (a JIT build runs where it is built),
    unless ``$MLLM_KERNEL_CPU_TARGET=portable``."""
    choice = os.environ.get(CPU_TARGET_ENV, "native").strip().lower()
    if choice == PORTABLE_CPU_TARGET:
        return PORTABLE_CPU_TARGET
    if choice not in ("", "native"):
        raise ValueError(f"{CPU_TARGET_ENV} must be 'native' or 'portable', got {choice!r}")
    return native_cpu_target()


def cpu_target_flags(target: str) -> list[str]:
    """Compiler flags for a CPU target: a native target compiles Highway's static target only
    (the best one this CPU runs), a portable one every target with run-time dispatch."""
    if target == PORTABLE_CPU_TARGET:
        return []
    native = "-mcpu=native" if "aarch64" in target or "arm64" in target else "-march=native"
    return [native, "-DHWY_COMPILE_ONLY_STATIC=1"]


@functools.lru_cache(maxsize=None)
def find_cuda_home() -> Path | None:
    """The CUDA toolkit: ``$CUDA_HOME``/``$CUDA_PATH``, else the folder above ``nvcc`` on PATH,
    else ``/usr/local/cuda``; the first that holds both ``bin/nvcc`` and ``include/cuda_runtime.h``
    (an ``nvcc`` that is a wrapper script elsewhere is skipped), or None."""
    candidates = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")]
    nvcc = shutil.which("nvcc")
    if nvcc:
        candidates.append(str(Path(os.path.realpath(nvcc)).parent.parent))
    candidates.append("/usr/local/cuda")
    for c in candidates:
        if c and (Path(c) / "bin" / "nvcc").exists() and (Path(c) / "include" / "cuda_runtime.h").exists():
            return Path(c)
    return None


def cuda_library_dir() -> Path:
    """The toolkit folder holding ``libcudart``."""
    home = Path(find_nvcc()).parent.parent
    for sub in ("lib64", "lib", "targets/x86_64-linux/lib", "targets/sbsa-linux/lib", "lib/x64"):
        if any((home / sub).glob("libcudart.so*")):
            return home / sub
    raise ToolchainNotFoundError(f"no libcudart in the CUDA toolkit at {home}")


def find_nvcc() -> str:
    """Path of nvcc; ToolchainNotFoundError saying what to install when there is none."""
    home = find_cuda_home()
    if home is None:
        raise ToolchainNotFoundError(
            "nvcc was not found: install the CUDA toolkit (or the PyPI wheels nvidia-cuda-nvcc, "
            "nvidia-cuda-runtime and nvidia-cuda-cccl) and set CUDA_HOME to its folder"
        )
    return str(home / "bin" / "nvcc")


@functools.lru_cache(maxsize=None)
def cuda_toolkit_version() -> str | None:
    """The toolkit's version from its ``version.json`` (no subprocess), e.g. ``"13.0.88"``."""
    home = find_cuda_home()
    if home is None:
        return None
    try:
        import json

        data = json.loads((home / "version.json").read_text())
        return data.get("cuda_nvcc", data.get("cuda", {})).get("version")
    except (OSError, ValueError, AttributeError):
        return None


def parse_arch_list(text: str) -> tuple[str, ...]:
    archs = tuple(a for a in re.split(r"[\s;,]+", text.strip()) if a)
    for arch in archs:
        if not re.fullmatch(r"\d+\.\d+[af]?", arch):
            raise ValueError(f"invalid CUDA architecture {arch!r} (expected forms like 8.0, 9.0 or 9.0a)")
    return archs


def cuda_arch_list() -> tuple[str, ...]:
    """The architectures CUDA modules are built for, in this order of precedence:
    ``$MLLM_KERNEL_CUDA_ARCH_LIST``, ``$TVM_FFI_CUDA_ARCH_LIST`` (both "8.0 9.0" or "8.0;9.0"),
    the visible GPUs, and DEFAULT_CUDA_ARCHS when no GPU is visible."""
    for env in (CUDA_ARCH_ENV, TVM_FFI_CUDA_ARCH_ENV):
        if os.environ.get(env, "").strip():
            return parse_arch_list(os.environ[env])
    return _visible_gpu_archs() or DEFAULT_CUDA_ARCHS


@functools.lru_cache(maxsize=None)
def _visible_gpu_archs() -> tuple[str, ...]:
    try:
        import torch

        if torch.cuda.is_available():
            caps = {torch.cuda.get_device_capability(i) for i in range(torch.cuda.device_count())}
            return tuple(f"{major}.{minor}" for major, minor in sorted(caps))
    except Exception:  # noqa: BLE001 - a broken CUDA setup means "no GPU visible"
        pass
    return ()


def _arch_parts(arch: str) -> tuple[int, int, str]:
    major, minor = arch.split(".")
    suffix = minor.lstrip("0123456789")
    return int(major), int(minor[: len(minor) - len(suffix)]), suffix


def archs_cover(built: tuple[str, ...], needed: tuple[str, ...]) -> bool:
    """Whether a module built for ``built`` runs on every GPU of ``needed``: the same
    architecture, an older minor of the same major (SASS is compatible within a major), or
    the PTX of the newest built architecture, which the driver compiles for newer GPUs."""
    if not built:
        return False
    parts = [_arch_parts(a) for a in built]
    newest = parts[-1]
    for arch in needed:
        major, minor, suffix = _arch_parts(arch)
        if any(a == (major, minor, suffix) for a in parts):
            continue
        if any(m == major and n <= minor and not s for m, n, s in parts):
            continue
        if not newest[2] and (newest[0], newest[1]) <= (major, minor):
            continue
        return False
    return True


def gencode_flags(archs: tuple[str, ...]) -> list[str]:
    """nvcc flags building SASS for each architecture and PTX for the newest (forward compatible)."""
    flags = []
    for arch in archs:
        num = arch.replace(".", "")
        flags.append(f"-gencode=arch=compute_{num},code=sm_{num}")
    newest = archs[-1].replace(".", "")
    flags.append(f"-gencode=arch=compute_{newest},code=compute_{newest}")
    return flags


@dataclass(frozen=True)
class HighwayConfig:
    """How to compile and link against Google Highway."""

    include_dirs: tuple[str, ...] = ()
    library_dirs: tuple[str, ...] = ()
    libraries: tuple[str, ...] = ()
    #: Highway sources compiled into the module (a source tree without a built library).
    sources: tuple[str, ...] = ()
    header: str = ""
    origin: str = ""
    extra: dict = field(default_factory=dict, compare=False)

    @property
    def version(self) -> str | None:
        return highway_version(self.header)


_MULTIARCH_LIB_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib",
                       "/usr/local/lib", "/usr/local/lib64", "/opt/homebrew/lib")
_DEFAULT_INCLUDE_DIRS = ("/usr/include", "/usr/local/include", "/opt/homebrew/include")


def _env_paths(*names: str) -> list[str]:
    out = []
    for name in names:
        out += [p for p in os.environ.get(name, "").split(os.pathsep) if p]
    return out


def _find_lib(dirs: list[str]) -> str | None:
    for d in dirs:
        if any((Path(d) / f).exists() for f in ("libhwy.so", "libhwy.dylib", "libhwy.a")):
            return d
    return None


@functools.lru_cache(maxsize=None)
def find_highway() -> HighwayConfig:
    """Locates Highway: ``$MLLM_KERNEL_HWY_ROOT`` (an install prefix or a source tree), then the
    compiler's search paths (CPLUS_INCLUDE_PATH, CPATH, /usr/include, ...), then pkg-config.

    Debian's libhwy-dev ships no ``hwy/targets.cc``, so modules link the system ``libhwy``; a
    source tree without a built library has its runtime sources compiled into the module.
    """
    root = os.environ.get(HWY_ROOT_ENV)
    if root:
        root_path = Path(root).expanduser().resolve()
        for inc in (root_path / "include", root_path):
            if (inc / "hwy" / "highway.h").exists():
                lib = _find_lib([str(root_path / "lib"), str(root_path / "lib64"), str(root_path / "build")])
                if lib:
                    return HighwayConfig((str(inc),), (lib,), ("hwy",), (), str(inc / "hwy/highway.h"),
                                         f"{HWY_ROOT_ENV}={root}")
                sources = tuple(str(inc / "hwy" / f) for f in ("targets.cc", "per_target.cc", "abort.cc",
                                                               "print.cc") if (inc / "hwy" / f).exists())
                if not any(s.endswith("targets.cc") for s in sources):
                    raise ToolchainNotFoundError(
                        f"{HWY_ROOT_ENV}={root} has Highway headers but neither a built libhwy nor "
                        "hwy/targets.cc to compile. " + HIGHWAY_INSTALL_HINT
                    )
                return HighwayConfig((str(inc),), (), (), sources, str(inc / "hwy/highway.h"),
                                     f"{HWY_ROOT_ENV}={root} (source tree)")
        raise ToolchainNotFoundError(f"{HWY_ROOT_ENV}={root} holds no hwy/highway.h. " + HIGHWAY_INSTALL_HINT)

    env_includes = _env_paths("CPLUS_INCLUDE_PATH", "CPATH")
    for inc in env_includes + list(_DEFAULT_INCLUDE_DIRS):
        header = Path(inc) / "hwy" / "highway.h"
        if header.exists():
            lib = _find_lib(_env_paths("LIBRARY_PATH") + [str(Path(inc).parent / "lib")] + list(_MULTIARCH_LIB_DIRS))
            if lib is None:
                raise ToolchainNotFoundError(f"found {header} but no libhwy library. " + HIGHWAY_INSTALL_HINT)
            # Directories the compiler searches already are not repeated (-I/usr/include breaks
            # #include_next in the C++ standard library).
            extra_inc = () if inc in env_includes or inc == "/usr/include" else (inc,)
            return HighwayConfig(extra_inc, (lib,), ("hwy",), (), str(header), f"headers in {inc}")

    if shutil.which("pkg-config"):
        try:
            cflags = subprocess.run(["pkg-config", "--cflags-only-I", "libhwy"], capture_output=True,
                                    text=True, check=True).stdout.split()
            libdirs = subprocess.run(["pkg-config", "--libs-only-L", "libhwy"], capture_output=True,
                                     text=True, check=True).stdout.split()
            incs = tuple(f[2:] for f in cflags)
            header = next((str(Path(i) / "hwy/highway.h") for i in incs if (Path(i) / "hwy/highway.h").exists()), "")
            return HighwayConfig(incs, tuple(f[2:] for f in libdirs), ("hwy",), (), header, "pkg-config libhwy")
        except subprocess.CalledProcessError:
            pass
    raise ToolchainNotFoundError(HIGHWAY_INSTALL_HINT)


def highway_version(header: str) -> str | None:
    """Highway's version from the HWY_MAJOR/MINOR/PATCH macros of ``hwy/highway.h``."""
    try:
        text = Path(header).read_text(errors="replace")
    except OSError:
        return None
    parts = [re.search(rf"#define HWY_{k}\s+(\d+)", text) for k in ("MAJOR", "MINOR", "PATCH")]
    return ".".join(m.group(1) for m in parts) if all(parts) else None


CUTLASS_INSTALL_HINT = (
    "CUTLASS's headers were not found. Install them with `pip install --no-deps nvidia-cutlass` "
    "(only the headers under cutlass_library/source/include are used), or point "
    f"{CUTLASS_HOME_ENVS[0]} (or CUTLASS_HOME) at a CUTLASS checkout."
)


@functools.lru_cache(maxsize=None)
def find_cutlass_include() -> str:
    """The folder holding ``cutlass/`` and ``cute/``: ``$MLLM_KERNEL_CUTLASS_HOME`` or
    ``$CUTLASS_HOME`` (a CUTLASS checkout: its include/), else the headers of the
    ``nvidia-cutlass`` wheel (found without importing its Python code)."""
    import importlib.util

    for env in CUTLASS_HOME_ENVS:
        home = os.environ.get(env, "").strip()
        if home:
            include = Path(home).expanduser() / "include"
            if not (include / "cutlass" / "cutlass.h").is_file():
                raise ToolchainNotFoundError(f"${env}={home} has no include/cutlass/cutlass.h. " + CUTLASS_INSTALL_HINT)
            return str(include.resolve())
    spec = importlib.util.find_spec("cutlass_library")
    for location in (spec.submodule_search_locations or []) if spec else []:
        include = Path(location) / "source" / "include"
        if (include / "cutlass" / "cutlass.h").is_file():
            return str(include.resolve())
    raise ToolchainNotFoundError(CUTLASS_INSTALL_HINT)


def _tvm_ffi_module(name: str):
    """tvm-ffi's module ``name`` (``libinfo``, ``_version``: standard library imports only), run
    from its file without importing the package when the package is not imported yet: a build's
    key needs these, and the package's import (its compiled core, its PyTorch bindings) takes a
    tenth of a second before a first call's compilers could start. The caller falls back to the
    package's own import when the file is not there."""
    import importlib.util
    import sys

    if "tvm_ffi" in sys.modules:
        return importlib.import_module(f"tvm_ffi.{name}")
    package = importlib.util.find_spec("tvm_ffi")
    for folder in (package.submodule_search_locations or []) if package else []:
        path = Path(folder) / f"{name}.py"
        if path.is_file():
            spec = importlib.util.spec_from_file_location(f"_mllm_kernel_tvm_ffi_{name}", path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return module
    return importlib.import_module(f"tvm_ffi.{name}")


@functools.lru_cache(maxsize=None)
def tvm_ffi_paths() -> tuple[tuple[str, ...], str]:
    """tvm-ffi's include folders (its own and DLPack's) and the folder of ``libtvm_ffi``."""
    libinfo = _tvm_ffi_module("libinfo")
    includes = tuple(dict.fromkeys([libinfo.find_include_path(), libinfo.find_dlpack_include_path()]))
    return includes, str(Path(libinfo.find_libtvm_ffi()).parent)


@functools.lru_cache(maxsize=None)
def tvm_ffi_version() -> str:
    try:
        return _tvm_ffi_module("_version").__version__
    except ImportError:  # a source build without the generated file
        import tvm_ffi

        return tvm_ffi.__version__
