"""Recording the server with py-spy while something runs, and reading what it recorded.

py-spy is installed outside the project's virtualenv (``python3 -m pip install py-spy``): without it
``available()`` is False and the benchmarks say they could not profile.
"""

from __future__ import annotations

import collections
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path


def available() -> bool:
    return shutil.which("py-spy") is not None


def record(pid: int, work: Callable[[], None], output: Path, *, idle: bool = False, rate: int = 250) -> None:
    """Sample ``pid`` (``--gil``: the CPU it holds; ``idle``: wall time) while ``work()`` runs; raw stacks to ``output``."""
    spy = shutil.which("py-spy")
    if spy is None:
        raise RuntimeError("py-spy is not installed (python3 -m pip install py-spy, outside the project's virtualenv)")
    command = [spy, "record", "--pid", str(pid), "--rate", str(rate), "--format", "raw", "--nonblocking"]
    recorder = subprocess.Popen(
        [*command, "--idle" if idle else "--gil", "--output", str(output)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        time.sleep(1.0)  # py-spy attaches
        work()
    finally:
        recorder.send_signal(signal.SIGINT)  # py-spy writes its output on Ctrl-C
        recorder.wait(timeout=60)


def _stacks(collapsed: Path) -> list[tuple[list[str], int]]:
    out = []
    for line in collapsed.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if count.isdigit():
            out.append((stack.split(";"), int(count)))
    return out


def _function(frame: str) -> str:
    """``name (path:line)`` → ``name (path)``."""
    return frame.rsplit(":", 1)[0] + ")" if frame.endswith(")") else frame


def top_frames(collapsed: Path, limit: int, only: str = "assistant/") -> list[tuple[str, float]]:
    """The functions whose text contains ``only`` with the largest share of samples, inclusive (once per stack)."""
    inclusive: collections.Counter[str] = collections.Counter()
    total = 0
    for stack, n in _stacks(collapsed):
        total += n
        for frame in {_function(f) for f in stack}:
            if only in frame:
                inclusive[frame] += n
    return [(frame, n / max(1, total)) for frame, n in inclusive.most_common(limit)]


def top_modules(collapsed: Path, limit: int, only: str = "assistant/") -> list[tuple[str, float]]:
    """The modules of ``only`` with the largest share of samples, each sample counted for the innermost of them in
    its stack: the time of that module's own code and of what it calls outside ``only`` (Django, SQLite, the SDK)."""
    modules: collections.Counter[str] = collections.Counter()
    total = 0
    for stack, n in _stacks(collapsed):
        total += n
        inner = next((f for f in reversed(stack) if only in f), None)
        name = inner.rsplit("(", 1)[-1].split(":", 1)[0].rstrip(")") if inner else "outside " + only.rstrip("/")
        modules[name[name.find(only) :] if only in name else name] += n
    return [(name, n / max(1, total)) for name, n in modules.most_common(limit)]
