"""A GCC precompiled header for CPU kernel modules, built once per toolchain and CPU target.

A CPU module's compile is mostly parsing: the SIMD intrinsics Highway includes (all of
``<immintrin.h>`` on x86), the standard library and the package's host headers, the same for
every module. ``mllm_kernel/cpu/precompiled.hpp`` holds them; compiled once into the cache
(``cpu-pch_<key>/``, the key covering the compiler, the module flags, the include path and the
package's headers), it is given to later module compiles with ``-include``, and GCC reads the
parsed form instead. GCC checks that the header was compiled with the same options and falls
back to the text when it was not, so a mismatch costs time, not correctness.

It is built in the background when a module is compiled on a machine with a core to spare
for it (not during a first call on a two-core machine, which also builds the host runtime):
that module compiles without it, the ones after read it. Users' own modules, modules with
flags of their own, portable builds (every Highway target) and compilers other than GCC
compile as before; ``MLLM_KERNEL_CPU_PCH=0`` turns it off.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import subprocess
from pathlib import Path

from mllm_kernel.jit_utils import pch_build, toolchain
from mllm_kernel.jit_utils.paths import CPU_INCLUDE_DIR, INCLUDE_DIR, PACKAGE_DIR, cache_root

logger = logging.getLogger("mllm_kernel")

PCH_ENV = "MLLM_KERNEL_CPU_PCH"
HEADER = CPU_INCLUDE_DIR / "mllm_kernel" / "cpu" / "precompiled.hpp"
#: The package's headers the precompiled one may include (a change to any gives a new key).
PACKAGE_HEADERS = (INCLUDE_DIR / "mllm_kernel", CPU_INCLUDE_DIR / "mllm_kernel" / "cpu")
#: In a built folder: the header (GCC finds ``<name>.gch`` beside it) and the files it read.
DEPENDENCIES = "dependencies.json"


def enabled() -> bool:
    return os.environ.get(PCH_ENV, "1") not in ("0", "false", "False")


def applies(spec) -> bool:
    """Whether ``spec`` (a BuildSpec) compiles with the precompiled header: one of the package's
    own Highway CPU modules (a user's source may define macros before its first include, which
    a header given ahead of it would preempt), for this CPU, with no flags or include paths of
    its own, built by GCC."""
    return (enabled() and spec.device == "cpu" and spec.highway is not None and not spec.extra_cflags
            and not spec.extra_include_paths and spec.cpu_target != toolchain.PORTABLE_CPU_TARGET
            and all(Path(f).resolve().is_relative_to(PACKAGE_DIR.resolve()) for u in spec.units for f in u.files)
            and toolchain.compiler_is_gcc(toolchain.find_cxx()))


def _command(spec, header: Path, output: Path, depfile: Path) -> list[str]:
    return [toolchain.find_cxx(), *spec.cxx_flags(), *(f"-I{d}" for d in spec.include_dirs()), "-x", "c++-header",
            str(header), "-o", str(output), "-MD", "-MF", str(depfile)]


def _key(cxx_identity: str, flags: tuple[str, ...], include_dirs: tuple[str, ...]) -> str:
    # Not memoised: a header edited while a process runs must give the next build a new key.
    digest = hashlib.sha256(json.dumps([cxx_identity, flags, include_dirs]).encode())
    for folder in PACKAGE_HEADERS:
        for path in sorted(folder.glob("*.hpp")):
            digest.update(path.name.encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def folder(spec) -> Path:
    """Where the precompiled header for ``spec``'s compiler, flags and include path lives."""
    key = _key(toolchain.file_identity(toolchain.find_cxx()), tuple(spec.cxx_flags()), tuple(spec.include_dirs()))
    return cache_root() / f"cpu-pch_{key}"  # not "cpu_": no module folder can take the name


def usage(spec) -> tuple[list[str], list[str]]:
    """The compiler flags that read the built precompiled header, and the files it was made
    from (for the module's dependency record, since GCC's depfile omits them); ``([], [])``
    while it is not built."""
    where = folder(spec)
    try:
        dependencies = json.loads((where / DEPENDENCIES).read_text())
    except (OSError, ValueError):
        return [], []
    if not (where / f"{HEADER.name}.gch").is_file():
        return [], []
    return ["-include", str(where / HEADER.name), "-Winvalid-pch"], dependencies


def has_spare_core(busy: int) -> bool:
    """Whether a build that keeps ``busy`` compilers running leaves a core for this header."""
    return (os.cpu_count() or 1) > busy


def build_in_background(spec) -> None:
    """Starts ``build(spec)`` in a thread of its own unless one is at it already; the module
    being built does not wait for it, the process does at exit."""
    pch_build.start_in_background(folder(spec), build, spec)


#: Waits for the precompiled headers being built in the background (tests, benchmarks).
wait_for_background = pch_build.wait_for_background


def build(spec) -> bool:
    """Builds the precompiled header for ``spec`` unless it is there; True when it is there
    after. Safe for many processes at once (pch_build.publish); a failure is logged, and modules
    compile without it."""
    from mllm_kernel.jit_utils.build import parse_depfile

    def fill(temp: Path) -> bool:
        header = temp / HEADER.name
        shutil.copyfile(HEADER, header)
        depfile = temp / "pch.d"
        command = _command(spec, header, temp / f"{HEADER.name}.gch", depfile)
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            logger.warning("mllm_kernel: the CPU precompiled header did not build; CPU modules compile without "
                           "it:\n%s", (result.stdout + result.stderr).strip()[-2000:])
            return False
        read = sorted({os.path.realpath(d) for d in parse_depfile(depfile) if not d.startswith(str(temp))})
        (temp / DEPENDENCIES).write_text(json.dumps(read))
        depfile.unlink()
        return True

    built = pch_build.publish(folder(spec), fill, DEPENDENCIES)
    _remove_old_layout()
    return built


def _remove_old_layout() -> None:
    """Headers built under the folder name used before (``cpu_pch_<key>``, which a module's
    name could take too: those hold a manifest), which nothing reads any more."""
    from mllm_kernel.jit_utils.cache import MANIFEST  # cache imports this module through build

    for old in cache_root().glob("cpu_pch_*"):
        if (old / DEPENDENCIES).is_file() and not (old / MANIFEST).exists():
            pch_build.remove(old)
