"""Full-text search over documents, one interface for two databases.

- SQLite (the embedded default): an FTS5 table ``knowledge_document_fts`` over ``knowledge_document``
  (external content, kept in sync by triggers), ranked by ``bm25()`` with the title weighted above the
  text, snippets by ``snippet()``. Accents are folded (``remove_diacritics``).
- PostgreSQL: a weighted ``tsvector`` over title (A) and text (B) with the ``simple`` configuration
  (no stemming: bases mix French and English), stored in a generated column ``search_vector`` that
  PostgreSQL keeps in step with the row (``PgVector``), indexed by a GIN index on that column; ranked by
  ``ts_rank``, snippets by ``ts_headline``, the count of matches in the same statement. A stored vector
  is read, not recomputed: an expression index (migration 0003's) still made every ranked row parse its
  text again, about 25 ms a search of the demo's 45 documents against under 1 ms.

Both match documents containing any query word, as a prefix (``factur`` finds ``factures``), and
highlight matches with ``**``. ``search`` always filters on one organisation and one knowledge base,
and on ready documents only: an upload still processing (or failed) has an index entry for its
provisional title, never a hit.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Any

from django.db import connection
from django.db.backends.base.base import BaseDatabaseWrapper

from assistant.engine.tools import Hit

CONFIG = "simple"
FTS_TABLE = "knowledge_document_fts"
INDEX_NAME = "knowledge_document_fts"
MAX_TERMS = 32
HIGHLIGHT = "**"
READY = "ready"  # Document.READY (not imported: migration 0003 imports this module)


@dataclass(frozen=True)
class Fts5Table:
    """An FTS5 table ``name`` over two text columns of ``content`` (external content, kept in sync by triggers,
    accents folded), and how to create, rebuild and drop it. ``IF NOT EXISTS`` everywhere: creation runs after
    every migrate, because a migration that rebuilds the content table drops its triggers."""

    name: str
    content: str
    rowid: str
    title: str
    text: str

    @property
    def create_sql(self) -> str:
        return (
            f"CREATE VIRTUAL TABLE IF NOT EXISTS {self.name} USING fts5({self.title}, {self.text}, "
            f"content='{self.content}', content_rowid='{self.rowid}', tokenize='unicode61 remove_diacritics 2')"
        )

    @property
    def triggers(self) -> dict[str, str]:
        n, c, r, cols = self.name, self.content, self.rowid, f"{self.title}, {self.text}"
        new = f"new.{r}, new.{self.title}, new.{self.text}"
        old = f"'delete', old.{r}, old.{self.title}, old.{self.text}"
        return {
            f"{n}_ai": f"""CREATE TRIGGER IF NOT EXISTS {n}_ai AFTER INSERT ON {c} BEGIN
  INSERT INTO {n}(rowid, {cols}) VALUES ({new});
END""",
            f"{n}_ad": f"""CREATE TRIGGER IF NOT EXISTS {n}_ad AFTER DELETE ON {c} BEGIN
  INSERT INTO {n}({n}, rowid, {cols}) VALUES ({old});
END""",
            f"{n}_au": f"""CREATE TRIGGER IF NOT EXISTS {n}_au AFTER UPDATE OF {cols} ON {c} BEGIN
  INSERT INTO {n}({n}, rowid, {cols}) VALUES ({old});
  INSERT INTO {n}(rowid, {cols}) VALUES ({new});
END""",
        }

    @property
    def rebuild_sql(self) -> str:
        return f"INSERT INTO {self.name}({self.name}) VALUES ('rebuild')"

    def create(self, conn: BaseDatabaseWrapper) -> None:
        """Create the table and its triggers (where missing) and rebuild the index from the content table."""
        with conn.cursor() as cursor:
            cursor.execute(self.create_sql)
            for sql in self.triggers.values():
                cursor.execute(sql)
            cursor.execute(self.rebuild_sql)

    def present(self, conn: BaseDatabaseWrapper) -> bool:
        """Whether the table and all its triggers exist."""
        with conn.cursor() as cursor:
            cursor.execute(
                "SELECT name FROM sqlite_master WHERE type IN ('table', 'trigger') AND name LIKE %s", [self.name + "%"]
            )
            names = {row[0] for row in cursor.fetchall()}
        return self.name in names and self.triggers.keys() <= names

    def drop(self, conn: BaseDatabaseWrapper) -> None:
        with conn.cursor() as cursor:
            for name in self.triggers:
                cursor.execute(f"DROP TRIGGER IF EXISTS {name}")
            cursor.execute(f"DROP TABLE IF EXISTS {self.name}")


@dataclass(frozen=True)
class PgVector:
    """A stored generated ``tsvector`` column ``column`` of ``table``: ``title`` weighted A, ``text`` B, in the
    ``simple`` configuration, computed by PostgreSQL on every insert and update of the row (nothing in Python
    writes it, and Django's models do not list it: their queries name their columns); a GIN index ``index`` on
    it. A migration that changes the type of ``title`` or ``text`` must drop the column first (``drop``)."""

    table: str
    title: str
    text: str
    index: str
    column: str = "search_vector"

    @property
    def expression(self) -> str:
        return (
            f"setweight(to_tsvector('{CONFIG}', coalesce({self.title}, '')), 'A') || "
            f"setweight(to_tsvector('{CONFIG}', coalesce({self.text}, '')), 'B')"
        )

    def create(self, conn: BaseDatabaseWrapper) -> None:
        with conn.cursor() as cursor:
            cursor.execute(
                f"ALTER TABLE {self.table} ADD COLUMN IF NOT EXISTS {self.column} tsvector "
                f"GENERATED ALWAYS AS ({self.expression}) STORED"
            )
            cursor.execute(f"CREATE INDEX IF NOT EXISTS {self.index} ON {self.table} USING gin ({self.column})")

    def drop(self, conn: BaseDatabaseWrapper) -> None:
        with conn.cursor() as cursor:
            cursor.execute(f"DROP INDEX IF EXISTS {self.index}")
            cursor.execute(f"ALTER TABLE {self.table} DROP COLUMN IF EXISTS {self.column}")

    def replace(self, schema_editor: Any, model: Any, expression_index: Any) -> None:
        """Migrate forwards on PostgreSQL (nothing elsewhere): ``expression_index`` (a GIN index on the vector's
        expression, of ``model``) dropped, this column and its index made."""
        if schema_editor.connection.vendor == "postgresql":
            schema_editor.remove_index(model, expression_index)
            self.create(schema_editor.connection)

    def restore(self, schema_editor: Any, model: Any, expression_index: Any) -> None:
        """``replace`` undone."""
        if schema_editor.connection.vendor == "postgresql":
            self.drop(schema_editor.connection)
            schema_editor.add_index(model, expression_index)


def tsquery(terms: list[str]) -> str:
    """The text of a ``to_tsquery``: any of the words, each as a prefix (the words are letters and digits only:
    ``query_terms``)."""
    return " | ".join(f"'{t}':*" for t in terms)


def headline_options(conn: BaseDatabaseWrapper, **options: object) -> str:
    """``ts_headline``'s options string, each value quoted as a literal (as Django's ``SearchHeadline`` does)."""
    compose = conn.ops.compose_sql  # type: ignore[attr-defined]  # PostgreSQL's operations only
    return ", ".join(compose(f"{name}=%s", [value]) for name, value in options.items())


def weighted_vector(title: str, text: str) -> Any:
    """The PostgreSQL vector of ``title`` (weight A) and ``text`` (B), as an expression: what migration 0003's
    GIN index (``gin_index``) was on, before the stored column (``PgVector``) replaced it."""
    from django.contrib.postgres.search import SearchVector

    return SearchVector(title, weight="A", config=CONFIG) + SearchVector(text, weight="B", config=CONFIG)


def gin_index(title: str, text: str, name: str) -> Any:
    from django.contrib.postgres.indexes import GinIndex

    return GinIndex(weighted_vector(title, text), name=name)


FTS = Fts5Table(FTS_TABLE, content="knowledge_document", rowid="id", title="title", text="text")
SQLITE_TRIGGERS = FTS.triggers


def ensure_sqlite(conn: BaseDatabaseWrapper) -> bool:
    """Create the FTS5 table and its triggers where missing; rebuild the index if anything was. True if it did."""
    if FTS.present(conn):
        return False
    FTS.create(conn)
    return True


def drop_sqlite(conn: BaseDatabaseWrapper) -> None:
    FTS.drop(conn)


PG_VECTOR = PgVector("knowledge_document", title="title", text="text", index=INDEX_NAME)


def pg_index() -> Any:
    """Migration 0003's expression index (0006 replaces it by ``PG_VECTOR``)."""
    return gin_index("title", "text", INDEX_NAME)


def _fold(text: str) -> str:
    folded = unicodedata.normalize("NFKD", text.lower())
    return "".join(c for c in folded if not unicodedata.combining(c))


def query_terms(query: str, fold: bool) -> list[str]:
    """The words of a query (letters and digits only, so nothing reaches the query syntax), deduplicated."""
    words = re.findall(r"[^\W_]+", _fold(query) if fold else query.lower())
    return list(dict.fromkeys(words))[:MAX_TERMS]


def search(
    organisation_id: int, kb: str, query: str, limit: int, pks: list[int] | None = None
) -> tuple[list[Hit], int]:
    """Ranked hits in one organisation's knowledge base ``kb``, and how many documents match; with ``pks``
    (chosen documents), among those documents only."""
    if pks is not None and not pks:
        return [], 0
    if connection.vendor == "postgresql":
        return _search_postgresql(organisation_id, kb, query, limit, pks)
    if connection.vendor == "sqlite":
        return _search_sqlite(organisation_id, kb, query, limit, pks)
    raise NotImplementedError(f"No full-text search for the {connection.vendor} database.")


def _search_sqlite(
    organisation_id: int, kb: str, query: str, limit: int, pks: list[int] | None
) -> tuple[list[Hit], int]:
    terms = query_terms(query, fold=True)
    if not terms:
        return [], 0
    match = " OR ".join(f'"{t}"*' if len(t) > 2 else f'"{t}"' for t in terms)
    where = f"""FROM {FTS_TABLE}
        JOIN knowledge_document d ON d.id = {FTS_TABLE}.rowid
        JOIN knowledge_knowledgebase kb ON kb.id = d.knowledge_base_id
        WHERE {FTS_TABLE} MATCH %s AND kb.organisation_id = %s AND kb.slug = %s AND d.status = %s"""
    params: list[Any] = [match, organisation_id, kb, READY]
    if pks is not None:
        where += f" AND d.id IN ({', '.join('%s' for _ in pks)})"
        params += pks
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) {where}", params)
        total = int(cursor.fetchone()[0])
        if not total:
            return [], 0
        cursor.execute(
            f"""SELECT d.id, d.title,
                   snippet({FTS_TABLE}, 1, %s, %s, '…', 24),
                   bm25({FTS_TABLE}, 5.0, 1.0) AS rank
            {where} ORDER BY rank, d.id LIMIT %s""",
            [HIGHLIGHT, HIGHLIGHT, *params, limit],
        )
        rows = cursor.fetchall()
    hits = [
        Hit(id=f"doc-{pk}", kb=kb, title=title, snippet=snippet, score=round(-float(rank), 4))
        for pk, title, snippet, rank in rows
    ]
    return hits, total


def _search_postgresql(
    organisation_id: int, kb: str, query: str, limit: int, pks: list[int] | None
) -> tuple[list[Hit], int]:
    terms = query_terms(query, fold=False)
    if not terms:
        return [], 0
    sql, params = pg_query(organisation_id, kb, terms, limit, pks)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    if not rows:
        return [], 0
    hits = [
        Hit(id=f"doc-{pk}", kb=kb, title=title, snippet=snippet, score=round(float(rank), 4))
        for pk, title, snippet, rank, _total in rows
    ]
    return hits, int(rows[0][4])


def pg_query(
    organisation_id: int, kb: str, terms: list[str], limit: int, pks: list[int] | None = None
) -> tuple[str, list[Any]]:
    """One statement: the best ``limit`` matches of the stored vectors with the count of all matches (a window
    over the matches, before the limit), then the snippets of those rows only."""
    v = PG_VECTOR.column
    where = f"d.{v} @@ q AND kb.organisation_id = %s AND kb.slug = %s AND d.status = %s"
    params: list[Any] = [CONFIG, tsquery(terms), organisation_id, kb, READY]
    if pks is not None:
        where += f" AND d.id IN ({', '.join('%s' for _ in pks)})"
        params += pks
    options = headline_options(
        connection,
        StartSel=HIGHLIGHT,
        StopSel=HIGHLIGHT,
        MaxWords=35,
        MinWords=15,
        MaxFragments=2,
        FragmentDelimiter=" … ",
    )
    sql = f"""SELECT top.id, top.title, ts_headline(%s, d.text, to_tsquery(%s, %s), %s), top.rank, top.total
        FROM (
            SELECT d.id, d.title, ts_rank(d.{v}, q) AS rank, count(*) OVER () AS total
            FROM knowledge_document d JOIN knowledge_knowledgebase kb ON kb.id = d.knowledge_base_id,
                to_tsquery(%s, %s) q
            WHERE {where}
            ORDER BY rank DESC, d.id LIMIT %s
        ) top JOIN knowledge_document d ON d.id = top.id
        ORDER BY top.rank DESC, top.id"""
    return sql, [CONFIG, CONFIG, tsquery(terms), options, *params, limit]
