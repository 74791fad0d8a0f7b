"""A request whose first call cannot fit its model's window is refused before any call, with the numbers.

The main model's: ``run_chat`` raises ``ContextTooLong`` (tokens, window) before its first round, after
the oldest turns were left out. An agent's: its task is refused, as a tool error the main model reads.
"""

from __future__ import annotations

import json

import pytest

from assistant.engine.errors import ContextTooLong, RequestRefused
from assistant.engine.events import AgentStarted, RoundStarted, UsageEvent
from assistant.engine.loop import first_request
from assistant.engine.policy import RunRequest, plan_request
from assistant.engine.tokens import prompt_tokens
from assistant.engine.types import Message
from tests.engine.engine_support import AGENT_A, MAIN, delegate, harness, reply, scripted, task, tool_payloads


async def test_a_question_larger_than_the_main_model_s_window_is_refused_before_any_call() -> None:
    h = harness({MAIN.id: scripted()})  # any call fails the test
    question = "Zorglub " * 70_000  # about 140,000 tokens, over the 128,000 of the window

    with pytest.raises(ContextTooLong) as refused:
        await h.run(question, resources=("kb:factures",))

    e = refused.value
    assert isinstance(e, RequestRefused) and e.code == "context_length_exceeded"
    assert e.window == MAIN.context_window and e.tokens > MAIN.context_window
    assert f"{e.tokens:,}" in str(e) and "128,000" in str(e)
    assert h.main.requests == [] and h.of(RoundStarted) == [] and h.of(UsageEvent) == []
    assert h.ctx.usage.calls == 0 and h.ctx.usage.cost_eur == 0


async def test_a_long_conversation_whose_oldest_turns_can_be_left_out_is_not_refused() -> None:
    h = harness({MAIN.id: scripted(reply(text="Voilà."))})
    history = [Message.user("Ancien " * 6_000), Message.assistant("Réponse " * 6_000)] * 5  # ~60,000 tokens a pair

    outcome = await h.run("Et Zorglub ?", resources=("kb:factures",), history=history)

    assert outcome.status == "ok" and len(h.main.requests) == 1
    assert prompt_tokens(h.main.requests[0]) + MAIN.output_cap <= MAIN.context_window


def test_first_request_is_what_the_first_round_sends_and_counts_the_tool_specs() -> None:
    h = harness({MAIN.id: scripted()})
    request = RunRequest(
        messages=(Message.user("Zorglub ?"),),
        model=MAIN.id,
        level="approfondi",
        resources=("kb:factures", "agents"),
    )
    first = first_request(request, plan_request(request, h.ctx.catalogue, h.ctx.policy), h.ctx)
    assert first.messages[-1] == Message.user("Zorglub ?")
    assert {t.name for t in first.tools} == {"kb_search", "kb_read", "agents"}
    assert first.max_output_tokens is not None and prompt_tokens(first) > 500


async def test_an_agent_whose_instruction_cannot_fit_its_model_s_window_is_a_tool_error() -> None:
    long = "Vérifie chaque facture de Zorglub. " * 5_000  # ~45,000 tokens, over agent-a's 32,000
    h = harness(
        {
            MAIN.id: scripted(reply(delegate(task(long))), reply(text="L'agent n'a pas pu partir.")),
            AGENT_A.id: scripted(),  # never called
        }
    )

    outcome = await h.run()

    assert outcome.status == "ok" and h.of(AgentStarted) == []
    (payload,) = tool_payloads(h.main.requests[1], "agents")
    (result,) = payload["agents"]
    assert "32,000" in result["error"] and "agent-a" in result["error"]
    assert json.dumps(result).count("Refused") == 1
    assert h.model(AGENT_A.id).requests == []
