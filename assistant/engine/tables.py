"""Read-only SQL over the tables of a scope's knowledge bases: ``data_tables`` and ``data_query``, on DuckDB.

A table is a CSV, XLSX sheet or Parquet document of a base, stored as a Parquet file when it was
extracted; the Django side gives the tools a ``TableBackend`` over its own organisation's ready
tables. The tools only ever see the tables of the caller's own bases (``Scope.knowledge_bases``).

Each ``data_query`` call gets a fresh in-memory DuckDB connection, with no extension installed or
loaded automatically. Only the tables the statement names, and only those of the scope, are copied
into it from their Parquet files; then external access is switched off and the configuration locked,
so the statement can read no file, attach no database, copy nothing out and load no extension. The
statement must be one ``SELECT`` (or ``WITH … SELECT``), as DuckDB's own parser says. It runs off the
event loop under a memory limit and a time limit (a timer interrupts it), and its result comes back
as a small Markdown table with its row count, cut at a row limit. At most ``QueryLimits.concurrent``
queries run at once in an event loop's process, the others wait their turn: the loop keeps a core.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import decimal
import json
import os
import re
import tempfile
import threading
import weakref
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from .errors import OutOfScope, ToolError
from .events import Action, Source
from .scope import Scope
from .tools import Tool, ToolFactory, ToolOutcome
from .types import ToolSpec

MAX_SQL_CHARS = 20_000
MAX_LISTED_TABLES = 30
RESULT = "__data_query_result"  # the result's temporary table: no table of a base starts with "_"

# Statement types, as DuckDB names them, and what refusing each one tells the model.
_REFUSED = {
    "INSERT": "it writes",
    "UPDATE": "it writes",
    "DELETE": "it writes",
    "CREATE": "it writes",
    "DROP": "it writes",
    "ALTER": "it writes",
    "MERGE_INTO": "it writes",
    "VACUUM": "it writes",
    "ANALYZE": "it writes",
    "CREATE_FUNC": "it writes",
    "ATTACH": "it attaches a database",
    "DETACH": "it detaches a database",
    "COPY": "it copies to or from a file",
    "COPY_DATABASE": "it copies a database",
    "EXPORT": "it writes files",
    "LOAD": "it installs or loads an extension",
    "EXTENSION": "it installs or loads an extension",
    "SET": "it changes a setting",
    "VARIABLE_SET": "it changes a setting",
    "PRAGMA": "it changes or reads settings",
    "TRANSACTION": "it manages transactions",
}


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    type: str


@dataclass(frozen=True, slots=True)
class TableInfo:
    """One table of a base: its name (unique within the base), its document, columns and row count."""

    kb: str
    name: str
    document_id: str
    title: str
    columns: tuple[Column, ...]
    row_count: int


class TableBackend(Protocol):
    """Where tables live (the Django side implements it over its database and storage)."""

    async def tables(self, kbs: Sequence[str]) -> list[TableInfo]:
        """The tables of these bases, in a stable order (bases that do not exist have none)."""
        ...

    async def parquet(self, table: TableInfo) -> str | bytes:
        """The table's Parquet data: a local file's path, or its bytes."""
        ...


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


def _ident(text: str) -> str:
    return re.sub(r"\W", "_", text.lower())


def query_names(tables: Sequence[TableInfo]) -> dict[str, TableInfo]:
    """The name each table is queried by: its own, or ``<kb>__<name>`` when two bases of the scope share it."""
    counts: dict[str, int] = {}
    for t in tables:
        counts[t.name.lower()] = counts.get(t.name.lower(), 0) + 1
    named: dict[str, TableInfo] = {}
    for t in tables:
        key = t.name.lower()
        named[key if counts[key] == 1 else f"{_ident(t.kb)}__{key}"] = t
    return named


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0][:400]


def check_statement(sql: str) -> tuple[str, set[str] | None]:
    """The one statement of ``sql`` (without its final semicolon) and the tables it names, or a ToolError.

    The names are None when DuckDB cannot list them without the tables themselves (``JOIN … USING``): the
    call then loads every table of the scope, and DuckDB says which name it does not know.
    """
    import duckdb

    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as e:
        raise ToolError(f"The SQL could not be parsed: {_first_line(e)}") from e
    if len(statements) != 1:
        raise ToolError(
            f"data_query runs exactly one statement; this SQL holds {len(statements)}. "
            "Send one SELECT (or WITH … SELECT)."
        )
    statement = statements[0]
    kind = statement.type.name
    if kind != "SELECT":
        why = _REFUSED.get(kind, "it is not a query")
        raise ToolError(
            f"data_query is read-only: only one SELECT (or WITH … SELECT) runs. This {kind} statement is refused "
            f"({why}). The tables cannot be changed; return what you found."
        )
    text = statement.query.strip().rstrip(";").strip()
    try:
        return text, {str(n) for n in duckdb.get_table_names(text, qualified=False)}
    except duckdb.Error:
        return text, None


def _is_path(name: str) -> bool:
    return any(c in name for c in "/\\.:") or name.startswith("~")


def _cell(value: Any, width: int) -> str:
    if value is None:
        text = "NULL"
    elif isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, float):
        text = f"{value:.15g}"
    elif isinstance(value, decimal.Decimal):
        text = format(value, "f")
    elif isinstance(value, dt.datetime | dt.date | dt.time):
        text = value.isoformat(sep=" ") if isinstance(value, dt.datetime) else value.isoformat()
    elif isinstance(value, bytes | bytearray | memoryview):
        text = f"<{len(bytes(value))} bytes>"
    else:
        text = str(value)
    text = " ".join(text.split()).replace("|", "\\|")
    return text if len(text) <= width else text[: width - 1] + "…"


def markdown_table(columns: Sequence[str], rows: Sequence[Sequence[Any]], width: int = 200) -> str:
    """A Markdown table of ``rows`` under ``columns``, each cell on one line and at most ``width`` characters."""
    head = "| " + " | ".join(_cell(c, width) for c in columns) + " |"
    rule = "| " + " | ".join("---" for _ in columns) + " |"
    body = ["| " + " | ".join(_cell(v, width) for v in row) + " |" for row in rows]
    return "\n".join([head, rule, *body])


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

    def run(self, statement: str, sources: Mapping[str, str | bytes]) -> QueryResult:
        import duckdb

        timer = threading.Timer(self.limits.seconds, lambda: self.interrupt(timed_out=True))
        timer.daemon = True
        timer.start()
        try:
            self._connect()
            with _local_files(sources) as paths:
                for name, path in paths.items():
                    self._check()
                    self.con.execute(f"CREATE TABLE {_quote(name)} AS SELECT * FROM read_parquet({_literal(path)})")
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
                f"attach databases or load extensions ({_first_line(e)})."
            ) from e
        except duckdb.OutOfMemoryException as e:
            raise ToolError(
                f"The query needed more than {self.limits.memory_mb} MB of memory. Aggregate or filter more, "
                "or select fewer columns."
            ) from e
        except duckdb.Error as e:
            raise ToolError(f"The query failed: {_first_line(e)}") from e
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


_turns: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = weakref.WeakKeyDictionary()


def _turn(limits: QueryLimits) -> asyncio.Semaphore:
    """The queries' turns in the running loop (``QueryLimits.concurrent`` at once, as its first query says: one
    setting, ``DATA_QUERY_CONCURRENT``, for the whole process)."""
    loop = asyncio.get_running_loop()
    turn = _turns.get(loop)
    if turn is None:
        turn = _turns[loop] = asyncio.Semaphore(max(1, limits.concurrent))
    return turn


async def run_query(statement: str, sources: Mapping[str, str | bytes], limits: QueryLimits) -> QueryResult:
    """Run ``statement`` over ``sources`` (query name -> Parquet) off the event loop, in its turn (Stop while it
    waits ends the wait; while it runs, interrupts it)."""
    async with _turn(limits):
        return await _run_query(statement, sources, limits)


async def _run_query(statement: str, sources: Mapping[str, str | bytes], limits: QueryLimits) -> QueryResult:
    query = _Query(limits)
    future = asyncio.ensure_future(asyncio.to_thread(query.run, statement, sources))
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        query.interrupt()
        with contextlib.suppress(BaseException):
            await future
        raise


def _dump(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)


MAX_LISTED_COLUMNS = 40


def _simple(name: str) -> str:
    return name if re.fullmatch(r"[a-z_][a-z0-9_]*", name) else _quote(name)


def listing(tables: Mapping[str, TableInfo]) -> str:
    """The tables as the tools' descriptions list them: ``name(column TYPE, ...)``, the first ones only."""
    shown = []
    for name, t in list(tables.items())[:MAX_LISTED_TABLES]:
        columns = [f"{_simple(c.name)} {c.type}" for c in t.columns[:MAX_LISTED_COLUMNS]]
        if len(t.columns) > MAX_LISTED_COLUMNS:
            columns.append("…")
        shown.append(f"{name}({', '.join(columns)})")
    more = len(tables) - len(shown)
    return "; ".join(shown) + (f"; and {more} more (data_tables lists them all)" if more > 0 else "")


NAMING = (
    "A table is named after its document's file name (a spreadsheet's sheet: <file>__<sheet>); when two of "
    "your knowledge bases hold a table of the same name, it is <kb>__<name>."
)


class DataTables(Tool):
    """``data_tables()``: the tables of the scope's bases, with their columns, types and row counts."""

    def __init__(self, backend: TableBackend, scope: Scope, catalogue: Mapping[str, TableInfo]) -> None:
        self.backend = backend
        self.scope = scope
        self.catalogue = catalogue

    @property
    def spec(self) -> ToolSpec:
        return ToolSpec(
            name="data_tables",
            description=(
                "List the tables of your knowledge bases (their CSV, XLSX and Parquet documents): for each, the "
                "name to use in data_query, its knowledge base and document, its columns with their types, and "
                f"its row count. Tables: {', '.join(self.catalogue)}. {NAMING}"
            ),
            parameters={"type": "object", "properties": {}},
        )

    async def run(self, args: dict[str, Any]) -> ToolOutcome:
        tables = query_names(await self.backend.tables(self.scope.knowledge_bases))
        listed = [
            {
                "name": name,
                "kb": t.kb,
                "document": t.document_id,
                "title": t.title,
                "rows": t.row_count,
                "columns": [{"name": c.name, "type": c.type} for c in t.columns],
            }
            for name, t in tables.items()
        ]
        content = _dump(
            {
                "tables": listed,
                "note": "Query them with data_query: one read-only SELECT (or WITH … SELECT) naming these tables.",
            }
        )
        label = "data_tables: " + (", ".join(tables) or "—")  # the panel shows an "other" action's label as it is
        return ToolOutcome(content, Action(tool="data_tables", kind="other", label=label, count=len(tables)))


class DataQuery(Tool):
    """``data_query(sql)``: one read-only SELECT over the scope's tables, as a small table with its row count."""

    def __init__(
        self, backend: TableBackend, scope: Scope, catalogue: Mapping[str, TableInfo], limits: QueryLimits
    ) -> None:
        self.backend = backend
        self.scope = scope
        self.catalogue = catalogue
        self.limits = limits

    @property
    def spec(self) -> ToolSpec:
        return ToolSpec(
            name="data_query",
            description=(
                "Run one read-only SQL query (DuckDB dialect) over the tables of your knowledge bases: a single "
                "SELECT or WITH … SELECT; anything that writes, attaches, copies, reads files, installs or loads "
                "extensions or changes settings is refused. Tables, with their columns: "
                f"{listing(self.catalogue)}. {NAMING} data_tables also gives their row counts. The result "
                f"comes back as a table of at most {self.limits.max_rows} rows with the total row count; aggregate "
                f"(GROUP BY, SUM, COUNT) rather than reading rows one by one. Time limit: {self.limits.seconds:g} s."
            ),
            parameters={
                "type": "object",
                "properties": {"sql": {"type": "string", "description": "One SELECT (or WITH … SELECT) statement."}},
                "required": ["sql"],
            },
        )

    async def run(self, args: dict[str, Any]) -> ToolOutcome:
        sql = str(args.get("sql", "") or "").strip()
        if not sql:
            raise ToolError("data_query needs 'sql': one SELECT (or WITH … SELECT) statement.")
        if len(sql) > MAX_SQL_CHARS:
            raise ToolError(f"The SQL is too long ({len(sql)} characters; the limit is {MAX_SQL_CHARS}).")
        statement, listed = await asyncio.to_thread(check_statement, sql)
        tables = query_names(await self.backend.tables(self.scope.knowledge_bases))
        available = ", ".join(tables) or "none"
        named = set(tables) if listed is None else listed
        files = sorted(n for n in named if _is_path(n))
        if files:
            raise ToolError(
                f"data_query cannot read files: {', '.join(files)} is not a table of your knowledge bases. "
                f"Tables you can query: {available}."
            )
        missing = sorted(n for n in named if n.lower() not in tables)
        if missing:
            raise OutOfScope(
                f"No table {', '.join(repr(n) for n in missing)} among the tables of your knowledge bases "
                f"({', '.join(self.scope.knowledge_bases) or 'none'}): it does not exist or is outside your scope. "
                f"Tables you can query: {available}."
            )
        used = {n.lower(): tables[n.lower()] for n in sorted(named)}
        sources = {name: await self.backend.parquet(t) for name, t in used.items()}
        result = await run_query(statement, sources, self.limits)
        payload: dict[str, object] = {
            "row_count": result.row_count,
            "columns": list(result.columns),
            "table": markdown_table(result.columns, result.rows, self.limits.max_cell_chars),
        }
        if result.row_count > len(result.rows):
            payload["note"] = (
                f"Truncated: showing the first {len(result.rows)} of {result.row_count} rows (the row limit). "
                "Aggregate, filter or add a LIMIT to see what matters."
            )
        seen: dict[str, Source] = {}
        for t in used.values():
            seen.setdefault(t.document_id, Source(id=t.document_id, title=t.title, where=t.kb))
        return ToolOutcome(
            _dump(payload),
            Action(tool="data_query", kind="query", label=" ".join(statement.split())[:1000], count=result.row_count),
            tuple(seen.values()),
        )


@dataclass(frozen=True, slots=True)
class TableCatalogue:
    """The tables each base held when the toolbox was made: which scopes get the table tools, and what their
    descriptions list (a query reads the tables as they are at that moment)."""

    tables: Mapping[str, Sequence[TableInfo]] = field(default_factory=dict)

    def of(self, scope: Scope) -> dict[str, TableInfo]:
        return query_names([t for kb in scope.knowledge_bases for t in self.tables.get(kb, ())])


def table_tools(backend: TableBackend, catalogue: TableCatalogue, limits: QueryLimits) -> ToolFactory:
    """A factory giving ``data_tables`` and ``data_query`` to scopes whose knowledge bases hold tables."""

    def build(scope: Scope) -> list[Tool]:
        names = catalogue.of(scope)
        if not names:
            return []
        return [DataTables(backend, scope, names), DataQuery(backend, scope, names, limits)]

    return build


__all__ = [
    "Column",
    "DataQuery",
    "DataTables",
    "QueryLimits",
    "QueryResult",
    "TableBackend",
    "TableCatalogue",
    "TableInfo",
    "check_statement",
    "markdown_table",
    "query_names",
    "run_query",
    "table_tools",
]
