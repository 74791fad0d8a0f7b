"""Full-text search on PostgreSQL: the same ranking, snippets by ts_headline, the GIN index used.

Run by ``make test`` with DATABASE_URL pointing at PostgreSQL; an unreachable server fails them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.urls import reverse

from assistant.knowledge.fulltext import CONFIG, INDEX_NAME, PG_VECTOR, pg_query, search
from assistant.knowledge.models import Document
from tests.knowledge.knowledge_support import (
    RANKING_QUERY,
    check_base_deletion,
    check_ranking,
    check_ready_only,
    extract_pending,
    files_under,
    fts_rowids,
    make_org,
    two_orgs,
)

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]


@pytest.fixture(autouse=True)
def _postgresql() -> None:
    assert connection.vendor == "postgresql", "these tests need DATABASE_URL=postgres://…"


def test_ranking_and_snippets_on_a_small_corpus() -> None:
    a, b = two_orgs()
    check_ranking(a, b)


def test_only_ready_documents_are_found() -> None:
    check_ready_only(*two_orgs())


def test_the_gin_index_on_the_stored_vector_serves_the_search() -> None:
    a, _ = two_orgs()
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname = %s", [INDEX_NAME])
        (definition,) = cursor.fetchone()
        assert "USING gin" in definition and f"({PG_VECTOR.column})" in definition
        cursor.execute(
            "SELECT is_generated, generation_expression FROM information_schema.columns "
            "WHERE table_name = %s AND column_name = %s",
            [PG_VECTOR.table, PG_VECTOR.column],
        )
        generated, expression = cursor.fetchone()
        assert generated == "ALWAYS" and "to_tsvector" in expression
        cursor.execute("SET enable_seqscan = off")  # the table is tiny: make the planner show its choice
        cursor.execute(
            f"EXPLAIN SELECT id FROM {PG_VECTOR.table} WHERE {PG_VECTOR.column} @@ to_tsquery(%s, %s)",
            [CONFIG, "'turbine':*"],
        )
        assert INDEX_NAME in "\n".join(row[0] for row in cursor.fetchall())
        sql, params = pg_query(a.org.pk, "factures", ["turbine"], 8)
        cursor.execute("EXPLAIN " + sql, params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert PG_VECTOR.column in plan and "to_tsvector" not in plan  # the stored vectors are read, not recomputed


def test_words_not_substrings_prefixes_kept() -> None:
    org = make_org("gamma", [("Factures 2024", "Les factures sont réglées."), ("Other", "disturbing news")])
    assert search(org.org.pk, "factures", "urbin", 8) == ([], 0)
    assert [h.title for h in search(org.org.pk, "factures", "FACTUR", 8)[0]] == ["Factures 2024"]


@pytest.mark.parametrize("query", ["turbine & | ! (", "'; DROP TABLE x; --", "a:* <-> b", "  "])
def test_query_syntax_cannot_reach_the_engine(query: str) -> None:
    a, _ = two_orgs()
    hits, total = search(a.org.pk, "factures", query, 8)
    assert total >= len(hits)


def test_updates_and_deletes_are_searched_at_once() -> None:
    a, _ = two_orgs()
    doc = a.docs[3]
    doc.text = "Wind turbine picnic"
    doc.save()
    assert [h.title for h in search(a.org.pk, "factures", "picnic", 8)[0]] == ["Canteen menu"]
    doc.delete()
    assert search(a.org.pk, "factures", "picnic", 8) == ([], 0)
    assert search(a.org.pk, "factures", RANKING_QUERY, 8)[1] == 3


def test_deleting_a_base_removes_its_documents_from_the_search() -> None:
    check_base_deletion(*two_orgs())


def test_an_admin_deleting_a_base_on_its_page_takes_its_files_and_index_entries(
    media: Path, django_capture_on_commit_callbacks: Any
) -> None:
    a, b = two_orgs()
    client = a.admin_client()
    client.post(reverse("kb_base", args=["factures"]), {"files": [SimpleUploadedFile("n.txt", b"the wallaby turbine")]})
    extract_pending()
    ids = set(Document.objects.filter(knowledge_base=a.kb).values_list("pk", flat=True))
    assert len(ids) == 5 and ids & fts_rowids("wallaby") and len(files_under(media)) == 1
    with django_capture_on_commit_callbacks(execute=True):
        assert client.post(reverse("kb_base_delete", args=["factures"])).status_code == 302
    assert not Document.objects.filter(pk__in=ids).exists() and files_under(media) == []
    assert not ids & (fts_rowids("wallaby") | fts_rowids("turbine"))
    assert search(a.org.pk, "factures", "wallaby", 8) == ([], 0)
    assert search(b.org.pk, "factures", RANKING_QUERY, 8)[1] == 1


def test_a_search_of_chosen_documents_sees_only_them() -> None:
    from tests.knowledge.test_fulltext import check_chosen_documents

    check_chosen_documents()
