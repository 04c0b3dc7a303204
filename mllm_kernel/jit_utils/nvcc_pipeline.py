"""nvcc's phases as a graph, so that the host and the device halves of a CUDA unit compile at once.

nvcc runs its phases one after another: the host preprocessor, cudafe++ (splits host from
device code, writes the host stubs), the device preprocessor and cicc (device front end, to PTX)
per architecture, ptxas, fatbinary, then the host compiler over cudafe++'s output with the
fatbinary embedded. cudafe++ and cicc each parse the whole unit, and neither reads what the
other writes but the module id (the name both give anonymous namespaces, which must agree for
host stubs to find their kernels). With the id written beforehand, the host chain and each
device chain run side by side.

The final host compile reads cudafe++'s output, the host stubs cicc writes, and the
fatbinary, which nvcc embeds as ``<unit>.fatbin.c`` (the image as assembler data, and the wrapper
the stubs register). Here it waits for none but cudafe++:
  - the stubs, #included at the end of cudafe++'s output, come through a named pipe
    (``StubPipe``; where the build folder's file system has named pipes): the host compiler
    parses the unit while cicc works, and reads them when it gets there;
  - ``fatbin.c`` declares the image instead of holding it, and the image is assembled into an
    object of its own after fatbinary (``EmbeddedImage``), linked beside the unit's. Before
    that object is used, nvcc's own ``fatbin.c`` (written elsewhere) is checked to be exactly
    that wrapper around exactly that image; a toolchain whose file differs gets its host code
    compiled again over nvcc's file.

The commands are nvcc's own (``nvcc --dryrun``), so flags and versions stay nvcc's business:
a listing with a step this module does not know, or a command that asks nvcc itself for
something (``--time``, ``--keep``), runs as one plain nvcc call instead.
``MLLM_KERNEL_NVCC_PIPELINE=0`` always does. The caller (``build._compile_cuda``) also runs plain
nvcc when the graph fails, so a toolchain it misreads costs time, not a build.
"""

from __future__ import annotations

import array
import errno
import hashlib
import logging
import os
import re
import shlex
import subprocess
import sys
import time
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path

from mllm_kernel.jit_utils import cuda_pch
from mllm_kernel.jit_utils.errors import JitCompileError

logger = logging.getLogger("mllm_kernel")

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


#: nvcc's ``<unit>.fatbin.c`` before and after its image data (``.quad`` lines), with the image's
#: length in quads: the wrapper the host stubs register, which names the image ``fatbinData``.
_FATBIN_HEAD = """#ifndef __SKIP_INTERNAL_FATBINARY_HEADERS
#include "fatbinary_section.h"
#endif
#define __CUDAFATBINSECTION  ".nvFatBinSegment"
#define __CUDAFATBINDATASECTION  ".nv_fatbin"
asm(
".section .nv_fatbin, \\"a\\"\\n"
".align 8\\n"
"fatbinData:\\n"
"""
_FATBIN_TAIL = """".text\\n");
#ifdef __cplusplus
extern "C" {
#endif
extern const unsigned long long fatbinData[QUADS];
#ifdef __cplusplus
}
#endif
#ifdef __cplusplus
extern "C" {
#endif
static const __fatBinC_Wrapper_t __fatDeviceText __attribute__ ((aligned (8))) __attribute__ ((section (__CUDAFATBINSECTION)))= 
\t{ 0x466243b1, 1, fatbinData, 0 };
#ifdef __cplusplus
}
#endif
"""
_QUAD_LINE = re.compile(r'^"\.quad (0x[0-9a-f]{16}(?:, ?0x[0-9a-f]{16})*)\\n"$')


@dataclass
class EmbeddedImage:
    """A unit's fatbinary as an object of its own: ``wrapper`` (the ``fatbin.c`` the host stubs
    include) declares ``symbol``, which ``object`` defines by assembling ``image``. fatbinary
    writes its own ``fatbin.c`` to ``nvcc_wrapper``, to be checked against them."""

    step: int  # the fatbinary step's index
    wrapper: Path
    nvcc_wrapper: Path
    image: Path
    object: Path
    symbol: str

    def write_wrapper(self) -> None:
        """nvcc's wrapper with the image declared (defined by ``object``) instead of held."""
        includes = _FATBIN_HEAD[:_FATBIN_HEAD.index("asm(")]
        declaration_and_wrapper = _FATBIN_TAIL[_FATBIN_TAIL.index("#ifdef"):]
        self.wrapper.write_text(includes + declaration_and_wrapper.replace("[QUADS]", "[]").replace("fatbinData",
                                                                                                   self.symbol))

    def assembly(self) -> str:
        """The image as data, where nvcc puts it; the symbol global within the module only."""
        image = str(self.image).replace("\\", "\\\\").replace('"', '\\"')
        return (f'.section .nv_fatbin, "a"\n.balign 8\n.globl {self.symbol}\n.hidden {self.symbol}\n{self.symbol}:\n'
                f'.incbin "{image}"\n.balign 8\n.section .note.GNU-stack, "", @progbits\n')

    def matches_nvcc(self) -> bool:
        """Whether nvcc's own fatbin.c is that wrapper around exactly the image's bytes."""
        text = self.nvcc_wrapper.read_text()
        image = self.image.read_bytes()
        quads = (len(image) + 7) // 8
        tail = _FATBIN_TAIL.replace("QUADS", str(quads))
        if not (text.startswith(_FATBIN_HEAD) and text.endswith(tail)):
            return False
        hexes = []
        for line in text[len(_FATBIN_HEAD):len(text) - len(tail)].splitlines():
            match = _QUAD_LINE.match(line)
            if match is None:
                return False
            hexes += [h.strip()[2:] for h in match.group(1).split(",")]
        data = array.array("Q", bytes.fromhex("".join(hexes)))
        if sys.byteorder == "little":
            data.byteswap()  # each quad is written as a number, most significant digit first
        return data.tobytes() == image.ljust(quads * 8, b"\0")


@dataclass
class StubPipe:
    """The host stubs cicc writes to ``written``, handed to the host compile through ``pipe`` (the
    file cudafe++'s output #includes, a named pipe while the steps run)."""

    step: int  # the cicc step that writes them
    pipe: Path
    written: Path

    def feed(self, writer: Future, host: Future) -> None:
        """Once cicc is done, writes its stubs into the pipe when the host compiler opens it; gives
        up when the host compile ends without opening it. A failed cicc gives the host compiler
        no stubs (it must not wait forever) and its error."""
        error: BaseException | None = None
        try:
            writer.result()
            content = self.written.read_bytes()
        except BaseException as e:  # noqa: BLE001 - re-raised once the pipe is closed
            error, content = e, b""
        fd = None
        while fd is None:
            try:
                fd = os.open(self.pipe, os.O_WRONLY | os.O_NONBLOCK)
            except OSError as e:
                if e.errno != errno.ENXIO:  # ENXIO: the host compiler has not reached the stubs yet
                    raise
                if host.done():
                    break
                time.sleep(0.002)
        if fd is not None:
            os.set_blocking(fd, True)
            # The compiler has the pipe open; later opens of the name (a compiler reading the
            # file again to quote it in a message) must find the stubs, not a pipe no one feeds.
            self.settle()
            try:
                with os.fdopen(fd, "wb") as pipe:
                    pipe.write(content)
            except BrokenPipeError:
                pass  # the host compiler stopped reading: its own failure is reported
        if error is not None:
            raise error

    def settle(self) -> None:
        """The stubs as a plain file where the host code includes them (for a compile run again,
        and for anyone reading the kept intermediates); an empty one when cicc wrote none."""
        if self.written.exists():
            os.replace(self.written, self.pipe)
        elif self.pipe.is_fifo():
            empty = self.pipe.with_name(self.pipe.name + ".empty")
            empty.write_bytes(b"")
            os.replace(empty, self.pipe)


@dataclass
class Pipeline:
    """nvcc's steps for one unit: the environment of each (``NAME=value``), the steps in order."""

    assignments: list[str]
    steps: list[Step]
    depfiles: list[Path]
    module_id_file: Path
    #: The fatbinary linked as an object of its own (None: embedded by the host compile, as nvcc does).
    embedded: EmbeddedImage | None = None
    #: The host stubs through a named pipe (None: the host compile waits for cicc, as in nvcc).
    stubs: StubPipe | None = None
    #: cudafe++'s output, which the host compile reads (its prefix may be precompiled: cuda_pch).
    host_source: Path | None = None


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
    embedded = _embed_apart(steps)
    stubs = _pipe_stubs(steps)
    cudafe = [s for s in steps if s.tool == "cudafe++"]
    host_source = _flag_value(cudafe[0].command, "--gen_c_file_name") if len(cudafe) == 1 else None
    for i, step in enumerate(steps[:-1]):
        named = _paths(step.command, folder)
        step.after = [j for j in range(i) if steps[j].outputs & named]
    # The final host compile reads cudafe++'s output, the stubs cicc writes and the fatbinary
    # by relative #includes: it waits for everything, but for the image when it is linked apart
    # and for cicc when the stubs come through a pipe.
    not_waited = ({"ptxas", "fatbinary"} if embedded is not None else set()) | ({"cicc"} if stubs else set())
    steps[-1].after = [j for j in range(len(steps) - 1) if steps[j].tool not in not_waited]
    return Pipeline(assignments, steps, depfiles, module_id_file, embedded, stubs,
                    Path(host_source) if host_source else None)


def _flag_value(command: str, flag: str) -> str | None:
    """The value of ``flag`` in a listing's command (``--flag value`` or ``--flag=value``)."""
    tokens = shlex.split(command)
    for i, token in enumerate(tokens):
        if token == flag and i + 1 < len(tokens):
            return tokens[i + 1]
        if token.startswith(flag + "="):
            return token[len(flag) + 1:]
    return None


def _with_flag_value(command: str, flag: str, old: str, new: str) -> str | None:
    """``command`` with ``flag``'s value ``old`` (quoted or not) replaced by ``new``; None unless
    it occurs exactly once."""
    pattern = re.compile(re.escape(flag) + r'(=|\s+)("?)' + re.escape(old) + r"\2(?=\s|$)")
    changed, count = pattern.subn(lambda m: flag + m.group(1) + shlex.quote(new), command)
    return changed if count == 1 else None


def _pipe_stubs(steps: list[Step]) -> StubPipe | None:
    """The stubs the host code includes piped from the cicc step that writes them (its command
    changed to write them elsewhere; the pipe made), or None when the listing has no single such
    step or the build folder's file system has no named pipes."""
    cudafe = [s for s in steps if s.tool == "cudafe++"]
    if len(cudafe) != 1 or not hasattr(os, "mkfifo"):
        return None
    # cudafe++ names the file as its output #includes it (beside that output), cicc by its path.
    included = _flag_value(cudafe[0].command, "--stub_file_name")
    writers = [(i, path) for i, s in enumerate(steps) if s.tool == "cicc"
               for path in [_flag_value(s.command, "--stub_file_name")] if path and included
               and Path(path).name == Path(included).name]
    if len(writers) != 1:
        return None
    index, path = writers[0]
    written = path + ".cicc"
    command = _with_flag_value(steps[index].command, "--stub_file_name", path, written)
    if command is None:
        return None
    try:
        Path(path).unlink(missing_ok=True)
        os.mkfifo(path)
    except OSError:
        return None
    steps[index].command = command
    steps[index].outputs = (steps[index].outputs - {path}) | {written}
    return StubPipe(index, Path(path), Path(written))


def _embed_apart(steps: list[Step]) -> EmbeddedImage | None:
    """The fatbinary step's image linked apart (its fatbin.c written elsewhere, the step's
    command changed to match), or None when the listing has no single such step."""
    fatbinaries = [i for i, s in enumerate(steps) if s.tool == "fatbinary"]
    if len(fatbinaries) != 1:
        return None
    step = steps[fatbinaries[0]]
    wrapper, image = _flag_value(step.command, "--embedded-fatbin"), _flag_value(step.command, "--create")
    if wrapper is None or image is None:
        return None
    wrapper, image = Path(wrapper), Path(image)
    nvcc_wrapper = wrapper.with_name(wrapper.name.replace(".fatbin.c", "") + ".nvcc-fatbin.c")
    command = _with_flag_value(step.command, "--embedded-fatbin", str(wrapper), str(nvcc_wrapper))
    if command is None:
        return None
    step.command = command
    step.outputs = (step.outputs - {str(wrapper)}) | {str(nvcc_wrapper)}
    symbol = "__mllm_kernel_fatbin_" + re.sub(r"\W", "_", image.stem)
    return EmbeddedImage(fatbinaries[0], wrapper, nvcc_wrapper, image, image.with_suffix(".o"), symbol)


def module_id(source: Path) -> str:
    """A module id of the form cudafe++ writes (letters, digits and underscores), unique to the
    source's path and text."""
    digest = hashlib.sha256(str(source.resolve()).encode() + source.read_bytes()).hexdigest()[:8]
    stem = re.sub(r"\W", "_", source.name)
    return f"_{digest}_{len(stem)}_{stem}"


def _precompiled_prefix(pipeline: Pipeline, source: Path) -> tuple[cuda_pch.Prefix | None, bool]:
    """The prefix of cudafe++'s output that may be precompiled (cuda_pch), and whether the host
    compile's source was rewritten to read it (when it is built). It only saves time: anything
    that goes wrong here leaves the host compile as nvcc has it."""
    path = next((a.partition("=")[2] for a in pipeline.assignments if a.startswith("PATH=")), None)
    try:
        found = cuda_pch.read(pipeline.host_source, source, pipeline.steps[-1].command, path)
        if found is None or not found.built():
            return found, False
        found.use(pipeline.host_source)
    except (OSError, ValueError) as error:  # unreadable output, a command shlex cannot split
        logger.warning("mllm_kernel: %s: the precompiled host prefix was skipped: %s", source.name, error)
        return None, False
    logger.info("mllm_kernel: %s: host code compiled with the precompiled prefix %s", source.name, found.folder.name)
    return found, True


def _build_prefix_later(prefix: cuda_pch.Prefix, source: Path) -> None:
    """Has ``prefix`` built in the background, for the units after this one, unless it is (or
    was given up)."""
    try:
        if not prefix.built() and not prefix.unusable():
            cuda_pch.build_in_background(prefix)
    except (OSError, RuntimeError) as error:  # a folder that cannot be looked at, no thread to be had
        logger.warning("mllm_kernel: %s: the precompiled host prefix was not built: %s", source.name, error)


def run(pipeline: Pipeline, source: Path, run_step) -> list[Path]:
    """Runs the steps, each once those it waits for are done, through ``run_step(argv)`` (which
    raises on failure); a failure stops the steps not yet started. Returns the objects to link
    beside the unit's own: the fatbinary's, when it is linked apart."""
    pipeline.module_id_file.write_text(module_id(source))
    embedded, stubs = pipeline.embedded, pipeline.stubs
    if embedded is not None:
        embedded.write_wrapper()
    preamble = "".join(f"export {shlex.quote(a)}; " for a in pipeline.assignments)

    def run_command(command: str) -> None:
        run_step(["bash", "-c", preamble + "exec " + command])

    done: dict[int, Future] = {}
    last = len(pipeline.steps) - 1
    prefix: list[cuda_pch.Prefix] = []

    def host_compile() -> None:
        found, used = _precompiled_prefix(pipeline, source) if pipeline.host_source is not None else (None, False)
        if found is not None:
            prefix.append(found)
        try:
            run_command(pipeline.steps[last].command)
        except JitCompileError:
            if used:
                # The prefix may be at fault: the caller's plain nvcc tells (its error is the
                # unit's own), and the prefix is not used again either way.
                logger.warning("mllm_kernel: %s: the host compile failed with the precompiled prefix %s, which is "
                               "not used again", source.name, found.folder.name)
                found.give_up(pipeline.host_source)
            raise

    def start(i: int, pool: ThreadPoolExecutor) -> Future:
        if i not in done:
            waits = [start(j, pool) for j in pipeline.steps[i].after]

            def go() -> None:
                for future in waits:
                    future.result()
                if i == last:
                    host_compile()
                else:
                    run_command(pipeline.steps[i].command)

            done[i] = pool.submit(go)
        return done[i]

    def assemble(fatbinary: Future) -> bool:
        fatbinary.result()
        if not embedded.matches_nvcc():
            return False
        assembly = embedded.object.with_suffix(".s")
        assembly.write_text(embedded.assembly())
        run_step([shlex.split(pipeline.steps[-1].command)[0], "-c", str(assembly), "-o", str(embedded.object)])
        return True

    # Every step gets a worker, so one waiting on another never starves the pool; so do the
    # stubs' feeder and the image's assembly, which start the steps the host compile does not
    # wait for.
    with ThreadPoolExecutor(max_workers=len(pipeline.steps) + 2) as pool:
        host = start(last, pool)
        feeder = pool.submit(stubs.feed, start(stubs.step, pool), host) if stubs is not None else None
        image = pool.submit(assemble, start(embedded.step, pool)) if embedded is not None else None
        try:
            host.result()
            if prefix:
                _build_prefix_later(prefix[0], source)
            if feeder is not None:
                feeder.result()
        finally:
            if feeder is not None:
                wait([feeder])
                stubs.settle()
        if image is None:
            return []
        if image.result():
            return [embedded.object]
    # nvcc's fatbin.c is not the wrapper this module writes: the host compile again, over nvcc's.
    logger.info("mllm_kernel: %s: nvcc's fatbin.c has an unknown form; its host code compiled again with it",
                source.name)
    os.replace(embedded.nvcc_wrapper, embedded.wrapper)
    run_command(pipeline.steps[-1].command)
    return []
