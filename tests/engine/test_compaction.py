"""An agent's history is compacted before it nears its own model's context window.

The instruction, the scope and the findings so far stay; the latest results stay whole; it goes
down far enough not to compact again at the next turn.
"""

from __future__ import annotations

import json

from assistant.engine.agent import run_agent
from assistant.engine.catalogue import Catalogue, ModelInfo
from assistant.engine.compaction import CUT, compact
from assistant.engine.knowledge import MemoryKnowledge
from assistant.engine.loop import MAIN_SYSTEM_PROMPT, run_chat
from assistant.engine.models.function import CallInfo, FunctionModel
from assistant.engine.outcomes import AgentTask
from assistant.engine.policy import RunRequest
from assistant.engine.runtime import RunContext
from assistant.engine.tokens import request_tokens
from assistant.engine.tools import Document, Toolbox
from assistant.engine.types import Message, ModelRequest, ModelResponse, ToolCall
from assistant.engine.usage import AgentBudget

SYSTEM = Message.system("You are a research agent.")
FIRST = Message.user("Instruction:\nFind the invoices of Bimbamjob.\nYour scope:\n- knowledge base factures")


def read_turn(n: int, ids: list[str], chars: int) -> list[Message]:
    call = ToolCall(f"c{n}", "kb_read", json.dumps({"ids": ids}))
    docs = [
        {"id": i, "kb": "factures", "title": f"Invoice {i}", "text": f"Invoice {i}: 1,000 EUR. " + "x" * chars}
        for i in ids
    ]
    return [
        Message.assistant(f"Reading {', '.join(ids)}.", (call,)),
        Message.tool(call, json.dumps({"documents": docs})),
    ]


def search_turn(n: int) -> list[Message]:
    call = ToolCall(f"s{n}", "kb_search", json.dumps({"query": "Bimbamjob", "kb": "factures"}))
    hits = [{"id": f"doc-{i}", "title": f"Invoice doc-{i}", "snippet": "y" * 150} for i in range(8)]
    return [
        Message.assistant("", (call,)),
        Message.tool(call, json.dumps({"kb": "factures", "query": "Bimbamjob", "count": 8, "hits": hits})),
    ]


def tokens(messages: list[Message]) -> int:
    return request_tokens(tuple(messages))


def test_a_short_history_is_left_alone() -> None:
    messages = [SYSTEM, FIRST, *search_turn(1)]
    assert not compact(messages, 100_000)
    assert messages == [SYSTEM, FIRST, *search_turn(1)]


def test_old_results_become_digests_that_keep_the_findings_and_the_latest_round_stays_whole() -> None:
    latest = read_turn(4, ["doc-5", "doc-6"], 3_000)
    messages = [
        SYSTEM,
        FIRST,
        *search_turn(1),
        *read_turn(2, ["doc-1", "doc-2"], 6_000),
        *read_turn(3, ["doc-3"], 6_000),
        *latest,
    ]
    window = int(tokens(messages) / 0.8)  # the history is at 80% of the window

    assert compact(messages, window)

    assert messages[:2] == [SYSTEM, FIRST]  # the instruction and the scope
    assert messages[-2:] == latest  # the results the agent has not read yet
    assert [m.content for m in messages if m.role == "assistant"][:3] == ["", "Reading doc-1, doc-2.", "Reading doc-3."]
    results = [json.loads(m.content) for m in messages[:-2] if m.role == "tool"]
    # Oldest first, and only as far as needed: the search and the first read are digests now.
    assert ["compacted" in r for r in results] == [True, True, False]
    assert [h["id"] for h in results[0]["hits"]] == [f"doc-{i}" for i in range(8)]
    read = [d for r in results for d in r.get("documents", [])]
    assert [d["id"] for d in read] == ["doc-1", "doc-2", "doc-3"]  # the findings so far: what was read
    assert all(d["excerpt"].startswith(f"Invoice {d['id']}: 1,000 EUR.") for d in results[1]["documents"])
    assert tokens(messages) <= window * 0.5
    # It went down far enough not to compact again at the next turn.
    messages += search_turn(5)
    assert not compact(messages, window)


def test_the_room_for_the_answer_and_the_tool_specs_counts() -> None:
    messages = [SYSTEM, FIRST, *read_turn(1, ["doc-1"], 8_000), *search_turn(2)]
    window = int(tokens(messages) / 0.6)  # below the 75% trigger...
    assert not compact(messages, window)
    assert compact(messages, window, reserve=window // 2)  # ...but not with half the window kept for the answer
    assert tokens(messages) <= window // 2


def test_a_latest_round_too_large_for_the_window_is_cut_rather_than_sent_to_fail() -> None:
    messages = [SYSTEM, FIRST, *read_turn(1, ["doc-1", "doc-2"], 20_000)]
    window = 6_000
    assert compact(messages, window, reserve=1_000)
    assert messages[:2] == [SYSTEM, FIRST]
    assert messages[-1].content.endswith(CUT)
    assert tokens(messages) <= window - 1_000


async def test_an_agent_near_its_small_window_keeps_its_instruction_and_findings_and_finishes() -> None:
    small = ModelInfo(
        id="small-window",
        provider="test",
        display_name="Small window",
        input_price=0.1,
        cached_input_price=0.01,
        output_price=0.3,
        context_window=9_000,
        output_cap=1_000,
    )
    documents = [
        Document(f"doc-{i}", "factures", f"Invoice {i}", f"Invoice {i} of Bimbamjob: {i},000 EUR. " + "z" * 5_000)
        for i in range(1, 7)
    ]

    def agent(request: ModelRequest, info: CallInfo) -> ModelResponse:
        if info.index < 6:
            return ModelResponse(
                tool_calls=[ToolCall(f"r{info.index}", "kb_read", json.dumps({"ids": [f"doc-{info.index + 1}"]}))]
            )
        seen = " ".join(m.content for m in request.messages)
        found = [d.id for d in documents if f'"{d.id}"' in seen]
        report = {"findings": f"Read {', '.join(found)}.", "sources": found, "gaps": []}
        return ModelResponse(tool_calls=[ToolCall("done", "submit_result", json.dumps(report))])

    model = FunctionModel(agent, small)
    ctx = RunContext(
        catalogue=Catalogue([small]),
        models=lambda _: model,
        toolbox=Toolbox(knowledge=MemoryKnowledge({"factures": documents})),
    )
    task = AgentTask(
        instruction="Find the invoices of Bimbamjob.", model=small, resources=("kb:factures",), max_rounds=10
    )

    outcome = await run_agent(ctx, "agent-1", task, AgentBudget(max_rounds=10, max_tokens=10**6), None)

    assert outcome.status == "ok", outcome.reason
    assert outcome.report.startswith("Read doc-1, doc-2, doc-3, doc-4, doc-5, doc-6.")
    first = model.requests[0].messages[:2]
    for request in model.requests:
        assert request.messages[:2] == first  # the instruction and the scope, byte for byte
        assert request.max_output_tokens is not None
        assert request_tokens(request.messages) + request.max_output_tokens <= small.context_window
    assert any("compacted" in m.content for m in model.requests[-1].messages)


# The main model's history: a long conversation ---------------------------------------------------------


def conversation(turns: int, chars: int) -> list[Message]:
    out: list[Message] = []
    for n in range(turns):
        out += [Message.user(f"Question {n}: " + "q" * chars), Message.assistant(f"Answer {n}: " + "a" * chars)]
    return out


def main_model(model_id: str, *, context_window: int, output_cap: int) -> ModelInfo:
    return ModelInfo(
        id=model_id,
        provider="test",
        display_name=model_id,
        input_price=1.0,
        cached_input_price=0.1,
        output_price=3.0,
        context_window=context_window,
        output_cap=output_cap,
    )


async def test_a_long_conversation_leaves_out_its_oldest_messages_and_says_so() -> None:
    small = main_model("small-main", context_window=8_000, output_cap=1_000)
    model = FunctionModel(lambda request, info: ModelResponse(text="Here it is."), small)
    ctx = RunContext(catalogue=Catalogue([small]), models=lambda _: model, toolbox=Toolbox())
    earlier = conversation(20, 2_000)  # about 20,000 tokens: far more than the window
    question = Message.user("And the latest invoice of Bimbamjob?")

    outcome = await run_chat(RunRequest(messages=(*earlier, question), model=small.id), ctx)

    assert outcome.status == "ok" and outcome.text == "Here it is."
    [request] = model.requests
    assert request.max_output_tokens is not None
    assert request_tokens(request.messages) + request.max_output_tokens <= small.context_window
    system, *kept = request.messages
    assert kept[-1] == question  # the request's own message is whole
    assert kept[0].role == "user" and kept[0].content.startswith("Question ")  # whole turns, from a question
    assert kept == [*earlier[-(len(kept) - 1) :], question] and len(kept) > 1  # the most recent ones, in order
    left_out = len(earlier) - (len(kept) - 1)
    assert system.content.startswith(MAIN_SYSTEM_PROMPT)
    assert f"{left_out} earlier messages of this conversation were left out" in system.content


async def test_a_conversation_that_fits_is_sent_whole() -> None:
    info = main_model("roomy", context_window=128_000, output_cap=4_000)
    model = FunctionModel(lambda request, info: ModelResponse(text="Fine."), info)
    ctx = RunContext(catalogue=Catalogue([info]), models=lambda _: model, toolbox=Toolbox())
    messages = (*conversation(5, 500), Message.user("Thanks, and the total?"))

    await run_chat(RunRequest(messages=messages, model=info.id), ctx)

    [request] = model.requests
    assert request.messages == (Message.system(MAIN_SYSTEM_PROMPT), *messages)
