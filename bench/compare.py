"""Two versions of the server side by side on the benchmark's scenario: ``python -m bench.compare REV``.

The machine is shared: figures taken a minute apart are not comparable. This starts the server of
the commit ``REV`` (exported with ``git archive`` into a temporary folder) and the server of the
working tree, both as ``bench/benchmarks/whole_server.py`` starts one, on one scripted model
server, and makes their runs take turns (``REV`` streamed, ours streamed, ``REV`` not, ours not),
so that a neighbour's load weighs on both alike. It prints, for each, the medians of: the request
to its first model call, the wall at zero latency, the wall at ``--latency`` a call and its
overhead over the critical path, and the CPU per model request. With ``--pg``, both on PostgreSQL.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import statistics
import subprocess
import tarfile
import tempfile
from pathlib import Path

from . import scripted
from .benchmarks import whole_server as ws

ROOT = Path(__file__).resolve().parent.parent


def export(rev: str, into: Path) -> None:
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev], capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.compare", description=__doc__.splitlines()[0])
    parser.add_argument("rev", help="the commit to compare the working tree with (e.g. HEAD, main)")
    parser.add_argument("--runs", type=int, default=12, help="runs of each kind at zero latency")
    parser.add_argument("--slow-runs", type=int, default=4, help="runs of each kind at --latency")
    parser.add_argument("--latency", type=float, default=ws.LATENCY)
    parser.add_argument(
        "--pg",
        nargs="?",
        const=os.environ.get("BENCH_POSTGRES") or "postgres://postgres@127.0.0.1:5432",
        default="",
        help="both servers on PostgreSQL, each on a new database of this server (default: BENCH_POSTGRES, else "
        "127.0.0.1:5432), dropped afterwards",
    )
    args = parser.parse_args(argv)
    model = scripted.spawn()
    with tempfile.TemporaryDirectory() as folder, contextlib.ExitStack() as stack:
        old_root = Path(folder) / "old"
        export(args.rev, old_root)
        stack.callback(model.stop)
        databases = [stack.enter_context(ws.fresh_database(args.pg, f"_{i}")) for i in (0, 1)] if args.pg else ["", ""]
        servers = {
            args.rev: stack.enter_context(ws.server(model.base_url, databases[0], root=old_root)),
            "working tree": stack.enter_context(ws.server(model.base_url, databases[1])),
        }
        drivers = {name: ws.Driver(srv) for name, srv in servers.items()}
        results: dict[tuple[str, str, float], list[ws.Run]] = {}
        for latency, runs in ((0.0, args.runs), (args.latency, args.slow_runs)):
            model.set_latency(latency)
            for _ in range(ws.WARMUP if latency == 0 else 0):
                for driver in drivers.values():
                    driver.run(True)
                    driver.run(False)
            model.reset()
            for _ in range(runs):
                for stream in (True, False):
                    for name, srv in servers.items():
                        run = ws._ours(srv, drivers[name], stream)
                        results.setdefault((name, "streamed" if stream else "not streamed", latency), []).append(run)
            log = model.requests()
            for key, done in results.items():
                if key[2] == latency:
                    for run in done:
                        run.requests = [r for r in log if run.start <= r["arrived"] <= run.end]
    critical = ws.CALLS_ON_CRITICAL_PATH * args.latency
    print(
        f"{'':>14} {'mode':>13} {'first call':>11} {'wall @0':>9} {'wall @' + format(args.latency, 'g'):>9} "
        f"{'overhead':>9} {'CPU/request':>12}"
    )
    for name in servers:
        for mode in ("streamed", "not streamed"):
            fast, slow = results[(name, mode, 0.0)], results[(name, mode, args.latency)]
            first = statistics.median(r.first_call or 0.0 for r in fast)
            wall0 = statistics.median(r.wall for r in fast)
            wall = statistics.median(r.wall for r in slow)
            cpu = sum(r.cpu for r in fast) / max(1, sum(len(r.requests) for r in fast))
            print(
                f"{name[:14]:>14} {mode:>13} {first * 1000:>8.1f} ms {wall0 * 1000:>6.0f} ms {wall * 1000:>6.0f} ms "
                f"{(wall - critical) * 1000:>6.0f} ms {cpu * 1000:>9.1f} ms"
            )


if __name__ == "__main__":
    main()
