"""``data_query``'s SQL: one read-only statement checked with DuckDB's own parser, and a result as Markdown.

``check_statement`` lets through exactly one ``SELECT`` (or ``WITH … SELECT``) and names the tables it reads;
``markdown_table`` renders a result as a small table whose cells stay on one line.
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Sequence
from typing import Any

from .errors import ToolError

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


def quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def sql_literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def first_line(e: BaseException) -> str:
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
        raise ToolError(f"The SQL could not be parsed: {first_line(e)}") from e
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


def is_path(name: str) -> bool:
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


__all__ = ["check_statement", "first_line", "is_path", "markdown_table", "quote_ident", "sql_literal"]
