"""The demo's feature behaviours, each triggered by what a user would naturally ask (``triggers.py``), in French
or in English, when the request offers what it needs:

- ``run_code`` (the sandbox can run here, ``code`` enabled): "totals per client of the invoices" /
  «total des factures par client» → a script over the base's tables (``computing.py``);
- the web (``web`` enabled): "what does the web say about…" / «que dit le web sur…» → ``web_search`` then
  ``web_fetch`` of the first pages, by the main model or by an agent given ``web`` (``browsing.py``);
- an agent profile: "check whether…" / «vérifie si…», with agents, when a checking profile is offered
  → one agent of that profile over the knowledge bases (``checking.py``);
- a long document read in parts: "read the whole report" / «lis tout le rapport» → ``kb_read`` again with
  ``from_char`` until the end (``parts.py``), by the main model or by one agent per base;
- a forced landing: the agents' round budget is the level's (the admin's mapping: 5 rounds at Approfondi,
  10 at Maximal by default); an agent that cannot finish a long document within it lands with what it read
  and says where it stopped;
- a relaunch: after such an ``interrupted`` agent, the main model makes a second ``agents`` call, one agent
  with a more precise instruction (that document, from that character).

:func:`main` and :func:`agent` return the behaviour's response, or None to leave the call to the procedure;
:func:`answer_notes` adds what a behaviour says in the procedure's answer.
"""

from __future__ import annotations

import re
from typing import Any, Literal

import assistant.demo.model.browsing as browsing
import assistant.demo.model.checking as checking
import assistant.demo.model.computing as computing
import assistant.demo.model.parts as parts
import assistant.demo.model.reading as reading
import assistant.demo.model.triggers as triggers
from assistant.engine.types import Message, ModelResponse, NamedTool

from .markers import DEMO_ROUNDS, without_markers
from .texts import agent_words
from .words import keywords

Mode = Literal["code", "web", "check", "whole"]

_CONTINUE = re.compile(r"\[(?P<id>[^\]\s]+)\][^\n]*?from_char=(?P<start>\d+)")


# The main model ---------------------------------------------------------------------------------


def main(step: Any, question: str) -> ModelResponse | None:
    """The main model's call when a behaviour applies, else None."""
    relaunch = _relaunch(step, question)
    if relaunch is not None:
        return relaunch
    asked = without_markers(question)
    words = triggers.topic(asked)
    mode = mode_of(step, asked)
    if mode == "code":
        return _code(step)
    if mode == "web":
        return _web(step, asked)
    if mode == "check" and _last_is_user(step):
        return _check(step, asked)
    if mode == "whole":
        return _whole(step, words)
    return None


def mode_of(step: Any, question: str) -> Mode | None:
    """Which behaviour this run follows: from what it already did, else from the question and what is offered."""
    messages, tools = step.messages, step.request.tools
    if reading.called(messages, "run_code"):
        return "code"
    if reading.called(messages, "web_search") or reading.called(messages, "web_fetch"):
        return "web"
    agents = reading.spec(step.request, "agents")
    delegable = _delegable(agents) if agents is not None else []
    run_code = reading.spec(step.request, "run_code")
    if triggers.asks(question, "code") and run_code is not None and computing.bases(run_code):
        return "code"
    search = reading.spec(step.request, "kb_search")
    kbs = [r for r in delegable if r.startswith("kb:")] or (reading.enum(search, "properties", "kb") if search else [])
    web = browsing.offered(tools) or "web" in delegable
    if web and (triggers.asks(question, "web") or not kbs) and triggers.web_query(question):
        return "web"
    if triggers.asks(question, "check") and agents is not None and checking.checker_profile(agents) and kbs:
        return "check"
    if triggers.asks(question, "whole") and (kbs or reading.called(messages, "kb_search")):
        return "whole"
    return None


def _last_is_user(step: Any) -> bool:
    return step.messages[-1].role == "user" and bool(step.request.tools)


def _delegable(agents: Any) -> list[str]:
    return reading.enum(agents, "properties", "tasks", "items", "properties", "resources", "items")


def _agent_model(agents: Any) -> str:
    """Another demo model if one is offered: the demo stays offline even when real providers have keys."""
    models = reading.enum(agents, "properties", "tasks", "items", "properties", "model")
    return next((m for m in models if m.startswith("demo-")), models[0] if models else "")


def _delegate(step: Any, text: str, tasks: list[dict[str, Any]]) -> ModelResponse:
    return ModelResponse(text=text, tool_calls=[step.call("agents", {"tasks": tasks}, 0)])


def _code(step: Any) -> ModelResponse | None:
    results = reading.tool_results(step.messages, "run_code")
    if not results:
        return computing.start(step) if _last_is_user(step) else None
    tool = reading.spec(step.request, "run_code")
    kbs = computing.bases(tool) if tool is not None else []
    body = computing.answer(step.language, kbs, results[-1])
    return ModelResponse(text="\n\n".join([*body, step.say("footer")]))


def _web(step: Any, question: str) -> ModelResponse | None:
    agents = reading.spec(step.request, "agents")
    messages = step.messages
    query = triggers.web_query(question)
    if agents is not None and "web" in _delegable(agents):
        if not _last_is_user(step):
            return None  # the agents came back: the procedure's answer reports them
        model = _agent_model(agents)
        task = {"instruction": step.say("web_instruction", query=query), "model": model, "resources": ["web"]}
        return _delegate(step, step.say("web_handing", model=model), [task])
    if step.request.tools:
        call = browsing.next_call(step, query, triggers.url_in(question))
        if call is not None:
            return call
    return ModelResponse(text=_web_answer(step, messages, keywords(query)))


def _web_answer(step: Any, messages: tuple[Message, ...], words: list[str]) -> str:
    topic = ", ".join(words) or step.say("topic_your_question")
    found = browsing.findings(messages, words)
    parts_: list[str] = []
    if found:
        parts_ = [step.say("web_answer", topic=topic), "\n".join(f"- {f}" for f in found)]
    elif browsing.summaries(messages):
        parts_ = [step.say("web_answer", topic=topic), "\n".join(f"- {s}" for s in browsing.summaries(messages))]
        parts_.append(step.say("web_gap_unread"))
    errors = browsing.errors(messages)
    parts_ += [step.say("web_failed", error=e) for e in errors]
    if not parts_:
        parts_ = [step.say("web_nothing", topic=topic)]
    return "\n\n".join([*parts_, step.say("footer")])


def _check(step: Any, question: str) -> ModelResponse | None:
    agents = reading.spec(step.request, "agents")
    if agents is None:
        return None
    profile = checking.checker_profile(agents)
    kbs = [r for r in _delegable(agents) if r.startswith("kb:")]
    if profile is None or not kbs:
        return None
    model = _agent_model(agents)
    claim = _claim(question)
    task = {
        "instruction": step.say("check_instruction", claim=claim),
        "model": model,
        "resources": kbs,
        "profile": profile,
    }
    return _delegate(step, step.say("check_handing", model=model), [task])


def _claim(question: str) -> str:
    """What the question asks to check: the question without its leading verb (``check whether``, «vérifie si»)."""
    found = triggers.CHECK.search(question)
    rest = question[found.end() :] if found else question
    rest = re.sub(r"^\W*(whether|if|that|si|que|qu['’])\s*", "", rest.strip(), flags=re.IGNORECASE)
    return rest.strip().rstrip("?.!").strip() or question.strip()


def _whole(step: Any, words: list[str]) -> ModelResponse | None:
    request, messages = step.request, step.messages
    agents = reading.spec(request, "agents")
    if agents is not None:
        if not _last_is_user(step):
            return None  # the agents came back (and were relaunched if need be): the procedure's answer
        kbs = [r for r in _delegable(agents) if r.startswith("kb:")][:4]
        model = _agent_model(agents)
        listed = ", ".join(words)
        tasks = [
            {"instruction": step.say("whole_instruction", words=listed), "model": model, "resources": [kb]}
            for kb in kbs
        ]
        return _delegate(step, step.say("whole_handing", count=len(tasks), model=model), tasks)
    search = reading.spec(request, "kb_search")
    if search is not None and not reading.called(messages, "kb_search"):
        kbs = reading.enum(search, "properties", "kb")
        calls = [step.call("kb_search", {"query": " ".join(words), "kb": kb}, i) for i, kb in enumerate(kbs)]
        return ModelResponse(text=step.say("whole_searching"), tool_calls=calls)
    docs = parts.readings(messages)
    if request.tools:
        reading_on = _read_on(step, messages, words, docs)
        if reading_on is not None:
            return reading_on
    if not docs:
        return None  # nothing found: the procedure says so
    return ModelResponse(text="\n\n".join([*_whole_answer(step, next(iter(docs.values())), words), step.say("footer")]))


def _read_on(
    step: Any, messages: tuple[Message, ...], words: list[str], docs: dict[str, parts.Reading]
) -> ModelResponse | None:
    """The next ``kb_read`` of a whole document: its best hit first, then its next part (``from_char``)."""
    if not docs:
        hit = parts.best_hit(messages, words, step.language)
        return None if hit is None else ModelResponse(tool_calls=[step.call("kb_read", {"ids": [hit["id"]]}, 0)])
    more = parts.read_next(next(iter(docs.values())))
    return None if more is None else ModelResponse(tool_calls=[step.call("kb_read", more, 0)])


def _whole_answer(step: Any, doc: parts.Reading, words: list[str]) -> list[str]:
    lang = step.language
    values = {"title": doc.title, "id": doc.id, "count": len(doc.parts), "ranges": parts.ranges(doc, lang)}
    if doc.complete:
        head = step.say("whole_read", **values)
    else:
        end, length = parts.number(doc.end, lang), parts.number(doc.length, lang)
        head = step.say("whole_read_partly", end=end, length=length, **values)
    return [head, *(_part_lines(step, doc, part, words) for part in doc.parts)]


def _part_lines(step: Any, doc: parts.Reading, part: parts.Part, words: list[str]) -> str:
    lang = step.language
    lines = [step.say("whole_part", start=parts.number(part.start, lang), end=parts.number(part.end, lang))]
    found = parts.sections(part.text)
    if found:
        lines.append(step.say("whole_sections", sections=(" ; " if lang == "fr" else "; ").join(found)))
    said = parts.mentions(part, words) or parts.last_section_opening(part)
    lines += [f"{s} [{doc.id}]" for s in said]
    return "\n".join(lines)


# The relaunch -----------------------------------------------------------------------------------


def _agents_calls(messages: tuple[Message, ...]) -> list[list[dict[str, Any]]]:
    """The tasks of each ``agents`` call the main model made, in order."""
    calls = []
    for m in messages:
        for call in m.tool_calls if m.role == "assistant" else ():
            if call.name == "agents":
                try:
                    tasks = call.parsed_arguments().get("tasks", [])
                except ValueError:
                    tasks = []
                calls.append([t for t in tasks if isinstance(t, dict)])
    return calls


def _delegations(messages: tuple[Message, ...]) -> list[list[dict[str, Any]]]:
    """What each ``agents`` call returned: its results, task by task."""
    return [[a for a in r.get("agents", []) if a] for r in reading.tool_results(messages, "agents")]


def stopped_at(delegation: dict[str, Any]) -> tuple[str, int] | None:
    """Where an interrupted agent stopped in a long document: (its id, the character to go on from)."""
    if delegation.get("status") != "interrupted":
        return None
    found = _CONTINUE.search(str(delegation.get("report", "")).partition("\n\nGaps:")[2])
    return (found.group("id"), int(found.group("start"))) if found else None


def _title(delegation: dict[str, Any], doc_id: str) -> str:
    for read in delegation.get("documents_read", []):
        head, _, rest = str(read).partition(" (")
        if head == doc_id:
            return rest.removesuffix(")")
    return doc_id


def _relaunch(step: Any, question: str) -> ModelResponse | None:
    """After the first ``agents`` call, one agent per interrupted one that stopped in a long document, with a more
    precise instruction: that document, from where it stopped (``#demo-rounds`` runs keep their interruption)."""
    messages = step.messages
    agents = reading.spec(step.request, "agents")
    last = messages[-1]
    if agents is None or DEMO_ROUNDS.search(question) or last.role != "tool" or last.name != "agents":
        return None
    calls, results = _agents_calls(messages), _delegations(messages)
    if len(calls) != 1 or len(results) != 1:
        return None
    tasks, texts = [], []
    for delegation in results[0]:
        where = stopped_at(delegation)
        index = int(delegation.get("task", 0)) - 1
        if where is None or not 0 <= index < len(calls[0]):
            continue
        doc_id, start = where
        title = _title(delegation, doc_id)
        earlier = calls[0][index]
        tasks.append(
            {
                "instruction": step.say(
                    "relaunch_instruction", id=doc_id, title=title, start=start, at=parts.number(start, step.language)
                ),
                "model": earlier.get("model") or _agent_model(agents),
                "resources": earlier.get("resources", []),
                "documents": [doc_id],
            }
        )
        texts.append(
            step.say(
                "relaunch_handing",
                Agent=agent_words(delegation.get("agent", "")).capitalize(),
                rounds=delegation.get("rounds", 0),
                title=title,
                start=parts.number(start, step.language),
            )
        )
    if not tasks:
        return None
    return _delegate(step, " ".join(texts), tasks[:4])


def answer_notes(step: Any) -> list[str]:
    """What the behaviours add to the procedure's answer: which profile checked, which agent was relaunched."""
    messages = step.messages
    notes: list[str] = []
    calls, results = _agents_calls(messages), _delegations(messages)
    profiles = dict.fromkeys(str(t["profile"]) for tasks in calls for t in tasks if t.get("profile"))
    notes += [step.say("check_profile_note")] if profiles else []
    if len(results) >= 2:
        relaunched = [a for a in results[1] if "agent" in a]
        for delegation in results[0]:
            where = stopped_at(delegation)
            if where is None or not relaunched:
                continue
            after = next((a for a in relaunched if where[0] in str(a.get("documents_read", ""))), relaunched[0])
            notes.append(
                step.say(
                    "relaunch_note",
                    Agent=agent_words(delegation.get("agent", "")).capitalize(),
                    start=parts.number(where[1], step.language),
                    title=_title(delegation, where[0]),
                    relaunched=agent_words(after.get("agent", "")),
                )
            )
    return notes


# The agents -------------------------------------------------------------------------------------


def agent(step: Any, instruction: str) -> ModelResponse | None:
    """An agent's call when a behaviour applies (its instruction, its tools, its profile), else None."""
    request = step.request
    words = keywords(instruction.split(":", 1)[-1].split(". ")[0]) or keywords(instruction)
    names = {t.name for t in request.tools}
    found = _CONTINUE.search(instruction)
    if found is not None and "kb_read" in names:
        return _agent_parts(step, words, start=(found.group("id"), int(found.group("start"))))
    if "from_char" in instruction and "kb_search" in names:
        return _agent_parts(step, words, start=None)
    if names & {"web_search", "web_fetch"} and "kb_search" not in names:
        query = instruction.split(":", 1)[-1].split(". ")[0].strip()
        return _agent_web(step, query, instruction)
    if checking.is_checker(request) and "kb_search" in names:
        return _agent_check(step, instruction)
    return None


def _forced(step: Any) -> bool:
    return isinstance(step.request.tool_choice, NamedTool)


def _submit(step: Any, findings: list[str], sources: list[str], gaps: list[str]) -> ModelResponse:
    report = {
        "findings": "\n".join(f"- {f}" for f in findings) or step.say("nothing_in_scope"),
        "sources": list(dict.fromkeys(sources)),
        "gaps": gaps,
    }
    return ModelResponse(tool_calls=[step.call("submit_result", report, 0)])


def _search_kbs(step: Any, words: list[str]) -> ModelResponse | None:
    search = reading.spec(step.request, "kb_search")
    if search is None or reading.called(step.messages, "kb_search"):
        return None
    kbs = reading.enum(search, "properties", "kb")
    calls = [step.call("kb_search", {"query": " ".join(words), "kb": kb}, i) for i, kb in enumerate(kbs)]
    return ModelResponse(tool_calls=calls) if calls else None


def _agent_parts(step: Any, words: list[str], start: tuple[str, int] | None) -> ModelResponse:
    """Read one document to its end, part after part; at a forced landing, say where the reading stopped."""
    messages = step.messages
    docs = parts.readings(messages)
    if not _forced(step):
        if start is None:
            searching = _search_kbs(step, words)
            if searching is not None:
                return searching
        if not docs and start is not None:
            return ModelResponse(tool_calls=[step.call("kb_read", {"ids": [start[0]], "from_char": start[1]}, 0)])
        reading_on = _read_on(step, messages, words, docs)
        if reading_on is not None:
            return reading_on
    findings: list[str] = []
    gaps: list[str] = []
    for doc in docs.values():
        findings += [_part_lines(step, doc, part, words).replace("\n", " ") for part in doc.parts]
        if not doc.complete:
            end, length = parts.number(doc.end, step.language), parts.number(doc.length, step.language)
            gaps.append(step.say("whole_gap", title=doc.title, id=doc.id, end=end, length=length, next=doc.next_char))
    if not docs:
        hits = [h for s in reading.tool_results(messages, "kb_search") for h in s.get("hits", [])[:3]]
        findings = [f"{h['title']}: {h['snippet']} [{h['id']}]" for h in hits]
        if hits:
            gaps.append(step.say("gap_not_read"))
        return _submit(step, findings, [h["id"] for h in hits], gaps)
    return _submit(step, findings, list(docs), gaps)


def _agent_web(step: Any, query: str, instruction: str) -> ModelResponse:
    messages = step.messages
    words = keywords(query)
    if not _forced(step):
        call = browsing.next_call(step, query, triggers.url_in(instruction))
        if call is not None:
            return ModelResponse(tool_calls=call.tool_calls)  # an agent's rounds carry no text
    pages = browsing.pages(messages)
    findings = browsing.findings(messages, words)
    gaps = [step.say("web_failed", error=e) for e in browsing.errors(messages)]
    if not pages:
        findings = browsing.summaries(messages)
        if findings:
            gaps.append(step.say("web_gap_unread"))
        sources = [f.rsplit("[", 1)[-1].rstrip("]") for f in findings]
    else:
        sources = [str(p["url"]) for p in pages]
    return _submit(step, findings, sources, gaps)


def _agent_check(step: Any, instruction: str) -> ModelResponse:
    messages = step.messages
    claim = checking.claim_of(instruction)
    words = triggers.topic(claim)
    if not _forced(step):
        searching = _search_kbs(step, words)
        if searching is not None:
            return searching
        searches = reading.tool_results(messages, "kb_search")
        hit_ids = [h["id"] for s in searches for h in parts.own_first(s.get("hits", []), step.language)[:3]]
        if hit_ids and not reading.called(messages, "kb_read"):
            return ModelResponse(tool_calls=[step.call("kb_read", {"ids": hit_ids}, 0)])
    reads = [d for r in reading.tool_results(messages, "kb_read") for d in r.get("documents", [])]
    quoted = checking.quoted(reads, words)
    said = " ".join(s for s, _ in quoted).lower()
    found = [w for w in words if w.lower() in said]
    findings = [step.say("check_claim", claim=claim)]
    findings += [f"«{s}» [{doc_id}]" for s, doc_id in quoted]
    if found:
        findings.append(step.say("check_found", words=", ".join(found)))
    gaps = [step.say("check_missing", word=w) for w in words if w not in found]
    if not reads:
        gaps.append(step.say("gap_not_read"))
    return _submit(step, findings, [str(d["id"]) for d in reads], gaps)


__all__ = ["agent", "answer_notes", "main", "mode_of", "stopped_at"]
