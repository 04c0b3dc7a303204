"""The on-disk module cache: one folder per module variant, safe across processes.

Folder ``<cache root>/<device>_<name>_<args>_<key>/`` holds:
  ``manifest.json``   the commit point: the library's file name and every file it was built
                      from (headers included) with size, mtime and SHA-256;
  ``<name>-<id>.so``  the library the manifest names;
  ``lock``            taken with flock() while building (the kernel drops it if the process dies);
  ``failed-build/``   sources and log of the last failed build, for reading only.

A load trusts nothing but a manifest whose files are all unchanged, so a killed build (no
manifest), an edited header (a changed dependency) or a failed build (no manifest) all lead to
a rebuild, never to loading a stale or half-written library. Builds run in a private temporary
folder and are published by renaming the library and then the manifest into place, so many
processes may race: one builds under the lock, the others wait and load its result.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import shutil
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from mllm_kernel.jit_utils.build import BuildSpec, compile_module
from mllm_kernel.jit_utils.errors import JitCompileError
from mllm_kernel.jit_utils.paths import cache_root

logger = logging.getLogger("mllm_kernel")

MANIFEST = "manifest.json"
FAILED_BUILD = "failed-build"
TEMP_PREFIX = ".build-"


def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _dependency_record(path: str) -> list:
    st = os.stat(path)
    return [path, st.st_size, st.st_mtime_ns, _sha256(path)]


def _dependencies_unchanged(records: list) -> bool:
    """Cheap check by size and mtime; a file whose stat changed is hashed before it counts as
    edited (a `git checkout` that rewrites the same bytes does not force a rebuild)."""
    for path, size, mtime_ns, digest in records:
        try:
            st = os.stat(path)
        except OSError:
            return False
        if st.st_size == size and st.st_mtime_ns == mtime_ns:
            continue
        if st.st_size != size or _sha256(path) != digest:
            logger.info("mllm_kernel: %s changed since the cached build", path)
            return False
    return True


def cached_library(folder: Path) -> Path | None:
    """The library a valid manifest in ``folder`` names, or None when it must be (re)built."""
    try:
        manifest = json.loads((folder / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    library = folder / manifest.get("library", "")
    if not library.is_file() or not _dependencies_unchanged(manifest.get("dependencies", [])):
        return None
    return library


@contextmanager
def _folder_lock(folder: Path, label: str) -> Iterator[None]:
    with open(folder / "lock", "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            logger.info("mllm_kernel: waiting for another process to finish building %s", label)
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _atomic_write(path: Path, text: str) -> None:
    temp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex}")
    temp.write_text(text)
    os.replace(temp, path)


def build_and_publish(spec: BuildSpec, folder: Path) -> Path:
    """Builds ``spec`` into ``folder`` under its lock (unless another process just did) and
    returns the published library."""
    folder.mkdir(parents=True, exist_ok=True)
    with _folder_lock(folder, spec.label):
        library = cached_library(folder)
        if library is not None:
            return library
        # Holding the lock, any temporary folder left here belongs to a build that died.
        for stale in folder.glob(TEMP_PREFIX + "*"):
            shutil.rmtree(stale, ignore_errors=True)
        build_dir = folder / f"{TEMP_PREFIX}{os.getpid()}-{uuid.uuid4().hex[:8]}"
        build_dir.mkdir()
        try:
            built, dependencies = compile_module(spec, build_dir)
        except JitCompileError as error:
            failed = folder / FAILED_BUILD
            shutil.rmtree(failed, ignore_errors=True)
            os.replace(build_dir, failed)
            raise JitCompileError(error.module, failed, error.command, error.output) from None
        except BaseException:
            shutil.rmtree(build_dir, ignore_errors=True)
            raise
        library = folder / f"{spec.name}-{uuid.uuid4().hex[:12]}.so"
        os.replace(built, library)
        manifest = {
            "module": spec.label,
            "device": spec.device,
            "library": library.name,
            "built_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "dependencies": [_dependency_record(d) for d in dependencies],
        }
        _atomic_write(folder / MANIFEST, json.dumps(manifest, indent=1))
        # Older libraries stay mapped in processes that loaded them; unlinking is safe.
        for old in folder.glob("*.so"):
            if old != library:
                old.unlink(missing_ok=True)
        shutil.rmtree(build_dir, ignore_errors=True)
        shutil.rmtree(folder / FAILED_BUILD, ignore_errors=True)
        return library


def load_module(spec: BuildSpec):
    """Loads the module of ``spec`` from the cache, building it first when needed."""
    import tvm_ffi

    folder = cache_root() / spec.folder_name
    library = cached_library(folder) or build_and_publish(spec, folder)
    return tvm_ffi.load_module(str(library))
