"""docs/BENCHMARKS.md from the benchmarks' result rows, with the facts of the machine they ran on."""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path

from .registry import Outcome, Result


def _run(*command: str) -> str:
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _memory() -> str:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return f"{int(line.split()[1]) / 1024**2:.1f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    return "unknown"


def _cores() -> str:
    total = os.cpu_count() or 0
    try:
        usable = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        usable = total
    return f"{total}" if usable == total else f"{total} ({usable} usable by this process)"


def _commit(root: Path) -> str:
    commit = _run("git", "-C", str(root), "rev-parse", "--short", "HEAD")
    if not commit:
        return "unknown"
    dirty = _run("git", "-C", str(root), "status", "--porcelain", "--untracked-files=no")
    return f"{commit} (with uncommitted changes)" if dirty else commit


def _load(load: tuple[float, float, float]) -> str:
    return f"{load[0]:.2f}, {load[1]:.2f}, {load[2]:.2f} (1, 5, 15 min; {os.cpu_count()} cores, shared)"


def machine_facts(root: Path, load_at_start: tuple[float, float, float] | None = None) -> list[tuple[str, str]]:
    loads = [("Load average at the start", _load(load_at_start))] if load_at_start is not None else []
    return [
        ("CPU", _cpu_model()),
        ("Cores", _cores()),
        ("Memory", _memory()),
        ("Python", f"{platform.python_version()} ({platform.python_implementation()})"),
        ("OS", platform.platform()),
        ("Commit", _commit(root)),
        *loads,
        ("Load average at the end", _load(os.getloadavg())),
    ]


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _row(r: Result, title: str | None = None) -> str:
    cells = ([title] if title is not None else []) + [r.name, r.figure_text, r.target_text, r.verdict]
    return "| " + " | ".join(_cell(c) for c in cells) + " |"


NOTES_START, NOTES_END = "<!-- bench/notes.md -->", "<!-- end of bench/notes.md -->"


def with_notes(report: str, notes: str) -> str:
    """``report`` (a rendered docs/BENCHMARKS.md) with its notes replaced by ``notes``, its figures kept."""
    start, end = report.find(NOTES_START), report.find(NOTES_END)
    if start == -1 or end == -1:
        summary_end = report.find("\n## ", report.find("## Summary") + 1)
        return report[:summary_end] + f"\n\n{NOTES_START}\n{notes.strip()}\n{NOTES_END}\n" + report[summary_end:]
    return report[:start] + f"{NOTES_START}\n{notes.strip()}\n" + report[end:]


def render(outcomes: list[Outcome], date: str, facts: list[tuple[str, str]], notes: str = "") -> str:
    """The report; ``notes``: the hand-written reading of the figures (``bench/notes.md``), after the summary."""
    lines = [
        "# Benchmarks",
        "",
        f"Measured on {date} by `make bench` (`.venv/bin/python -m bench`), which rewrites this file: do not edit it "
        "by hand (its reading of the figures, after the summary, is `bench/notes.md`). The engine's benchmarks "
        "drive the engine alone (`assistant/engine`, no Django) with scripted `FunctionModel` fakes, so the figures "
        "are the engine's, not a provider's; the live chat's runs the whole server with the offline demo provider; "
        "the whole server's runs it through its API with a scripted OpenAI-wire model server, against the OpenAI "
        "Agents SDK. Each one is a single run on the machine below unless its section says otherwise; the machine "
        "is shared (its load is below): expect some spread from one run to the next, the most in wall times.",
        "",
        "## Machine",
        "",
        "| | |",
        "| --- | --- |",
        *(f"| {name} | {_cell(value)} |" for name, value in facts),
        "",
        "## Summary",
        "",
        "| Benchmark | Measure | Figure | Target | Result |",
        "| --- | --- | ---: | --- | --- |",
    ]
    for o in outcomes:
        if o.error is not None:
            lines.append(f"| {_cell(o.benchmark.title)} | did not run | — | — | **ERROR** |")
        lines += [_row(r, o.benchmark.title) for r in o.rows if r.summary]
    if notes.strip():
        lines += ["", NOTES_START, notes.strip(), NOTES_END]
    for o in outcomes:
        lines += ["", f"## {o.benchmark.title}", "", o.benchmark.method.replace("\n", " "), ""]
        if o.error is not None:
            lines += ["It failed with:", "", "```", o.error.rstrip(), "```"]
        else:
            lines += ["| Measure | Figure | Target | Result |", "| --- | ---: | --- | --- |"]
            lines += [_row(r) for r in o.rows]
            notes = [f"- {r.name}: {r.notes}" for r in o.rows if r.notes]
            if notes:
                lines += ["", *notes]
        lines += [
            "",
            f"_Took {o.seconds:.1f} s, `bench/benchmarks/{o.benchmark.function.__module__.rsplit('.', 1)[-1]}.py`._",
        ]
    lines += [
        "",
        "## Adding a benchmark",
        "",
        "Add a module to `bench/benchmarks/` with a function decorated by `@benchmark(title, order=...)` "
        "(`bench/registry.py`) that returns a list of `Result` rows (name, figure, unit, target, notes); its "
        "docstring is the paragraph that says how it is measured. `python -m bench` finds it, runs it and "
        "rewrites this file; `python -m bench NAME` runs only the benchmarks whose key contains NAME, "
        "without writing the file.",
        "",
    ]
    return "\n".join(lines)


def date_now() -> str:
    return _run("date")
