"""``jit_module``: one compiled module variant, declared up front and built on first use.

A declaration costs nothing at import: it records the build (sources, exported functions,
flags) in the registry, so ``python -m mllm_kernel show-config`` lists it and ``prebuild``
builds it, and compiles or loads the module the first time ``load()`` is called.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from mllm_kernel.jit_utils import toolchain
from mllm_kernel.jit_utils.build import BuildSpec
from mllm_kernel.jit_utils.cache import load_module
from mllm_kernel.jit_utils.load import Wrappers, cpu_build_spec, cuda_build_spec
from mllm_kernel.jit_utils.registry import KernelRecord, register

_DEVICES = ("auto", "cpu", "cuda")


class JitModule:
    """A module variant of ``name`` for one device ("cpu" or "cuda"), or for both ("auto": the
    CPU module from the C++ files, the CUDA module from the CUDA files)."""

    def __init__(self, name: str, args: tuple[str, ...], device: str, build: dict) -> None:
        if device not in _DEVICES:
            raise ValueError(f"jit: device must be one of {_DEVICES}, got {device!r}")
        self.name = name
        self.args = args
        self.device = device
        self._build = build
        self._modules: dict[str, Any] = {}
        devices = ("cpu", "cuda") if device == "auto" else (device,)
        devices = tuple(d for d in devices if build.get("cpp_files" if d == "cpu" else "cuda_files"))
        if not devices:
            raise ValueError(f"jit({name!r}): no sources for device {device!r}")
        self.devices = devices
        files = [*(build.get("cpp_files") or ()), *(build.get("cuda_files") or ())]
        register(KernelRecord(name, devices, args, tuple(str(f) for f in files), kernel=self))

    def builds_for(self, device: str, cuda_archs: Sequence[str] | None = None) -> bool:
        """Whether a build of ``device`` modules, for ``cuda_archs`` (None: the JIT's,
        ``toolchain.cuda_arch_list()``), includes this module: always, unless it is a CUDA
        build and the declaration pins architectures, or names those it is meant for, of which
        none is listed (sm_90a kernels are not built for an Ampere GPU, Ampere's GEMMs not for a
        Hopper one)."""
        pinned = self._build["cuda_archs"] or self._build["meant_for_archs"]
        if device != "cuda" or not pinned:
            return True
        cuda_archs = cuda_archs or toolchain.cuda_arch_list()
        base = {a.rstrip("af") for a in cuda_archs}
        return any(a.rstrip("af") in base for a in pinned)

    def spec(self, device: str, *, cuda_archs: Sequence[str] | None = None) -> BuildSpec:
        """The build of the ``device`` module as the JIT makes it (this CPU; the visible GPUs
        unless ``cuda_archs`` is given, the declaration's own architectures when it pins
        them); ``prebuild --output`` builds its ``prebuilt_variant()``."""
        b = self._build
        if device not in self.devices:
            raise ValueError(f"{self.name}: no {device} sources (this kernel runs on {', '.join(self.devices)})")
        common = dict(extra_cflags=b["extra_cflags"], extra_ldflags=b["extra_ldflags"],
                      extra_include_paths=b["extra_include_paths"])
        if device == "cpu":
            return cpu_build_spec(self.name, *self.args, cpp_files=b["cpp_files"], cpp_wrappers=b["cpp_wrappers"],
                                  **common)
        with_cpp = self.device == "cuda"  # "auto" kernels keep their C++ files for the CPU module
        return cuda_build_spec(self.name, *self.args, cuda_files=b["cuda_files"], cuda_wrappers=b["cuda_wrappers"],
                               cpp_files=b["cpp_files"] if with_cpp else None,
                               cpp_wrappers=b["cpp_wrappers"] if with_cpp else None,
                               extra_cuda_cflags=b["extra_cuda_cflags"], cuda_archs=b["cuda_archs"] or cuda_archs,
                               cutlass=b["cutlass"], **common)

    def module(self, device: str):
        """The compiled module for ``device`` ("cpu" or "cuda"): prebuilt, cached, or built now."""
        module = self._modules.get(device)
        if module is None:
            module = load_module(self.spec(device))
            self._modules[device] = module
        return module

    def exports(self, device: str) -> list[str]:
        """The Python names of the functions the ``device`` module exports."""
        return [name for name, _ in self._build["cpp_wrappers" if device == "cpu" else "cuda_wrappers"]]

    def load(self):
        """The compiled module of a single-device declaration, built on first use."""
        if len(self.devices) != 1:
            raise ValueError(f"{self.name}: builds for {', '.join(self.devices)}; name one with module(device)")
        return self.module(self.devices[0])


def _variant(args: object | Sequence[object]) -> tuple[str, ...]:
    return tuple(str(a) for a in (args if isinstance(args, (list, tuple)) else [args]))


def _build_spec(cpp_files, cuda_files, cpp_wrappers, cuda_wrappers, extra_cflags, extra_cuda_cflags,
                extra_ldflags, extra_include_paths, cuda_archs, cutlass, meant_for_archs=None) -> dict:
    return dict(cpp_files=list(cpp_files or ()), cuda_files=list(cuda_files or ()),
                cpp_wrappers=list(cpp_wrappers or ()), cuda_wrappers=list(cuda_wrappers or ()),
                extra_cflags=extra_cflags, extra_cuda_cflags=extra_cuda_cflags, extra_ldflags=extra_ldflags,
                extra_include_paths=extra_include_paths, cuda_archs=tuple(cuda_archs or ()), cutlass=cutlass,
                meant_for_archs=tuple(meant_for_archs or ()))


def jit_module(
    name: str,
    *,
    args: object | Sequence[object] = (),
    device: str,
    cpp_files: Sequence[str | Path] | None = None,
    cuda_files: Sequence[str | Path] | None = None,
    cpp_wrappers: Wrappers | None = None,
    cuda_wrappers: Wrappers | None = None,
    extra_cflags: Sequence[str] | None = None,
    extra_cuda_cflags: Sequence[str] | None = None,
    extra_ldflags: Sequence[str] | None = None,
    extra_include_paths: Sequence[str | Path] | None = None,
    cuda_archs: Sequence[str] | None = None,
    cutlass: bool = False,
    meant_for_archs: Sequence[str] | None = None,
) -> JitModule:
    """Declares module ``name``, variant ``args`` (a value or a list; usually
    ``make_cpp_args(...)``), for ``device`` "cpu" (built from ``cpp_files`` exporting
    ``cpp_wrappers``) or "cuda" (``cuda_files`` exporting ``cuda_wrappers``, plus any host-only
    ``cpp_files``). ``cuda_archs`` pins the CUDA architectures (kernels written for one
    architecture, such as "9.0a"); ``meant_for_archs`` names the architectures a module is
    for without pinning them (precompile and prebuild skip it for others; a call still builds
    it for the GPU it runs on); ``cutlass`` compiles against CUTLASS's headers.
    Nothing is compiled until ``load()``."""
    return JitModule(name, _variant(args), device,
                     _build_spec(cpp_files, cuda_files, cpp_wrappers, cuda_wrappers, extra_cflags,
                                 extra_cuda_cflags, extra_ldflags, extra_include_paths, cuda_archs, cutlass,
                                 meant_for_archs))
