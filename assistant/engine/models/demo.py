"""The offline demo provider: no key, no network, deterministic, and honest about what it is.

It does not understand language. It follows a fixed procedure that exercises every feature: with
the ``agents`` tool it delegates one agent per knowledge base in parallel; its agents search, read
several documents in one turn and end through ``submit_result`` (or land when forced); without
agents it searches and reads itself; when its knowledge bases hold tables (``data_query`` is offered),
it totals the first numeric column of the first table by its first text column, in the round where it
reads; it then writes an answer citing what was read. Text streams word by word at a configurable pace
so live progress can be watched.

Three markers in the question make its agents end otherwise, to show those outcomes offline (the demo's
own, said in its answer): ``#demo-rounds=N`` gives each agent a round budget of N (with 2 or less it is
interrupted by its budget at its forced landing), ``#demo-fail`` makes each agent's model call fail
as an unreachable provider would, and ``#demo-hang=S`` makes each agent's model calls after its first
round hang S seconds before answering, as a provider that does not answer (Stop aborts them).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from typing import Any

from ..catalogue import ModelInfo
from ..errors import ModelUnavailable
from ..tokens import estimate_tokens, prompt_tokens, request_tokens
from ..types import (
    FinishPart,
    Message,
    ModelRequest,
    ModelResponse,
    NamedTool,
    StreamPart,
    TextDelta,
    ToolCall,
    ToolCallPart,
    ToolSpec,
    UsagePart,
)
from .base import Model

DEMO_MODELS: tuple[ModelInfo, ...] = (
    ModelInfo(
        id="demo-large",
        provider="demo",
        display_name="Demo Large",
        input_price=2.0,
        cached_input_price=0.5,
        output_price=6.0,
        context_window=128_000,
        output_cap=8_192,
        reasoning_efforts=("low", "medium", "high"),
        is_demo=True,
    ),
    ModelInfo(
        id="demo-small",
        provider="demo",
        display_name="Demo Small",
        input_price=0.2,
        cached_input_price=0.05,
        output_price=0.6,
        context_window=32_000,
        output_cap=4_096,
        is_demo=True,
    ),
)

DEMO_ROUNDS = re.compile(r"#demo-rounds=(\d+)")
DEMO_FAIL = "#demo-fail"
DEMO_HANG = re.compile(r"#demo-hang=(\d+(?:\.\d+)?)")
DEMO_FAILURE = "the offline demo model fails here on purpose (the question asked for it with #demo-fail)"
DEMO_FOOTER = "_Written by the offline demo model, which assembles what was read; no language model was used._"

_STOPWORDS = frozenset(
    """a an and are as at be by for from has have how i in is it its me my of on or our please that the their
    them they this to was what when where which who why will with you your about all any can could do does did
    tell give show find list summary summarise summarize everything know say said over into than then there
    le la les un une des du de et est sont ou où que qui quoi quel quelle quels quelles pour par sur dans avec
    au aux ce cet cette ces se sa son ses leur leurs nous vous il elle ils elles je tu on pas plus moins très
    fiche complète complet complete sheet fais fait faire donne donner dis dire tout tous toute toutes comment pourquoi quand entre chez depuis""".split()
)


def keywords(text: str, limit: int = 6) -> list[str]:
    """The content words of a text, in order, without duplicates."""
    seen: list[str] = []
    for word in re.findall(r"[\w][\w'-]*", text):
        w = word.strip("'-")
        if len(w) < 3 or w.lower() in _STOPWORDS or w.lower() in (s.lower() for s in seen):
            continue
        seen.append(w)
        if len(seen) == limit:
            break
    return seen


def _spec(request: ModelRequest, name: str) -> ToolSpec | None:
    return next((t for t in request.tools if t.name == name), None)


def _enum(spec: ToolSpec, *path: str) -> list[str]:
    node: Any = spec.parameters
    for key in path:
        node = node.get(key, {}) if isinstance(node, dict) else {}
    values = node.get("enum", []) if isinstance(node, dict) else []
    return [str(v) for v in values]


def _tool_results(messages: tuple[Message, ...], name: str) -> list[dict[str, Any]]:
    found = []
    for m in messages:
        if m.role == "tool" and m.name == name:
            try:
                value = json.loads(m.content)
            except ValueError:
                continue
            if isinstance(value, dict):
                found.append(value)
    return found


def _connector_tools(request: ModelRequest) -> list[tuple[str, str]]:
    """The connector tools offered (``mcp_<name>__<tool>``) that take one string: (tool, its parameter)."""
    found = []
    for spec in request.tools:
        if not spec.name.startswith("mcp_"):
            continue
        props = spec.parameters.get("properties", {}) if isinstance(spec.parameters, dict) else {}
        strings = [k for k, v in props.items() if isinstance(v, dict) and v.get("type") == "string"]
        if len(strings) == 1:
            found.append((spec.name, strings[0]))
    return found


def _connector_data(messages: tuple[Message, ...]) -> list[tuple[str, str]]:
    """What connectors returned: (tool, each non-empty line inside its <connector_data>)."""
    found = []
    for m in messages:
        # A refusal or an error is a JSON object; a result is the connector's text in its wrapper.
        if m.role == "tool" and m.name and m.name.startswith("mcp_") and not m.content.startswith("{"):
            _, _, after = m.content.partition("<connector_data")
            inside = after.partition(">")[2].rpartition("</connector_data>")[0]
            found += [(m.name, line.strip()) for line in inside.splitlines() if line.strip()]
    return found


def _connector_source(tool: str) -> str:
    """``mcp_crm__search_customers`` -> ``mcp:crm/search_customers``, the source id of what it read."""
    name, _, rest = tool.removeprefix("mcp_").partition("__")
    return f"mcp:{name}/{rest}"


def _demo_sql(request: ModelRequest) -> str | None:
    """The demo's query over the first table the ``data_query`` description lists, as ``name(column TYPE, ...)``:
    the first numeric column summed by the first text column (or the rows counted)."""
    spec = _spec(request, "data_query")
    if spec is None:
        return None
    listed = spec.description.split("Tables, with their columns: ", 1)[-1]
    match = re.match(r"(\w+)\(([^()]*)\)", listed)
    if match is None:
        return None
    table = match.group(1)
    columns = [c.strip().rsplit(" ", 1) for c in match.group(2).split(",") if " " in c.strip()]
    text = next((name for name, kind in columns if kind == "VARCHAR"), None)
    number = next((name for name, kind in columns if kind in _NUMERIC), None)
    if text is None:
        return f"SELECT COUNT(*) AS lignes FROM {table}"
    if number is None:
        return f"SELECT {text}, COUNT(*) AS lignes FROM {table} GROUP BY {text} ORDER BY lignes DESC"
    return f"SELECT {text}, SUM({number}) AS total, COUNT(*) AS lignes FROM {table} GROUP BY {text} ORDER BY total DESC"


_NUMERIC = frozenset({"DOUBLE", "BIGINT", "INTEGER", "DECIMAL", "FLOAT", "HUGEINT", "SMALLINT"})


def _queried(messages: tuple[Message, ...]) -> list[str]:
    """What the demo's queries returned, in words: the table each one gave, with its row count."""
    return [f"{q['row_count']} rows:\n\n{q['table']}" for q in _tool_results(messages, "data_query") if "table" in q]


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+|\n+", text) if s.strip()]


def _extract(doc: dict[str, Any], words: list[str], limit: int = 2) -> list[str]:
    """The sentences of a document that mention the words, else its first sentences."""
    sentences = _sentences(str(doc.get("text", "")))
    lowered = [w.lower() for w in words]
    hits = [s for s in sentences if any(w in s.lower() for w in lowered)]
    return (hits or sentences)[:limit]


class DemoModel(Model):
    """The demo model; ``pace`` is the delay between streamed words, ``latency`` before the first part."""

    def __init__(self, info: ModelInfo, *, pace: float = 0.0, latency: float = 0.0) -> None:
        super().__init__(info)
        self.pace = pace
        self.latency = latency
        self._calls = 0

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamPart]:
        self._calls += 1
        if _spec(request, "submit_result") is not None and DEMO_FAIL in request.messages[1].content:
            if self.latency:
                await asyncio.sleep(self.latency)
            raise ModelUnavailable(DEMO_FAILURE, unsent=True)
        hang = _spec(request, "submit_result") is not None and DEMO_HANG.search(request.messages[1].content)
        if hang and any(m.role == "assistant" for m in request.messages):  # after the agent's first round
            await asyncio.sleep(float(hang.group(1)))
        response = self.respond(request)
        if self.latency:
            await asyncio.sleep(self.latency)
        if response.text:
            pieces = re.findall(r"\S+\s*|\s+", response.text)
            for piece in pieces:
                if self.pace:
                    await asyncio.sleep(self.pace)
                yield TextDelta(piece)
        for call in response.tool_calls:
            yield ToolCallPart(call)
        prompt = prompt_tokens(request)
        # Providers cache the prefix a request shares with the previous one, in blocks.
        cached = (request_tokens(request.messages[:-1]) // 128) * 128 if len(request.messages) > 2 else 0
        completion = estimate_tokens(response.text) + sum(estimate_tokens(c.arguments) for c in response.tool_calls)
        yield UsagePart(prompt_tokens=prompt, completion_tokens=completion, cached_prompt_tokens=min(cached, prompt))
        yield FinishPart("tool_calls" if response.tool_calls else "stop")

    # The procedure -------------------------------------------------------------------------

    def respond(self, request: ModelRequest) -> ModelResponse:
        if _spec(request, "submit_result") is not None:
            return self._agent(request)
        return self._main(request)

    def _call(self, name: str, arguments: dict[str, Any], n: int) -> ToolCall:
        return ToolCall(id=f"call_{self._calls}_{n}", name=name, arguments=json.dumps(arguments, ensure_ascii=False))

    def _agent(self, request: ModelRequest) -> ModelResponse:
        messages = request.messages
        instruction = messages[1].content.split("Your scope:")[0].removeprefix("Instruction:").strip()
        words = keywords(instruction.split(":", 1)[-1].split(". ")[0]) or keywords(instruction)
        search = _spec(request, "kb_search")
        kbs = _enum(search, "properties", "kb") if search else []
        searches = _tool_results(messages, "kb_search")
        reads = [d for r in _tool_results(messages, "kb_read") for d in r.get("documents", [])]
        forced = isinstance(request.tool_choice, NamedTool)
        if not forced and kbs and not searches:
            calls = [self._call("kb_search", {"query": " ".join(words), "kb": kb}, i) for i, kb in enumerate(kbs)]
            return ModelResponse(tool_calls=calls)
        connectors = _connector_tools(request)
        asked = [m for m in messages if m.role == "tool" and m.name and m.name.startswith("mcp_")]
        if not forced and connectors and not asked:
            calls = [self._call(tool, {param: " ".join(words)}, i) for i, (tool, param) in enumerate(connectors[:4])]
            return ModelResponse(tool_calls=calls)
        connector_lines = _connector_data(messages)
        hit_ids = [h["id"] for s in searches for h in s.get("hits", [])[:3]]
        sql = _demo_sql(request)
        queried = bool([m for m in messages if m.role == "tool" and m.name == "data_query"])
        if not forced and ((hit_ids and not reads) or (sql and not queried)):
            calls = [self._call("kb_read", {"ids": hit_ids}, 0)] if hit_ids and not reads else []
            if sql and not queried:
                calls.append(self._call("data_query", {"sql": sql}, len(calls)))
            return ModelResponse(tool_calls=calls)
        findings = [f"{s} [{d['id']}]" for d in reads for s in _extract(d, words)]
        findings += [f"{line} [{_connector_source(tool)}]" for tool, line in connector_lines]
        findings += [f"The query `{sql}` gave {q}" for q in _queried(messages)]
        if not findings and searches:
            findings = [f"{h['title']}: {h['snippet']} [{h['id']}]" for s in searches for h in s.get("hits", [])[:3]]
        found_text = " ".join(findings).lower()
        gaps = [f"nothing found about '{w}'" for w in words if w.lower() not in found_text]
        if not reads and kbs:
            gaps.append("documents were not read, only search results")
        report = {
            "findings": "\n".join(f"- {f}" for f in findings) or "Nothing relevant was found in my scope.",
            "sources": [d["id"] for d in reads]
            + [_connector_source(t) for t in dict.fromkeys(t for t, _ in connector_lines)]
            or hit_ids,
            "gaps": gaps,
        }
        return ModelResponse(tool_calls=[self._call("submit_result", report, 0)])

    def _main(self, request: ModelRequest) -> ModelResponse:
        messages = request.messages
        question = next(
            (m.content for m in reversed(messages) if m.role == "user" and not m.content.startswith("[")), ""
        )
        words = keywords(DEMO_HANG.sub("", DEMO_ROUNDS.sub("", question)).replace(DEMO_FAIL, ""))
        hang = DEMO_HANG.search(question)
        last = messages[-1]
        if last.role == "user" and request.tools:
            agents = _spec(request, "agents")
            if agents is not None:
                props = agents.parameters["properties"]["tasks"]["items"]["properties"]
                kbs = [r for r in props["resources"]["items"]["enum"] if r.startswith("kb:")]
                connectors = [r for r in props["resources"]["items"]["enum"] if r.startswith("mcp:")]
                # Another demo model if one is offered: the demo stays offline even when real providers have keys.
                models = props["model"]["enum"]
                model = next((m for m in models if str(m).startswith("demo-")), models[0])
                tasks: list[dict[str, Any]] = [
                    {
                        "instruction": f"Find in the knowledge base {kb[3:]} what the documents say about: {', '.join(words)}. "
                        "Read the relevant documents and report the facts with their document ids."
                        + (f" {DEMO_FAIL}" if DEMO_FAIL in question else "")
                        + (f" {hang.group(0)}" if hang else ""),
                        "model": model,
                        "resources": [kb],
                    }
                    for kb in kbs[:4]
                ]
                tasks += [
                    {
                        "instruction": f"Ask the connector {c[4:]} what it has about: {', '.join(words)}. "
                        "Report what it returns, with the connector as the source.",
                        "model": model,
                        "resources": [c],
                    }
                    for c in connectors[: 4 - len(tasks)]
                ]
                rounds = DEMO_ROUNDS.search(question)
                if rounds is not None:
                    for task in tasks:
                        task["max_rounds"] = int(rounds.group(1))
                if tasks:
                    what = "knowledge base(s)" if not connectors else "resource(s)"
                    text = f"I am handing the search of {len(tasks)} {what} to agents running {model}, in parallel."
                    return ModelResponse(text=text, tool_calls=[self._call("agents", {"tasks": tasks}, 0)])
            search = _spec(request, "kb_search")
            if search is not None:
                kbs = _enum(search, "properties", "kb")
                calls = [self._call("kb_search", {"query": " ".join(words), "kb": kb}, i) for i, kb in enumerate(kbs)]
                return ModelResponse(text="Let me search the knowledge bases.", tool_calls=calls)
        if (
            last.role == "tool"
            and request.tools
            and not [m for m in messages if m.role == "tool" and m.name != "kb_search"]
        ):
            # The round after the searches: read the hits, and query the tables when there are some.
            ids = [h["id"] for s in _tool_results(messages, "kb_search") for h in s.get("hits", [])[:3]]
            calls = [self._call("kb_read", {"ids": ids}, 0)] if ids else []
            sql = _demo_sql(request)
            if sql:
                calls.append(self._call("data_query", {"sql": sql}, len(calls)))
            if calls:
                return ModelResponse(tool_calls=calls)
            connectors = _connector_tools(request)
            if connectors:
                calls = [
                    self._call(tool, {param: " ".join(words)}, i) for i, (tool, param) in enumerate(connectors[:4])
                ]
                return ModelResponse(text="Let me ask the connectors.", tool_calls=calls)
        return ModelResponse(text=self._answer(messages, words, question))

    def _answer(self, messages: tuple[Message, ...], words: list[str], question: str) -> str:
        delegated = [a for r in _tool_results(messages, "agents") for a in r.get("agents", []) if a]
        reads = [d for r in _tool_results(messages, "kb_read") for d in r.get("documents", [])]
        connector_lines = _connector_data(messages)
        queried = _queried(messages)
        if not delegated and not reads and not queried and connector_lines:
            lines = [f"- {line} [{_connector_source(tool)}]" for tool, line in connector_lines]
            return "Here is what the connectors returned.\n\n" + "\n".join(lines) + "\n\n" + DEMO_FOOTER
        if not delegated and not reads and not queried:
            if _tool_results(messages, "kb_search"):
                return "I found no document matching your question in the knowledge bases.\n\n" + DEMO_FOOTER
            topic = ", ".join(words) if words else "your message"
            return (
                f"This is the offline demo model. It does not understand language, so it cannot discuss {topic}. "
                "Enable one or more knowledge bases (and agents, at the Approfondi or Maximal level) and it will "
                "search them, read documents and write an answer citing them.\n\n" + DEMO_FOOTER
            )
        parts = [f"Here is what the documents say about {', '.join(words) or 'your question'}."]
        for agent in delegated:
            if "error" in agent:
                parts.append(f"**A task was refused:** {agent['error']}")
                continue
            header = f"**From {agent['agent']} ({agent['model']})**"
            body = agent.get("report", "").split("\n\nSources:")[0].strip()
            parts.append(f"{header}\n\n{body}")
            if agent.get("status") != "ok":
                parts.append(
                    f"_This agent did not finish ({agent.get('reason', 'no reason given')}): its findings are partial, "
                    "and I am not filling the gaps._"
                )
        if reads:
            lines = [f"- {s} [{d['id']}]" for d in reads for s in _extract(d, words, 1)]
            parts.append("\n".join(lines))
        for result in queried:
            parts.append(f"**From the tables** ({result.split(':', 1)[0]}):\n\n{result.split(':', 1)[1].strip()}")
        parts.append(DEMO_FOOTER)
        return "\n\n".join(parts)
