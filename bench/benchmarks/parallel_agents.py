"""Parallel efficiency of four agents whose model takes 0.3 s a call."""

from __future__ import annotations

import json
import time

from assistant.engine.loop import run_chat
from assistant.engine.models.function import FunctionModel
from assistant.engine.notes import without_note
from assistant.engine.policy import RunRequest
from assistant.engine.types import Message, ModelRequest, ModelResponse

from ..fixtures import FINAL_ANSWER, KNOWLEDGE_BASES, call, enum_of, setup, tool_results
from ..registry import Result, at_least, benchmark

LATENCY = 0.3  # seconds per agent model call
AGENTS = 4
CALLS_PER_AGENT = 3  # kb_search, kb_read, submit_result
REPEATS = 3
TARGET = 0.9


def main_model(request: ModelRequest, info: object) -> ModelResponse:
    """Instant main model: one ``agents`` call with one task per knowledge base of the request, then an answer."""
    if tool_results(request):
        return ModelResponse(text=FINAL_ANSWER)
    resources = enum_of_resources(request)
    tasks = [
        {
            "instruction": f"Find what the documents of {r[3:]} say about Bimbamjob's payments in 2024, with ids.",
            "model": "bench-agent",
            "resources": [r],
        }
        for r in resources
    ]
    return ModelResponse(tool_calls=[call(request, "agents", {"tasks": tasks})])


def enum_of_resources(request: ModelRequest) -> list[str]:
    spec = next(t for t in request.tools if t.name == "agents")
    item = spec.parameters["properties"]["tasks"]["items"]["properties"]["resources"]["items"]
    return [str(r) for r in item["enum"] if str(r).startswith("kb:")]


def agent_model(request: ModelRequest, info: object) -> ModelResponse:
    """The agent: search, read the hits, submit (the 0.3 s latency is the FunctionModel's)."""
    searches = tool_results(request, "kb_search")
    if not searches:
        kb = enum_of(request, "kb_search", "kb")[0]
        return ModelResponse(tool_calls=[call(request, "kb_search", {"query": "Bimbamjob payment", "kb": kb})])
    ids = [h["id"] for h in json.loads(without_note(searches[0].content))["hits"]]
    if not tool_results(request, "kb_read"):
        return ModelResponse(tool_calls=[call(request, "kb_read", {"ids": ids})])
    report = {"findings": f"Read {', '.join(ids)}.", "sources": ids}
    return ModelResponse(tool_calls=[call(request, "submit_result", report)])


async def _run(kbs: tuple[str, ...]) -> tuple[float, FunctionModel]:
    """One request whose main model delegates one task per knowledge base; its wall time."""
    s = setup(main_model, agent_model, agent_latency=LATENCY)
    request = RunRequest(
        messages=(Message.user("Bimbamjob: payments in 2024"),),
        model="bench-main",
        resources=(*(f"kb:{kb}" for kb in kbs), "agents"),
    )
    started = time.perf_counter()
    outcome = await run_chat(request, s.ctx)
    elapsed = time.perf_counter() - started
    bad = [a for a in outcome.agents if a.status != "ok" or a.rounds != CALLS_PER_AGENT]
    if outcome.status != "ok" or len(outcome.agents) != len(kbs) or bad:
        raise RuntimeError(
            f"the run ended {outcome.status} with agents {[(a.status, a.rounds) for a in outcome.agents]}"
        )
    return elapsed, s.agent


def _max_overlap(intervals: list[tuple[float, float]]) -> int:
    """The most model calls in flight at one instant."""
    edges = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    best = now = 0
    for _, step in edges:
        now += step
        best = max(best, now)
    return best


@benchmark("Parallel efficiency of 4 agents", order=20)
async def parallel_agents() -> list[Result]:
    """The main model answers instantly; the agent model is a `FunctionModel` with a latency of
    0.3 s a call, and each agent makes 3 calls: `kb_search`, `kb_read` of the hits, `submit_result`
    (so 0.9 s of model time per agent). Sequential time: 4 requests run one after the other, each
    delegating 1 task over its own knowledge base (the sum of their wall times, measured with
    `time.perf_counter` around `run_chat`). Parallel time: 1 request delegating the same 4 tasks
    in one `agents` call. Efficiency = sequential ÷ (4 × parallel); 1.0 would be perfect overlap
    with zero overhead. Repeated 3 times; the table gives the repetition of median efficiency. The
    notes give the most agent model calls seen in flight at once (from the model's call intervals).
    """
    trials: list[tuple[float, float, float, int]] = []
    for _ in range(REPEATS):
        sequential = 0.0
        for kb in KNOWLEDGE_BASES[:AGENTS]:
            elapsed, _ = await _run((kb,))
            sequential += elapsed
        parallel, agent = await _run(KNOWLEDGE_BASES[:AGENTS])
        trials.append((sequential / (AGENTS * parallel), sequential, parallel, _max_overlap(agent.intervals)))
    efficiency, sequential, parallel, overlap = sorted(trials)[len(trials) // 2]
    ideal = AGENTS * CALLS_PER_AGENT * LATENCY
    all_ratios = ", ".join(f"{t[0]:.3f}" for t in trials)
    return [
        Result(
            name="Parallel efficiency, 4 agents",
            figure=efficiency,
            target=at_least(TARGET),
            digits=3,
            notes=f"sequential ÷ (4 × parallel); the {REPEATS} repetitions: {all_ratios}",
        ),
        Result(
            name="Sequential time (4 × 1 agent)",
            figure=sequential,
            unit="s",
            digits=3,
            notes=f"model time alone: {ideal:.1f} s",
        ),
        Result(
            name="Parallel time (1 × 4 agents)",
            figure=parallel,
            unit="s",
            digits=3,
            notes=f"model time alone: {CALLS_PER_AGENT * LATENCY:.1f} s; at most {overlap} agent calls in flight at once",
        ),
    ]
