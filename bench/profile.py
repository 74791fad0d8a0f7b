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
import time
from pathlib import Path

from . import scripted, spy
from .benchmarks import whole_server


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
    if not spy.available():
        parser.error("py-spy is not installed (python3 -m pip install py-spy, outside the project's virtualenv)")
    model = scripted.spawn(args.latency)
    try:
        with whole_server.server(model.base_url) as srv:
            driver = whole_server.Driver(srv)
            for _ in range(whole_server.WARMUP):
                driver.run(args.stream)
            started = time.monotonic()
            spy.record(
                srv.process.pid,
                lambda: [driver.run(args.stream) for _ in range(args.runs)],
                args.output,
                idle=args.idle,
                rate=args.rate,
            )
            wall = time.monotonic() - started - 1.0
    finally:
        model.stop()
    print(f"{args.runs} runs in {wall:.2f} s; stacks in {args.output}")
    for frame, share in spy.top_frames(args.output, args.top, args.only):
        print(f"{share * 100:5.1f}%  {frame}")
    print("by module (innermost):")
    for module, share in spy.top_modules(args.output, 15, args.only):
        print(f"{share * 100:5.1f}%  {module}")


if __name__ == "__main__":
    main()
