"""Engine overhead per model round, with a model that answers instantly."""

from __future__ import annotations

import gc
import json
import time
from typing import Any

from assistant.engine.loop import run_chat
from assistant.engine.policy import Policy, RunRequest
from assistant.engine.scope import Scope
from assistant.engine.tools import Tool, Toolbox, ToolOutcome
from assistant.engine.types import Message, ModelRequest, ModelResponse, ToolSpec

from ..fixtures import FINAL_ANSWER, RoundClock, call, enum_of, median, percentile, setup, tool_results
from ..registry import Result, below, benchmark

MAIN_TOOL_ROUNDS = 10  # kb_search rounds of the main model before its answer
AGENT_TOOL_ROUNDS = 8  # kb_search rounds of the agent before submit_result (it has 10 rounds)
MAIN_RUNS = 300
AGENT_RUNS = 150
WARMUP_RUNS = 20
TARGET_MS = 1.0

QUESTION = "What do the invoices say about Bimbamjob's payment delays in 2024?"


class Echo(Tool):
    """The cheapest possible tool: it returns its arguments."""

    @property
    def spec(self) -> ToolSpec:
        return ToolSpec(
            name="echo",
            description="Returns its text.",
            parameters={"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
        )

    async def run(self, args: dict[str, Any]) -> ToolOutcome:
        return ToolOutcome(json.dumps(args))


def echo_tools(scope: Scope) -> list[Tool]:
    return [Echo()]


def main_searches(request: ModelRequest, info: object) -> ModelResponse:
    """The main model: one kb_search (or echo) per round, then a final answer."""
    if len(tool_results(request)) < MAIN_TOOL_ROUNDS and request.tools:
        if request.tools[0].name == "echo":
            return ModelResponse(tool_calls=[call(request, "echo", {"text": "ping"})])
        kb = enum_of(request, "kb_search", "kb")[0]
        return ModelResponse(tool_calls=[call(request, "kb_search", {"query": "Bimbamjob payment", "kb": kb})])
    return ModelResponse(text=FINAL_ANSWER)


def main_delegates(request: ModelRequest, info: object) -> ModelResponse:
    """The main model: one agents call with one task, then a final answer."""
    if not tool_results(request):
        task = {
            "instruction": "Find what the invoices say about Bimbamjob's payment delays in 2024, with document ids.",
            "model": "bench-agent",
            "resources": ["kb:factures"],
            "max_rounds": AGENT_TOOL_ROUNDS + 2,
        }
        return ModelResponse(tool_calls=[call(request, "agents", {"tasks": [task]})])
    return ModelResponse(text=FINAL_ANSWER)


def agent_searches(request: ModelRequest, info: object) -> ModelResponse:
    """The agent: one kb_search per round, then submit_result."""
    if len(tool_results(request)) < AGENT_TOOL_ROUNDS:
        kb = enum_of(request, "kb_search", "kb")[0]
        return ModelResponse(tool_calls=[call(request, "kb_search", {"query": "Bimbamjob payment", "kb": kb})])
    report = {"findings": "Bimbamjob paid the March invoice 45 days late [factures-1].", "sources": ["factures-1"]}
    return ModelResponse(tool_calls=[call(request, "submit_result", report)])


async def _measure(runs: int, delegate: bool, echo: bool = False) -> tuple[list[float], list[float]]:
    """Per-round durations over ``runs`` runs, and each run's whole time divided by its rounds.

    ``delegate``: time the rounds of an agent; else those of the main loop, calling kb_search or,
    with ``echo``, a trivial tool.
    """
    rounds: list[float] = []
    per_run: list[float] = []
    policy = Policy(default_main_rounds=MAIN_TOOL_ROUNDS + 1)
    delegating = Policy(default_agent_rounds=AGENT_TOOL_ROUNDS + 2)
    for _ in range(runs):
        clock = RoundClock()
        if delegate:
            # The level's agent round budget binds: the task's max_rounds is within it.
            s = setup(main_delegates, agent_searches, policy=delegating, clock=clock)
            request = RunRequest(
                messages=(Message.user(QUESTION),), model="bench-main", resources=("kb:factures", "agents")
            )
        elif echo:
            s = setup(main_searches, policy=policy, clock=clock, toolbox=Toolbox(factories=[echo_tools]))
            request = RunRequest(messages=(Message.user(QUESTION),), model="bench-main")
        else:
            s = setup(main_searches, policy=policy, clock=clock)
            request = RunRequest(messages=(Message.user(QUESTION),), model="bench-main", resources=("kb:factures",))
        started = time.perf_counter()
        outcome = await run_chat(request, s.ctx)
        elapsed = time.perf_counter() - started
        if outcome.status != "ok":
            raise RuntimeError(f"the run ended {outcome.status}: {outcome.error}")
        if delegate:
            agent = outcome.agents[0]
            if agent.status != "ok" or agent.rounds != AGENT_TOOL_ROUNDS + 1:
                raise RuntimeError(f"the agent ended {agent.status} after {agent.rounds} rounds: {agent.reason}")
            rounds += clock.rounds(agents=True)
        else:
            if outcome.rounds != MAIN_TOOL_ROUNDS + 1:
                raise RuntimeError(f"expected {MAIN_TOOL_ROUNDS + 1} rounds, got {outcome.rounds}")
            rounds += clock.rounds(agents=False)
            per_run.append(elapsed / outcome.rounds)
    return rounds, per_run


@benchmark("Engine overhead per model round", order=10)
async def engine_overhead() -> list[Result]:
    """A `FunctionModel` that answers instantly (no latency, no sleep) stands for the model, so all
    the time measured is the engine's. Main loop: each run is one request over a knowledge base of
    three documents in which the main model calls `kb_search` once per round for 10 rounds, then
    answers in 26 words streamed one word a part (11 rounds). Agent loop: the main model delegates
    one task in one `agents` call; the agent calls `kb_search` once per round for 8 rounds, then
    `submit_result` (9 rounds, no forced landing). A round is timed with `time.perf_counter` from its
    `RoundStarted` event to the next one of the same loop (the last round to `FinalEvent` or
    `AgentFinished`), so it holds everything the engine does for it: building the request, the
    model call and its streaming, usage accounting, the tool call (BM25 search, JSON), the events,
    the history; nothing is subtracted. 300 main runs and 150 delegated runs after 20 warm-up runs
    each, in one event loop, with the garbage collector on; median and 95th percentile over all
    the rounds. For comparison, the main loop is also timed with a trivial `echo` tool (given through
    `Toolbox(factories=[...])`) in place of `kb_search`.
    """
    await _measure(WARMUP_RUNS, delegate=False)
    await _measure(WARMUP_RUNS, delegate=False, echo=True)
    await _measure(WARMUP_RUNS, delegate=True)
    gc.collect()
    main_rounds, per_run = await _measure(MAIN_RUNS, delegate=False)
    gc.collect()
    echo_rounds, _ = await _measure(MAIN_RUNS, delegate=False, echo=True)
    gc.collect()
    agent_rounds, _ = await _measure(AGENT_RUNS, delegate=True)
    ms = 1000.0
    main_median, agent_median = median(main_rounds) * ms, median(agent_rounds) * ms
    return [
        Result(
            name="Main-loop round, median",
            figure=main_median,
            unit="ms",
            target=below(TARGET_MS),
            digits=3,
            notes=(
                f"{len(main_rounds):,} rounds ({MAIN_RUNS} runs × {MAIN_TOOL_ROUNDS + 1}); whole run ÷ rounds, "
                f"setup included: median {median(per_run) * ms:.3f} ms"
            ),
        ),
        Result(
            name="Main-loop round, p95",
            figure=percentile(main_rounds, 95) * ms,
            unit="ms",
            digits=3,
            notes=f"max {max(main_rounds) * ms:.3f} ms",
        ),
        Result(
            name="Main-loop round with a trivial tool, median",
            figure=median(echo_rounds) * ms,
            unit="ms",
            digits=3,
            notes=(
                f"{MAIN_RUNS} runs × {MAIN_TOOL_ROUNDS + 1} rounds with an `echo` tool instead of `kb_search` (p95 "
                f"{percentile(echo_rounds, 95) * ms:.3f} ms); the difference is `kb_search` itself: "
                "`MemoryKnowledge`'s BM25 scoring (documents are tokenised once, when added) and its JSON result"
            ),
        ),
        Result(
            name="Agent round, median",
            figure=agent_median,
            unit="ms",
            target=below(TARGET_MS),
            digits=3,
            notes=f"{len(agent_rounds):,} rounds ({AGENT_RUNS} agents × {AGENT_TOOL_ROUNDS + 1})",
        ),
        Result(
            name="Agent round, p95",
            figure=percentile(agent_rounds, 95) * ms,
            unit="ms",
            digits=3,
            notes=f"max {max(agent_rounds) * ms:.3f} ms",
        ),
    ]
