"""Machine-readable benchmark results: the JSON files that ``report.py`` renders into BENCHMARKS.md.

A results file holds sections; a section is one table as a benchmark printed it, with the
device, date and command that produced it::

    {"sections": [{"id": "cuda/norms", "family": "norms", "title": "...", "device": "...",
                   "date": "2026-11-24", "command": "python benchmarks/run_all_cuda.py ...",
                   "source": "measured", "copy_gbps": 2396.0, "notes": ["..."],
                   "columns": [["shape", "shape", ""], ["ours_us", "ours µs", ".2f"], ...],
                   "rows": [{"shape": "[1, 4096]", "ours_us": 1.25, ...}, ...]}]}

Writing a section replaces the one with the same ``id`` measured on the same ``device`` and keeps
the others, so a single benchmark can refresh its table in a file that a full run wrote, and a
table measured on one GPU stays beside the same benchmark's table from another. Standard library
only: the renderer needs no torch.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import shlex
import sys
from pathlib import Path
from typing import Sequence

#: Where the committed results live; ``report.py`` renders every ``*.json`` here by default.
RESULTS_DIR = Path(__file__).resolve().parent / "results"
#: Environment variable naming a results file, for scripts run without ``--json``.
ENV = "MLLM_BENCH_JSON"

Column = tuple[str, str, str]  # (row key, header, format spec of the value; "" for text)


def add_json_argument(parser) -> None:
    """The ``--json PATH`` option every benchmark script takes."""
    parser.add_argument("--json", metavar="PATH", default=os.environ.get(ENV),
                        help=f"also write the results into this JSON file (default: ${ENV}; "
                             f"the committed ones are benchmarks/results/{{cuda,cpu}}.json)")


def format_row(columns: Sequence[Column], row: dict) -> str:
    """One row as ``header value | header value ...`` for the terminal (the columns it has)."""
    return " | ".join(f"{label} {fmt.format(row[key])}" for key, label, fmt in columns if key in row)


def command_line() -> str:
    """The command that is running, as a reader would type it from the repository root."""
    script = Path(sys.argv[0]).resolve()
    shown = f"benchmarks/{script.name}" if script.parent.name == "benchmarks" else str(script)
    return shlex.join(["python", shown, *sys.argv[1:]])


def cpu_name() -> str:
    """This machine's CPU model and core count, as the results name a CPU device."""
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            model = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{model}, {os.cpu_count()} cores"


def section(id: str, family: str, title: str, device: str, columns: Sequence[Column], rows: Sequence[dict],
            *, copy_gbps: float | None = None, notes: Sequence[str] = (), command: str | None = None,
            date: str | None = None, source: str = "measured") -> dict:
    """One results section (see the module docstring), dated today and credited to the running
    command unless told otherwise."""
    return {
        "id": id, "family": family, "title": title, "device": device,
        "date": date or datetime.date.today().isoformat(), "command": command or command_line(),
        "source": source, "copy_gbps": copy_gbps, "notes": list(notes),
        "columns": [list(c) for c in columns], "rows": [dict(r) for r in rows],
    }


def load(path: str | Path) -> list[dict]:
    """The sections of a results file (none if it does not exist yet)."""
    path = Path(path)
    if not path.exists():
        return []
    return json.loads(path.read_text())["sections"]


def write(path: str | Path | None, *sections: dict) -> None:
    """Puts ``sections`` into the results file at ``path``, replacing those with the same id on
    the same device (nothing happens when ``path`` is None, i.e. no ``--json`` was given)."""
    if not path:
        return
    path = Path(path)
    new_keys = {key(s) for s in sections}
    kept = [s for s in load(path) if key(s) not in new_keys]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"sections": kept + list(sections)}, indent=1, ensure_ascii=False) + "\n")
    print(f"results: {', '.join(sorted(s['id'] for s in sections))} ({sections[0]['device'] if sections else '-'}) -> {path}")


def key(section: dict) -> tuple[str, str]:
    """What a section is the table of: its benchmark (``id``) on its device."""
    return section["id"], section["device"]
