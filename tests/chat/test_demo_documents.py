"""The demo data holds each document in English and in French: a question in either language finds, reads and
cites the documents in its own, whether the main model searches itself or hands the bases to agents."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from django.core.management import call_command
from django.test import AsyncClient

from assistant.demo.management.commands.load_demo import BASES, FRENCH_DOCUMENTS, TABLE_TITLE
from assistant.demo.model import say
from assistant.demo.model.texts import Language
from assistant.knowledge import fulltext
from assistant.knowledge.models import Document
from assistant.orgs.models import Organisation
from assistant.runs import execution
from assistant.runs.models import Run

pytestmark = pytest.mark.django_db(transaction=True)

ENGLISH_TITLES = {title for _, _, documents in BASES.values() for title, _ in documents}
FRENCH_TITLES = {title for documents in FRENCH_DOCUMENTS.values() for title, _ in documents}
QUESTIONS = {
    "fr": "Quels sont les retards de paiement de Bimbamjob et que disent les comptes rendus de la relation ?",
    "en": "What are the late payments of Bimbamjob and what do the meeting reports say about the relationship?",
}


def test_every_document_exists_in_both_languages() -> None:
    for slug, (_, _, documents) in BASES.items():
        assert len(FRENCH_DOCUMENTS[slug]) == len(documents), slug
    assert not ENGLISH_TITLES & FRENCH_TITLES
    call_command("load_demo", verbosity=0)
    call_command("load_demo", verbosity=0)  # idempotent
    assert Document.objects.filter(title__in=FRENCH_TITLES).count() == len(FRENCH_TITLES)
    assert Document.objects.filter(title__in=ENGLISH_TITLES).count() == len(ENGLISH_TITLES)


@pytest.mark.parametrize(
    ("query", "titles"),
    [("retard paiement relances", FRENCH_TITLES), ("late payment reminders", ENGLISH_TITLES)],
)
def test_the_search_ranks_a_language_s_words_to_its_documents(query: str, titles: set[str]) -> None:
    call_command("load_demo", verbosity=0)
    org = Organisation.objects.get(slug="demo")
    hits, total = fulltext.search(org.pk, "factures", query, 8)
    assert total and hits
    assert all(h.title in titles for h in hits), [h.title for h in hits]  # the other language's words do not match


@pytest.mark.parametrize("language", ["fr", "en"])
@pytest.mark.parametrize("agents", [True, False])
async def test_a_question_reads_and_cites_the_documents_of_its_language(
    fast_demo: None, language: Language, agents: bool
) -> None:
    await sync_to_async(call_command)("load_demo", verbosity=0)
    client = AsyncClient()
    assert await client.alogin(username="demo", password="demo-password")
    client.cookies["django_language"] = "en" if language == "fr" else "fr"  # the question's language wins
    resources = ["kb:factures", "kb:comptes-rendus", *(["agents"] if agents else [])]
    ask = {"text": QUESTIONS[language], "model": "demo-large", "level": "approfondi", "resources": resources}
    await client.post("/c/new", ask)
    run = await Run.objects.order_by("-created").afirst()
    assert run is not None
    await execution.wait_for(run.pk)
    await run.arefresh_from_db()
    assert run.status == "ok"
    read = {s["title"] for s in run.sources} - {TABLE_TITLE}  # the invoices' table, queried too (one title)
    assert read and read <= (FRENCH_TITLES if language == "fr" else ENGLISH_TITLES), read
    assert any("Bimbamjob" in title for title in read)
    assert run.answer.endswith(say("footer", language))
