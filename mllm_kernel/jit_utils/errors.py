"""Exceptions raised by the JIT layer."""

from __future__ import annotations

from pathlib import Path


class JitCompileError(RuntimeError):
    """A kernel module failed to compile or link.

    The message holds the compiler's own diagnostics (with file:line) and the folder that keeps
    the failed build's sources and log. Nothing of a failed build is ever loaded from the cache.
    """

    def __init__(self, module: str, build_dir: Path, command: list[str], output: str) -> None:
        self.module = module
        self.build_dir = build_dir
        self.command = command
        self.output = output
        super().__init__(
            f"failed to compile JIT module {module!r}\n"
            f"build folder: {build_dir}\n"
            f"command: {' '.join(command)}\n"
            f"compiler output:\n{output.rstrip()}"
        )


class ToolchainNotFoundError(RuntimeError):
    """A compiler, CUDA toolkit or library that a kernel needs is missing; says what to install."""
