"""The CPU int8 GEMM's Arm engines, cross-built and run under qemu: plain NEON (int16 widening),
NEON with the dot-product extension and SVE at two vector lengths (SDOT). Each build is checked
to contain SDOT exactly where it should, and its results against exact sums
(tests/cross/int8_scaled_mm_check.cpp). Needs an aarch64 cross compiler and qemu's user mode
(Debian/Ubuntu: g++-aarch64-linux-gnu qemu-user-static; .ci/run installs them); skipped without."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from mllm_kernel.jit_utils import toolchain
from mllm_kernel.jit_utils.paths import CPU_INCLUDE_DIR, INCLUDE_DIR

CXX = shutil.which("aarch64-linux-gnu-g++")
OBJDUMP = shutil.which("aarch64-linux-gnu-objdump")
QEMU = shutil.which("qemu-aarch64-static") or shutil.which("qemu-aarch64")
SYSROOT = Path("/usr/aarch64-linux-gnu")
CHECK = Path(__file__).parent / "cross" / "int8_scaled_mm_check.cpp"

pytestmark = pytest.mark.skipif(not (CXX and OBJDUMP and QEMU and SYSROOT.is_dir()),
                                reason="needs aarch64-linux-gnu-g++ and qemu-aarch64 "
                                       "(Debian: g++-aarch64-linux-gnu qemu-user-static)")


@pytest.mark.parametrize("march,target,sdot,qemu_cpu", [
    ("armv8-a", "NEON", False, None),
    ("armv8.2-a+dotprod", "NEON", True, None),
    ("armv8.2-a+sve", "SVE", True, "max,sve-default-vector-length=16"),
    ("armv8.2-a+sve", "SVE", True, "max,sve-default-vector-length=64"),
])
def test_int8_scaled_mm_on_arm(tmp_path, march, target, sdot, qemu_cpu):
    program = tmp_path / "check"
    includes, _ = toolchain.tvm_ffi_paths()  # (dlpack)
    # As the JIT builds for the running CPU: its flags, Highway's static target only.
    build = subprocess.run([CXX, "-std=c++20", "-O2", f"-march={march}", "-DHWY_COMPILE_ONLY_STATIC=1",
                            f"-I{INCLUDE_DIR}", f"-I{CPU_INCLUDE_DIR}", *(f"-I{d}" for d in includes), str(CHECK),
                            "-o", str(program)], capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    code = subprocess.run([OBJDUMP, "-d", str(program)], capture_output=True, text=True, check=True).stdout
    assert ("\tsdot\t" in code) == sdot
    command = [QEMU, "-L", str(SYSROOT), *(["-cpu", qemu_cpu] if qemu_cpu else []), str(program)]
    run = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 and run.stdout.rstrip().endswith("ok"), run.stdout + run.stderr
    assert run.stdout.startswith(f"target {target},")
