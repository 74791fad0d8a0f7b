"""Read-only SQL over the tables of a scope's knowledge bases: ``data_tables`` and ``data_query``, on DuckDB.

A table is a CSV, XLSX sheet or Parquet document of a base, stored as a Parquet file when it was
extracted; the Django side gives the tools a ``TableBackend`` over its own organisation's ready
tables. The tools only ever see the tables of the caller's own bases (``Scope.knowledge_bases``).

``sql.py`` checks a statement and renders its result; ``query.py`` runs it on DuckDB.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from .errors import OutOfScope, ToolError
from .events import Action, Source
from .query import QueryLimits, run_query
from .scope import Scope
from .sql import check_statement, is_path, markdown_table, quote_ident
from .tools import Tool, ToolFactory, ToolOutcome
from .turns import Turn
from .types import ToolSpec

MAX_SQL_CHARS = 20_000
MAX_LISTED_TABLES = 30


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


def _dump(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)


MAX_LISTED_COLUMNS = 40


def _simple(name: str) -> str:
    return name if re.fullmatch(r"[a-z_][a-z0-9_]*", name) else quote_ident(name)


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
    def turn(self) -> Turn:
        return Turn("data_query", self.limits.concurrent)

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
        files = sorted(n for n in named if is_path(n))
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
    "TableBackend",
    "TableCatalogue",
    "TableInfo",
    "query_names",
    "table_tools",
]
