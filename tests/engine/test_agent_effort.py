"""An agent's reasoning effort is the level's, translated for the agent's own model."""

from __future__ import annotations

import json

from assistant.engine.catalogue import Catalogue, ModelInfo
from assistant.engine.knowledge import MemoryKnowledge
from assistant.engine.loop import run_chat
from assistant.engine.models.function import CallInfo, FunctionModel
from assistant.engine.policy import RunRequest
from assistant.engine.runtime import RunContext
from assistant.engine.tools import Document, Toolbox
from assistant.engine.types import Message, ModelRequest, ModelResponse, ToolCall

MAIN = ModelInfo(id="plain-main", provider="t", display_name="Plain", input_price=4.0, cached_input_price=1.0,
                 output_price=16.0, context_window=64_000, output_cap=4_096)  # does not reason  # fmt: skip
THINKER = ModelInfo(id="small-thinker", provider="t", display_name="Thinker", input_price=0.2, cached_input_price=0.05,
                    output_price=0.8, context_window=32_000, output_cap=4_096, reasoning_efforts=("low", "medium"))  # fmt: skip


def main_model(request: ModelRequest, info: CallInfo) -> ModelResponse:
    if info.index == 0:
        task = {"instruction": "Report what doc-1 says.", "model": "small-thinker", "resources": ["kb:notes"]}
        return ModelResponse(tool_calls=[ToolCall("c1", "agents", json.dumps({"tasks": [task]}))])
    return ModelResponse(text="Done.")


def agent_model(request: ModelRequest, info: CallInfo) -> ModelResponse:
    report = {"findings": "doc-1 says hello [doc-1]"}
    return ModelResponse(tool_calls=[ToolCall("r1", "submit_result", json.dumps(report))])


async def test_agent_reasons_under_a_main_model_that_does_not() -> None:
    main, agent = FunctionModel(main_model, MAIN), FunctionModel(agent_model, THINKER)
    models = {MAIN.id: main, THINKER.id: agent}
    ctx = RunContext(
        catalogue=Catalogue([MAIN, THINKER]),
        models=models.__getitem__,
        toolbox=Toolbox(knowledge=MemoryKnowledge({"notes": [Document("doc-1", "notes", "Note", "hello")]})),
    )
    request = RunRequest(
        messages=(Message.user("q"),), model=MAIN.id, level="approfondi", resources=("kb:notes", "agents")
    )
    outcome = await run_chat(request, ctx)
    assert outcome.status == "ok" and outcome.agents[0].status == "ok"
    assert all(r.reasoning_effort is None for r in main.requests)  # the main model does not reason
    # Approfondi asks for "high"; the agent's model offers up to "medium": the nearest below.
    assert [r.reasoning_effort for r in agent.requests] == ["medium"]
