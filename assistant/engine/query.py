"""``data_query``'s runner: one statement on a fresh, locked-down, in-memory DuckDB connection, off the event loop.

Only the tables the statement names are copied into the connection from their Parquet files; then external
access is switched off and the configuration locked, so the statement can read no file, attach no database,
copy nothing out and load no extension. It runs on a thread of its own under a memory limit and a time limit
(a timer interrupts it); its task's cancellation interrupts it too. At most ``QueryLimits.concurrent`` queries
run at once in an event loop's process (``DataQuery.turn``), the others wait their turn: the loop keeps a core.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import tempfile
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from .errors import ToolError
from .sql import first_line, quote_ident, sql_literal

RESULT = "__data_query_result"  # the result's temporary table: no table of a base starts with "_"
NOWHERE = "/data_query"  # DuckDB's home, extension and secret directories: a path of no server (nothing is read there)
_PATH = re.compile(r"(?<![\w.)\]])/[\w.@+~-]+(?:/[\w.@+~-]*)+")


@dataclass(frozen=True, slots=True, kw_only=True)
class QueryLimits:
    """What one ``data_query`` call may use (settings ``DATA_QUERY_*``)."""

    max_rows: int = 50
    seconds: float = 10.0
    memory_mb: int = 256
    max_cell_chars: int = 200
    concurrent: int = 1
    """Queries at once in one event loop (the others wait, their time limit not started): DuckDB releases the
    GIL, so each query takes a core of its own, and 50 runs querying at once left the loop that serves their
    pages a fraction of one."""


@dataclass(frozen=True, slots=True)
class QueryResult:
    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]
    row_count: int


class _Query:
    """One statement on a fresh, locked-down DuckDB connection; ``interrupt`` stops it from another thread.

    The connection is opened in ``run``, on the query's own thread: opening one takes DuckDB about 10 ms
    (20 and more with other work in the process), which on the event loop would hold up every run and
    every page the process serves meanwhile."""

    def __init__(self, limits: QueryLimits) -> None:
        self.limits = limits
        self.timed_out = False
        self.interrupted = False
        self.con: Any = None
        self.paths: dict[str, str] = {}  # query name -> the local file it is read from
        self._lock = threading.Lock()  # the connection opened, or closed, while ``interrupt`` looks at it

    def _connect(self) -> None:
        import duckdb

        con = duckdb.connect(
            ":memory:",
            config={
                "autoinstall_known_extensions": False,
                "autoload_known_extensions": False,
                "allow_community_extensions": False,
                "allow_unsigned_extensions": False,
                "temp_directory": "",  # nothing spills to disk: past the memory limit the query fails
                # DuckDB's own directories, which its settings and errors show, name none of the server's.
                "home_directory": NOWHERE,
                "extension_directory": NOWHERE + "/extensions",
                "secret_directory": NOWHERE + "/secrets",
                "memory_limit": f"{self.limits.memory_mb}MB",
                "threads": 1,
            },
        )
        with self._lock:
            self.con = con

    def interrupt(self, *, timed_out: bool = False) -> None:
        self.timed_out = self.timed_out or timed_out
        self.interrupted = True
        with self._lock, contextlib.suppress(Exception):
            if self.con is not None:
                self.con.interrupt()

    def _check(self) -> None:
        """An interruption between two statements would be lost: it is raised here instead."""
        if self.interrupted:
            import duckdb

            raise duckdb.InterruptException("interrupted between statements")

    def _said(self, error: BaseException) -> str:
        """DuckDB's first line about ``error``, for the model: a table's file named by the table, any other path of
        the server (its home, its user's name in it, a temporary file) left out."""
        text = first_line(error)
        for name, path in self.paths.items():
            text = text.replace(path, name)
        home = os.path.expanduser("~")
        if home not in ("", "/"):
            text = text.replace(home, "~")
        return _PATH.sub("<path>", text)

    def run(self, statement: str, sources: Mapping[str, str | bytes]) -> QueryResult:
        import duckdb

        timer = threading.Timer(self.limits.seconds, lambda: self.interrupt(timed_out=True))
        timer.daemon = True
        timer.start()
        try:
            self._connect()
            with _local_files(sources) as paths:
                self.paths = paths
                for name, path in paths.items():
                    self._check()
                    self.con.execute(
                        f"CREATE TABLE {quote_ident(name)} AS SELECT * FROM read_parquet({sql_literal(path)})"
                    )
            # From here on the statement reads no file, attaches nothing, loads nothing, changes no setting.
            self.con.execute("SET enable_external_access = false")
            self.con.execute("SET lock_configuration = true")
            wrapped = f"CREATE TEMP TABLE {RESULT} AS {statement}"
            if len(duckdb.extract_statements(wrapped)) != 1:
                raise ToolError("data_query runs exactly one statement. Send one SELECT (or WITH … SELECT).")
            self._check()
            self.con.execute(wrapped)
            self._check()
            count = self.con.execute(f"SELECT count(*) FROM {RESULT}").fetchone()
            cursor = self.con.execute(f"SELECT * FROM {RESULT} LIMIT {int(self.limits.max_rows)}")
            columns = tuple(str(d[0]) for d in cursor.description or ())
            rows = tuple(tuple(r) for r in cursor.fetchall())
            return QueryResult(columns, rows, int(count[0]) if count else 0)
        except duckdb.InterruptException as e:
            if self.timed_out:
                raise ToolError(
                    f"The query was stopped at the time limit ({self.limits.seconds:g} s). "
                    "Make it cheaper: filter first, aggregate, avoid joins without a condition."
                ) from e
            raise ToolError("The query was interrupted.") from e
        except duckdb.PermissionException as e:
            raise ToolError(
                "data_query reads only the tables of your knowledge bases: it cannot read files, reach the network, "
                f"attach databases or load extensions ({self._said(e)})."
            ) from e
        except duckdb.OutOfMemoryException as e:
            raise ToolError(
                f"The query needed more than {self.limits.memory_mb} MB of memory. Aggregate or filter more, "
                "or select fewer columns."
            ) from e
        except duckdb.Error as e:
            raise ToolError(f"The query failed: {self._said(e)}") from e
        finally:
            timer.cancel()
            with self._lock, contextlib.suppress(Exception):
                if self.con is not None:
                    self.con.close()


@contextlib.contextmanager
def _local_files(sources: Mapping[str, str | bytes]) -> Iterator[dict[str, str]]:
    """A local path for each table: its own, or a private temporary file for bytes (removed afterwards)."""
    paths: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="data-query-") as folder:
        for i, (name, source) in enumerate(sources.items()):
            if isinstance(source, str):
                paths[name] = source
                continue
            path = os.path.join(folder, f"{i}.parquet")
            with open(path, "wb") as f:
                f.write(source)
            paths[name] = path
        yield paths


async def run_query(statement: str, sources: Mapping[str, str | bytes], limits: QueryLimits) -> QueryResult:
    """Run ``statement`` over ``sources`` (query name -> Parquet) off the event loop; cancelling the call (Stop)
    interrupts it. ``data_query`` calls it in its turn (``DataQuery.turn``)."""
    query = _Query(limits)
    future = asyncio.ensure_future(asyncio.to_thread(query.run, statement, sources))
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        query.interrupt()
        with contextlib.suppress(BaseException):
            await future
        raise


__all__ = ["QueryLimits", "QueryResult", "run_query"]
