"""Profile the whole server on the benchmark's scenario: ``python -m bench.profile [--runs N] [--stream] ...``.

It starts the scripted model server and the real server as ``bench/benchmarks/whole_server.py``
does, drives ``--runs`` runs through the API one after the other, and records the server with
``py-spy`` (installed outside the project's virtualenv, e.g. ``python3 -m pip install py-spy``)
while they run: ``--gil`` for the CPU held (the default), ``--idle`` for wall time, idle included.
It writes the collapsed stacks (``--output``, default ``/tmp/bench-profile.txt``, one stack a line
with its sample count, for flame graph tools) and prints the frames of the project with the largest
share of samples, inclusive (a frame counted once per stack).
"""

from __future__ import annotations

import argparse
import collections
import shutil
import signal
import subprocess
import time
from pathlib import Path

from . import scripted
from .benchmarks import whole_server


def top_frames(collapsed: Path, limit: int, only: str) -> list[tuple[str, float]]:
    inclusive: collections.Counter[str] = collections.Counter()
    total = 0
    for line in collapsed.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        n = int(count)
        total += n
        # A function once per stack, whatever its line: "name (path:line)" → "name (path)".
        for frame in {f.rsplit(":", 1)[0] + ")" if f.endswith(")") else f for f in stack.split(";")}:
            if only in frame:
                inclusive[frame] += n
    return [(frame, n / max(1, total)) for frame, n in inclusive.most_common(limit)]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.profile", description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--stream", action="store_true", help="stream the responses (default: not streamed)")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds each model call waits")
    parser.add_argument("--idle", action="store_true", help="sample idle threads too (wall time), not only the GIL")
    parser.add_argument("--rate", type=int, default=250, help="samples a second")
    parser.add_argument("--output", type=Path, default=Path("/tmp/bench-profile.txt"))
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--only", default="assistant/", help="list only frames whose text contains this")
    args = parser.parse_args(argv)
    spy = shutil.which("py-spy")
    if spy is None:
        parser.error("py-spy is not installed (python3 -m pip install py-spy, outside the project's virtualenv)")
    model = scripted.spawn(args.latency)
    try:
        with whole_server.server(model.base_url) as srv:
            driver = whole_server.Driver(srv)
            for _ in range(whole_server.WARMUP):
                driver.run(args.stream)
            mode = ["--idle"] if args.idle else ["--gil"]
            command = [spy, "record", "--pid", str(srv.process.pid), "--rate", str(args.rate), "--format", "raw"]
            recorder = subprocess.Popen([*command, *mode, "--output", str(args.output), "--nonblocking"])
            time.sleep(1.0)  # py-spy attaches
            started = time.monotonic()
            for _ in range(args.runs):
                driver.run(args.stream)
            wall = time.monotonic() - started
            recorder.send_signal(signal.SIGINT)  # py-spy writes its output on Ctrl-C
            recorder.wait(timeout=30)
    finally:
        model.stop()
    print(f"{args.runs} runs in {wall:.2f} s; stacks in {args.output}")
    for frame, share in top_frames(args.output, args.top, args.only):
        print(f"{share * 100:5.1f}%  {frame}")


if __name__ == "__main__":
    main()
