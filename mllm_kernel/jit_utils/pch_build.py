"""What the precompiled headers (cpu_pch.py, cuda_pch.py) share: a folder in the cache filled
once and published whole, and builds that run in threads beside the modules that asked for them.

A folder is filled in a temporary sibling of its own, so many processes may build the same
header at once: the first to finish publishes it by renaming, and a reader sees a folder only
when it is complete. A build in the background runs once per folder at a time; the modules
compiling meanwhile do not wait for it, the process does at exit (its threads are not daemons).
"""

from __future__ import annotations

import os
import shutil
import threading
import uuid
from collections.abc import Callable
from pathlib import Path

_background: dict[Path, threading.Thread] = {}
_background_lock = threading.Lock()


def publish(target: Path, fill: Callable[[Path], bool], complete: str) -> bool:
    """Makes ``target`` unless it is complete (holds the file ``complete``): ``fill(folder)``
    fills a temporary folder and says whether it succeeded, then the folder is renamed into
    place. True when ``target`` is complete after."""
    if (target / complete).is_file():
        return True
    target.parent.mkdir(parents=True, exist_ok=True)
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


def start_in_background(target: Path, build: Callable[..., object], *args) -> None:
    """Runs ``build(*args)`` in a thread of its own unless one is building ``target`` already."""
    with _background_lock:
        running = _background.get(target)
        if running is not None and running.is_alive():
            return
        thread = threading.Thread(target=build, args=args, name=f"mllm_kernel-{target.name}")
        _background[target] = thread
        thread.start()


def wait_for_background() -> None:
    """Waits for the builds running in the background (tests, benchmarks)."""
    with _background_lock:
        threads = list(_background.values())
    for thread in threads:
        thread.join()
