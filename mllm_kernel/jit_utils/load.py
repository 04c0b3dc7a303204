"""``load_cpu_jit`` and ``load_cuda_jit``: load one module variant from the cache, building it first when needed."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from mllm_kernel.jit_utils import host_runtime, standin, toolchain
from mllm_kernel.jit_utils.build import BuildSpec, TranslationUnit
from mllm_kernel.jit_utils.cache import load_module
from mllm_kernel.jit_utils.errors import ToolchainNotFoundError
from mllm_kernel.jit_utils.paths import CPU_CSRC_DIR, CUDA_CSRC_DIR

Wrappers = Sequence[tuple[str, str]]


def resolve_source(name: str | Path, search_dirs: Sequence[Path]) -> Path:
    """An absolute path as it is; a bare name looked up in the package's csrc folders."""
    path = Path(name).expanduser()
    if path.is_absolute():
        if not path.is_file():
            raise FileNotFoundError(f"kernel source {path} does not exist")
        return path.resolve()
    for folder in search_dirs:
        if (folder / path).is_file():
            return (folder / path).resolve()
    raise FileNotFoundError(
        f"kernel source {str(name)!r} not found in {', '.join(str(d) for d in search_dirs)}; "
        "pass an absolute path for a file of your own"
    )


def _check_wrappers(wrappers: Wrappers, kind: str) -> tuple[tuple[str, str], ...]:
    out = []
    for item in wrappers or ():
        if not (isinstance(item, (tuple, list)) and len(item) == 2 and all(isinstance(s, str) for s in item)):
            raise TypeError(f"{kind} entries must be (export_name, cpp_symbol) string pairs, got {item!r}")
        if not item[0].isidentifier():
            raise ValueError(f"{kind}: export name {item[0]!r} is not a valid identifier")
        out.append((item[0], item[1]))
    return tuple(out)


def _variant_args(args: Sequence[object]) -> tuple[str, ...]:
    return tuple(str(a) for a in args)


def _highway_or_none() -> toolchain.HighwayConfig | None:
    try:
        return toolchain.find_highway()
    except ToolchainNotFoundError:
        # Kernels that include Highway fail to compile with the install hint appended.
        return None


def cpu_build_spec(
    name: str,
    *args: object,
    cpp_files: Sequence[str | Path],
    cpp_wrappers: Wrappers,
    extra_cflags: Sequence[str] | None = None,
    extra_ldflags: Sequence[str] | None = None,
    extra_include_paths: Sequence[str | Path] | None = None,
) -> BuildSpec:
    """The build of a CPU module (see ``load_cpu_jit``), for the JIT's CPU target
    (``toolchain.jit_cpu_target()``: this CPU only, unless overridden)."""
    files = tuple(resolve_source(f, [CPU_CSRC_DIR]) for f in cpp_files)
    if not files:
        raise ValueError(f"load_cpu_jit({name!r}): cpp_files is empty")
    return BuildSpec(
        name=name,
        device="cpu",
        args=_variant_args(args),
        units=(TranslationUnit("cpp", files, _check_wrappers(cpp_wrappers, "cpp_wrappers")),),
        extra_cflags=tuple(extra_cflags or ()),
        extra_ldflags=tuple(extra_ldflags or ()),
        extra_include_paths=tuple(str(p) for p in extra_include_paths or ()),
        highway=_highway_or_none(),
        cpu_target=toolchain.jit_cpu_target(),
        host_runtime=host_runtime.runtime_id(),
        tvm_ffi_standin=standin.applies(files, extra_include_paths or ()),
    )


def cuda_build_spec(
    name: str,
    *args: object,
    cuda_files: Sequence[str | Path],
    cuda_wrappers: Wrappers,
    cpp_files: Sequence[str | Path] | None = None,
    cpp_wrappers: Wrappers | None = None,
    extra_cflags: Sequence[str] | None = None,
    extra_cuda_cflags: Sequence[str] | None = None,
    extra_ldflags: Sequence[str] | None = None,
    extra_include_paths: Sequence[str | Path] | None = None,
    cuda_archs: Sequence[str] | None = None,
    cutlass: bool = False,
) -> BuildSpec:
    """The build of a CUDA module (see ``load_cuda_jit``); ``cuda_archs`` defaults to
    ``toolchain.cuda_arch_list()``; ``cutlass`` adds CUTLASS's headers."""
    cuda = tuple(resolve_source(f, [CUDA_CSRC_DIR]) for f in cuda_files)
    if not cuda:
        raise ValueError(f"load_cuda_jit({name!r}): cuda_files is empty")
    units = [TranslationUnit("cuda", cuda, _check_wrappers(cuda_wrappers, "cuda_wrappers"))]
    if cpp_files:
        cpp = tuple(resolve_source(f, [CUDA_CSRC_DIR, CPU_CSRC_DIR]) for f in cpp_files)
        units.append(TranslationUnit("cpp", cpp, _check_wrappers(cpp_wrappers or (), "cpp_wrappers")))
    return BuildSpec(
        name=name,
        device="cuda",
        args=_variant_args(args),
        units=tuple(units),
        extra_cflags=tuple(extra_cflags or ()),
        extra_cuda_cflags=tuple(extra_cuda_cflags or ()),
        extra_ldflags=tuple(extra_ldflags or ()),
        extra_include_paths=tuple(str(p) for p in extra_include_paths or ()),
        cuda_archs=tuple(cuda_archs) if cuda_archs else toolchain.cuda_arch_list(),
        cutlass=cutlass,
        host_runtime=host_runtime.runtime_id(),
        tvm_ffi_standin=standin.applies([f for unit in units for f in unit.files], extra_include_paths or ()),
    )


def load_cpu_jit(
    name: str,
    *args: object,
    cpp_files: Sequence[str | Path],
    cpp_wrappers: Wrappers,
    extra_cflags: Sequence[str] | None = None,
    extra_ldflags: Sequence[str] | None = None,
    extra_include_paths: Sequence[str | Path] | None = None,
):
    """Compiles (first call) or loads (later calls, any process) a CPU module and returns it.

    ``args`` are the strings that tell variants of ``name`` apart (usually ``make_cpp_args``);
    ``cpp_files`` are resolved against ``mllm_kernel/cpu/csrc`` unless absolute;
    ``cpp_wrappers`` pairs each Python name with the C++ function it calls:
    ``[("add_constant", "mllm_kernel::cpu::add_constant<16>")]`` gives ``module.add_constant``.
    The module is built for this CPU (Highway's best target here) unless
    ``$MLLM_KERNEL_CPU_TARGET=portable``; prebuilt folders are searched first (cache.py).
    """
    return load_module(cpu_build_spec(name, *args, cpp_files=cpp_files, cpp_wrappers=cpp_wrappers,
                                      extra_cflags=extra_cflags, extra_ldflags=extra_ldflags,
                                      extra_include_paths=extra_include_paths))


def load_cuda_jit(
    name: str,
    *args: object,
    cuda_files: Sequence[str | Path],
    cuda_wrappers: Wrappers,
    cpp_files: Sequence[str | Path] | None = None,
    cpp_wrappers: Wrappers | None = None,
    extra_cflags: Sequence[str] | None = None,
    extra_cuda_cflags: Sequence[str] | None = None,
    extra_ldflags: Sequence[str] | None = None,
    extra_include_paths: Sequence[str | Path] | None = None,
):
    """Compiles (first call) or loads a CUDA module and returns it.

    ``cuda_files`` (``.cuh``/``.cu``) resolve against ``mllm_kernel/cuda/csrc`` and are built by
    nvcc with ``cuda_wrappers`` exported; optional host-only ``cpp_files`` go through the C++
    compiler with ``cpp_wrappers``, at the same time as nvcc. The target architectures come
    from ``toolchain.cuda_arch_list()`` (visible GPUs, overrides, or the no-GPU default).
    """
    return load_module(cuda_build_spec(name, *args, cuda_files=cuda_files, cuda_wrappers=cuda_wrappers,
                                       cpp_files=cpp_files, cpp_wrappers=cpp_wrappers, extra_cflags=extra_cflags,
                                       extra_cuda_cflags=extra_cuda_cflags, extra_ldflags=extra_ldflags,
                                       extra_include_paths=extra_include_paths))
