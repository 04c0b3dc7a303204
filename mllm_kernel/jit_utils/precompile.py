"""``precompile``: build a kernel family's modules ahead of its first call.

Library code that knows which modules it will need (every dtype of an op, or the tile
configurations of a GEMM for a batch of shapes) calls this at start-up, so no request waits
for a compiler. Modules already prebuilt or cached only load.
"""

from __future__ import annotations

import logging
import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Iterable

from mllm_kernel.jit_utils.kernel_table import KernelTable
from mllm_kernel.jit_utils.module import JitModule
from mllm_kernel.jit_utils.registry import registered_kernels

logger = logging.getLogger("mllm_kernel")


def _modules(items: Iterable[KernelTable | JitModule]) -> list[JitModule]:
    found: dict[int, JitModule] = {}
    for item in items:
        for module in item.modules() if isinstance(item, KernelTable) else [item]:
            if not isinstance(module, JitModule):
                raise TypeError(f"precompile: expected KernelTable or JitModule, got {type(module).__name__}")
            found[id(module)] = module
    return list(found.values())


def _build_all(modules: list[JitModule], device: str | None, jobs: int | None) -> bool:
    tasks = [(m, d) for m in modules for d in m.devices if device in (None, d)]

    def build(task: tuple[JitModule, str]) -> bool:
        module, dev = task
        try:
            module.module(dev)
            return True
        except Exception as error:  # noqa: BLE001 - reported, the caller decides what to do
            logger.warning("mllm_kernel: precompiling %s[%s] for %s failed: %s", module.name,
                           ", ".join(module.args), dev, error)
            return False

    workers = max(1, min(len(tasks), jobs or os.cpu_count() or 1))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return all(list(pool.map(build, tasks)))


def precompile(*items: KernelTable | JitModule, device: str | None = None, wait: bool = True,
               jobs: int | None = None) -> bool | Future:
    """Builds (or loads) the modules behind ``items`` (kernel tables or modules) now, up to
    ``jobs`` at a time (default: the CPU count), for ``device`` or every device they build for.

    Returns True when all are ready, False when one failed (each failure is logged as a
    warning; the op raises the full compiler error when called). With ``wait=False`` the
    builds run in a background thread and a ``concurrent.futures.Future`` of that bool is
    returned at once.
    """
    modules = _modules(items)
    if wait:
        return _build_all(modules, device, jobs)
    future: Future = Future()

    def run() -> None:
        future.set_running_or_notify_cancel()
        try:
            future.set_result(_build_all(modules, device, jobs))
        except BaseException as error:  # noqa: BLE001 - handed to the future's owner
            future.set_exception(error)

    threading.Thread(target=run, name="mllm_kernel-precompile", daemon=True).start()
    return future


def precompile_library(device: str, *, wait: bool = True) -> bool | Future:
    """``precompile`` of every registered module of the package itself for ``device`` (the
    package's modules name their sources relative to its csrc folders, users' absolutely)."""
    modules = [record.kernel for record in registered_kernels()
               if device in record.devices and not any(os.path.isabs(f) for f in record.files)
               and record.kernel.builds_for(device)]
    return precompile(*modules, device=device, wait=wait)
