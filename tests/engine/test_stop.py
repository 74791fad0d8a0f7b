"""Stop: the main stream ends at once; agents stop before their next turn and keep what they had; a tool call in
flight stops with them."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from assistant.engine.events import AgentAction, AgentFinished, FinalEvent, StoppedEvent, TextDeltaEvent
from assistant.engine.knowledge import MemoryKnowledge
from assistant.engine.models.base import Model
from assistant.engine.models.function import CallInfo
from assistant.engine.tools import Document, Hit, Tool, ToolOutcome
from assistant.engine.types import ModelRequest, ModelResponse, StreamPart, TextDelta, ToolSpec, UsagePart
from tests.engine.engine_support import (
    AGENT_A,
    AGENT_B,
    ANNUAIRE,
    CONTRATS,
    FACTURES,
    MAIN,
    OWN_DOCUMENT,
    STOPPED_WITH_RUN,
    TWO_AGENTS_TEXT,
    call,
    delegate,
    harness,
    main_delegating_to_two,
    read_own_document,
    reply,
    scripted,
    searchable_kbs,
    task,
)


class RecordingKnowledge(MemoryKnowledge):
    """The test knowledge bases, noting the loop time of every search and read."""

    def __init__(self) -> None:
        super().__init__({"factures": FACTURES, "contrats": CONTRATS, "annuaire": ANNUAIRE})
        self.log: list[tuple[float, str]] = []

    async def search(self, kb: str, query: str, limit: int, ids: Sequence[str] | None = None) -> tuple[list[Hit], int]:
        self.log.append((asyncio.get_running_loop().time(), f"search {kb}"))
        return await super().search(kb, query, limit, ids)

    async def read(self, ids: Sequence[str]) -> dict[str, Document]:
        self.log.append((asyncio.get_running_loop().time(), f"read {','.join(ids)}"))
        return await super().read(ids)


class RegisterCheck(Tool):
    """A slow read-only tool that notes when each run starts and completes."""

    def __init__(self, seconds: float = 0.3) -> None:
        self.seconds = seconds
        self.started: list[float] = []
        self.completed: list[float] = []
        self.on_start: list[Callable[[], None]] = []

    @property
    def spec(self) -> ToolSpec:
        return ToolSpec(name="check_register", description="Check the company register.", parameters={"type": "object"})

    async def run(self, args: dict[str, Any]) -> ToolOutcome:
        loop = asyncio.get_running_loop()
        self.started.append(loop.time())
        for hook in self.on_start:
            hook()
        await asyncio.sleep(self.seconds)
        self.completed.append(loop.time())
        return ToolOutcome(json.dumps({"registered": True}))


def read_then_check(request: ModelRequest, info: CallInfo) -> ModelResponse:
    """Turn 1: read its own document; turn 2: check the register; turn 3 must never come."""
    turn = sum(1 for m in request.messages if m.role == "assistant")
    if turn == 0:
        return read_own_document(request)
    if turn == 1:
        return reply(call("check_register"))
    return reply(call("kb_search", query="Zorglub", kb=searchable_kbs(request)[0]))


async def test_stop_while_agents_work_keeps_what_they_read_and_launches_nothing_more() -> None:
    register = RegisterCheck(seconds=0.3)
    backend = RecordingKnowledge()
    h = harness(
        {MAIN.id: main_delegating_to_two(), AGENT_A.id: read_then_check, AGENT_B.id: read_then_check},
        knowledge_backend=backend,
        factories=[lambda scope: [register]],
    )
    loop = asyncio.get_running_loop()
    stopped_at: list[float] = []

    def press_stop() -> None:
        stopped_at.append(loop.time())
        h.ctx.cancel.cancel()

    def on_first_start() -> None:
        if len(register.started) == 1:
            loop.call_later(0.05, press_stop)

    register.on_start.append(on_first_start)
    outcome = await h.run()

    assert len(stopped_at) == 1
    stop = stopped_at[0]
    # The register checks running when Stop came stopped with it: neither finished, each step says why.
    assert len(register.started) == 2 and register.completed == []
    checks = [e.action for e in h.of(AgentAction) if e.action.tool == "check_register"]
    assert len(checks) == 2
    assert all(a.stopped == STOPPED_WITH_RUN and a.started for a in checks)
    assert all(not a.ok for a in checks)
    # Nothing was searched or read after the stop, and no agent took another turn.
    assert backend.log
    assert all(t < stop for t, _ in backend.log)
    assert len(h.model(AGENT_A.id).requests) == 2
    assert len(h.model(AGENT_B.id).requests) == 2
    assert len(h.main.requests) == 1

    assert outcome.status == "stopped"
    assert outcome.text == TWO_AGENTS_TEXT
    by_model = {a.task.model.id: a for a in outcome.agents}
    for model_id, kb in ((AGENT_A.id, "factures"), (AGENT_B.id, "contrats")):
        agent = by_model[model_id]
        doc_id, title = OWN_DOCUMENT[kb]
        assert agent.status == "stopped"
        assert agent.reason == "stopped on request"
        assert agent.report.startswith("Stopped on request; no report was written.")
        assert title in agent.report  # what it had read is kept
        assert [s.id for s in agent.sources] == [doc_id]
        assert agent.tools_run == ["kb_read", "check_register"]
    assert {e.status for e in h.of(AgentFinished)} == {"stopped"}

    [stopped] = h.of(StoppedEvent)
    assert stopped.message == "stopped on request"
    assert stopped.text == TWO_AGENTS_TEXT
    assert {s.id for s in stopped.sources} == {"fac-1", "con-1"}
    assert h.of(FinalEvent) == []


async def test_tool_calls_of_a_turn_answered_after_the_stop_are_not_run() -> None:
    backend = RecordingKnowledge()

    async def slow_agent(request: ModelRequest, info: CallInfo) -> ModelResponse:
        asyncio.get_running_loop().call_later(0.05, h.ctx.cancel.cancel)
        await asyncio.sleep(0.2)  # Stop arrives while this call is in flight
        return reply(call("kb_read", ids=["fac-1"]), call("kb_search", query="Zorglub", kb="factures"))

    h = harness(
        {
            MAIN.id: scripted(
                reply(delegate(task("Factures de Zorglub.", AGENT_A.id, ["kb:factures"])), text="Un agent.")
            ),
            AGENT_A.id: slow_agent,
        },
        knowledge_backend=backend,
    )
    outcome = await h.run()

    assert backend.log == []
    [agent] = outcome.agents
    assert agent.status == "stopped"
    assert agent.tools_run == []
    assert "It had not run any tool yet." in agent.report
    assert outcome.status == "stopped"
    assert outcome.text == "Un agent."


class SlowTalker(Model):
    """Streams a long answer, one word every 50 ms, noting what it yielded and whether it was cut."""

    def __init__(self, words: int = 60) -> None:
        super().__init__(MAIN)
        self.words = words
        self.yielded: list[str] = []
        self.completed = False
        self.closed = False

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamPart]:
        try:
            for i in range(self.words):
                piece = f"mot{i} "
                self.yielded.append(piece)
                yield TextDelta(piece)
                await asyncio.sleep(0.05)
            yield UsagePart(prompt_tokens=10, completion_tokens=self.words)
            self.completed = True
        finally:
            self.closed = True


async def test_stop_ends_the_main_stream_at_once_and_keeps_the_partial_text() -> None:
    talker = SlowTalker(words=60)  # three seconds of streaming
    h = harness({MAIN.id: talker})
    loop = asyncio.get_running_loop()
    loop.call_later(0.3, h.ctx.cancel.cancel)
    started = loop.time()
    outcome = await h.run("Raconte une longue histoire.", resources=(), level=None)

    assert loop.time() - started < 1.0
    assert talker.closed
    assert not talker.completed
    assert 0 < len(talker.yielded) < 60
    assert outcome.status == "stopped"
    assert outcome.text == "".join(talker.yielded)
    assert "".join(e.text for e in h.of(TextDeltaEvent)) == outcome.text
    [stopped] = h.of(StoppedEvent)
    assert stopped.text == outcome.text
    assert h.ctx.usage.by_model[MAIN.id].calls == 1  # the cut call is still billed
