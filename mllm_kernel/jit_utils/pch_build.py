"""What the precompiled headers (cpu_pch.py, cuda_pch.py) share: a folder in the cache filled
once and published whole, and builds that run in threads beside the modules that asked for them.

A folder is filled in a temporary sibling of its own (``.<name>.<pid>.<random>``), so many
processes may build the same header at once: the first to finish publishes it by renaming, and a
reader sees a folder only when it is complete. Temporary siblings of processes that are gone,
and a folder left incomplete, are removed by the next build of that folder. A build in the
background runs once per folder at a time, and once per process when it fails; the modules
compiling meanwhile do not wait for it, the process does at exit (its threads are not daemons).
A header only saves time, so whatever goes wrong in building one is logged, never raised.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import uuid
from collections.abc import Callable
from pathlib import Path

logger = logging.getLogger("mllm_kernel")

_background: dict[Path, threading.Thread] = {}
_failed: set[Path] = set()
_background_lock = threading.Lock()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process: alive
        return True
    return True


def remove(folder: Path) -> None:
    """Removes `folder` as a whole: renamed aside first, so no reader finds it half removed."""
    aside = folder.parent / f".{folder.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.removed"
    try:
        folder.rename(aside)
    except OSError:
        return  # gone already, or another process is at it
    shutil.rmtree(aside, ignore_errors=True)


def _clear_leftovers(target: Path, complete: str) -> None:
    """The temporary siblings of `target` whose processes are gone, and `target` itself when it
    exists without its `complete` file (a build interrupted in another way)."""
    for sibling in target.parent.glob(f".{target.name}.*"):
        parts = sibling.name[len(target.name) + 2:].split(".")
        if parts and parts[0].isdigit() and not _alive(int(parts[0])):
            shutil.rmtree(sibling, ignore_errors=True)
    if target.is_dir() and not (target / complete).is_file():
        remove(target)


def publish(target: Path, fill: Callable[[Path], bool], complete: str) -> bool:
    """Makes `target` unless it is complete (holds the file `complete`): ``fill(folder)`` fills a
    temporary folder and says whether it succeeded, then the folder is renamed into place. True
    when `target` is complete after."""
    if (target / complete).is_file():
        return True
    target.parent.mkdir(parents=True, exist_ok=True)
    _clear_leftovers(target, complete)
    temp = target.parent / f".{target.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}"
    temp.mkdir()
    try:
        if not fill(temp):
            return False
        try:
            temp.rename(target)
        except OSError:  # another process published it first
            pass
        return (target / complete).is_file()
    finally:
        shutil.rmtree(temp, ignore_errors=True)


def start_in_background(target: Path, build: Callable[..., bool], *args) -> None:
    """Runs ``build(*args)`` in a thread of its own unless one is building `target` already or
    one failed to in this process. The thread logs what it raises; a False result or an
    exception counts as a failure."""

    def run() -> None:
        try:
            built = build(*args)
        except Exception:  # noqa: BLE001 - a header only saves time
            logger.warning("mllm_kernel: building the precompiled header %s failed", target.name, exc_info=True)
            built = False
        if not built:
            with _background_lock:
                _failed.add(target)

    with _background_lock:
        running = _background.get(target)
        if target in _failed or (running is not None and running.is_alive()):
            return
        thread = threading.Thread(target=run, name=f"mllm_kernel-{target.name}")
        _background[target] = thread
        thread.start()


def wait_for_background() -> None:
    """Waits for the builds running in the background (tests, benchmarks)."""
    with _background_lock:
        threads = list(_background.values())
    for thread in threads:
        thread.join()


def forget_failures() -> None:
    """Lets builds that failed in this process be tried again (tests)."""
    with _background_lock:
        _failed.clear()
