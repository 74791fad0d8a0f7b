"""One agent stopped alone: its call in flight aborted, it ends stopped with what it had; its sibling and the run go
on, and the main model reads that the user stopped it."""

from __future__ import annotations

import asyncio

from assistant.engine.causes import Cause
from assistant.engine.events import AgentFinished, Event, RoundStarted
from assistant.engine.models.function import CallInfo
from assistant.engine.types import ModelRequest, ModelResponse
from tests.engine.engine_support import (
    AGENT_A,
    AGENT_B,
    MAIN,
    call,
    delegate,
    harness,
    reply,
    scripted,
    searchable_kbs,
    submit,
    task,
    tool_payloads,
)

STOPPED_ALONE = Cause(code="stopped_by_user", agent_id="agent-1")


async def test_one_agent_stopped_alone_ends_stopped_while_its_sibling_and_the_run_go_on() -> None:
    aborted: list[bool] = []
    sibling_may_finish = asyncio.Event()

    async def hangs_on_its_second_round(request: ModelRequest, info: CallInfo) -> ModelResponse:
        if info.index == 0:
            return reply(call("kb_search", query="Zorglub", kb=searchable_kbs(request)[0]))
        try:
            await asyncio.sleep(60)  # a provider that does not answer: only the stop ends this call
        except asyncio.CancelledError:
            aborted.append(True)
            raise
        return reply(submit("never"))

    async def finishes_after_the_stop(request: ModelRequest, info: CallInfo) -> ModelResponse:
        if info.index == 0:
            return reply(call("kb_search", query="Zorglub", kb=searchable_kbs(request)[0]))
        await sibling_may_finish.wait()
        return reply(submit("Le contrat de Zorglub prévoit 30 jours [con-1].", ["con-1"]))

    h = harness(
        {
            MAIN.id: scripted(
                reply(
                    delegate(
                        task("Trouve les factures de Zorglub.", AGENT_A.id, ["kb:factures"]),
                        task("Trouve le contrat de Zorglub.", AGENT_B.id, ["kb:contrats"]),
                    )
                ),
                reply(text="Le contrat prévoit 30 jours ; la recherche des factures a été arrêtée."),
            ),
            AGENT_A.id: hangs_on_its_second_round,
            AGENT_B.id: finishes_after_the_stop,
        }
    )
    recorded = h.ctx.emit
    stopped: list[bool] = []

    async def emit(event: Event) -> None:
        await recorded(event)
        if isinstance(event, RoundStarted) and event.agent_id == "agent-1" and event.round == 2:
            # Its second call is about to be made: the user stops it then (its call in flight is aborted).
            asyncio.get_running_loop().call_later(0.05, lambda: stopped.append(h.ctx.cancel.stop_agent("agent-1")))
        if isinstance(event, AgentFinished) and event.agent_id == "agent-1":
            sibling_may_finish.set()

    h.ctx.emit = emit
    outcome = await h.run()

    assert stopped == [True] and aborted == [True]
    first, second = outcome.agents
    assert (first.agent_id, first.status, first.cause) == ("agent-1", "stopped", STOPPED_ALONE)
    assert first.reason == "this agent was stopped on request"
    assert "Searched 'Zorglub'" in first.report  # what it had done is kept
    assert (second.agent_id, second.status) == ("agent-2", "ok")
    assert outcome.status == "ok" and not h.ctx.cancel.cancelled  # the run went on
    [payload] = tool_payloads(h.main.requests[1], "agents")
    told = {r["agent"]: r for r in payload["agents"]}
    assert "The user stopped this agent (agent-1)" in told["agent-1"]["note"]
    assert "do not launch an agent again for the same instruction" in told["agent-1"]["note"]
    assert told["agent-1"]["cause"] == {"code": "stopped_by_user", "agent_id": "agent-1"}
    assert "note" not in told["agent-2"]
    # Stopping an agent that has ended, or one the run never started, stops nothing.
    assert not h.ctx.cancel.stop_agent("agent-1") and not h.ctx.cancel.stop_agent("agent-9")


async def test_the_runs_stop_reaches_every_agent_token() -> None:
    async def hangs(request: ModelRequest, info: CallInfo) -> ModelResponse:
        await asyncio.sleep(60)
        return reply(submit("never"))

    h = harness(
        {
            MAIN.id: scripted(reply(delegate(task("Factures de Zorglub.", AGENT_A.id, ["kb:factures"])))),
            AGENT_A.id: hangs,
        }
    )
    recorded = h.ctx.emit

    async def emit(event: Event) -> None:
        await recorded(event)
        if isinstance(event, RoundStarted) and event.agent_id == "agent-1":
            asyncio.get_running_loop().call_later(0.05, h.ctx.cancel.cancel)

    h.ctx.emit = emit
    outcome = await h.run()

    [agent] = outcome.agents
    assert (agent.status, agent.cause) == ("stopped", Cause(code="stopped_by_user"))
    assert outcome.status == "stopped"
