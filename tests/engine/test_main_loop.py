"""The main loop: concurrent tool calls, the round limit with a forced answer, and model errors."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from assistant.engine.causes import Cause
from assistant.engine.errors import ModelUnavailable
from assistant.engine.events import ErrorEvent, FinalEvent, RoundStarted, ToolCallEvent
from assistant.engine.loop import ROUND_LIMIT_NOTICE
from assistant.engine.models.base import Model
from assistant.engine.models.function import CallInfo
from assistant.engine.notes import without_note
from assistant.engine.tools import Tool, ToolOutcome
from assistant.engine.types import ModelRequest, ModelResponse, StreamPart, TextDelta, ToolSpec
from tests.engine.engine_support import MAIN, call, harness, reply, scripted, tool_messages


class Lookup(Tool):
    """A slow read-only tool noting the loop-time interval of each run."""

    def __init__(self) -> None:
        self.intervals: list[tuple[float, float]] = []
        self.cancelled = 0

    @property
    def spec(self) -> ToolSpec:
        return ToolSpec(name="lookup", description="Look a word up.", parameters={"type": "object"})

    async def run(self, args: dict[str, Any]) -> ToolOutcome:
        loop = asyncio.get_running_loop()
        start = loop.time()
        try:
            await asyncio.sleep(0.2)
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        self.intervals.append((start, loop.time()))
        return ToolOutcome(f"definition of {args.get('word')}")


async def test_tool_calls_of_one_turn_run_concurrently() -> None:
    lookup = Lookup()
    calls = [call("lookup", word=w) for w in ("facture", "contrat", "avenant")]
    h = harness(
        {MAIN.id: scripted(reply(*calls), reply(text="Trois définitions."))}, factories=[lambda scope: [lookup]]
    )
    outcome = await h.run(resources=("kb:factures",))

    assert len(lookup.intervals) == 3
    assert max(s for s, _ in lookup.intervals) < min(e for _, e in lookup.intervals)
    results = tool_messages(h.main.requests[1], "lookup")
    assert [m.tool_call_id for m in results] == [c.id for c in calls]  # results in the order of the calls
    assert [without_note(m.content) for m in results] == [
        "definition of facture",
        "definition of contrat",
        "definition of avenant",
    ]
    assert outcome.text == "Trois définitions."


async def test_after_the_round_limit_the_model_answers_without_tools_and_that_answer_is_final() -> None:
    def always_searches(request: ModelRequest, info: CallInfo) -> ModelResponse:
        # It would search forever; on the forced round it still asks for a tool, which is ignored.
        return reply(call("kb_search", query=f"Zorglub {info.index}", kb="factures"), text=f"Tour {info.index + 1}.")

    h = harness({MAIN.id: always_searches})
    outcome = await h.run(level="rapide", resources=("kb:factures",))  # rapide: 2 rounds

    requests = h.main.requests
    assert len(requests) == 3
    assert [r.tool_choice for r in requests] == ["auto", "auto", "none"]
    assert requests[2].tools == ()
    assert requests[2].messages[-1].role == "tool" and requests[2].messages[-1].content.endswith(ROUND_LIMIT_NOTICE)
    assert [e.forced for e in h.of(RoundStarted)] == [False, False, True]
    assert len(h.of(ToolCallEvent)) == 2  # the forced round's tool call is not run
    assert outcome.status == "ok"
    assert outcome.rounds == 3
    assert outcome.text.endswith("Tour 3.")
    [final] = h.of(FinalEvent)
    assert final.text == outcome.text


async def test_a_model_error_ends_the_run_in_error_with_the_partial_text() -> None:
    def fails_second(request: ModelRequest, info: CallInfo) -> ModelResponse:
        if info.index == 1:
            raise ModelUnavailable("the provider answered 503")
        return reply(call("kb_search", query="Zorglub", kb="factures"), text="Je cherche dans les factures.")

    h = harness({MAIN.id: fails_second})
    outcome = await h.run(resources=("kb:factures",))

    assert outcome.status == "error"
    assert outcome.text.strip() == "Je cherche dans les factures."
    assert outcome.error is not None
    assert "503" in outcome.error
    [error] = h.of(ErrorEvent)
    assert "503" in error.message
    assert h.of(FinalEvent) == []


class BreaksMidStream(Model):
    """Streams a few words, then the connection breaks."""

    def __init__(self) -> None:
        super().__init__(MAIN)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamPart]:
        for word in ("Zorglub ", "paie ", "en "):
            yield TextDelta(word)
        raise ConnectionResetError("connection reset by peer")


async def test_a_stream_broken_midway_keeps_the_text_received() -> None:
    h = harness({MAIN.id: BreaksMidStream()})
    outcome = await h.run(resources=("kb:factures",))

    assert outcome.status == "error"
    assert outcome.text == "Zorglub paie en "
    assert outcome.error is not None
    assert "ConnectionResetError" in outcome.error
    assert h.ctx.usage.by_model[MAIN.id].calls == 1  # what it consumed is billed


class Broken(Tool):
    """A tool failing in a way no tool error foresees."""

    @property
    def spec(self) -> ToolSpec:
        return ToolSpec(name="broken", description="Fails.", parameters={"type": "object"})

    async def run(self, args: dict[str, Any]) -> ToolOutcome:
        raise RuntimeError("disk on fire")


async def test_an_unexpected_tool_failure_ends_the_run_as_a_tool_failure_and_cancels_the_turn_s_other_calls() -> None:
    lookup = Lookup()
    h = harness(
        {MAIN.id: scripted(reply(call("broken"), call("lookup", word="facture"), text="Je vérifie."))},
        factories=[lambda scope: [Broken(), lookup]],
    )
    outcome = await h.run(resources=("kb:factures",))

    assert outcome.status == "error"
    assert outcome.text == "Je vérifie."
    assert outcome.error is not None
    assert "disk on fire" in outcome.error
    [error] = h.of(ErrorEvent)
    assert error.message == outcome.error == "A tool failed: RuntimeError: disk on fire"
    assert error.cause == Cause(code="tool_failed", kind="RuntimeError")
    assert (lookup.intervals, lookup.cancelled) == ([], 1)  # the call running beside it was cancelled, not left behind
    assert len(h.main.requests) == 1
