"""A model's reasoning: a part of its turn, sent back within its loop, shown as a ``reasoning`` step per round."""

from __future__ import annotations

from assistant.engine.events import (
    Event,
    ReasoningEvent,
    RoundStarted,
    TextDeltaEvent,
    ToolCallEvent,
    erased,
)
from assistant.engine.models.function import CallInfo, ModelFunction
from assistant.engine.types import ModelRequest, ModelResponse, Reasoning
from tests.engine.engine_support import AGENT_A, MAIN, delegate, harness, reply, researcher, scripted, task

PLANNING = Reasoning(format="openai", id="rs_1", encrypted="enc-1", summary=("Plan the search.", "Two bases."))
HIDDEN = Reasoning(format="openai", id="rs_2", encrypted="enc-2")  # no summary: goes back, shows nothing
REFUSED = Reasoning(format="openai", id="rs_3", encrypted="enc-3", summary_unavailable=True)


def _with(response: ModelResponse, *reasoning: Reasoning) -> ModelResponse:
    response.reasoning = list(reasoning)
    return response


def thinking_agent() -> ModelFunction:
    research = researcher()

    def function(request: ModelRequest, info: CallInfo) -> ModelResponse:
        response = research(request, info)
        assert isinstance(response, ModelResponse)
        return _with(response, Reasoning(format="mistral", id="thinking-0", summary=(f"agent turn {info.index}",)))

    return function


def _kinds(events: list[Event], agent_id: str | None) -> list[str]:
    return [e.kind for e in events if e.agent_id == agent_id and e.kind in ("round_started", "reasoning", "tool_call")]


async def test_each_rounds_summary_is_a_step_before_that_rounds_calls_and_text() -> None:
    h = harness(
        {
            MAIN.id: scripted(
                _with(reply(delegate(task("Liste les factures de Zorglub."))), PLANNING, HIDDEN),
                _with(reply(text="Zorglub paie en retard [fac-1]."), REFUSED),
            ),
            AGENT_A.id: thinking_agent(),
        }
    )
    outcome = await h.run()
    assert outcome.status == "ok"

    main = [e for e in h.of(ReasoningEvent) if e.agent_id is None]
    assert [(e.round, e.model, e.summary, e.summary_unavailable) for e in main] == [
        (1, MAIN.id, "Plan the search.\n\nTwo bases.", False),
        (2, MAIN.id, "", True),
    ]
    # In its place: after its round starts, before that round's tool calls and text.
    assert _kinds(h.events, None) == ["round_started", "reasoning", "tool_call", "round_started", "reasoning"]
    second_round = h.events.index(next(e for e in h.events if isinstance(e, RoundStarted) and e.round == 2))
    first_text = h.events.index(next(e for e in h.events[second_round:] if isinstance(e, TextDeltaEvent)))
    assert h.events.index(main[1]) < first_text
    # An agent's summaries are its own steps, round by round.
    agent = [e for e in h.of(ReasoningEvent) if e.agent_id is not None]
    assert [(e.round, e.summary) for e in agent] == [(1, "agent turn 0"), (2, "agent turn 1"), (3, "agent turn 2")]
    assert all(e.model == AGENT_A.id for e in agent)
    assert len(h.of(ToolCallEvent)) == 1


async def test_reasoning_goes_back_whole_in_the_main_models_next_request() -> None:
    h = harness(
        {
            MAIN.id: scripted(
                _with(reply(delegate(task("Liste les factures de Zorglub."))), PLANNING, HIDDEN),
                reply(text="Fini."),
            ),
            AGENT_A.id: researcher(),
        }
    )
    await h.run()
    first, second = h.main.requests
    assert all(not m.reasoning for m in first.messages)
    (turn,) = [m for m in second.messages if m.role == "assistant"]
    assert turn.reasoning == (PLANNING, HIDDEN)  # verbatim, in order, the one without a summary too


async def test_a_summary_is_erased_with_its_conversation() -> None:
    event = ReasoningEvent(round=1, model=MAIN.id, summary="Le client Zorglub paie en retard.")
    gone = erased(event)
    assert gone.summary == "" and (gone.round, gone.model) == (1, MAIN.id)
