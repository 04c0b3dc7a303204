"""A GCC precompiled header for the host half of CUDA units that include tvm-ffi's C++ headers.

nvcc's last step compiles cudafe++'s output (the unit preprocessed, its device code reduced to
stubs) with the host compiler; it starts when cudafe++ ends, so it is on every CUDA build's
critical path (nvcc_pipeline.py). A kernel written as the seed guide shows includes tvm-ffi's
C++ headers (``tvm/ffi/container/tensor.h``), which bring the standard library's streams,
strings and containers: most of that compile is parsing them.

Those headers come first, so cudafe++'s output for such a unit begins with text that depends
only on the leading includes and the flags: the prefix, everything before the first line mark
that names one of the unit's own files (the generated unit, and the kernel sources it
includes). The first unit with a given prefix compiles as before, then has the prefix compiled
into the cache (``cuda-pch_<key>/``) in the background; a later unit whose output begins with
the same text is compiled as ``#include "<folder>/prefix.h"`` followed by the rest of its
output, and GCC reads the parsed form. The key hashes the compiler, the host compile's flags and
the prefix's text, so an edited header or another toolchain gives a new prefix, never a stale
one; and should GCC find the parsed form unusable, it reads ``prefix.h`` as text.

Only prefixes holding tvm-ffi's C++ headers (not its C API, which the library's own units
include) are compiled: each takes about 100 MB, and the library's units are light without one.
At most ``MAX_FOLDERS`` are kept, the least recently used making way for a new one. A host
compile that fails with a prefix fails the pipeline's steps, so the build runs as plain nvcc
(build._compile_cuda), and the prefix is not used again. ``MLLM_KERNEL_CUDA_PCH=0`` turns it off, and compilers other than GCC compile as
before.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from mllm_kernel.jit_utils import pch_build, standin, toolchain
from mllm_kernel.jit_utils.paths import cache_root

logger = logging.getLogger("mllm_kernel")

PCH_ENV = "MLLM_KERNEL_CUDA_PCH"
#: Module folders start "cuda_": none can take this name.
FOLDER_PREFIX = "cuda-pch_"
HEADER = "prefix.h"
#: Each folder holds about 100 MB; a new one beyond this many replaces the least recently used.
MAX_FOLDERS = 8
#: In a folder whose prefix a host compile failed with: it is not used again.
UNUSABLE = "unusable"

#: A line mark as cudafe++ and GCC write them: ``# 12 "/path/file.h"`` (GCC adds flags after).
_LINE_MARK = re.compile(r'^# \d+ "((?:[^"\\]|\\.)*)"', re.MULTILINE)
#: tvm-ffi's C API headers: light, included by the library's own units.
_TVM_FFI_C_API = ("c_api.h", "extra/c_env_api.h")
#: A tvm-ffi header other than those, as a line mark names it. A plain search for it rules out
#: the library's units in a few milliseconds, before any line mark is read.
_TVM_FFI_CPP = re.compile("/tvm/ffi/(?!" + "|".join(re.escape(h) + '"' for h in _TVM_FFI_C_API) + ")")
#: The stand-in for tvm-ffi's tensor header (standin.py) is light: nothing to precompile.
_STANDIN = str(standin.STANDIN_INCLUDE_DIR) + os.sep
_OWN_INCLUDE = re.compile(r'^#include "([^"]+)"', re.MULTILINE)
#: cudafe++'s output is read and written back byte for byte, whatever its encoding.
_TEXT = {"encoding": "utf-8", "errors": "surrogateescape"}


def enabled() -> bool:
    return os.environ.get(PCH_ENV, "1") not in ("0", "false", "False")


def own_files(unit_source: Path) -> set[str]:
    """The unit's own files as line marks name them: the generated unit and the kernel sources
    it includes by path (build.TranslationUnit.source_text)."""
    return {str(unit_source), *_OWN_INCLUDE.findall(unit_source.read_text())}


def split(text: str, own: set[str]) -> tuple[str, str, str] | None:
    """cudafe++'s output as (its first line, the prefix, the rest): the prefix runs from the
    second line to the first line mark naming a file in ``own``. None when there is no such mark
    or the prefix holds none of tvm-ffi's C++ headers (nothing heavy to precompile)."""
    first_end = text.find("\n") + 1
    if first_end == 0 or _TVM_FFI_CPP.search(text, first_end) is None:
        return None
    heavy = False
    for mark in _LINE_MARK.finditer(text, first_end):
        path = mark.group(1)
        if path in own:
            if not heavy:
                return None
            return text[:first_end], text[first_end:mark.start()], text[mark.start():]
        if not heavy and _TVM_FFI_CPP.search(path + '"') is not None and not path.startswith(_STANDIN):
            heavy = True
    return None


@dataclass
class Prefix:
    """The prefix of one unit's cudafe++ output, and the host compile that reads it."""

    folder: Path
    first_line: str
    text: str
    rest: str
    #: The host compile's command without its source and output: the header is built with it.
    flags: list[str]

    def header(self) -> Path:
        return self.folder / HEADER

    def built(self) -> bool:
        """Whether the prefix is compiled and may be used."""
        return (self.folder / f"{HEADER}.gch").is_file() and not self.unusable()

    def unusable(self) -> bool:
        """Whether a host compile failed with it (give_up)."""
        return (self.folder / UNUSABLE).exists()

    def use(self, host_source: Path) -> None:
        """Rewrites ``host_source`` (cudafe++'s output) to include the precompiled prefix, whole or
        not at all. Its first line (the mark naming the unit) stays first, so GCC's messages name
        the unit. The folder's time is set, for MAX_FOLDERS's least recently used."""
        _replace(host_source, f'{self.first_line}#include "{self.header()}"\n{self.rest}')
        try:
            os.utime(self.folder)
        except OSError:  # made way for another meanwhile: the compile fails and gives up on it
            pass

    def give_up(self, host_source: Path) -> None:
        """Puts cudafe++'s own output back into ``host_source`` and marks the folder unusable."""
        _replace(host_source, self.first_line + self.text + self.rest)
        try:
            (self.folder / UNUSABLE).touch()
        except OSError:  # the folder is gone
            pass

    def build(self) -> bool:
        """Compiles the prefix into its folder unless it is there (safe for many processes at
        once), making way for it among MAX_FOLDERS; a failure is logged and units compile without
        it. True when it is there after."""
        if not self.folder.is_dir():
            folders = sorted(cache_root().glob(FOLDER_PREFIX + "*"), key=_last_used)
            for old in folders[:max(0, len(folders) - MAX_FOLDERS + 1)]:
                logger.info("mllm_kernel: %d CUDA precompiled headers are cached; the least recently used, %s, "
                            "makes way for a new one", MAX_FOLDERS, old.name)
                pch_build.remove(old)
        nice = ["nice", "-n", "10"] if shutil.which("nice") else []  # behind the compiles a call waits for

        def fill(temp: Path) -> bool:
            header = temp / HEADER
            header.write_text(self.text, **_TEXT)
            command = [*self.flags, "-x", "c++-header", str(header), "-o", str(temp / f"{HEADER}.gch")]
            result = subprocess.run(nice + command, capture_output=True, text=True)
            if result.returncode != 0:
                logger.warning("mllm_kernel: a CUDA unit's host precompiled header did not build; such units "
                               "compile without it:\n%s", (result.stdout + result.stderr).strip()[-2000:])
                return False
            (temp / "command.json").write_text(json.dumps(command))
            return True

        return pch_build.publish(self.folder, fill, f"{HEADER}.gch")


def _last_used(folder: Path) -> float:
    try:
        return folder.stat().st_mtime
    except OSError:  # removed meanwhile
        return 0.0


def _replace(path: Path, text: str) -> None:
    from mllm_kernel.jit_utils.cache import atomic_write  # cache imports this module through build

    atomic_write(path, text, **_TEXT)


def read(host_source: Path, unit_source: Path, host_command: str, path: str | None = None) -> Prefix | None:
    """The prefix of ``host_source`` (cudafe++'s output for the unit ``unit_source``), compiled
    by ``host_command`` (the listing's last step, its compiler found on ``path``: the PATH nvcc
    gives its steps); None when it does not apply."""
    if not enabled():
        return None
    tokens = shlex.split(host_command)
    compiler = shutil.which(tokens[0], path=path)
    if compiler is None or not toolchain.compiler_is_gcc(compiler) or "-o" not in tokens:
        return None
    folder_root = cache_root()
    if any(c in str(folder_root) for c in '"\\\n'):
        return None  # the folder could not be named in an #include
    parts = split(host_source.read_text(**_TEXT), own_files(unit_source))
    if parts is None:
        return None
    at = tokens.index("-o")
    flags = [t for t in tokens[:at] + tokens[at + 2:] if t not in ("-c", str(host_source))]
    digest = hashlib.sha256(json.dumps([toolchain.file_identity(compiler), flags[1:]]).encode())
    digest.update(parts[1].encode(**_TEXT))
    return Prefix(folder_root / f"{FOLDER_PREFIX}{digest.hexdigest()[:16]}", parts[0], parts[1], parts[2],
                  [compiler, *flags[1:]])


def build_in_background(prefix: Prefix) -> None:
    """Starts ``prefix.build()`` in a thread of its own unless one is at it already."""
    pch_build.start_in_background(prefix.folder, prefix.build)


#: Waits for the precompiled headers being built in the background (tests, benchmarks).
wait_for_background = pch_build.wait_for_background
