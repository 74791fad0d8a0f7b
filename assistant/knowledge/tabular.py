"""Tables from uploads: CSV and Parquet read by DuckDB's built-in readers, XLSX by openpyxl (one table per sheet).

Like ``extract``, this runs in the extraction child under its limits and imports nothing of Django. The
child may write no file (``RLIMIT_FSIZE`` is 0): DuckDB reads the upload through ``/dev/fd/N`` (a memfd
the parent filled, or a pipe this process feeds) and writes each table's Parquet file into a pipe that a
thread of this process reads. DuckDB runs in memory with one thread, no extension installed or loaded
automatically, nothing spilled to disk, and a memory limit: a Parquet file or a CSV that expands past it
fails as ``expanded``. An .xlsx is decompressed first through ``decoding.read_zip``'s counting reader.

Each table comes back as ``TableData``: its sheet (XLSX), columns with their DuckDB types, row count,
Parquet bytes, and a text rendering of its rows (capped) for the full-text index.

A short row of a CSV gets NULLs for its missing cells (``null_padding``) rather than failing the file.
French formats are read as such: a CSV's delimiter is sniffed (``;`` included), its encoding is UTF-8 or
Windows-1252; when it is not comma-separated and holds text columns, it is read again with
``decimal_separator=','`` and the reading with more typed columns is kept; then text columns whose every
value is a number written with a decimal comma and spaces between thousands (``1 234,50``, ``12 000 €``)
become numbers, and those whose every value is a ``dd/mm/yyyy`` date become dates.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import os
import threading
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import duckdb

    from .decoding import Limits

MAX_COLUMNS = 1000
INSERT_BATCH = 500
# A number in the French way: optional sign, thousands split by spaces, decimal comma, an optional euro sign.
FRENCH_NUMBER = r"^[+-]?(\d{1,3}([ \x{00A0}\x{202F}]\d{3})+|\d+)(,\d+)?[ \x{00A0}]?€?$"
FRENCH_DATE = r"^\d{1,2}/\d{1,2}/\d{4}$"
NUMERIC = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "FLOAT", "DOUBLE", "DECIMAL", "UBIGINT")


@dataclass(frozen=True, slots=True)
class TableData:
    sheet: str
    columns: tuple[tuple[str, str], ...]
    row_count: int
    parquet: bytes
    text: str


def _connect(limits: Limits) -> duckdb.DuckDBPyConnection:
    import duckdb

    memory_mb = max(64, int(limits.max_expanded_bytes * 2 / 1024 / 1024))
    return duckdb.connect(
        ":memory:",
        config={
            "autoinstall_known_extensions": False,
            "autoload_known_extensions": False,
            "allow_community_extensions": False,
            "temp_directory": "",
            "memory_limit": f"{memory_mb}MB",
            "threads": 1,
        },
    )


@contextlib.contextmanager
def _fed(data: bytes) -> Iterator[str]:
    """A path DuckDB reads ``data`` from once: a pipe a thread writes into."""
    read_end, write_end = os.pipe()

    def feed() -> None:
        with contextlib.suppress(BrokenPipeError, OSError), os.fdopen(write_end, "wb") as f:
            f.write(data)

    thread = threading.Thread(target=feed, daemon=True)
    thread.start()
    try:
        yield f"/dev/fd/{read_end}"
    finally:
        os.close(read_end)
        thread.join()


def _parquet(con: duckdb.DuckDBPyConnection, table: str) -> bytes:
    """The table as Parquet bytes, written into a pipe this process reads (no file is written)."""
    read_end, write_end = os.pipe()
    chunks: list[bytes] = []

    def drain() -> None:
        with os.fdopen(read_end, "rb") as f:
            while chunk := f.read(1024 * 1024):
                chunks.append(chunk)

    thread = threading.Thread(target=drain, daemon=True)
    thread.start()
    try:
        con.execute(f"COPY {table} TO '/dev/fd/{write_end}' (FORMAT parquet, COMPRESSION zstd)")
    finally:
        os.close(write_end)
        thread.join()
    return b"".join(chunks)


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _columns(con: duckdb.DuckDBPyConnection, table: str) -> list[tuple[str, str]]:
    return [(str(r[0]), str(r[1])) for r in con.execute(f"DESCRIBE {table}").fetchall()]


def _varchar_count(columns: Sequence[tuple[str, str]]) -> int:
    return sum(1 for _, kind in columns if kind == "VARCHAR")


def _refine(con: duckdb.DuckDBPyConnection, table: str) -> None:
    """Text columns that are all French numbers or dd/mm/yyyy dates become numbers or dates."""
    columns = _columns(con, table)
    exprs: list[str] = []
    changed = False
    for name, kind in columns:
        col = _q(name)
        if kind != "VARCHAR":
            exprs.append(col)
            continue
        filled = f"{col} IS NOT NULL AND trim({col}) <> ''"
        number, comma, date, count = con.execute(
            f"SELECT bool_and(regexp_full_match(trim({col}), ?)) FILTER (WHERE {filled}), "
            f"bool_or(contains({col}, ',')) FILTER (WHERE {filled}), "
            f"bool_and(regexp_full_match(trim({col}), ?) AND try_strptime(trim({col}), '%d/%m/%Y') IS NOT NULL) "
            f"FILTER (WHERE {filled}), count(*) FILTER (WHERE {filled}) FROM {table}",
            [FRENCH_NUMBER, FRENCH_DATE],
        ).fetchone() or (None, None, None, 0)
        if count and number:
            digits = f"replace(regexp_replace(trim({col}), '[ \u00a0\u202f€]', '', 'g'), ',', '.')"
            cast = "DOUBLE" if comma else "BIGINT"
            exprs.append(f"CASE WHEN {filled} THEN TRY_CAST({digits} AS {cast}) END AS {col}")
            changed = True
        elif count and date:
            exprs.append(f"CASE WHEN {filled} THEN CAST(try_strptime(trim({col}), '%d/%m/%Y') AS DATE) END AS {col}")
            changed = True
        else:
            exprs.append(col)
    if changed:
        con.execute(f"CREATE TABLE refined AS SELECT {', '.join(exprs)} FROM {table}")
        con.execute(f"DROP TABLE {table}")
        con.execute(f"ALTER TABLE refined RENAME TO {table}")


def _decode(data: bytes) -> bytes:
    """The CSV as UTF-8: it is UTF-8 (a BOM dropped) or Windows-1252, as French spreadsheets export it."""
    from .decoding import NOT_TEXT, NOT_UTF8, ExtractionError

    if b"\x00" in data[:8192]:
        raise ExtractionError(NOT_TEXT)
    for encoding in ("utf-8-sig", "cp1252"):
        try:
            return data.decode(encoding).encode("utf-8")
        except UnicodeDecodeError:
            continue
    raise ExtractionError(NOT_UTF8)


def _render(con: duckdb.DuckDBPyConnection, table: str, budget: Any, cap: int) -> str:
    """The table's rows as text, one line each (``a | b | c``), until ``cap`` characters."""
    columns = [name for name, _ in _columns(con, table)]
    lines = [" | ".join(columns)]
    used = len(lines[0])
    total = 0
    shown = 0
    cursor = con.execute(f"SELECT * FROM {table}")
    full = False
    while rows := cursor.fetchmany(1000):
        for row in rows:
            total += 1
            if full:
                continue
            line = " | ".join("" if v is None else " ".join(str(v).split()) for v in row)
            if used + len(line) + 1 > cap:
                full = True
                continue
            lines.append(line)
            used += len(line) + 1
            shown += 1
    if total > shown:
        lines.append(f"… {total - shown} more rows (the whole table is queried with data_query).")
    text = "\n".join(lines)
    budget.add(len(text))
    return text


def _table(con: duckdb.DuckDBPyConnection, table: str, sheet: str, budget: Any, limits: Limits) -> TableData:
    columns = _columns(con, table)
    count = con.execute(f"SELECT count(*) FROM {table}").fetchone()
    text = _render(con, table, budget, limits.max_table_text_chars)
    return TableData(sheet, tuple(columns), int(count[0]) if count else 0, _parquet(con, table), text)


def _failure(e: BaseException, kind: str, limits: Limits) -> Exception:
    import duckdb

    from .decoding import CORRUPT, EXPANDED, ExtractionError

    if isinstance(e, duckdb.OutOfMemoryException):
        return ExtractionError(EXPANDED, limit_mb=limits.max_expanded_mb)
    return ExtractionError(CORRUPT, kind=kind)


@contextlib.contextmanager
def _session(kind: str, limits: Limits, *, any_error_corrupt: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
    """A DuckDB connection to read one file of ``kind`` with, closed after; DuckDB's errors become extraction
    errors (and, with ``any_error_corrupt``, any other error but memory: the file is corrupt)."""
    import duckdb

    from .decoding import CORRUPT, ExtractionError

    con = _connect(limits)
    try:
        yield con
    except (ExtractionError, MemoryError):
        raise
    except duckdb.Error as e:
        raise _failure(e, kind, limits) from e
    except Exception as e:
        if not any_error_corrupt:
            raise
        raise ExtractionError(CORRUPT, kind=kind) from e
    finally:
        con.close()


def _only_table(con: duckdb.DuckDBPyConnection, limits: Limits) -> list[TableData]:
    """Table ``t`` as the file's one table; refused with too many columns."""
    from .decoding import ExtractionError, text_budget

    columns = len(_columns(con, "t"))
    if columns > MAX_COLUMNS:
        raise ExtractionError("too_many_columns", columns=columns, limit=MAX_COLUMNS)
    return [_table(con, "t", "", text_budget(limits), limits)]


def read_csv(data: bytes, limits: Limits) -> list[TableData]:
    from .decoding import expanded_budget

    text = _decode(data)
    expanded_budget(limits).add(len(text))
    with _session("csv", limits) as con:
        with _fed(text) as path:
            sniffed = con.execute(f"SELECT Delimiter FROM sniff_csv('{path}', null_padding=true)").fetchone()
        delimiter = str(sniffed[0]) if sniffed else ","
        with _fed(text) as path:
            con.execute(f"CREATE TABLE t AS SELECT * FROM read_csv('{path}', null_padding=true)")
        if delimiter != "," and _varchar_count(_columns(con, "t")):
            # A decimal comma is possible only when the comma does not separate fields.
            with _fed(text) as path:
                con.execute(
                    f"CREATE TABLE c AS SELECT * FROM read_csv('{path}', null_padding=true, decimal_separator=',')"
                )
            if _varchar_count(_columns(con, "c")) < _varchar_count(_columns(con, "t")):
                con.execute("DROP TABLE t")
                con.execute("ALTER TABLE c RENAME TO t")
            else:
                con.execute("DROP TABLE c")
        _refine(con, "t")
        return _only_table(con, limits)


def read_parquet(path: str, limits: Limits) -> list[TableData]:
    """A Parquet file read by DuckDB from ``path`` (the parent's memfd), rewritten as this server writes them."""
    with _session("parquet", limits) as con:
        con.execute(f"CREATE TABLE t AS SELECT * FROM read_parquet('{path}')")
        return _only_table(con, limits)


def _kind(values: Sequence[Any]) -> str:
    """The DuckDB type of a sheet's column from its cells' Python values (text when they are mixed)."""
    kinds = {type(v) for v in values if v is not None and v != ""}
    if not kinds:
        return "VARCHAR"
    if kinds == {bool}:
        return "BOOLEAN"
    if kinds == {int}:
        return "BIGINT"
    if kinds <= {int, float}:
        return "DOUBLE"
    if kinds == {dt.datetime}:
        # A spreadsheet's dates come as datetimes: at midnight each, they are dates.
        if all(v.time() == dt.time() for v in values if isinstance(v, dt.datetime)):
            return "DATE"
        return "TIMESTAMP"
    if kinds == {dt.date}:
        return "DATE"
    if kinds <= {dt.datetime, dt.date}:
        return "TIMESTAMP"
    if kinds == {dt.time}:
        return "TIME"
    return "VARCHAR"


def _value(value: Any, kind: str) -> Any:
    if value is None or value == "":
        return None
    if kind == "VARCHAR":
        return value.isoformat() if isinstance(value, dt.date | dt.time) else str(value)
    if kind == "TIMESTAMP" and type(value) is dt.date:
        return dt.datetime.combine(value, dt.time())
    if kind == "DATE" and isinstance(value, dt.datetime):
        return value.date()
    if kind == "DOUBLE":
        return float(value)
    return value


def _names(header: Sequence[Any]) -> list[str]:
    names: list[str] = []
    for i, cell in enumerate(header, 1):
        base = " ".join(str(cell).split()) if cell not in (None, "") else f"column_{i}"
        name, n = base, 2
        while name.lower() in (x.lower() for x in names):
            name, n = f"{base}_{n}", n + 1
        names.append(name)
    return names


def read_xlsx(data: bytes, limits: Limits) -> tuple[str, list[TableData]]:
    """The workbook's title and one table per sheet that holds something (its first row names the columns)."""
    import openpyxl

    from .decoding import ExtractionError, expanded_budget, read_zip, text_budget

    # Decompressed first through the counting reader: openpyxl then reads parts known to fit.
    read_zip(data, expanded_budget(limits), "xlsx")
    chars = text_budget(limits)
    tables: list[TableData] = []
    # Any other error is a missing part, bad XML, a value openpyxl cannot read: a corrupt file.
    with _session("xlsx", limits, any_error_corrupt=True) as con:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            book = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True)
        title = str(book.properties.title or "") if book.properties else ""
        for sheet in book.worksheets:
            rows = [list(r) for r in sheet.iter_rows(values_only=True)]
            rows = [r for r in rows if any(v not in (None, "") for v in r)]
            if not rows:
                continue
            width = max(max((i + 1 for i, v in enumerate(r) if v not in (None, "")), default=0) for r in rows)
            if width > MAX_COLUMNS:
                raise ExtractionError("too_many_columns", columns=width, limit=MAX_COLUMNS)
            rows = [(r + [None] * width)[:width] for r in rows]
            names = _names(rows[0])
            body = rows[1:]
            kinds = [_kind([r[i] for r in body]) for i in range(width)]
            con.execute(
                f"CREATE OR REPLACE TABLE t ({', '.join(f'{_q(n)} {k}' for n, k in zip(names, kinds, strict=True))})"
            )
            marks = "(" + ", ".join("?" for _ in names) + ")"
            for start in range(0, len(body), INSERT_BATCH):
                batch = body[start : start + INSERT_BATCH]
                values = [_value(v, kinds[i]) for r in batch for i, v in enumerate(r)]
                con.execute(f"INSERT INTO t VALUES {', '.join(marks for _ in batch)}", values)
            tables.append(_table(con, "t", str(sheet.title), chars, limits))
        book.close()
    return title, tables


def table_text(tables: Sequence[TableData]) -> str:
    return "\n\n".join(t.text for t in tables)


__all__ = ["TableData", "read_csv", "read_parquet", "read_xlsx", "table_text"]
