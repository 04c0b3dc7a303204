"""The host runtime library: the host code every module shares, compiled once per toolchain.

``mllm_kernel/csrc/host_runtime.cpp`` holds what each kernel's host side would otherwise
compile again (TensorMatcher's checks, error messages, dtype and device names; see
``include/mllm_kernel/host_runtime.hpp``), ``thread_pool.cpp`` the CPU kernels' thread pool.
The JIT builds it into the user cache like a module (same lock, manifest and key rules) as
``libmllm_kernel_host_<id>.so``, where the id hashes its sources and the host headers that
declare its functions; every module links it by that name (its soname) and finds it through
its rpath, and a module's key holds the id, so a changed runtime rebuilds the modules that
link it. ``prebuild --output`` copies it into the folder's
lib/, beside Highway.
"""

from __future__ import annotations

import functools
import hashlib
import os
import uuid
from pathlib import Path

from mllm_kernel.jit_utils import toolchain
from mllm_kernel.jit_utils.build import BuildSpec, TranslationUnit
from mllm_kernel.jit_utils.paths import CPU_INCLUDE_DIR, INCLUDE_DIR, PACKAGE_DIR

#: The runtime's sources, one translation unit each: compiled side by side (beside a first
#: module's own units) on a machine with the cores, they keep the runtime off a first call's
#: critical path.
SOURCES = (PACKAGE_DIR / "csrc" / "host_runtime.cpp", PACKAGE_DIR / "csrc" / "thread_pool.cpp")
#: Its optimisation (after the usual -O3, so these win): a first call on a machine with the cores
#: builds the runtime beside the module, and at -O3 the runtime took longer than the module; at
#: -O1 with small functions inlined it compiles in half the time, and a kernel call's checks
#: measured no slower (CPU rmsnorm on a [1, 64] tensor, about 3.7 us a call either way).
OPT_FLAGS = ("-O1", "-finline-small-functions")
#: The headers that declare its functions, besides the header library's .hpp files.
HEADERS = (CPU_INCLUDE_DIR / "mllm_kernel" / "cpu" / "thread_pool.hpp",)


@functools.cache
def runtime_id() -> str:
    """16 hex digits naming this runtime: a hash of its sources and of the headers that
    declare its functions (the header library's .hpp files, the CPU thread pool's)."""
    digest = hashlib.sha256()
    for path in [*SOURCES, *sorted((INCLUDE_DIR / "mllm_kernel").glob("*.hpp")), *HEADERS]:
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def soname() -> str:
    """The runtime's file name, which modules record as a needed library."""
    return f"libmllm_kernel_host_{runtime_id()}.so"


def build_spec() -> BuildSpec:
    """The runtime's build: plain C++ for every CPU (no -march), named by its soname."""
    return BuildSpec(name="host_runtime", device="cpu", args=(), extra_cflags=OPT_FLAGS,
                     units=tuple(TranslationUnit("cpp", (source,), ()) for source in SOURCES),
                     extra_ldflags=("-pthread", f"-Wl,-soname,{soname()}"),  # the pool's POSIX threads
                     cpu_target=toolchain.PORTABLE_CPU_TARGET)


def is_built() -> bool:
    """Whether the cache holds the runtime already (a build then only links against it)."""
    from mllm_kernel.jit_utils.cache import cached_library
    from mllm_kernel.jit_utils.paths import cache_root

    return cached_library(cache_root() / build_spec().folder_name) is not None


def library() -> Path:
    """The runtime under its soname (``<cache folder>/libmllm_kernel_host_<id>.so``), built
    first when the cache has none. Safe for many processes at once: the build takes the
    folder's lock, and the soname is a hard link to the published library, swapped in
    atomically."""
    from mllm_kernel.jit_utils.cache import find_library

    built = find_library(build_spec())
    named = built.parent / soname()
    try:
        if os.path.samefile(built, named):
            return named
    except OSError:
        pass
    temp = built.parent / f".{soname()}.{os.getpid()}.{uuid.uuid4().hex[:8]}"
    os.link(built, temp)
    os.replace(temp, named)
    return named
