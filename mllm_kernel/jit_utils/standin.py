"""Whether a kernel's sources can build against the stand-in for tvm-ffi's tensor header.

A kernel written as the seed guide shows includes ``<tvm/ffi/container/tensor.h>`` and takes
``tvm::ffi::TensorView`` parameters. That header brings tvm-ffi's object system and the standard
library's strings, streams and containers, which a CUDA build parses three times (cudafe++,
cicc, the host compile): most of a small kernel's first build. ``mllm_kernel/standin/`` holds a
header of the same name with TensorView and ShapeView alone (their public interface, on a
DLTensor), and a build whose sources pass ``applies`` puts that folder ahead of tvm-ffi's own.

The test reads the sources and the files they include by quotes (found beside the including
file or on the module's include paths), as text: they include tvm-ffi's tensor header, no
tvm-ffi C++ header besides it, name nothing of ``tvm::ffi`` but TensorView and ShapeView (no
``using namespace tvm::ffi``, no namespace alias, no ``TVM_FFI_`` macro). A source may still
lean on something the test does not see (a header it includes by angle brackets that uses
more of tvm-ffi, a standard header the real one brought along, a member the stand-in lacks);
such a build fails against the stand-in and is built again against the real header, the
failure remembered in its folder (cache.py), so it is paid once.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterable

from mllm_kernel.jit_utils.paths import PACKAGE_DIR

#: Put ahead of tvm-ffi's include folder: ``<tvm/ffi/container/tensor.h>`` resolves here.
STANDIN_INCLUDE_DIR = PACKAGE_DIR / "standin"
#: The header it stands in for.
TENSOR_HEADER = "tvm/ffi/container/tensor.h"
#: tvm-ffi headers a source may include beside it (the C API, which the library includes too).
_ALLOWED_HEADERS = {TENSOR_HEADER, "tvm/ffi/c_api.h"}
#: The names of tvm::ffi the stand-in defines.
_ALLOWED_NAMES = {"TensorView", "ShapeView"}

_INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.MULTILINE)
_TVM_FFI = re.compile(r"\btvm\s*::\s*ffi\b(\s*::\s*(\w+))?")
_REFUSED = re.compile(r"\bTVM_FFI_\w*|\bnamespace\s+tvm\b")


def _quoted_include(name: str, including: Path, search: Iterable[Path]) -> Path | None:
    for folder in (including.parent, *search):
        candidate = folder / name
        if candidate.is_file():
            return candidate.resolve()
    return None


def applies(files: Iterable[Path], include_paths: Iterable[str | Path] = ()) -> bool:
    """Whether ``files`` (a module's kernel sources) build against the stand-in: see the module
    docstring. False when they do not include tvm-ffi's tensor header at all."""
    search = [Path(p) for p in include_paths]
    pending = [Path(f).resolve() for f in files]
    if all(path.is_relative_to(PACKAGE_DIR) for path in pending):
        return False  # the library's kernels use mllm_kernel::TensorView
    seen: set[Path] = set()
    includes_tensor = False
    while pending:
        path = pending.pop()
        if path in seen:
            continue
        seen.add(path)
        try:
            text = path.read_text(errors="replace")
        except OSError:
            return False
        if _REFUSED.search(text):
            return False
        for match in _TVM_FFI.finditer(text):
            if match.group(2) not in _ALLOWED_NAMES:
                return False
        for quote, name in _INCLUDE.findall(text):
            if name.startswith("tvm/ffi/"):
                if name not in _ALLOWED_HEADERS:
                    return False
                includes_tensor = includes_tensor or name == TENSOR_HEADER
            elif quote == '"':
                found = _quoted_include(name, path, search)
                # The library's headers need no test; a header found elsewhere (a system or
                # Highway folder) is not read, like those included by angle brackets.
                if found is not None and not found.is_relative_to(PACKAGE_DIR):
                    pending.append(found)
    return includes_tensor
