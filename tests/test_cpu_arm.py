"""CPU kernels' Arm builds, cross-compiled and run under qemu, the way the JIT builds them for the
running CPU (``-march``, Highway's static target only): the int8 GEMM (plain NEON: int16
widening; NEON with the dot-product extension and SVE at two vector lengths: SDOT, which each
build must contain exactly where it should) against exact sums, and the weight-only Marlin GEMM
against a float64 GEMM of the weights its format defines (tests/cross/). Needs an aarch64 cross
compiler, qemu's user mode and, for the Marlin GEMM (its scratch comes from Highway's aligned
allocator), Highway's arm64 library (Debian/Ubuntu: g++-aarch64-linux-gnu qemu-user-static,
libhwy1:arm64; .ci/run installs them); skipped without."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import build_cross_check

CXX = shutil.which("aarch64-linux-gnu-g++")
OBJDUMP = shutil.which("aarch64-linux-gnu-objdump")
QEMU = shutil.which("qemu-aarch64-static") or shutil.which("qemu-aarch64")
SYSROOT = Path("/usr/aarch64-linux-gnu")
HWY_ARM64 = Path("/usr/lib/aarch64-linux-gnu/libhwy.so.1")

pytestmark = pytest.mark.skipif(not (CXX and OBJDUMP and QEMU and SYSROOT.is_dir()),
                                reason="needs aarch64-linux-gnu-g++ and qemu-aarch64 "
                                       "(Debian: g++-aarch64-linux-gnu qemu-user-static)")

#: (-march, Highway's target, whether the int8 GEMM multiplies by SDOT, qemu's -cpu).
BUILDS = [("armv8-a", "NEON", False, None),
          ("armv8.2-a+dotprod", "NEON", True, None),
          ("armv8.2-a+sve", "SVE", True, "max,sve-default-vector-length=16"),
          ("armv8.2-a+sve", "SVE", True, "max,sve-default-vector-length=64")]


def _build_and_run(tmp_path: Path, check: str, march: str, qemu_cpu: str | None, libs=()) -> tuple[str, str]:
    """Builds tests/cross/<check>.cpp for `march` and runs it under qemu: (its disassembly, its
    output), asserting that both steps succeed and the check printed ok."""
    program = tmp_path / check
    build_cross_check(CXX, check, march, program, libs)
    code = subprocess.run([OBJDUMP, "-d", str(program)], capture_output=True, text=True, check=True).stdout
    command = [QEMU, "-L", str(SYSROOT), *(["-cpu", qemu_cpu] if qemu_cpu else []), str(program)]
    run = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 and run.stdout.rstrip().endswith("ok"), run.stdout + run.stderr
    return code, run.stdout


@pytest.mark.parametrize("march,target,sdot,qemu_cpu", BUILDS)
def test_int8_scaled_mm_on_arm(tmp_path, march, target, sdot, qemu_cpu):
    code, output = _build_and_run(tmp_path, "int8_scaled_mm_check", march, qemu_cpu)
    assert ("\tsdot\t" in code) == sdot
    assert output.startswith(f"target {target},")


@pytest.mark.skipif(not HWY_ARM64.exists(), reason="needs Highway's arm64 library (Debian: libhwy1:arm64)")
@pytest.mark.parametrize("march,target,_,qemu_cpu", BUILDS)
def test_marlin_gemm_on_arm(tmp_path, march, target, _, qemu_cpu):
    _, output = _build_and_run(tmp_path, "marlin_gemm_check", march, qemu_cpu,
                               libs=(str(HWY_ARM64), f"-Wl,-rpath,{HWY_ARM64.parent}"))
    assert output.startswith(f"target {target}\n")
