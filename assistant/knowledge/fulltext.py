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

# The FTS5 table, its triggers and a rebuild. ``IF NOT EXISTS`` everywhere: ``ensure_sqlite`` runs
# after every migrate, because a migration that rebuilds ``knowledge_document`` drops its triggers.
SQLITE_TABLE = (
    f"CREATE VIRTUAL TABLE IF NOT EXISTS {FTS_TABLE} USING fts5("
    "title, text, content='knowledge_document', content_rowid='id', tokenize='unicode61 remove_diacritics 2')"
)
SQLITE_TRIGGERS = {
    f"{FTS_TABLE}_ai": f"""CREATE TRIGGER IF NOT EXISTS {FTS_TABLE}_ai AFTER INSERT ON knowledge_document BEGIN
  INSERT INTO {FTS_TABLE}(rowid, title, text) VALUES (new.id, new.title, new.text);
END""",
    f"{FTS_TABLE}_ad": f"""CREATE TRIGGER IF NOT EXISTS {FTS_TABLE}_ad AFTER DELETE ON knowledge_document BEGIN
  INSERT INTO {FTS_TABLE}({FTS_TABLE}, rowid, title, text) VALUES ('delete', old.id, old.title, old.text);
END""",
    f"{FTS_TABLE}_au": f"""CREATE TRIGGER IF NOT EXISTS {FTS_TABLE}_au AFTER UPDATE OF title, text ON knowledge_document BEGIN
  INSERT INTO {FTS_TABLE}({FTS_TABLE}, rowid, title, text) VALUES ('delete', old.id, old.title, old.text);
  INSERT INTO {FTS_TABLE}(rowid, title, text) VALUES (new.id, new.title, new.text);
END""",
}
SQLITE_REBUILD = f"INSERT INTO {FTS_TABLE}({FTS_TABLE}) VALUES ('rebuild')"


def ensure_sqlite(conn: BaseDatabaseWrapper) -> bool:
    """Create the FTS5 table and its triggers where missing; rebuild the index if anything was. True if it did."""
    with conn.cursor() as cursor:
        cursor.execute(
            "SELECT name FROM sqlite_master WHERE type IN ('table', 'trigger') AND name LIKE %s", [FTS_TABLE + "%"]
        )
        present = {row[0] for row in cursor.fetchall()}
        if FTS_TABLE in present and SQLITE_TRIGGERS.keys() <= present:
            return False
        cursor.execute(SQLITE_TABLE)
        for sql in SQLITE_TRIGGERS.values():
            cursor.execute(sql)
        cursor.execute(SQLITE_REBUILD)
    return True


def drop_sqlite(conn: BaseDatabaseWrapper) -> None:
    with conn.cursor() as cursor:
        for name in SQLITE_TRIGGERS:
            cursor.execute(f"DROP TRIGGER IF EXISTS {name}")
        cursor.execute(f"DROP TABLE IF EXISTS {FTS_TABLE}")


def pg_vector() -> Any:
    """The weighted document vector; the GIN index is on this exact expression, so queries use it."""
    from django.contrib.postgres.search import SearchVector

    return SearchVector("title", weight="A", config=CONFIG) + SearchVector("text", weight="B", config=CONFIG)


def pg_index() -> Any:
    from django.contrib.postgres.indexes import GinIndex

    return GinIndex(pg_vector(), name=INDEX_NAME)


def _fold(text: str) -> str:
    folded = unicodedata.normalize("NFKD", text.lower())
    return "".join(c for c in folded if not unicodedata.combining(c))


def query_terms(query: str, fold: bool) -> list[str]:
    """The words of a query (letters and digits only, so nothing reaches the query syntax), deduplicated."""
    words = re.findall(r"[^\W_]+", _fold(query) if fold else query.lower())
    return list(dict.fromkeys(words))[:MAX_TERMS]


def search(organisation_id: int, kb: str, query: str, limit: int) -> tuple[list[Hit], int]:
    """Ranked hits in one organisation's knowledge base ``kb``, and how many documents match."""
    if connection.vendor == "postgresql":
        return _search_postgresql(organisation_id, kb, query, limit)
    if connection.vendor == "sqlite":
        return _search_sqlite(organisation_id, kb, query, limit)
    raise NotImplementedError(f"No full-text search for the {connection.vendor} database.")


def _search_sqlite(organisation_id: int, kb: str, query: str, limit: int) -> tuple[list[Hit], int]:
    terms = query_terms(query, fold=True)
    if not terms:
        return [], 0
    match = " OR ".join(f'"{t}"*' if len(t) > 2 else f'"{t}"' for t in terms)
    where = f"""FROM {FTS_TABLE}
        JOIN knowledge_document d ON d.id = {FTS_TABLE}.rowid
        JOIN knowledge_knowledgebase kb ON kb.id = d.knowledge_base_id
        WHERE {FTS_TABLE} MATCH %s AND kb.organisation_id = %s AND kb.slug = %s AND d.status = %s"""
    params: list[Any] = [match, organisation_id, kb, READY]
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


def _search_postgresql(organisation_id: int, kb: str, query: str, limit: int) -> tuple[list[Hit], int]:
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
