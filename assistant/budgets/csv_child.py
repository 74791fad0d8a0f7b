"""The usage CSV's worker: ``python csv_child.py ROOT``, started by ``csv_export`` and kept for the next CSVs.

Its priority is lowered first (``nice``: the server's requests come before a CSV when they compete for the cores),
then Django is set up once (seconds of CPU: the apps and their libraries) with the server's settings and the
database the server's requests read (its connection's settings, from the header: a test's database, not the one
the settings name). Standard input: that header, one JSON line; then one job a line (``organisation``, ``month``).
Standard output: ``ready``, then for each job ``ok SIZE`` and the CSV's SIZE bytes (UTF-8, as ``usage_csv`` writes
it), or ``failed 0`` (the error on standard error, the server's log). It leaves when the server closes its input,
or after ``idle_seconds`` without a job (the server starts another when it needs one). Nothing is imported from
Django before the settings are given their database.
"""

from __future__ import annotations

import json
import os
import select
import sys
import traceback


def _line(stdin: int) -> bytes:
    """One line of the server's (b"" when it closed the pipe), read unbuffered: ``select`` sees what is left."""
    out = b""
    while not out.endswith(b"\n"):
        byte = os.read(stdin, 1)
        if not byte:
            return b""
        out += byte
    return out


def main() -> None:
    stdin = sys.stdin.fileno()
    # The protocol's own copy of standard output; whatever else prints there (a library's banner) goes to stderr.
    stdout = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    header = json.loads(_line(stdin))
    os.nice(int(header["nice"]))
    sys.path[0] = sys.argv[1]  # the project, not this script's folder (whose modules would shadow others by name)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "assistant.settings")
    from django.conf import settings

    settings.DATABASES = {**settings.DATABASES, "default": header["database"]}
    import django

    django.setup()
    from datetime import date

    from django.db import connections

    from assistant.budgets.usage_csv import usage_csv_parts
    from assistant.orgs.models import Organisation

    stdout.write(b"ready\n")
    stdout.flush()
    while select.select([stdin], [], [], float(header["idle_seconds"]))[0]:
        line = _line(stdin)
        if not line:
            return  # the server closed the pipe: it stopped
        job = json.loads(line)
        try:
            org = Organisation.objects.get(pk=job["organisation"])
            # Alone in its process: nothing to leave the interpreter to (``share``).
            data = "".join(usage_csv_parts(org, date.fromisoformat(job["month"]), share=False)).encode()
            stdout.write(b"ok %d\n" % len(data) + data)
        except Exception:
            traceback.print_exc()
            stdout.write(b"failed 0\n")
        finally:
            connections.close_all()  # no connection held between two CSVs
        stdout.flush()


if __name__ == "__main__":
    main()
