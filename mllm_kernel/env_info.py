"""What this machine offers mllm-kernel: CUDA toolkit and driver, GPUs, CPU and Highway, tvm-ffi.

Every probe is best effort: a missing tool is reported as missing (with what to install),
never raised, so ``show-env`` works on a machine with no GPU and no nvcc.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
import sys
from pathlib import Path

from mllm_kernel import __version__
from mllm_kernel.jit_utils import toolchain
from mllm_kernel.jit_utils.errors import ToolchainNotFoundError
from mllm_kernel.jit_utils.paths import cache_root

MISSING = "not found"


def _run(args: list[str], timeout: float = 20.0) -> str | None:
    try:
        result = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError):
        return None
    return result.stdout if result.returncode == 0 else None


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("model name", "Model", "Hardware")):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or MISSING


def nvcc_version() -> str:
    home = toolchain.find_cuda_home()
    if home is None:
        return MISSING + " (install the CUDA toolkit or set CUDA_HOME)"
    out = _run([str(home / "bin" / "nvcc"), "--version"])
    match = re.search(r"release ([\d.]+), V([\d.]+)", out or "")
    return match.group(2) if match else MISSING


def nvidia_smi() -> dict[str, str]:
    """Driver and CUDA versions and the GPUs that nvidia-smi lists."""
    path = shutil.which("nvidia-smi")
    if path is None:
        return {"nvidia-smi": MISSING + " (no NVIDIA driver)"}
    info = {"nvidia-smi": path}
    header = _run([path]) or ""
    if m := re.search(r"Driver Version:\s*([\d.]+)", header):
        info["driver version"] = m.group(1)
    if m := re.search(r"CUDA Version:\s*([\d.]+)", header):
        info["CUDA version (driver)"] = m.group(1)
    gpus = _run([path, "--query-gpu=index,name,compute_cap,memory.total", "--format=csv,noheader"])
    if gpus:
        info["GPUs (nvidia-smi)"] = "; ".join(line.strip() for line in gpus.strip().splitlines())
    return info


def torch_info() -> dict[str, str]:
    try:
        import torch
    except ImportError:
        return {"PyTorch": MISSING}
    info = {"PyTorch": torch.__version__, "CUDA version (PyTorch build)": str(torch.version.cuda)}
    try:
        available = torch.cuda.is_available()
    except Exception:  # noqa: BLE001
        available = False
    info["CUDA available (PyTorch)"] = str(available)
    if available:
        gpus = []
        for i in range(torch.cuda.device_count()):
            major, minor = torch.cuda.get_device_capability(i)
            gpus.append(f"cuda:{i} {torch.cuda.get_device_name(i)} (sm_{major}{minor})")
        info["GPUs"] = "; ".join(gpus)
    return info


def highway_info(probe_targets: bool = True) -> dict[str, str]:
    """Highway's location and version, and (by compiling a tiny module) its SIMD targets."""
    try:
        hwy = toolchain.find_highway()
    except ToolchainNotFoundError as error:
        return {"Highway": f"{MISSING}: {error}"}
    info = {"Highway": f"{hwy.version or 'unknown version'} ({hwy.origin})"}
    if probe_targets:
        try:
            from mllm_kernel.jit_utils import load_cpu_jit

            module = load_cpu_jit("hwy_info", cpp_files=["hwy_info.cpp"],
                                  cpp_wrappers=[("highway_targets", "mllm_kernel::cpu::highway_targets")])
            fields = dict(part.split("=", 1) for part in str(module.highway_targets()).split(";"))
            info["Highway targets (CPU)"] = fields.get("supported", "")
            info["Highway targets (compiled)"] = fields.get("compiled", "")
            info["Highway target in use"] = fields.get("best", "")
        except Exception as error:  # noqa: BLE001 - report, don't fail
            info["Highway targets"] = f"could not build the probe: {str(error).splitlines()[0]}"
    return info


def environment(probe_targets: bool = True) -> list[tuple[str, dict[str, str]]]:
    """The summary shown by ``show-env``, as titled sections of key/value pairs."""
    cuda = {
        "CUDA_HOME": os.environ.get("CUDA_HOME", "(unset)"),
        "CUDA_PATH": os.environ.get("CUDA_PATH", "(unset)"),
        "CUDA toolkit": str(toolchain.find_cuda_home() or MISSING),
        "nvcc": shutil.which("nvcc") or (str(toolchain.find_cuda_home() / "bin/nvcc")
                                         if toolchain.find_cuda_home() else MISSING),
        "CUDA version (nvcc)": nvcc_version(),
    }
    cuda.update(nvidia_smi())
    cuda.update(torch_info())
    try:
        cuda["CUDA archs for builds"] = " ".join(toolchain.cuda_arch_list())
    except ValueError as error:
        cuda["CUDA archs for builds"] = f"invalid override: {error}"
    system = {
        "OS": platform.platform(),
        "Python": f"{sys.version.split()[0]} ({sys.executable})",
        "CPU": cpu_model(),
        "CPU cores": str(os.cpu_count()),
    }
    system.update(highway_info(probe_targets))
    try:
        cxx = toolchain.find_cxx()
        first = (_run([cxx, "--version"]) or "").splitlines()
        system["C++ compiler"] = f"{cxx} ({first[0] if first else 'unknown'})"
    except ToolchainNotFoundError as error:
        system["C++ compiler"] = str(error)
    try:
        tvm = toolchain.tvm_ffi_version()
    except ImportError:
        tvm = MISSING + " (pip install apache-tvm-ffi)"
    packages = {"mllm-kernel": __version__, "apache-tvm-ffi": tvm, "cache root": str(cache_root())}
    return [("CUDA", cuda), ("System", system), ("Packages", packages)]


def format_sections(sections: list[tuple[str, dict[str, str]]]) -> str:
    width = max(len(k) for _, items in sections for k in items) + 2
    lines = []
    for title, items in sections:
        lines.append(f"[{title}]")
        lines += [f"  {key + ':':<{width}}{value}" for key, value in items.items()]
    return "\n".join(lines)
