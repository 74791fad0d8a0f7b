"""Per-model settings follow the agent's model (seed 001): its effort (tests/engine/test_agent_effort.py), its output
cap with room for its reasoning, and its history kept inside its own window, the reasoning it sends back counted."""

from __future__ import annotations

import json

from assistant.engine.agent import run_agent
from assistant.engine.catalogue import Catalogue, ModelInfo
from assistant.engine.knowledge import MemoryKnowledge
from assistant.engine.loop import run_chat
from assistant.engine.models.function import CallInfo, FunctionModel
from assistant.engine.outcomes import AgentTask
from assistant.engine.policy import RunRequest
from assistant.engine.runtime import RunContext
from assistant.engine.tools import Document, Toolbox
from assistant.engine.types import Effort, Message, ModelRequest, ModelResponse, Reasoning, ToolCall
from assistant.engine.usage import AgentBudget


def _info(
    model_id: str, *, window: int = 64_000, cap: int = 4_096, efforts: tuple[Effort, ...] = (), price: float = 4.0
) -> ModelInfo:
    return ModelInfo(id=model_id, provider="t", display_name=model_id, input_price=price, cached_input_price=price / 4,
                     output_price=price * 4, context_window=window, output_cap=cap, reasoning_efforts=efforts)  # fmt: skip


MAIN = _info("main", cap=32_000, efforts=("low", "medium", "high"))
THINKER = _info("thinker", cap=20_000, efforts=("low", "medium"), price=0.2)
PLAIN = _info("plain", cap=20_000, price=0.2)
SHORT = _info("short-thinker", cap=6_000, efforts=("high",), price=0.2)
NOTES = MemoryKnowledge({"notes": [Document("doc-1", "notes", "Note", "hello")]})


def _main(request: ModelRequest, info: CallInfo) -> ModelResponse:
    if info.index == 0:
        tasks = [{"instruction": f"Report doc-1 ({m}).", "model": m, "resources": ["kb:notes"]} for m in
                 ("thinker", "plain", "short-thinker")]  # fmt: skip
        return ModelResponse(tool_calls=[ToolCall("c1", "agents", json.dumps({"tasks": tasks}))])
    return ModelResponse(text="Done.")


def _agent(request: ModelRequest, info: CallInfo) -> ModelResponse:
    return ModelResponse(tool_calls=[ToolCall("r1", "submit_result", json.dumps({"findings": "hello [doc-1]"}))])


async def test_each_agents_output_cap_leaves_room_for_its_own_models_reasoning() -> None:
    models = {MAIN.id: FunctionModel(_main, MAIN)} | {m.id: FunctionModel(_agent, m) for m in (THINKER, PLAIN, SHORT)}
    ctx = RunContext(catalogue=Catalogue([MAIN, THINKER, PLAIN, SHORT]), models=models.__getitem__,
                     toolbox=Toolbox(knowledge=NOTES))  # fmt: skip
    request = RunRequest(messages=(Message.user("q"),), model=MAIN.id, level="approfondi",
                         resources=("kb:notes", "agents"))  # fmt: skip
    outcome = await run_chat(request, ctx)
    assert outcome.status == "ok" and [a.status for a in outcome.agents] == ["ok", "ok", "ok"]

    def sent(model_id: str) -> tuple[object, object]:
        (only,) = models[model_id].requests
        return only.reasoning_effort, only.max_output_tokens

    # An agent's answer is capped at 4,000 tokens; a reasoning model's cap counts its reasoning too: four times that,
    # within its own model's cap. The effort is the level's (high), translated to what each model offers.
    assert sent(THINKER.id) == ("medium", 16_000)
    assert sent(PLAIN.id) == (None, 4_000)
    assert sent(SHORT.id) == ("high", 6_000)
    # The main model's calls: its own cap, at the level's effort.
    assert {(r.reasoning_effort, r.max_output_tokens) for r in models[MAIN.id].requests} == {("high", 32_000)}


async def test_an_agents_history_with_its_reasoning_stays_inside_its_own_window() -> None:
    small = _info("small-thinker", window=12_000, cap=1_000, efforts=("high",))
    documents = [Document(f"doc-{i}", "factures", f"Invoice {i}", f"Invoice {i}: {i},000 EUR. " + "z" * 5_000)
                 for i in range(1, 7)]  # fmt: skip

    def agent(request: ModelRequest, info: CallInfo) -> ModelResponse:
        thought = Reasoning(format="openai", model="small", id=f"rs_{info.index}", encrypted="e" * 3_200,
                            summary=(f"Read doc-{info.index + 1} next.",))  # fmt: skip
        if info.index < 6:
            call = ToolCall(f"r{info.index}", "kb_read", json.dumps({"ids": [f"doc-{info.index + 1}"]}))
            return ModelResponse(tool_calls=[call], reasoning=[thought])
        report = {"findings": "Read the six invoices.", "sources": [d.id for d in documents], "gaps": []}
        return ModelResponse(tool_calls=[ToolCall("done", "submit_result", json.dumps(report))], reasoning=[thought])

    model = FunctionModel(agent, small)
    ctx = RunContext(catalogue=Catalogue([small]), models=lambda _: model,
                     toolbox=Toolbox(knowledge=MemoryKnowledge({"factures": documents})))  # fmt: skip
    task = AgentTask(instruction="Read the invoices.", model=small, resources=("kb:factures",), max_rounds=10)
    outcome = await run_agent(ctx, "agent-1", task, AgentBudget(max_rounds=10, max_tokens=10**6), "high")

    assert outcome.status == "ok", outcome.reason
    for n, request in enumerate(model.requests):
        # What it is sent, at about four characters a token, its reasoning (sent back whole, never shortened) included.
        chars = sum(len(m.content) + sum(len(c.arguments) for c in m.tool_calls)
                    + sum(len(r.encrypted) + len(r.text) for r in m.reasoning) for m in request.messages)  # fmt: skip
        assert chars // 4 + (request.max_output_tokens or 0) <= small.context_window, n
        turns = [m for m in request.messages if m.role == "assistant"]
        assert [r.id for m in turns for r in m.reasoning] == [f"rs_{i}" for i in range(n)]
    assert any("compacted" in m.content for m in model.requests[-1].messages)
