"""Full-text search on SQLite (FTS5): ranking, snippets, confinement, the index kept in sync."""

from __future__ import annotations

import pytest
from django.db import connection

from assistant.knowledge.apps import KnowledgeConfig, _ensure_fulltext
from assistant.knowledge.backend import OrgKnowledge
from assistant.knowledge.fulltext import FTS_TABLE, SQLITE_TRIGGERS, search
from assistant.knowledge.models import Document
from tests.knowledge.knowledge_support import RANKING_QUERY, check_ranking, check_ready_only, make_org, two_orgs

pytestmark = pytest.mark.django_db


def test_runs_on_sqlite_fts5() -> None:
    assert connection.vendor == "sqlite"
    with connection.cursor() as cursor:
        cursor.execute("SELECT sql FROM sqlite_master WHERE name = %s", [FTS_TABLE])
        assert "fts5" in cursor.fetchone()[0].lower()


def test_ranking_and_snippets_on_a_small_corpus() -> None:
    a, b = two_orgs()
    check_ranking(a, b)


def test_words_not_substrings_accents_folded_prefixes_kept() -> None:
    org = make_org("gamma", [("Été 2024", "Les factures de l'été sont réglées."), ("Other", "disturbing news")])
    assert search(org.org.pk, "factures", "urbin", 8) == ([], 0)  # not a substring scan
    assert [h.title for h in search(org.org.pk, "factures", "ete", 8)[0]] == ["Été 2024"]
    assert [h.title for h in search(org.org.pk, "factures", "FACTUR", 8)[0]] == ["Été 2024"]


@pytest.mark.parametrize("query", ['turbine" OR *', "NEAR(turbine", "title:turbine", "-", "  ", "'; DROP TABLE x; --"])
def test_query_syntax_cannot_reach_the_engine(query: str) -> None:
    a, _ = two_orgs()
    hits, total = search(a.org.pk, "factures", query, 8)
    assert total == len(hits) or total > len(hits)


def test_only_ready_documents_are_found() -> None:
    check_ready_only(*two_orgs())


def test_the_index_follows_inserts_updates_and_deletes() -> None:
    a, _ = two_orgs()
    doc = a.docs[3]
    doc.text = "Wind turbine picnic"
    doc.save()
    assert "Canteen menu" in [h.title for h in search(a.org.pk, "factures", "picnic", 8)[0]]
    assert search(a.org.pk, "factures", "vegetarian", 8) == ([], 0)
    doc.delete()
    assert search(a.org.pk, "factures", "picnic", 8) == ([], 0)
    Document.objects.bulk_create([Document(knowledge_base=a.kb, title="Bulk", text="quokka")])
    assert search(a.org.pk, "factures", "quokka", 8)[1] == 1


def test_lost_triggers_come_back_after_migrate() -> None:
    # A migration that rebuilds knowledge_document on SQLite drops its triggers; post_migrate restores them.
    a, _ = two_orgs()
    with connection.cursor() as cursor:
        for name in SQLITE_TRIGGERS:
            cursor.execute(f"DROP TRIGGER {name}")
    Document.objects.create(knowledge_base=a.kb, title="Unindexed", text="wombat")
    assert search(a.org.pk, "factures", "wombat", 8) == ([], 0)
    from django.apps import apps

    config = apps.get_app_config("knowledge")
    assert isinstance(config, KnowledgeConfig)
    _ensure_fulltext(config, using="default")
    assert search(a.org.pk, "factures", "wombat", 8)[1] == 1
    Document.objects.create(knowledge_base=a.kb, title="Indexed again", text="wombat")
    assert search(a.org.pk, "factures", "wombat", 8)[1] == 2


@pytest.mark.django_db(transaction=True)
async def test_org_knowledge_searches_through_the_index() -> None:
    from asgiref.sync import sync_to_async

    a, _ = await sync_to_async(two_orgs)()
    hits, total = await OrgKnowledge(a.org.pk).search("factures", RANKING_QUERY, 8)
    assert total == 3 and hits[0].title == "Turbine maintenance schedule"


def check_chosen_documents() -> None:
    """A search given chosen documents (``pks``) ranks among them only; another organisation's pk finds nothing."""
    a, b = two_orgs()
    query = "turbine maintenance"
    hits, total = search(a.org.pk, "factures", query, 8)
    assert total >= 2
    kept = int(hits[1].id[4:])
    assert search(a.org.pk, "factures", query, 8, [kept]) == ([hits[1]], 1)
    theirs = [d.pk for d in b.docs]
    assert search(a.org.pk, "factures", query, 8, theirs) == ([], 0)
    assert search(a.org.pk, "factures", query, 8, []) == ([], 0)


def test_a_search_of_chosen_documents_sees_only_them() -> None:
    check_chosen_documents()
