"""The wheel carries every header and kernel source the JIT compiles, and works outside the checkout."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import zipfile
from pathlib import Path

from conftest import REPO_ROOT

SOURCE_SUFFIXES = {".hpp", ".cuh", ".cpp", ".cu", ".h"}


def test_wheel_carries_all_kernel_sources(tmp_path):
    # Build with the installed setuptools when there is one, so the test also runs offline
    # (the GPU machine has no network for an isolated build environment).
    isolation = [] if importlib.util.find_spec("setuptools") is None else ["--no-build-isolation"]
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", *isolation, str(REPO_ROOT),
                    "-w", str(tmp_path)], check=True, capture_output=True)
    wheel = next(tmp_path.glob("mllm_kernel-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    package = REPO_ROOT / "mllm_kernel"
    expected = {str(p.relative_to(REPO_ROOT)) for p in package.rglob("*")
                if p.suffix in SOURCE_SUFFIXES and "__pycache__" not in p.parts}
    assert expected, "no kernel sources found in the checkout"
    missing = sorted(expected - names)
    assert not missing, f"the wheel lacks: {missing}"
