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


class JitDisabledError(RuntimeError):
    """A module is neither prebuilt nor cached and ``MLLM_KERNEL_DISABLE_JIT`` forbids compiling it.

    Names the module, its variant and the command that prebuilds it."""

    def __init__(self, module: str, variant: tuple[str, ...], device: str, searched: list[str]) -> None:
        self.module = module
        self.variant = variant
        self.device = device
        where = ", ".join(searched) if searched else "none (MLLM_KERNEL_PREBUILT_PATH is not set)"
        super().__init__(
            f"JIT module {module!r}, variant [{', '.join(variant)}] for {device}, is neither prebuilt nor "
            f"cached, and MLLM_KERNEL_DISABLE_JIT is set, so it is not compiled. Build it ahead of time with "
            f"`python -m mllm_kernel prebuild --output DIR --device {device}` and set "
            f"MLLM_KERNEL_PREBUILT_PATH=DIR. Prebuilt folders searched: {where}"
        )
