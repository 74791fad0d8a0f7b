"""``python -m bench``: run every benchmark and rewrite docs/BENCHMARKS.md.

``python -m bench NAME ...`` runs only the benchmarks whose key contains one of the names and
prints their rows without writing the file (unless ``--output`` is given).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from .registry import Outcome, discover
from .report import date_now, machine_facts, render, with_notes

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUTPUT = ROOT / "docs" / "BENCHMARKS.md"


NOTES = ROOT / "bench" / "notes.md"


def _notes() -> str:
    """The hand-written reading of the figures, kept in ``bench/notes.md`` (the rest of the report is generated)."""
    return NOTES.read_text(encoding="utf-8") if NOTES.exists() else ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="run only the benchmarks whose key contains one of these")
    parser.add_argument(
        "--output", type=Path, help=f"the report to write (default: {DEFAULT_OUTPUT.relative_to(ROOT)})"
    )
    parser.add_argument(
        "--notes-only",
        action="store_true",
        help="only put bench/notes.md into the report again, its figures kept (nothing is measured)",
    )
    args = parser.parse_args(argv)
    if args.notes_only:
        target = args.output or DEFAULT_OUTPUT
        target.write_text(with_notes(target.read_text(encoding="utf-8"), _notes()), encoding="utf-8")
        print(f"wrote the notes into {target}")
        return 0

    benchmarks = discover()
    if args.names:
        benchmarks = [b for b in benchmarks if any(n in b.key for n in args.names)]
        if not benchmarks:
            parser.error(f"no benchmark matches {', '.join(args.names)}; keys: {', '.join(b.key for b in discover())}")
    output = args.output or (None if args.names else DEFAULT_OUTPUT)

    date = date_now()
    load = os.getloadavg()
    started = time.perf_counter()
    outcomes: list[Outcome] = []
    for b in benchmarks:
        print(f"{b.key}: {b.title} …", flush=True)
        outcome = b.run()
        outcomes.append(outcome)
        if outcome.error is not None:
            print(outcome.error, file=sys.stderr)
        for r in outcome.rows:
            print(f"  {r.name}: {r.figure_text} (target {r.target_text}: {r.verdict})")
        print(f"  took {outcome.seconds:.1f} s", flush=True)

    if "django" in sys.modules:
        print("The benchmarks imported Django: the engine must not.", file=sys.stderr)
        return 2
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(render(outcomes, date, machine_facts(ROOT, load), _notes()), encoding="utf-8")
        print(f"wrote {output} in {time.perf_counter() - started:.1f} s")
    return 1 if any(o.failed for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
