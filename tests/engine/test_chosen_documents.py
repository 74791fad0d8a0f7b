"""Chosen documents: a task (or a request, ``doc:<slug>/<id>``) that names documents scopes its reader to them.

The agent's ``kb_search`` and ``kb_read`` see nothing else of the base, enforced in the tool layer; refusals
come back to the main model as the task's error; what the agent read counts as read.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from assistant.engine.errors import RequestRefused
from assistant.engine.events import AgentAction, AgentStarted, ChosenDocument, FinalEvent
from assistant.engine.notes import without_note
from assistant.engine.scope import Scope
from tests.engine.engine_support import (
    AGENT_A,
    AGENT_B,
    MAIN,
    call,
    delegate,
    harness,
    reply,
    request_text,
    researcher,
    scripted,
    submit,
    task,
    tool_messages,
    tool_payloads,
)


def errors_by_call(messages: list[Any]) -> dict[str, str]:
    return {m.tool_call_id: json.loads(without_note(m.content)).get("error", "") for m in messages}


async def test_an_agent_given_one_document_cannot_find_or_read_another_of_the_same_base() -> None:
    search = call("kb_search", query="facture 2024", kb="factures")
    read_other = call("kb_read", ids=["fac-2"])
    read_other_base = call("kb_read", ids=["con-1"])
    read_mixed = call("kb_read", ids=["fac-1", "fac-2"])
    search_other_base = call("kb_search", query="Zorglub", kb="contrats")
    h = harness(
        {
            MAIN.id: scripted(
                reply(
                    delegate(task("Résume la facture de Zorglub.", AGENT_A.id, ["kb:factures"], documents=["fac-1"]))
                ),
                reply(text="Réponse."),
            ),
            AGENT_A.id: scripted(
                reply(search, read_other, read_other_base, read_mixed, search_other_base),
                reply(submit("12 400 EUR, payée en retard [fac-1].", ["fac-1"])),
            ),
        }
    )
    outcome = await h.run()

    first, second = h.model(AGENT_A.id).requests
    # Its scope, as it was told: the document and its title, not the base.
    assert "only these documents: fac-1 (Facture Zorglub mars 2024)" in first.messages[1].content
    assert "- knowledge base factures" not in first.messages[1].content
    assert "fac-2" not in request_text(first) and "Acme" not in request_text(first)
    [spec] = [t for t in first.tools if t.name == "kb_search"]
    assert spec.parameters["properties"]["kb"]["enum"] == ["factures"]

    [hits] = [
        p for m in tool_messages(second) if m.tool_call_id == search.id for p in [json.loads(without_note(m.content))]
    ]
    assert [h["id"] for h in hits["hits"]] == ["fac-1"] and hits["count"] == 1  # fac-2 matches too, unseen
    errors = errors_by_call(tool_messages(second))
    assert "outside your scope" in errors[read_other.id]
    assert "you may only read the documents you were given: fac-1" in errors[read_other.id]
    assert "outside your scope" in errors[read_other_base.id]
    assert "outside your scope" in errors[search_other_base.id]
    [mixed] = [json.loads(without_note(m.content)) for m in tool_messages(second) if m.tool_call_id == read_mixed.id]
    assert [d["id"] for d in mixed["documents"]] == ["fac-1"]
    assert "fac-2: outside your scope" in mixed["errors"][0]
    assert "Acme" not in request_text(second)  # fac-2's text never reached the agent

    [started] = h.of(AgentStarted)
    assert started.resources == ("doc:factures/fac-1",)
    assert started.documents == (ChosenDocument(id="fac-1", kb="factures", title="Facture Zorglub mars 2024"),)
    [agent] = outcome.agents
    assert agent.status == "ok"
    assert [s.id for s in agent.sources] == ["fac-1"]  # counted as read, for the answer's sources
    [final] = h.of(FinalEvent)
    assert [s.id for s in final.sources] == ["fac-1"]
    assert len([e for e in h.of(AgentAction) if not e.action.ok]) == 3


async def test_two_agents_each_given_their_own_documents_read_only_theirs() -> None:
    h = harness(
        {
            MAIN.id: scripted(
                reply(
                    delegate(
                        task("Facture.", AGENT_A.id, [], documents=["fac-2"]),
                        task("Contrat.", AGENT_B.id, ["kb:factures"], documents=["con-2", "fac-1"]),
                    )
                ),
                reply(text="Réponse."),
            ),
            AGENT_A.id: researcher("facture 2024"),
            AGENT_B.id: researcher("Zorglub 2024"),
        }
    )
    outcome = await h.run()

    a, b = outcome.agents
    assert a.task.resources == ("doc:factures/fac-2",)
    assert b.task.resources == ("doc:contrats/con-2", "doc:factures/fac-1")  # the whole base is narrowed away
    assert [s.id for s in a.sources] == ["fac-2"]
    assert {s.id for s in b.sources} == {"con-2", "fac-1"}
    read_by_a = [
        d["id"]
        for r in h.model(AGENT_A.id).requests
        for p in tool_payloads(r, "kb_read")
        for d in p.get("documents", [])
    ]
    assert set(read_by_a) == {"fac-2"}


@pytest.mark.parametrize(
    ("documents", "error"),
    [
        (["fac-99"], "Document 'fac-99' does not exist"),
        (["ann-1"], "Document 'ann-1' is not part of this request's knowledge bases (kb:factures, kb:contrats)"),
        ("fac-1 fac-2", "Document 'fac-1 fac-2' does not exist"),
        ([3], "documents must be a list of document ids"),
    ],
)
async def test_a_task_naming_a_document_outside_the_request_is_refused_to_the_main_model(
    documents: Any, error: str
) -> None:
    agents_call = delegate(task("Annuaire.", AGENT_A.id, ["kb:factures"], documents=documents))
    h = harness({MAIN.id: scripted(reply(agents_call), reply(text="Réponse."))})
    outcome = await h.run()

    assert outcome.agents == [] and not h.of(AgentStarted)
    [result] = tool_payloads(h.main.requests[1], "agents")
    assert error in result["agents"][0]["error"]


async def test_the_agents_tool_tells_the_main_model_it_can_pass_documents() -> None:
    h = harness({MAIN.id: scripted(reply(text="Réponse."))})
    await h.run()
    [spec] = [t for t in h.main.requests[0].tools if t.name == "agents"]
    assert "documents" in spec.parameters["properties"]["tasks"]["items"]["properties"]
    assert "ids seen in kb_search results" in spec.description


async def test_a_request_given_chosen_documents_searches_and_reads_only_them() -> None:
    search = call("kb_search", query="facture 2024", kb="factures")
    read = call("kb_read", ids=["fac-1", "fac-2"])
    h = harness(
        {
            MAIN.id: scripted(
                reply(search, read),
                reply(delegate(task("Relis-la.", AGENT_A.id, ["doc:factures/fac-1"]))),
                reply(text="12 400 EUR [fac-1]."),
            ),
            AGENT_A.id: researcher("facture"),
        }
    )
    outcome = await h.run(resources=("doc:factures/fac-1", "agents"))

    assert "only these documents: fac-1" in h.main.requests[0].messages[0].content
    second = h.main.requests[1]
    [hits] = tool_payloads(second, "kb_search")
    assert [x["id"] for x in hits["hits"]] == ["fac-1"]
    [payload] = tool_payloads(second, "kb_read")
    assert [d["id"] for d in payload["documents"]] == ["fac-1"]
    assert "fac-2: outside your scope" in payload["errors"][0]
    # The agents tool offers the request's documents as resources, and the agent reads only that one.
    [spec] = [t for t in h.main.requests[0].tools if t.name == "agents"]
    assert spec.parameters["properties"]["tasks"]["items"]["properties"]["resources"]["items"]["enum"] == [
        "doc:factures/fac-1"
    ]
    [agent] = outcome.agents
    assert agent.status == "ok" and [s.id for s in agent.sources] == ["fac-1"]
    [started] = h.of(AgentStarted)  # the request's document handed on: its line shows its title too
    assert started.documents == (ChosenDocument(id="fac-1", kb="factures", title="Facture Zorglub mars 2024"),)


async def test_a_request_naming_a_document_not_in_its_base_is_refused_before_any_call() -> None:
    h = harness({MAIN.id: scripted()})
    with pytest.raises(RequestRefused, match="'doc:factures/con-1' does not exist"):
        await h.run(resources=("doc:factures/con-1", "agents"))
    with pytest.raises(RequestRefused, match="Unknown resource 'doc:factures'"):
        await h.run(resources=("doc:factures", "agents"))
    assert h.main.requests == []


def test_a_scope_of_chosen_documents() -> None:
    scope = Scope.from_resources(["doc:factures/fac-1", "kb:contrats", "doc:contrats/con-1", "doc:bad", "web"])
    assert scope.resources == ("kb:contrats", "doc:factures/fac-1", "web")  # a whole base holds its documents
    assert scope.searchable == ("contrats", "factures")
    assert scope.chosen("factures") == ("fac-1",) and scope.chosen("contrats") is None
    assert scope.may_read("factures", "fac-1") and not scope.may_read("factures", "fac-2")
    assert scope.may_read("contrats", "con-2")
