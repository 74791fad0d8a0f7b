"""A database that refuses to write: a real failure, raised by the database itself (a trigger), for the tests of
what the product does when a write fails (a full disk, a constraint, a lost connection fail it the same way)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connection, models


@contextmanager
def refused_inserts(model: type[models.Model], reason: str, when: str = "") -> Iterator[None]:
    """While open, the database fails every insert of a ``model`` row (``when``: only those where this SQL condition
    on ``NEW`` holds, e.g. ``NEW.filename = 'two.txt'``), with ``reason`` as its error message."""
    table = connection.ops.quote_name(model._meta.db_table)
    name = f"refuse_{model._meta.db_table}"
    message = reason.replace("'", "''")
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                f"CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS "
                f"$$ BEGIN RAISE EXCEPTION '{message}'; END $$"
            )
            condition = f"WHEN ({when})" if when else ""
            cursor.execute(
                f"CREATE TRIGGER {name} BEFORE INSERT ON {table} FOR EACH ROW {condition} EXECUTE FUNCTION {name}()"
            )
        else:
            condition = f"WHEN {when}" if when else ""
            cursor.execute(
                f"CREATE TRIGGER {name} BEFORE INSERT ON {table} {condition} BEGIN SELECT RAISE(ABORT, '{message}'); END"
            )
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f"DROP TRIGGER {name}" + (f" ON {table}" if connection.vendor == "postgresql" else ""))
            if connection.vendor == "postgresql":
                cursor.execute(f"DROP FUNCTION {name}()")
