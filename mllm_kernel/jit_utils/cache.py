"""The on-disk module caches: prebuilt folders (read-only) and the user cache.

A module is looked up, in order, in every folder of ``$MLLM_KERNEL_PREBUILT_PATH`` (by its
portable key: no toolchain needed, see ``BuildSpec.portable_key``), then in the user cache (by
its full key), and only then built into the user cache. With ``$MLLM_KERNEL_DISABLE_JIT`` set
a miss raises ``JitDisabledError`` instead of starting a compiler.

Folder ``<cache root>/<device>_<name>_<args>_<key>/`` holds:
  ``manifest.json``   the commit point: the library's file name and every file it was built
                      from (headers included) with size, mtime and SHA-256;
  ``<name>-<id>.so``  the library the manifest names;
  ``lock``            taken with flock() while building (the kernel drops it if the process dies);
  ``failed-build/``   sources and log of the last failed build, for reading only;
  ``standin-refused`` in the folder of a build against the stand-in for tvm-ffi's tensor header
                      (standin.py) that failed: the compiler's output. The module is built
                      against tvm-ffi's own header instead, in a folder of its own.

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
from typing import Callable, Iterator

from mllm_kernel.jit_utils import toolchain
from mllm_kernel.jit_utils.build import (BUNDLED_LIB_DIR, PACKAGE_PREFIX, BuildSpec, compile_module, key_path,
                                         resolve_key_path)
from mllm_kernel.jit_utils.errors import JitCompileError, JitDisabledError, ToolchainNotFoundError
from mllm_kernel.jit_utils.paths import cache_root, jit_disabled, prebuilt_dirs

logger = logging.getLogger("mllm_kernel")

MANIFEST = "manifest.json"
FAILED_BUILD = "failed-build"
STANDIN_REFUSED = "standin-refused"
TEMP_PREFIX = ".build-"


def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _dependency_record(path: str) -> list:
    st = os.stat(path)
    return [key_path(path), st.st_size, st.st_mtime_ns, _sha256(path)]


def _dependencies_unchanged(records: list, package_only: bool = False) -> bool:
    """Cheap check by size and mtime; a file whose stat changed is hashed before it counts as
    edited (a `git checkout` that rewrites the same bytes does not force a rebuild).
    ``package_only`` checks the package's own files alone (a prebuilt module on another
    machine, whose toolchain headers are not there)."""
    for name, size, mtime_ns, digest in records:
        if package_only and not name.startswith(PACKAGE_PREFIX):
            continue
        path = resolve_key_path(name)
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


def read_manifest(folder: Path) -> dict | None:
    try:
        return json.loads((folder / MANIFEST).read_text())
    except (OSError, ValueError):
        return None


def cached_library(folder: Path) -> Path | None:
    """The library a valid manifest in ``folder`` names, or None when it must be (re)built."""
    manifest = read_manifest(folder)
    if manifest is None:
        return None
    library = folder / manifest.get("library", "")
    if not library.is_file() or not _dependencies_unchanged(manifest.get("dependencies", [])):
        return None
    return library


def _usable_build(folder: Path, spec: BuildSpec) -> Path | None:
    """The library of a build found by its portable key (a prebuilt folder, or the user cache
    when no toolchain is there to compute the full key): same portable key, built for the
    GPUs here, the package's own files unchanged."""
    manifest = read_manifest(folder)
    if manifest is None or manifest.get("portable_key") != spec.portable_key():
        return None
    if spec.device == "cuda" and not toolchain.archs_cover(tuple(manifest.get("cuda_archs", ())), spec.cuda_archs):
        return None
    library = folder / manifest.get("library", "")
    if not library.is_file() or not _dependencies_unchanged(manifest.get("dependencies", []), package_only=True):
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


def atomic_write(path: Path, text: str, **options) -> None:
    """Writes ``text`` to ``path`` whole or not at all (a temporary file renamed over it);
    ``options`` go to Path.write_text (an encoding, its errors)."""
    temp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex}")
    temp.write_text(text, **options)
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
            "name": spec.name,
            "device": spec.device,
            "args": list(spec.args),
            "portable_key": spec.portable_key(),
            "cuda_archs": list(spec.cuda_archs),
            "cpu_target": spec.cpu_target if spec.device == "cpu" else None,
            "library": library.name,
            "built_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "dependencies": [_dependency_record(d) for d in dependencies],
        }
        atomic_write(folder / MANIFEST, json.dumps(manifest, indent=1))
        # Older libraries stay mapped in processes that loaded them; unlinking is safe.
        for old in folder.glob("*.so"):
            if old != library:
                old.unlink(missing_ok=True)
        shutil.rmtree(build_dir, ignore_errors=True)
        shutil.rmtree(folder / FAILED_BUILD, ignore_errors=True)
        return library


def find_prebuilt(spec: BuildSpec) -> Path | None:
    """The library of ``spec`` in a folder of ``$MLLM_KERNEL_PREBUILT_PATH``, if one has it."""
    directories = prebuilt_dirs()
    if not directories:
        return None
    for candidate in _variants(spec):
        prebuilt = candidate.prebuilt_variant()
        for directory in directories:
            library = _usable_build(directory / prebuilt.prebuilt_folder_name, prebuilt)
            if library is not None:
                return library
    return None


def _cached_without_compiler(spec: BuildSpec) -> Path | None:
    """A user-cache build of ``spec`` found by its portable key, for a process that may not
    start a compiler (or has none, so the full key cannot be computed)."""
    for candidate in _variants(spec):
        try:
            library = cached_library(cache_root() / candidate.folder_name)
            if library is not None:
                return library
        except ToolchainNotFoundError:
            pass
    root = cache_root()
    if not root.is_dir():
        return None
    for folder in sorted(root.glob(spec.readable_name + "_*")):
        for candidate in _variants(spec):
            library = _usable_build(folder, candidate)
            if library is not None:
                return library
    return None


def _variants(spec: BuildSpec) -> list[BuildSpec]:
    """``spec``, and where it builds against the stand-in for tvm-ffi's tensor header, the same
    module against tvm-ffi's own (built instead where the stand-in failed): either may be there."""
    return [spec, spec.without_standin()] if spec.tvm_ffi_standin else [spec]


def build_into(spec: BuildSpec, folder_of: Callable[[BuildSpec], Path]) -> Path:
    """The library of ``spec`` cached in ``folder_of(spec)``, or built there. A module on the
    stand-in for tvm-ffi's tensor header (standin.py) that fails to compile against it is built
    against tvm-ffi's own header in its own folder, and the failure is kept, so that later
    loads go there at once; only that second build's errors are raised."""
    if spec.tvm_ffi_standin:
        folder = folder_of(spec)
        if not (folder / STANDIN_REFUSED).exists():
            try:
                return cached_library(folder) or build_and_publish(spec, folder)
            except JitCompileError as error:
                atomic_write(folder / STANDIN_REFUSED, error.output, errors="replace")
                logger.info("mllm_kernel: %s does not compile against the stand-in for tvm-ffi's tensor header "
                            "(jit_utils/standin.py); building it against tvm-ffi's own", spec.label)
        spec = spec.without_standin()
    folder = folder_of(spec)
    return cached_library(folder) or build_and_publish(spec, folder)


def find_library(spec: BuildSpec) -> Path:
    """The library of ``spec``: prebuilt, cached, or (unless JIT is disabled) built now."""
    library = find_prebuilt(spec)
    if library is not None:
        return library
    if jit_disabled():
        library = _cached_without_compiler(spec)
        if library is None:
            raise JitDisabledError(spec.name, spec.args, spec.device, [str(d) for d in prebuilt_dirs()])
        return library
    return build_into(spec, lambda s: cache_root() / s.folder_name)


def load_module(spec: BuildSpec):
    """Loads the module of ``spec``: prebuilt, cached, or built first when needed."""
    library = find_library(spec)
    import tvm_ffi  # after a build, which imports it meanwhile (build.compile_module)

    return tvm_ffi.load_module(str(library))


def bundle_libraries(spec: BuildSpec, directory: Path) -> None:
    """Copies the shared libraries ``spec`` links besides tvm-ffi and CUDA (the host runtime,
    Highway) into the prebuilt ``directory``'s lib/ folder, which its modules search
    (``bundled_libs``)."""
    target = directory / BUNDLED_LIB_DIR
    target.mkdir(parents=True, exist_ok=True)
    libraries: list[Path] = []
    if spec.host_runtime:
        from mllm_kernel.jit_utils import host_runtime

        libraries.append(host_runtime.library())
    if spec.highway is not None:
        libraries += [path for lib_dir in spec.highway.library_dirs for lib in spec.highway.libraries
                      for path in Path(lib_dir).glob(f"lib{lib}.so*")]
    for path in libraries:
        # Copied under a temporary name and renamed: parallel prebuild jobs bundle the same files.
        if not (target / path.name).exists():
            temp = target / f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}"
            shutil.copy2(path.resolve(), temp)
            os.replace(temp, target / path.name)


def _idle(folder: Path) -> bool:
    """Whether no process is building in ``folder`` right now (its lock is free)."""
    try:
        with open(folder / "lock", "a+") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            fcntl.flock(handle, fcntl.LOCK_UN)
        return True
    except BlockingIOError:
        return False
    except OSError:
        return True


def clear_cache(names: list[str] | None = None) -> list[Path]:
    """Removes cached builds from the user cache and returns the folders removed: those of the
    modules ``names`` (with any device and variant), or every one when ``names`` is None.
    Either way the leftovers of builds that died (``.build-*`` folders, failed builds) go too.
    A folder where a build is running is left alone."""
    root = cache_root()
    removed: list[Path] = []
    if not root.is_dir():
        return removed
    wanted = set(names or ())
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        if not _idle(folder):
            logger.info("mllm_kernel: %s is being built by another process; left alone", folder)
            continue
        manifest = read_manifest(folder) or {}
        name = manifest.get("name")
        if name is None:  # a build that never finished: match the folder name
            matches = any(folder.name.startswith(f"{d}_{n}_") for n in wanted for d in ("cpu", "cuda"))
        else:
            matches = name in wanted
        if names is None or matches:
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
            continue
        for leftover in [*folder.glob(TEMP_PREFIX + "*"), folder / FAILED_BUILD]:
            if leftover.exists():
                shutil.rmtree(leftover, ignore_errors=True)
                removed.append(leftover)
    return removed
