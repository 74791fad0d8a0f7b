"""Web and code through delegation: an agent gets run_code and the web tools only for its own scope,
its script sees only its own knowledge bases, and a write from its code comes back as a tool error
telling it to return what it found."""

from __future__ import annotations

import json

from assistant.engine.notes import without_note
from assistant.engine.run_code import code_tools
from assistant.engine.sandbox import CodeLimits, Sandbox
from assistant.engine.sandbox_probe import detect
from assistant.engine.web import WebConfig, web_tools
from tests.engine.engine_support import (
    AGENT_A,
    AGENT_B,
    MAIN,
    call,
    delegate,
    harness,
    knowledge,
    reply,
    request_text,
    scripted,
    submit,
    task,
    tool_messages,
    tool_names,
)

LIST_FILES = """
import json
for d in json.load(open("index.json")):
    print(d["kb"], d["id"], open(d["path"]).read()[:40])
"""


async def test_an_agent_gets_web_and_code_only_for_its_scope_and_its_code_reads_only_its_bases() -> None:
    isolation = detect()
    assert isolation is not None
    memory = knowledge()
    sandbox = Sandbox(CodeLimits(cpu_seconds=2, wall_seconds=6, memory_mb=256), isolation)
    listing = call("run_code", code=LIST_FILES)
    peek = call("run_code", code="print(open('../contrats/con-1.txt').read())")
    write = call("run_code", code="open('findings.txt', 'w').write('Zorglub')")
    h = harness(
        {
            MAIN.id: scripted(
                reply(
                    delegate(
                        task("Compte les factures en retard.", AGENT_A.id, ["kb:factures", "code"]),
                        task("Cherche Zorglub sur le web.", AGENT_B.id, ["web"]),
                    )
                ),
                reply(text="Réponse."),
            ),
            AGENT_A.id: scripted(
                reply(listing, peek, write), reply(submit("Une facture en retard [fac-1].", ["fac-1"]))
            ),
            AGENT_B.id: scripted(reply(submit("Rien trouvé.", []))),
        },
        knowledge_backend=memory,
        factories=[web_tools(WebConfig(search_url="http://127.0.0.1:9/search")), code_tools(sandbox, memory)],
    )
    outcome = await h.run(resources=("kb:factures", "kb:contrats", "web", "code", "agents"))

    assert {"run_code", "web_search", "web_fetch", "kb_search"} <= tool_names(h.main.requests[0])
    first_a, second_a = h.model(AGENT_A.id).requests
    assert tool_names(first_a) == {"kb_search", "kb_read", "run_code", "submit_result"}
    assert tool_names(h.model(AGENT_B.id).requests[0]) == {"web_search", "web_fetch", "submit_result"}

    results = {m.tool_call_id: without_note(m.content) for m in tool_messages(second_a)}
    printed = json.loads(results[listing.id])["stdout"].splitlines()
    assert [line.split()[:2] for line in printed] == [["factures", "fac-1"], ["factures", "fac-2"]]
    assert "not allowed" in json.loads(results[peek.id])["error"]
    assert "return what you found" in json.loads(results[write.id])["error"]
    assert "pénalité de 2 %" not in request_text(second_a)  # contrats never reached the agent

    agent_a = next(a for a in outcome.agents if a.task.model.id == AGENT_A.id)
    assert agent_a.status == "ok"
    assert {"fac-1", "fac-2"} <= {s.id for s in agent_a.sources}  # what its code read counts as read
