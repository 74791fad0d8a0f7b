"""Scope enforced by the tool layer: reads outside it, writes and delegation are refused as tool errors."""

from __future__ import annotations

import json
from typing import Any

from assistant.engine.events import AgentAction
from assistant.engine.notes import without_note
from assistant.engine.tools import Tool, ToolOutcome
from assistant.engine.types import ToolSpec
from tests.engine.engine_support import (
    AGENT_A,
    AGENT_B,
    MAIN,
    call,
    delegate,
    harness,
    reply,
    researcher,
    scripted,
    submit,
    task,
    tool_messages,
    tool_names,
)


class WriteFile(Tool):
    """A write tool the main model may have; agents must never get it."""

    read_only = False

    def __init__(self) -> None:
        self.runs = 0

    @property
    def spec(self) -> ToolSpec:
        return ToolSpec(name="write_file", description="Write a file.", parameters={"type": "object"})

    async def run(self, args: dict[str, Any]) -> ToolOutcome:
        self.runs += 1
        return ToolOutcome("written")


def errors_by_call(messages: list[Any]) -> dict[str, str]:
    return {m.tool_call_id: json.loads(without_note(m.content)).get("error", "") for m in messages}


async def test_reads_and_searches_outside_the_scope_come_back_as_tool_errors() -> None:
    other_kb_doc = call("kb_read", ids=["con-1"])
    missing_doc = call("kb_read", ids=["nope-9"])
    mixed = call("kb_read", ids=["fac-1", "con-2"])
    other_kb = call("kb_search", query="Zorglub", kb="contrats")
    no_kb = call("kb_search", query="Zorglub", kb="inexistante")
    h = harness(
        {
            MAIN.id: scripted(
                reply(delegate(task("Trouve les factures de Zorglub.", AGENT_A.id, ["kb:factures"]))),
                reply(text="Réponse."),
            ),
            AGENT_A.id: scripted(
                reply(other_kb_doc, missing_doc, mixed, other_kb, no_kb),
                reply(submit("Facture de mars 2024 en retard [fac-1].", ["fac-1"])),
            ),
        }
    )
    outcome = await h.run()

    second = h.model(AGENT_A.id).requests[1]
    errors = errors_by_call(tool_messages(second))
    assert "outside your scope" in errors[other_kb_doc.id]
    assert "no such document" in errors[missing_doc.id]
    assert "outside your scope" in errors[other_kb.id]
    assert "does not exist" in errors[no_kb.id]
    # A read mixing an own document and another base's returns the own one only.
    [mixed_result] = [m for m in tool_messages(second) if m.tool_call_id == mixed.id]
    payload = json.loads(without_note(mixed_result.content))
    assert [d["id"] for d in payload["documents"]] == ["fac-1"]
    assert "con-2: outside your scope" in payload["errors"][0]
    assert "révision annuelle" not in mixed_result.content  # con-2's text never reaches the agent

    [agent] = outcome.agents
    assert agent.status == "ok"
    assert [s.id for s in agent.sources] == ["fac-1"]
    refused = [e.action for e in h.of(AgentAction) if not e.action.ok]
    assert len(refused) == 4


async def test_a_write_or_a_delegation_is_refused_with_a_message_to_return_what_it_found() -> None:
    write = WriteFile()
    write_call = call("write_file", path="notes.txt", content="Zorglub")
    agents_call = delegate(task("Sous-tâche.", AGENT_A.id, ["kb:factures"]))
    h = harness(
        {
            MAIN.id: scripted(
                reply(delegate(task("Trouve les factures de Zorglub.", AGENT_A.id, ["kb:factures"]))),
                reply(text="Réponse."),
            ),
            AGENT_A.id: scripted(reply(write_call, agents_call), reply(submit("Rien d'écrit.", []))),
        },
        factories=[lambda scope: [write]],
    )
    outcome = await h.run(resources=("kb:factures", "agents"))

    assert "write_file" in tool_names(h.main.requests[0])  # the main model has it...
    first, second = h.model(AGENT_A.id).requests
    assert "write_file" not in tool_names(first)  # ...its agents never do
    errors = errors_by_call(tool_messages(second))
    for refused in (write_call, agents_call):
        assert "not available" in errors[refused.id]
        assert "Return what you found with submit_result" in errors[refused.id]
    assert write.runs == 0
    [agent] = outcome.agents
    assert agent.status == "ok"
    assert len(outcome.agents) == 1  # the agent's own delegation started nothing


async def test_no_agent_request_ever_offers_the_agents_tool() -> None:
    h = harness(
        {
            MAIN.id: scripted(
                reply(
                    delegate(
                        task("Factures de Zorglub.", AGENT_A.id, ["kb:factures"], max_rounds=10),
                        task("Contrats de Zorglub.", AGENT_B.id, ["kb:contrats", "kb:factures"]),
                    )
                ),
                reply(text="Réponse."),
            ),
            AGENT_A.id: researcher(),
            AGENT_B.id: researcher(),
        }
    )
    outcome = await h.run(level="maximal")

    assert "agents" in tool_names(h.main.requests[0])
    requests = h.model(AGENT_A.id).requests + h.model(AGENT_B.id).requests
    assert len(requests) == 6
    for request in requests:
        assert "agents" not in tool_names(request)
        assert tool_names(request) == {"kb_search", "kb_read", "submit_result"}
    assert [a.status for a in outcome.agents] == ["ok", "ok"]


async def test_an_agent_without_a_knowledge_base_gets_no_knowledge_base_tool() -> None:
    h = harness(
        {
            MAIN.id: scripted(
                reply(
                    delegate(
                        task("Cherche sur le web les actualités de Zorglub.", AGENT_A.id, ["web"]),
                        task("Factures et web.", AGENT_B.id, ["kb:factures", "web"]),
                    )
                ),
                reply(text="Réponse."),
            ),
            AGENT_A.id: scripted(reply(submit("Aucun outil pour le web.", []))),
            AGENT_B.id: scripted(reply(submit("Rien.", []))),
        }
    )  # no web tool is configured: the toolbox has no factory
    outcome = await h.run(resources=("kb:factures", "web", "agents"))

    [web_only] = h.model(AGENT_A.id).requests
    assert tool_names(web_only) == {"submit_result"}
    assert "knowledge base" not in web_only.messages[1].content
    [with_kb] = h.model(AGENT_B.id).requests
    assert tool_names(with_kb) == {"kb_search", "kb_read", "submit_result"}
    assert [a.status for a in outcome.agents] == ["ok", "ok"]
