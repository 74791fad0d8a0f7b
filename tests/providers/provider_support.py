"""Builders shared by the provider tests: the real SDK adapters pointed at a local wire server."""

from __future__ import annotations

import json
import threading
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from assistant.engine.catalogue import ModelInfo
from assistant.engine.models.base import Model
from assistant.engine.models.mistral import MistralModel
from assistant.engine.models.openai import OpenAIModel
from assistant.engine.models.responses import ResponsesModel
from assistant.engine.models.streaming import RetryPolicy
from assistant.engine.notes import without_note
from assistant.engine.providers.mistral import MistralProvider
from assistant.engine.providers.openai import OpenAIProvider
from assistant.engine.usage import RunUsage
from tests.providers.wire import Dialect, Reply, Turn, Usage, WireServer, sse_reply

FAST_RETRY = RetryPolicy(base_delay=0.01, max_delay=0.05)
# A plain (non-reasoning) model with prices, a context window and an output cap.
PLAIN = ModelInfo(
    id="plain",
    provider="test",
    display_name="Plain",
    input_price=1.0,
    cached_input_price=0.1,
    output_price=4.0,
    context_window=32_000,
    output_cap=4_000,
)


@dataclass
class Wire:
    """A server speaking one dialect and the provider (real SDK client) that talks to it."""

    dialect: Dialect
    server: WireServer
    provider: OpenAIProvider | MistralProvider
    models: dict[str, Model] = field(default_factory=dict)

    def model(
        self,
        info: ModelInfo,
        *,
        api_model: str | None = None,
        retry: RetryPolicy = FAST_RETRY,
        native_reasoning: bool = False,
    ) -> Model:
        if self.dialect == "responses":
            assert isinstance(self.provider, OpenAIProvider)
            model: Model = ResponsesModel(info, self.provider, api_model=api_model, retry=retry)
        elif isinstance(self.provider, OpenAIProvider):
            model = OpenAIModel(info, self.provider, api_model=api_model, retry=retry)
        else:
            model = MistralModel(
                info, self.provider, api_model=api_model, retry=retry, adjustable_reasoning=not native_reasoning
            )
        self.models[info.id] = model
        return model


def make_provider(
    dialect: Dialect, server: WireServer, *, official: bool | None = None
) -> OpenAIProvider | MistralProvider:
    if dialect in ("openai", "responses"):
        return OpenAIProvider(api_key="sk-test", base_url=server.url + "/v1", timeout=10, official=official)
    return MistralProvider(api_key="test-key", base_url=server.url, timeout=10)


class Brain:
    """Plays the models on the server side, from what each request contains; reports made-up usage."""

    def __init__(self, dialect: Dialect, names: dict[str, str]) -> None:
        self.dialect = dialect
        self.ids = {api: our for our, api in names.items()}
        self.reported: dict[str, list[Usage]] = defaultdict(list)
        self.lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> Reply:
        responses = "input" in body  # the Responses API: read as the chat completions it stands for
        seen = chat_view(body) if responses else body
        tools = [t["function"]["name"] for t in seen.get("tools", [])]
        turn = self.agent(seen) if "submit_result" in tools else self.main(seen)
        messages = seen["messages"]
        prompt = 40 + sum(len(json.dumps(m)) for m in messages) // 4
        reasons = "reasoning_effort" in body or "reasoning" in body
        usage = Usage(
            prompt_tokens=prompt,
            completion_tokens=15 + 10 * len(turn.calls) + len(turn.text.split()) + (7 if reasons else 0),
            cached_tokens=(prompt // 2 // 64) * 64 if len(messages) > 2 else 0,
            reasoning_tokens=7 if reasons else 0,
        )
        # A reasoning model on the Responses API reasons each turn, said in a summary that names the turn.
        rounds = sum(m["role"] == "assistant" for m in messages)
        thinking = f"Thinking {self.ids[body['model']]} {len(messages)}-{rounds}" if responses and reasons else ""
        with self.lock:
            self.reported[self.ids[body["model"]]].append(usage)
        dialect = "responses" if responses else self.dialect
        return sse_reply(dialect, body["model"], Turn(turn.text, turn.calls, usage, thinking=thinking))

    def main(self, body: dict[str, Any]) -> Turn:
        if not any(m["role"] == "tool" for m in body["messages"]):
            agents = next(t for t in body["tools"] if t["function"]["name"] == "agents")
            model = agents["function"]["parameters"]["properties"]["tasks"]["items"]["properties"]["model"]["enum"][0]
            tasks = [
                {
                    "instruction": "List the 2024 invoices of Bimbamjob and whether they were paid.",
                    "model": model,
                    "resources": ["kb:factures"],
                },
                {
                    "instruction": "What do the meeting reports say about Bimbamjob?",
                    "model": model,
                    "resources": ["kb:comptes-rendus"],
                    "max_rounds": 2,
                },
            ]
            return Turn("I will hand the searches to two agents.", (("agents", json.dumps({"tasks": tasks})),))
        return Turn(
            "Bimbamjob paid invoice F-2024-031 late [doc-1], left F-2024-077 unpaid [doc-2] and asked for instalments [doc-3]."
        )

    def agent(self, body: dict[str, Any]) -> Turn:
        messages = body["messages"]
        results = [json.loads(without_note(m["content"])) for m in messages if m["role"] == "tool"]
        kb = "factures" if "invoices" in messages[1]["content"] else "comptes-rendus"
        forced = isinstance(body.get("tool_choice"), dict)
        read = [d for r in results for d in r.get("documents", [])]
        if forced or read:
            report = {
                "findings": " ".join(f"{d['text']} [{d['id']}]" for d in read) or "Only search results so far.",
                "sources": [d["id"] for d in read],
                "gaps": [] if read else ["the documents were not read"],
            }
            return Turn(calls=(("submit_result", json.dumps(report)),))
        if not results and kb == "factures":
            return Turn(
                calls=(("kb_search", '{"query": "Bimbamjob", "kb": "factures"'),)
            )  # invalid JSON: corrected next turn
        hits = [h["id"] for r in results for h in r.get("hits", [])]
        if hits:
            return Turn(calls=(("kb_read", json.dumps({"ids": hits})),))
        return Turn(calls=(("kb_search", json.dumps({"query": "Bimbamjob", "kb": kb})),))


def check_billed_as_reported(usage: RunUsage, catalogue: Mapping[str, ModelInfo], brain: Brain) -> float:
    """Each model's calls and tokens (reasoning included) in ``usage`` are what ``brain`` reported, its cost is their
    price in ``catalogue`` and its carbon is estimated for every call; returns the run's price, every model's summed."""
    priced = 0.0
    for model_id, reported in brain.reported.items():
        got = usage.by_model[model_id]
        assert got.calls == len(reported)
        assert got.prompt_tokens == sum(u.prompt_tokens for u in reported)
        assert got.completion_tokens == sum(u.completion_tokens for u in reported)
        assert got.cached_prompt_tokens == sum(u.cached_tokens for u in reported)
        assert got.reasoning_tokens == sum(u.reasoning_tokens for u in reported)
        info = catalogue[model_id]
        fresh = got.prompt_tokens - got.cached_prompt_tokens
        price = (
            fresh * info.input_price
            + got.cached_prompt_tokens * info.cached_input_price
            + got.completion_tokens * info.output_price  # reasoning tokens are output tokens
        ) / 1e6
        assert got.cost_eur == pytest.approx(price)
        assert got.carbon_g > 0 and got.estimated_calls == got.calls
        priced += price
    return priced


def chat_view(body: dict[str, Any]) -> dict[str, Any]:
    """A Responses API request as the chat completions request it stands for (reasoning items left out): the
    brain reads that."""
    messages: list[dict[str, Any]] = []
    if body.get("instructions"):
        messages.append({"role": "system", "content": body["instructions"]})
    for item in body["input"]:
        kind = item.get("type", "message")
        if kind == "function_call_output":
            messages.append({"role": "tool", "content": item["output"], "tool_call_id": item["call_id"]})
        elif kind == "function_call":
            call = {"id": item["call_id"], "type": "function",
                    "function": {"name": item["name"], "arguments": item["arguments"]}}  # fmt: skip
            if not messages or messages[-1]["role"] != "assistant" or "tool_calls" not in messages[-1]:
                if messages and messages[-1]["role"] == "assistant":
                    messages[-1]["tool_calls"] = []
                else:
                    messages.append({"role": "assistant", "content": None, "tool_calls": []})
            messages[-1]["tool_calls"].append(call)
        elif kind == "message":
            messages.append({"role": item["role"], "content": item["content"]})
    tools = [
        {"type": "function", "function": {"name": t["name"], "description": t.get("description"), "parameters": t["parameters"]}}
        for t in body.get("tools", [])
    ]  # fmt: skip
    choice = body.get("tool_choice")
    if isinstance(choice, dict):
        choice = {"type": "function", "function": {"name": choice["name"]}}
    return {"model": body["model"], "messages": messages, "tools": tools, "tool_choice": choice}
