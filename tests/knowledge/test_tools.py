"""kb_search and kb_read over the database: ranked hits, several reads in one call, the caller's scope enforced.

The tools are built the way a run builds them (``execution.toolbox_for``), so what is tested here is what
the main model and each agent get for their scope.
"""

from __future__ import annotations

import json

import pytest
from asgiref.sync import sync_to_async
from pytest_django import Settings

from assistant.engine.errors import OutOfScope, ToolError
from assistant.engine.scope import Scope
from assistant.engine.tools import Tool
from assistant.knowledge.models import Document, KnowledgeBase
from assistant.knowledge.tools import available_resources
from assistant.runs.execution import toolbox_for
from tests.knowledge.knowledge_support import SECRET, Org, two_orgs

pytestmark = pytest.mark.django_db(transaction=True)


def tools(org: Org, scope: Scope) -> dict[str, Tool]:
    return {t.spec.name: t for t in toolbox_for(org.org.pk).tools_for(scope)}


@pytest.fixture
async def orgs() -> tuple[Org, Org]:
    def build() -> tuple[Org, Org]:
        a, b = two_orgs()
        KnowledgeBase.objects.create(organisation=a.org, slug="contrats", name="Contrats")
        Document.objects.create(
            knowledge_base=KnowledgeBase.objects.get(organisation=a.org, slug="contrats"),
            title="Contract",
            text="turbine contract",
        )
        b.kb.slug = "secrets"
        b.kb.save()
        return a, b

    return await sync_to_async(build)()


async def test_kb_search_returns_ranked_hits_with_ids_titles_snippets_and_count(orgs: tuple[Org, Org]) -> None:
    a, _ = orgs
    outcome = await tools(a, Scope(("factures",)))["kb_search"].run({"query": "turbine maintenance", "kb": "factures"})
    data = json.loads(outcome.content)
    assert data["count"] == 3
    assert [h["title"] for h in data["hits"]] == [
        "Turbine maintenance schedule",
        "Maintenance report 2024",
        "Supplier list",
    ]
    assert all(h["id"].startswith("doc-") and h["snippet"] for h in data["hits"])
    assert outcome.action is not None and outcome.action.count == 3 and outcome.action.kind == "search"


async def test_kb_read_reads_several_documents_in_one_call(orgs: tuple[Org, Org]) -> None:
    a, _ = orgs
    ids = [d.public_id for d in a.docs[:3]]
    outcome = await tools(a, Scope(("factures",)))["kb_read"].run({"ids": ids})
    data = json.loads(outcome.content)
    assert [d["id"] for d in data["documents"]] == ids and "errors" not in data
    assert [s.id for s in outcome.sources] == ids


async def test_kb_read_goes_on_where_a_long_document_stopped(orgs: tuple[Org, Org]) -> None:
    from assistant.engine.tools import MAX_CHARS_PER_DOCUMENT

    a, _ = orgs
    tail = "The penalty clause: three times the legal interest rate."
    text = "Preamble. " + "x" * (MAX_CHARS_PER_DOCUMENT + 500) + tail

    def add() -> str:
        return Document.objects.create(knowledge_base=a.kb, title="Long contract", text=text).public_id

    doc_id = await sync_to_async(add)()
    read = tools(a, Scope(("factures",)))["kb_read"]
    first = json.loads((await read.run({"ids": [doc_id]})).content)["documents"][0]
    assert first["text"] == text[:MAX_CHARS_PER_DOCUMENT] and tail not in first["text"]
    assert (first["continue_from_char"], first["length"]) == (MAX_CHARS_PER_DOCUMENT, len(text))
    rest = json.loads((await read.run({"ids": [doc_id], "from_char": first["continue_from_char"]})).content)
    [second] = rest["documents"]
    assert second["text"].endswith(tail) and second["from_char"] == MAX_CHARS_PER_DOCUMENT
    assert "continue_from_char" not in second  # nothing more to read
    past = json.loads((await read.run({"ids": [doc_id], "from_char": len(text) + 10})).content)["documents"][0]
    assert past["text"] == "" and f"{len(text)} characters" in past["note"]
    with pytest.raises(ToolError, match="from_char"):
        await read.run({"ids": [doc_id], "from_char": -1})
    with pytest.raises(ToolError, match="from_char"):
        await read.run({"ids": [doc_id], "from_char": "ten"})


@pytest.mark.parametrize(
    ("kb", "message"),
    [
        ("contrats", "Knowledge base 'contrats' is outside your scope"),  # exists in the organisation, not given
        ("secrets", "Knowledge base 'secrets' does not exist"),  # another organisation's: does not exist here
        ("nowhere", "Knowledge base 'nowhere' does not exist"),
    ],
)
async def test_kb_search_refuses_a_base_outside_the_scope(orgs: tuple[Org, Org], kb: str, message: str) -> None:
    a, _ = orgs
    with pytest.raises(OutOfScope, match=message):
        await tools(a, Scope(("factures",)))["kb_search"].run({"query": "zorglub", "kb": kb})


async def test_kb_read_refuses_another_organisations_documents(orgs: tuple[Org, Org]) -> None:
    a, b = orgs
    read = tools(a, Scope(("factures",)))["kb_read"]
    foreign = [d.public_id for d in b.docs]
    with pytest.raises(OutOfScope) as refused:
        await read.run({"ids": foreign})
    assert all(f"{i}: no such document" in str(refused.value) for i in foreign)
    assert SECRET not in str(refused.value)
    # Mixed with one of its own: its own is read, the other is reported missing, never shown.
    outcome = await read.run({"ids": [a.docs[0].public_id, *foreign]})
    data = json.loads(outcome.content)
    assert [d["id"] for d in data["documents"]] == [a.docs[0].public_id]
    assert SECRET not in outcome.content and len(data["errors"]) == 2


async def test_kb_read_refuses_a_document_of_a_base_outside_the_scope(orgs: tuple[Org, Org]) -> None:
    a, _ = orgs
    contract = await Document.objects.aget(knowledge_base__organisation=a.org, knowledge_base__slug="contrats")
    with pytest.raises(OutOfScope, match="outside your scope"):
        await tools(a, Scope(("factures",)))["kb_read"].run({"ids": [contract.public_id]})


async def test_the_other_organisation_cannot_reach_alphas_documents_either(orgs: tuple[Org, Org]) -> None:
    a, b = orgs
    box = tools(b, Scope(("secrets",)))
    with pytest.raises(OutOfScope, match="'factures' does not exist"):
        await box["kb_search"].run({"query": "turbine", "kb": "factures"})
    with pytest.raises(OutOfScope, match="no such document"):
        await box["kb_read"].run({"ids": [d.public_id for d in a.docs]})


async def test_web_and_code_tools_exist_only_when_configured(orgs: tuple[Org, Org], settings: Settings) -> None:
    a, _ = orgs
    everything = Scope(("factures",), web=True, code=True)
    settings.WEB_SEARCH_URL = ""
    settings.WEB_FETCH_ENABLED = False
    settings.RUN_CODE_ENABLED = False
    assert set(tools(a, everything)) == {"kb_search", "kb_read"}
    assert available_resources() == {"web": False, "code": False}
    settings.WEB_FETCH_ENABLED = True
    assert set(tools(a, everything)) == {"kb_search", "kb_read", "web_fetch"}
    settings.WEB_SEARCH_URL = "http://127.0.0.1:9/search"
    settings.RUN_CODE_ENABLED = True
    assert set(tools(a, everything)) == {"kb_search", "kb_read", "web_search", "web_fetch", "run_code"}
    assert available_resources() == {"web": True, "code": True}
    # A scope gets only the tools of its own resources.
    assert set(tools(a, Scope(("factures",)))) == {"kb_search", "kb_read"}
    assert set(tools(a, Scope(web=True))) == {"web_search", "web_fetch"}
    assert set(tools(a, Scope(code=True))) == {"run_code"}
    assert all(t.read_only for t in tools(a, everything).values())
