"""Size in tokens of a sub-agent's first request, for a scope of two knowledge bases."""

from __future__ import annotations

import json

from assistant.engine.loop import run_chat
from assistant.engine.policy import RunRequest
from assistant.engine.tokens import estimate_tokens
from assistant.engine.types import Message, ModelRequest, ModelResponse, ToolSpec

from ..fixtures import FINAL_ANSWER, call, setup, tool_results
from ..registry import Result, at_most, benchmark
from ..tokens import token_counter

SCOPE = ("kb:factures", "kb:comptes-rendus")
TARGET = 2_000
SEED_001_FRESH_AGENT = 10_000  # tokens of a fresh agent in the product of seed 001 (from the issue)
INSTRUCTION = (
    "Find in the invoices and the meeting notes everything about Bimbamjob in 2024: each invoice with its "
    "amount and date, whether and when it was paid, the payment delays, and what was said about payments "
    "in meetings. Read the relevant documents and report the facts with their document ids."
)


def main_model(request: ModelRequest, info: object) -> ModelResponse:
    if tool_results(request):
        return ModelResponse(text=FINAL_ANSWER)
    task = {"instruction": INSTRUCTION, "model": "bench-agent", "resources": list(SCOPE)}
    return ModelResponse(tool_calls=[call(request, "agents", {"tasks": [task]})])


def agent_model(request: ModelRequest, info: object) -> ModelResponse:
    report = {"findings": "Nothing read: this benchmark only looks at the first request.", "gaps": ["all"]}
    return ModelResponse(tool_calls=[call(request, "submit_result", report)])


def spec_text(spec: ToolSpec) -> str:
    """A tool as a provider receives it: the JSON of its name, description and parameters."""
    return json.dumps(
        {"name": spec.name, "description": spec.description, "parameters": spec.parameters}, ensure_ascii=False
    )


@benchmark("Sub-agent first request size", order=30)
async def agent_first_request() -> list[Result]:
    """A request over two knowledge bases (`kb:factures`, `kb:comptes-rendus`) whose main model
    delegates one task over both, with a 49-word instruction; the agent's model is a
    `FunctionModel`, which records every request it receives. The first one (what a fresh agent
    costs before it has done anything) is counted as its system prompt + its user message (the
    instruction and the scope) + the JSON text of each tool spec (name, description, parameters).
    Not counted: the few tokens a provider adds per message and its own framing of tool specs,
    which vary by provider. The notes give the counting method and the share of each part.
    """
    s = setup(main_model, agent_model)
    request = RunRequest(
        messages=(Message.user("Bimbamjob in 2024"),), model="bench-main", resources=(*SCOPE, "agents")
    )
    outcome = await run_chat(request, s.ctx)
    if outcome.status != "ok" or not s.agent.requests:
        raise RuntimeError(f"the run ended {outcome.status} without an agent request")
    first = s.agent.requests[0]
    if [m.role for m in first.messages] != ["system", "user"]:
        raise RuntimeError(f"unexpected first request: {[m.role for m in first.messages]}")
    counter = token_counter()
    parts = {
        "system prompt": first.messages[0].content,
        "user message": first.messages[1].content,
        **{f"tool {t.name}": spec_text(t) for t in first.tools},
    }
    counts = {name: counter.count(text) for name, text in parts.items()}
    total = sum(counts.values())
    estimate = sum(estimate_tokens(text) for text in parts.values())
    tools = sum(v for k, v in counts.items() if k.startswith("tool "))
    breakdown = ", ".join(f"{name} {n:,}" for name, n in counts.items())
    notes = [
        f"Counted with {counter.method}.",
        f"Parts: {breakdown} (tool specs together {tools:,}, {tools / total:.0%}).",
    ]
    if counter.exact:
        notes.append(f"The engine's estimate (characters ÷ 4) gives {estimate:,}.")
    notes.append(
        f"About {total / SEED_001_FRESH_AGENT:.0%} of the ~{SEED_001_FRESH_AGENT:,} tokens of a fresh agent "
        "in the product of seed 001."
    )
    return [
        Result(
            name="Agent's first request, 2 knowledge bases",
            figure=total,
            unit="tokens",
            target=at_most(TARGET),
            digits=0,
            notes=" ".join(notes),
        )
    ]
