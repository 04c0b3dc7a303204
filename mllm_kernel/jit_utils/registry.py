"""The registry of ``@jit`` kernels, read by ``python -m mllm_kernel show-config``."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mllm_kernel.jit_utils.cache import MANIFEST
from mllm_kernel.jit_utils.paths import cache_root


@dataclass(frozen=True)
class KernelRecord:
    """One declared module: its name, the devices it builds for and its variant args."""

    name: str
    devices: tuple[str, ...]
    args: tuple[str, ...]
    files: tuple[str, ...]
    #: The declared module itself (a ``JitModule``); ``kernel.module(device)`` builds or loads it.
    kernel: Any = field(default=None, compare=False, repr=False)

    def cache_folders(self, device: str) -> list[Path]:
        """Cache folders of this kernel on ``device`` that hold a published build."""
        prefix = "_".join([device, self.name, *self.args]) + "_"
        root = cache_root()
        if not root.is_dir():
            return []
        return sorted(p for p in root.glob(prefix + "*")
                      if (p / MANIFEST).is_file() and len(p.name) == len(prefix) + 16)


_REGISTRY: dict[tuple, KernelRecord] = {}


def register(record: KernelRecord) -> None:
    _REGISTRY[(record.name, record.devices, record.args)] = record


def find_module(name: str, args: tuple[str, ...], device: str):
    """The declared module ``name`` of variant ``args`` that builds for ``device`` (a LookupError
    when none is registered in this process; import the package that declares it first)."""
    for record in _REGISTRY.values():
        if record.name == name and record.args == tuple(args) and device in record.devices:
            return record.kernel
    raise LookupError(f"no module {name}[{', '.join(args)}] for {device} is registered")


def registered_kernels() -> list[KernelRecord]:
    """Every kernel registered so far in this process, sorted by name."""
    return sorted(_REGISTRY.values(), key=lambda r: (r.name, r.args))


def folder_size(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())
