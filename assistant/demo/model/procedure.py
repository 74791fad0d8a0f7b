"""The demo's fixed procedure, for the main model and for its agents (one model call = one :class:`Step`).

The main model (:func:`main`): with the ``agents`` tool it delegates one agent per knowledge base (and per
connector) in parallel; without agents it searches the knowledge bases itself, then reads the hits and
queries the tables (``data_query``) in the next round, or asks the connectors; it then writes an answer
citing what was read (:func:`answer`).

An agent (:func:`agent`): searches its knowledge bases, asks its connectors, reads several documents in one
round and queries its tables, then ends through ``submit_result`` (or lands when forced), with findings and
gaps.

Where things go:

- every sentence written, in :mod:`.texts` (keyed by code, in both languages) — never a literal here;
- a new behaviour (a tool the demo uses, a trigger in the question) goes in a module of its own in this
  package, as a function taking the :class:`Step` and returning a ``ModelResponse`` (or None when it does
  not apply); :func:`main` / :func:`agent` call it at the place marked ``# Behaviours:`` below;
- how the language is chosen, in :mod:`.language` (the question's, else the interface language).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import assistant.demo.model.client_tools as client_tools
import assistant.demo.model.features as features
import assistant.demo.model.numbers as numbers
import assistant.demo.model.reading as reading
from assistant.engine.outcomes import AgentReport
from assistant.engine.types import Message, ModelRequest, ModelResponse, NamedTool, ToolCall

from .language import detect, language_of
from .markers import DEMO_FAIL, DEMO_HANG, DEMO_ROUNDS, DEMO_SLOW, without_markers
from .texts import Language, agent_words, say
from .triggers import topic
from .words import extract, keywords


@dataclass(frozen=True, slots=True)
class Step:
    """One call of the demo model: the request, the language it writes in, and how it names its tool calls."""

    request: ModelRequest
    language: Language
    call_id: Callable[[int], str]

    @property
    def messages(self) -> tuple[Message, ...]:
        return self.request.messages

    def call(self, name: str, arguments: dict[str, Any], n: int) -> ToolCall:
        return ToolCall(id=self.call_id(n), name=name, arguments=json.dumps(arguments, ensure_ascii=False))

    def say(self, code: str, **values: object) -> str:
        return say(code, self.language, **values)


def question_of(request: ModelRequest) -> str:
    """The user's question: the last user message that is not a note of the product's (``[...]``)."""
    return next(
        (m.content for m in reversed(request.messages) if m.role == "user" and not m.content.startswith("[")), ""
    )


def instruction_of(request: ModelRequest) -> str:
    """An agent's instruction, without the scope the engine appends."""
    return request.messages[1].content.split("Your scope:")[0].removeprefix("Instruction:").strip()


def is_agent(request: ModelRequest) -> bool:
    return reading.spec(request, "submit_result") is not None


def language_for(request: ModelRequest, interface: Language) -> Language:
    """The language the demo writes in for this request: its question's (an agent's: its instruction's)."""
    text = instruction_of(request) if is_agent(request) else question_of(request)
    return language_of(without_markers(text), interface)


def respond(step: Step) -> ModelResponse:
    return agent(step) if is_agent(step.request) else main(step)


def agent(step: Step) -> ModelResponse:
    request, messages = step.request, step.messages
    instruction = instruction_of(request)
    words = keywords(instruction.split(":", 1)[-1].split(". ")[0]) or keywords(instruction)
    search = reading.spec(request, "kb_search")
    kbs = reading.enum(search, "properties", "kb") if search else []
    searches = reading.tool_results(messages, "kb_search")
    reads = [d for r in reading.tool_results(messages, "kb_read") for d in r.get("documents", [])]
    forced = isinstance(request.tool_choice, NamedTool)
    # Behaviours: an agent's (before its first search, or once it has read) go here.
    behaviour = features.agent(step, instruction)
    if behaviour is not None:
        return behaviour
    if not forced and kbs and not searches:
        calls = [step.call("kb_search", {"query": " ".join(words), "kb": kb}, i) for i, kb in enumerate(kbs)]
        return ModelResponse(tool_calls=calls)
    connectors = reading.connector_tools(request)
    asked = [m for m in messages if m.role == "tool" and m.name and m.name.startswith("mcp_")]
    if not forced and connectors and not asked:
        calls = [step.call(tool, {param: " ".join(words)}, i) for i, (tool, param) in enumerate(connectors[:4])]
        return ModelResponse(tool_calls=calls)
    connector_lines = reading.connector_data(messages)
    hit_ids = [h["id"] for h in hits_to_read(step, searches)]
    sql = reading.demo_sql(request, step.say("sql_rows"))
    queried = reading.called(messages, "data_query")
    if not forced and ((hit_ids and not reads) or (sql and not queried)):
        calls = [step.call("kb_read", {"ids": hit_ids}, 0)] if hit_ids and not reads else []
        if sql and not queried:
            calls.append(step.call("data_query", {"sql": sql}, len(calls)))
        return ModelResponse(tool_calls=calls)
    findings = [f"{numbers.row(s, step.language)} [{d['id']}]" for d in reads for s in extract(d, words)]
    findings += [f"{line} [{reading.connector_source(tool)}]" for tool, line in connector_lines]
    findings += [step.say("query_gave", sql=sql, result=_query_result(step, q)) for q in reading.queries(messages)]
    if not findings and searches:
        findings = [f"{h['title']}: {h['snippet']} [{h['id']}]" for h in hits_to_read(step, searches)]
    found_text = " ".join(findings).lower()
    gaps = [step.say("gap_word", word=w) for w in words if w.lower() not in found_text]
    if not reads and kbs:
        gaps.append(step.say("gap_not_read"))
    report = {
        "findings": "\n".join(f"- {f}" for f in findings) or step.say("nothing_in_scope"),
        "sources": [d["id"] for d in reads]
        + [reading.connector_source(t) for t in dict.fromkeys(t for t, _ in connector_lines)]
        or hit_ids,
        "gaps": gaps,
    }
    return ModelResponse(tool_calls=[step.call("submit_result", report, 0)])


def main(step: Step) -> ModelResponse:
    request, messages = step.request, step.messages
    question = question_of(request)
    words = topic(without_markers(question))
    last = messages[-1]
    slow = DEMO_SLOW.search(question)
    if slow is not None and last.role == "user":
        call = reading.slow_call(request, slow.group(1))
        if call is not None:
            return ModelResponse(tool_calls=[step.call(call[0], call[1], 0)])
    # Behaviours: the main model's (on the question, or after a tool's answer) go here.
    behaviour = client_tools.call_forced(step, question) or features.main(step, question)
    if behaviour is not None:
        return behaviour
    if last.role == "user" and request.tools:
        agents = reading.spec(request, "agents")
        if agents is not None:
            props = agents.parameters["properties"]["tasks"]["items"]["properties"]
            kbs = [r for r in props["resources"]["items"]["enum"] if r.startswith("kb:")]
            connectors = [r for r in props["resources"]["items"]["enum"] if r.startswith("mcp:")]
            # Another demo model if one is offered: the demo stays offline even when real providers have keys.
            models = props["model"]["enum"]
            model = next((m for m in models if str(m).startswith("demo-")), models[0])
            listed = ", ".join(words)
            hang = DEMO_HANG.search(question)
            markers = (f" {DEMO_FAIL}" if DEMO_FAIL in question else "") + (f" {hang.group(0)}" if hang else "")
            tasks: list[dict[str, Any]] = [
                {
                    "instruction": step.say("instruction_kb", words=listed) + markers,
                    "model": model,
                    "resources": [kb],
                }
                for kb in kbs[:4]
            ]
            tasks += [
                {
                    "instruction": step.say("instruction_connector", connector=c[4:], words=listed),
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
                code = "handing_kbs" if not connectors else "handing_resources"
                text = step.say(code, count=len(tasks), model=model)
                return ModelResponse(text=text, tool_calls=[step.call("agents", {"tasks": tasks}, 0)])
        search = reading.spec(request, "kb_search")
        if search is not None:
            kbs = reading.enum(search, "properties", "kb")
            calls = [step.call("kb_search", {"query": " ".join(words), "kb": kb}, i) for i, kb in enumerate(kbs)]
            return ModelResponse(text=step.say("searching_kbs"), tool_calls=calls)
    if (
        last.role == "tool"
        and request.tools
        and not [m for m in messages if m.role == "tool" and m.name != "kb_search"]
    ):
        # The round after the searches: read the hits, and query the tables when there are some.
        ids = [h["id"] for h in hits_to_read(step, reading.tool_results(messages, "kb_search"))]
        calls = [step.call("kb_read", {"ids": ids}, 0)] if ids else []
        sql = reading.demo_sql(request, step.say("sql_rows"))
        if sql:
            calls.append(step.call("data_query", {"sql": sql}, len(calls)))
        if calls:
            return ModelResponse(tool_calls=calls)
        connectors = reading.connector_tools(request)
        if connectors:
            calls = [step.call(tool, {param: " ".join(words)}, i) for i, (tool, param) in enumerate(connectors[:4])]
            return ModelResponse(text=step.say("asking_connectors"), tool_calls=calls)
    return ModelResponse(text=answer(step, words))


def hits_to_read(step: Step, searches: list[dict[str, Any]], per_search: int = 3) -> list[dict[str, Any]]:
    """The hits the demo reads: of each search, the first ones in its language (a base may hold documents in both),
    else the first ones it cannot tell the language of, else the first ones."""
    chosen = []
    for search in searches:
        hits = [h for h in search.get("hits", []) if isinstance(h, dict) and "id" in h]
        found = [detect(f"{h.get('title', '')} {h.get('snippet', '')}") for h in hits]
        mine = [h for h, lang in zip(hits, found, strict=True) if lang == step.language]
        unsure = [h for h, lang in zip(hits, found, strict=True) if lang is None]
        chosen += (mine or unsure or hits)[:per_search]
    return chosen


def _query_result(step: Step, query: tuple[int, str]) -> str:
    """A query's result as the demo writes it for a person: its row count and table in the reader's number format."""
    rows = step.say("query_rows", count=numbers.number(query[0], step.language))
    return step.say("query_result", rows=rows, table=numbers.table(query[1], step.language))


def _report(step: Step, delegation: dict[str, Any]) -> str:
    """An agent's report as the answer gives it: its findings and gaps (its sources are cited in its findings);
    a partial one (the engine's account of what the agent had done) as what it had read."""
    if delegation.get("partial_report"):
        read = [str(d) for d in delegation.get("documents_read", [])]
        return step.say("agent_partial_read", documents=", ".join(read)) if read else step.say("agent_partial_nothing")
    report = AgentReport.from_text(str(delegation.get("report", "")))
    gaps = (
        f"\n\n{step.say('agent_gaps', gaps=(' ; ' if step.language == 'fr' else '; ').join(report.gaps))}"
        if report.gaps
        else ""
    )
    return report.findings + gaps


def _why(step: Step, delegation: dict[str, Any]) -> str:
    """Why an agent did not finish, from the cause the agents tool gives as data."""
    cause = delegation.get("cause") or {}
    code = str(cause.get("code", ""))
    if code == "rounds":
        return step.say("cause_rounds", used=_number(cause.get("used")), limit=_number(cause.get("limit")))
    if code in ("tokens", "seconds", "output_cut", "model_error", "stopped_by_user", "category_budget"):
        return step.say(f"cause_{code}")
    status = str(delegation.get("status", ""))
    if status in ("interrupted", "stopped", "error"):
        return step.say(f"cause_other_{status}")
    return step.say("no_reason")


def _number(value: object) -> str:
    return f"{value:g}" if isinstance(value, int | float) else "?"


def answer(step: Step, words: list[str]) -> str:
    """The main model's answer: what its agents reported, what it read and queried, then the footer."""
    messages = step.messages
    footer = step.say("footer")
    delegated = [a for r in reading.tool_results(messages, "agents") for a in r.get("agents", []) if a]
    reads = [d for r in reading.tool_results(messages, "kb_read") for d in r.get("documents", [])]
    connector_lines = reading.connector_data(messages)
    queried = reading.queries(messages)
    if not delegated and not reads and not queried and connector_lines:
        lines = [f"- {line} [{reading.connector_source(tool)}]" for tool, line in connector_lines]
        return step.say("answer_connectors") + "\n\n" + "\n".join(lines) + "\n\n" + footer
    if not delegated and not reads and not queried:
        if reading.tool_results(messages, "kb_search"):
            return step.say("answer_nothing_found") + "\n\n" + footer
        topic = ", ".join(words) if words else step.say("topic_your_message")
        return step.say("answer_no_resources", topic=topic) + "\n\n" + footer
    parts = [step.say("answer_intro", topic=", ".join(words) or step.say("topic_your_question"))]
    # Behaviours: what a behaviour adds to the answer goes here, in the order it happened.
    parts += features.answer_notes(step)
    for delegation in delegated:
        if "error" in delegation:
            parts.append(step.say("task_refused", error=delegation["error"]))
            continue
        header = step.say("from_agent", agent=agent_words(delegation["agent"]))
        parts.append(f"{header}\n\n{_report(step, delegation)}")
        if delegation.get("status") != "ok":
            parts.append(step.say("agent_unfinished", reason=_why(step, delegation)))
    if reads:
        lines = [f"- {numbers.row(s, step.language)} [{d['id']}]" for d in reads for s in extract(d, words, 1)]
        parts.append("\n".join(lines))
    for rows, table in queried:
        count = step.say("query_rows", count=numbers.number(rows, step.language))
        parts.append(step.say("from_tables", rows=count, table=numbers.table(table, step.language)))
    parts.append(footer)
    return "\n\n".join(parts)
