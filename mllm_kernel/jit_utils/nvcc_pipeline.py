"""nvcc's phases as a graph, so that the host and the device halves of a CUDA unit compile at once.

nvcc runs its phases one after another: the host preprocessor, cudafe++ (splits host from
device code, writes the host stubs), the device preprocessor and cicc (device front end, to PTX)
per architecture, ptxas, fatbinary, then the host compiler over cudafe++'s output with the
fatbinary embedded. cudafe++ and cicc each parse the whole unit, and neither reads what the
other writes but the module id (the name both give anonymous namespaces, which must agree for
host stubs to find their kernels). With the id written beforehand, the host chain and each
device chain run side by side; the fatbinary and the final host compile wait for them.

The commands are nvcc's own (``nvcc --dryrun``), so flags and versions stay nvcc's business:
a listing with a step this module does not know, or a command that asks nvcc itself for
something (``--time``, ``--keep``), runs as one plain nvcc call instead.
``MLLM_KERNEL_NVCC_PIPELINE=0`` always does. The caller (``build._compile_cuda``) also runs plain
nvcc when the graph fails, so a toolchain it misreads costs time, not a build.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import subprocess
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

PIPELINE_ENV = "MLLM_KERNEL_NVCC_PIPELINE"

#: The tools a listing may run: nvcc's own, and the host compilers it calls (another one, named
#: with -ccbin, makes the listing run as plain nvcc).
_DEVICE_TOOLS = {"cudafe++", "cicc", "ptxas", "fatbinary"}
_HOST_COMPILERS = {"gcc", "g++", "cc", "c++", "clang", "clang++"}
#: Flags whose value is a file the step writes.
_OUTPUT_FLAGS = ("-o", "--gen_c_file_name", "--stub_file_name", "--gen_device_file_name", "--create",
                 "--embedded-fatbin")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
#: Flags that ask nvcc itself for something (its phase times, its intermediates): such a
#: command runs as it is.
_NVCC_ONLY_FLAGS = {"--time", "-time", "--keep", "-keep", "--save-temps", "-save-temps", "--dryrun", "-dryrun"}


def enabled() -> bool:
    return os.environ.get(PIPELINE_ENV, "1") not in ("0", "false", "False")


@dataclass
class Step:
    """One command of the listing, with the steps it waits for."""

    command: str
    tool: str
    outputs: set[str] = field(default_factory=set)
    after: list[int] = field(default_factory=list)


@dataclass
class Pipeline:
    """nvcc's steps for one unit: the environment of each (``NAME=value``), the steps in order."""

    assignments: list[str]
    steps: list[Step]
    depfiles: list[Path]
    module_id_file: Path


def _tool(command: str) -> str:
    first = shlex.split(command)[0]
    return os.path.basename(first.replace("$CICC_PATH/", ""))


def _paths(command: str, folder: str) -> set[str]:
    """The files under ``folder`` that ``command`` names (alone, or as a flag's ``=value``)."""
    return set(re.findall(re.escape(folder) + r"/[^\s\"',=]+", command))


def _outputs(tokens: list[str]) -> set[str]:
    found = set()
    for i, token in enumerate(tokens):
        flag, eq, value = token.partition("=")
        if eq and flag in _OUTPUT_FLAGS:
            found.add(value)
        elif token in _OUTPUT_FLAGS and i + 1 < len(tokens):
            found.add(tokens[i + 1])
    return found


def plan(nvcc_command: list[str], keep_dir: Path) -> Pipeline | None:
    """nvcc's listing for ``nvcc_command`` (a ``-c`` compile without ``-MD``), its
    intermediate files in ``keep_dir``; None when the listing has a step this module does not
    know (the caller then runs nvcc itself)."""
    if _NVCC_ONLY_FLAGS & set(nvcc_command):
        return None
    keep_dir.mkdir(parents=True, exist_ok=True)
    folder = str(keep_dir)
    listing = subprocess.run([*nvcc_command, "--dryrun", "--keep", "--keep-dir", folder], capture_output=True,
                             text=True)
    if listing.returncode != 0:
        return None
    assignments: list[str] = []
    steps: list[Step] = []
    depfiles: list[Path] = []
    module_id_file: Path | None = None
    for line in listing.stderr.splitlines():
        if not line.startswith("#$ "):
            continue
        text = line[3:].strip()
        if _ASSIGNMENT.match(text):
            # The environment nvcc gives its tools (PATH, CICC_PATH, ...); lists of flags such as
            # INCLUDES are written into the commands already.
            words = shlex.split(text)
            if len(words) == 1:
                assignments.append(words[0])
            continue
        try:
            tokens = shlex.split(text)
        except ValueError:
            return None
        tool = _tool(text)
        if tool == "rm":
            continue  # the kept intermediates go with the build folder
        if tool not in _DEVICE_TOOLS and tool not in _HOST_COMPILERS:
            return None
        if tool == "cudafe++" and "--gen_module_id_file" in tokens:
            # The id is written beforehand, so that cicc need not wait for cudafe++.
            index = tokens.index("--module_id_file_name")
            module_id_file = Path(tokens[index + 1])
            text = text.replace(" --gen_module_id_file", "", 1)
        if tool in _HOST_COMPILERS and "-E" in tokens:
            # Preprocessing also lists the headers it read, for the cache's dependencies.
            depfile = keep_dir / f"deps_{len(depfiles)}.d"
            depfiles.append(depfile)
            text += f" -MD -MF {shlex.quote(str(depfile))}"
        steps.append(Step(text, tool, _outputs(tokens)))
    if not steps or module_id_file is None or steps[-1].tool not in _HOST_COMPILERS or "-c" not in shlex.split(
            steps[-1].command):
        return None
    for i, step in enumerate(steps[:-1]):
        named = _paths(step.command, folder)
        step.after = [j for j in range(i) if steps[j].outputs & named]
    # The final host compile reads cudafe++'s output, the stubs cicc writes and the fatbinary
    # by relative #includes: it waits for everything.
    steps[-1].after = list(range(len(steps) - 1))
    return Pipeline(assignments, steps, depfiles, module_id_file)


def module_id(source: Path) -> str:
    """A module id of the form cudafe++ writes (letters, digits and underscores), unique to the
    source's path and text."""
    digest = hashlib.sha256(str(source.resolve()).encode() + source.read_bytes()).hexdigest()[:8]
    stem = re.sub(r"\W", "_", source.name)
    return f"_{digest}_{len(stem)}_{stem}"


def run(pipeline: Pipeline, source: Path, run_step) -> None:
    """Runs the steps, each once those it waits for are done, through ``run_step(argv)`` (which
    raises on failure); a failure stops the steps not yet started."""
    pipeline.module_id_file.write_text(module_id(source))
    preamble = "".join(f"export {shlex.quote(a)}; " for a in pipeline.assignments)
    done: dict[int, Future] = {}

    def start(i: int, pool: ThreadPoolExecutor) -> Future:
        if i not in done:
            waits = [start(j, pool) for j in pipeline.steps[i].after]

            def go() -> None:
                for future in waits:
                    future.result()
                run_step(["bash", "-c", preamble + "exec " + pipeline.steps[i].command])

            done[i] = pool.submit(go)
        return done[i]

    # Every step gets a worker, so one waiting on another never starves the pool. The last step
    # waits for all the others (plan), so starting it starts them.
    with ThreadPoolExecutor(max_workers=len(pipeline.steps)) as pool:
        start(len(pipeline.steps) - 1, pool).result()
