"""Full-text search over documents, one interface for two databases.

- SQLite (the embedded default): an FTS5 table ``knowledge_document_fts`` over ``knowledge_document``
  (external content, kept in sync by triggers), ranked by ``bm25()`` with the title weighted above the
  text, snippets by ``snippet()``. Accents are folded (``remove_diacritics``).
- PostgreSQL: a weighted ``tsvector`` over title (A) and text (B) with the ``simple`` configuration
  (no stemming: bases mix French and English), indexed by a GIN index on that expression; ranked by
  ``ts_rank`` (``SearchRank``), snippets by ``ts_headline`` (``SearchHeadline``).

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


def weighted_vector(title: str, text: str) -> Any:
    """The PostgreSQL vector of ``title`` (weight A) and ``text`` (B); a GIN index on this exact expression
    (``gin_index``) serves the queries."""
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


def pg_vector() -> Any:
    """The weighted document vector; the GIN index is on this exact expression, so queries use it."""
    return weighted_vector("title", "text")


def pg_index() -> Any:
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
    from django.contrib.postgres.search import SearchHeadline, SearchQuery, SearchRank

    from .models import Document

    terms = query_terms(query, fold=False)
    if not terms:
        return [], 0
    tsquery = SearchQuery(" | ".join(f"'{t}':*" for t in terms), search_type="raw", config=CONFIG)
    vector = pg_vector()
    matching = (
        Document.objects.filter(
            knowledge_base__organisation_id=organisation_id, knowledge_base__slug=kb, status=Document.READY
        )
        .annotate(document=vector)
        .filter(document=tsquery)
    )
    if pks is not None:
        matching = matching.filter(pk__in=pks)
    total = matching.count()
    if not total:
        return [], 0
    rows = (
        matching.annotate(
            rank=SearchRank(vector, tsquery),
            snippet=SearchHeadline(
                "text",
                tsquery,
                config=CONFIG,
                start_sel=HIGHLIGHT,
                stop_sel=HIGHLIGHT,
                max_words=35,
                min_words=15,
                max_fragments=2,
                fragment_delimiter=" … ",
            ),
        )
        .order_by("-rank", "pk")
        .values_list("pk", "title", "snippet", "rank")[:limit]
    )
    hits = [
        Hit(id=f"doc-{pk}", kb=kb, title=title, snippet=snippet, score=round(float(rank), 4))
        for pk, title, snippet, rank in rows
    ]
    return hits, total
