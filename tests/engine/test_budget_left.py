"""The admin's levels bind, and every request after the first says what is left.

A task asking more rounds than its level allows gets the level's budget (its step says what it asked); each agent
request after its first, and each main request after its first, ends its last tool result with one ``Budget left:``
line, kept in the history as sent (each request extends the one before it), and the forced landing's notice and the
round limit's go there too: no user message ever follows a tool message.
"""

from __future__ import annotations

import itertools
import re

from assistant.engine.agent import LANDING_NOTICE
from assistant.engine.events import AgentStarted
from assistant.engine.loop import ROUND_LIMIT_NOTICE
from assistant.engine.models.function import CallInfo
from assistant.engine.notes import BUDGET_LEFT
from assistant.engine.policy import DEFAULT_LEVELS, LevelSettings, Policy
from assistant.engine.tokens import estimate_tokens
from assistant.engine.types import Message, ModelRequest, ModelResponse, UsagePart
from tests.engine.engine_support import (
    AGENT_A,
    MAIN,
    agents_told,
    call,
    endless_searcher,
    forced,
    harness,
    main_delegating,
    reply,
)

LINE = re.compile(r"Budget left: (\d+) rounds? \(this one included\), ([\d,]+) tokens, (\d+) s\.")
MAIN_LINE = re.compile(r"Budget left: (\d+) rounds? with tools \(this one included\), (\d+) s\.")


def no_user_after_tool(messages: tuple[Message, ...]) -> bool:
    return all(not (a.role == "tool" and b.role == "user") for a, b in itertools.pairwise(messages))


def with_level(**settings: int) -> Policy:
    levels = dict(DEFAULT_LEVELS)
    approfondi = levels["approfondi"]
    levels["approfondi"] = LevelSettings(
        effort=approfondi.effort,
        main_rounds=settings.get("main_rounds", approfondi.main_rounds),
        agent_rounds=settings.get("agent_rounds", approfondi.agent_rounds),
    )
    return Policy(levels=levels)


async def test_a_task_asking_more_rounds_than_its_level_gets_the_level_budget_and_its_step_says_so() -> None:
    h = harness(
        {MAIN.id: main_delegating(max_rounds=10), AGENT_A.id: endless_searcher(UsagePart(1_000, 100))},
        policy=with_level(agent_rounds=3),
    )
    outcome = await h.run(level="approfondi")

    [spec] = [t for t in h.main.requests[0].tools if t.name == "agents"]
    assert spec.parameters["properties"]["tasks"]["items"]["properties"]["max_rounds"]["maximum"] == 3
    [started] = h.of(AgentStarted)
    assert (started.max_rounds, started.rounds_asked) == (3, 10)
    [agent] = outcome.agents
    assert agent.rounds == 3 and agent.forced_landing
    assert len(h.model(AGENT_A.id).requests) == 3
    [told] = agents_told(h.main.requests[1])
    assert "you asked 10" in told["max_rounds"]


async def test_a_task_within_its_level_is_not_marked_clamped() -> None:
    h = harness({MAIN.id: main_delegating(max_rounds=2), AGENT_A.id: endless_searcher(UsagePart(1_000, 100))})
    outcome = await h.run(level="approfondi")

    [started] = h.of(AgentStarted)
    assert (started.max_rounds, started.rounds_asked) == (2, None)
    [told] = agents_told(h.main.requests[1])
    assert "max_rounds" not in told
    assert outcome.agents[0].rounds == 2


async def test_every_agent_request_after_the_first_says_what_is_left_and_extends_the_one_before() -> None:
    h = harness(
        {MAIN.id: main_delegating(max_rounds=4), AGENT_A.id: endless_searcher(UsagePart(9_000, 1_000))},
        policy=Policy(agent_max_tokens=60_000),
    )
    await h.run(level="approfondi")

    requests = h.model(AGENT_A.id).requests
    assert len(requests) == 4
    assert BUDGET_LEFT not in "".join(m.content for m in requests[0].messages[1:])  # the first says nothing
    for number, request in enumerate(requests[1:], start=1):
        last = request.messages[-1]
        assert last.role == "tool"
        found = LINE.search(last.content)
        assert found is not None, last.content
        rounds, tokens, seconds = int(found[1]), int(found[2].replace(",", "")), int(found[3])
        assert rounds == 4 - number  # this one included
        assert tokens == 60_000 - number * 10_000  # rounded down to the thousand
        assert 0 < seconds <= 300
        line = last.content[found.start() :].split(" This is your last round")[0]
        assert estimate_tokens(line) <= 30
        assert no_user_after_tool(request.messages)
    # The forced landing's notice is in the last tool result too, after the line.
    assert requests[3].messages[-1].content.endswith(LANDING_NOTICE)
    assert all(LANDING_NOTICE not in m.content for r in requests[:3] for m in r.messages)
    # Each request extends the one before it, byte for byte: the line stays as it was sent.
    for before, after in itertools.pairwise(requests):
        assert after.messages[: len(before.messages)] == before.messages


async def test_a_landing_forced_by_tokens_running_low_says_so_in_the_last_tool_result() -> None:
    h = harness(
        {MAIN.id: main_delegating(max_rounds=5), AGENT_A.id: endless_searcher(UsagePart(15_000, 5_000))},
        policy=Policy(agent_max_tokens=60_000),
    )
    await h.run(level="approfondi")

    requests = h.model(AGENT_A.id).requests
    assert [forced(r) for r in requests] == [False, False, True]
    last = requests[2].messages[-1]
    assert last.role == "tool" and last.content.endswith(LANDING_NOTICE)
    found = LINE.search(last.content)
    assert found is not None and int(found[1]) == 3 and found[2] == "20,000"
    assert no_user_after_tool(requests[2].messages)


async def test_the_main_loop_says_its_rounds_left_and_its_round_limit_in_its_last_tool_result() -> None:
    def always_searches(request: ModelRequest, info: CallInfo) -> ModelResponse:
        return reply(call("kb_search", query=f"Zorglub {info.index}", kb="factures"), text=f"Tour {info.index + 1}.")

    h = harness({MAIN.id: always_searches}, policy=with_level(main_rounds=3))
    outcome = await h.run(level="approfondi", resources=("kb:factures",))

    requests = h.main.requests
    assert len(requests) == 4 and outcome.status == "ok"
    assert BUDGET_LEFT not in "".join(m.content for m in requests[0].messages[1:])
    for number, request in enumerate(requests[1:], start=2):
        last = request.messages[-1]
        assert last.role == "tool"
        found = MAIN_LINE.search(last.content)
        assert found is not None, last.content
        assert int(found[1]) == 3 - number + 1
        assert no_user_after_tool(request.messages)
    assert requests[3].messages[-1].content.endswith(ROUND_LIMIT_NOTICE)
    assert requests[3].tools == ()
    for before, after in itertools.pairwise(requests):
        assert after.messages[: len(before.messages)] == before.messages
