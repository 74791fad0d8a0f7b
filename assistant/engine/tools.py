"""The tool runtime: read-only tools over a ``Scope`` (``scope.py``), enforced here, in the tool, never only in a prompt.

A tool raises ``ToolError`` (or ``OutOfScope``) for anything the model should read and correct;
the loop sends it back as the tool's result and the run goes on.

A call stops with its run: ``run_tool_call`` watches the run's ``CancelToken`` and, on Stop, cancels the tool's
work (a query is interrupted, a script killed, a page read or a connector call aborted), waits a moment for it
to wind down, and returns the call as stopped, with the stop's cause and whether it had started (a tool that
waits for a turn, ``Tool.turn``, never starts when Stop comes while it waits). Our tools only read: aborting
one loses nothing but its answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from .cancel import CancelToken
from .causes import Cause
from .errors import EngineError, OutOfScope, ToolError, ToolFailed
from .events import Action, Source
from .scope import DOC_PREFIX, KB_PREFIX, Scope
from .turns import Turn, turn
from .types import ToolCall, ToolSpec

LABEL_CHARS = 300
SERVER_TOOLS = frozenset(
    {
        "kb_search",
        "kb_read",
        "data_tables",
        "data_query",
        "web_search",
        "web_fetch",
        "run_code",
        "agents",
        "submit_result",
    }
)
"""The names of the server's own tools, of the main model and of agents, whatever a request was offered; a test holds
it to the tools' specs."""
CONNECTOR_TOOLS_PREFIX = "mcp_"
"""How a connector's tools are named (``connectors.tool_name``: ``mcp_<connector>__<tool>``)."""


def is_server_tool(name: str) -> bool:
    """Whether ``name`` is, or may be, one of the server's tools: an API client's tool may not take it."""
    return name in SERVER_TOOLS or name.startswith(CONNECTOR_TOOLS_PREFIX)


WIND_DOWN_SECONDS = 0.1
"""How long a stopped call's work is waited for once cancelled (a query's interruption, a script's kill, a session's
close): past it the call is returned as stopped and its work ends on its own."""

MAX_IDS_PER_READ = 10
MAX_CHARS_PER_DOCUMENT = 6_000


@dataclass(frozen=True, slots=True)
class Hit:
    id: str
    kb: str
    title: str
    snippet: str
    score: float


@dataclass(frozen=True, slots=True)
class Document:
    id: str
    kb: str
    title: str
    text: str
    titles: dict[str, str] = field(default_factory=dict, compare=False)
    """Its title in other languages, by language (``{"en": "Invoices 2024"}``), where the base holds them (a title
    that exists in both, as the demo's table's): ``run_code``'s index gives them, so a script can quote the title
    in the language it writes in."""
    tables: tuple[str, ...] = field(default=(), compare=False)
    """The names ``data_query`` gives the tables it holds (a CSV, Parquet or spreadsheet document), which need not
    be its title: ``run_code``'s index gives them, so a script finds the documents of the tables it was told of."""


@dataclass(frozen=True, slots=True)
class KnowledgeBaseInfo:
    slug: str
    name: str
    description: str
    document_count: int


class KnowledgeBackend(Protocol):
    """Where knowledge bases live (the Django side implements it over the database)."""

    async def describe(self, kb: str) -> KnowledgeBaseInfo | None: ...

    async def existing(self, kbs: Sequence[str]) -> set[str]:
        """Those of the knowledge bases ``kbs`` that exist (a run's start checks its bases with it, in one read)."""
        ...

    async def search(self, kb: str, query: str, limit: int, ids: Sequence[str] | None = None) -> tuple[list[Hit], int]:
        """Ranked hits and the total number of matches; with ``ids``, among those documents only."""
        ...

    async def read(self, ids: Sequence[str]) -> dict[str, Document]:
        """The documents found among ``ids`` (missing ids are absent from the result)."""
        ...


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    """A tool's result: the text the model reads, and what the user sees of it."""

    content: str
    action: Action | None = None
    sources: tuple[Source, ...] = ()
    error: str | None = None
    """Why it did nothing asked of it, though it ran (the agents tool when no agent could start); None: it did."""


class Tool(ABC):
    """One tool. Agents only ever get tools whose ``read_only`` is true."""

    read_only: bool = True
    stops_itself: bool = False
    """Stop does not end its call (the agents tool: its agents stop on their own and report what they had)."""

    @property
    def turn(self) -> Turn | None:
        """The turns its calls take (``turns.py``: at most so many at once in a process), or None: it runs at once."""
        return None

    @property
    @abstractmethod
    def spec(self) -> ToolSpec: ...

    @abstractmethod
    async def run(self, args: dict[str, Any]) -> ToolOutcome: ...

    async def run_call(self, call: ToolCall, args: dict[str, Any]) -> ToolOutcome:
        """Run ``call`` (``args``: its arguments parsed): ``run``, for every tool but the agents tool, whose agents
        name the call that started them."""
        return await self.run(args)


def _dump(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)


class KbSearch(Tool):
    """``kb_search(query, kb)``: ranked hits with ids, titles, snippets and the count."""

    def __init__(self, backend: KnowledgeBackend, scope: Scope) -> None:
        self.backend = backend
        self.scope = scope

    @property
    def spec(self) -> ToolSpec:
        return ToolSpec(
            name="kb_search",
            description=(
                "Full-text search in one knowledge base. Returns ranked hits (id, title, snippet) and "
                "the number of matches. Knowledge bases you can search: "
                + ", ".join(self.scope.searchable)
                + "."
                + _chosen_note(self.scope)
            ),
            parameters={
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "Words to search for."},
                    "kb": {"type": "string", "enum": list(self.scope.searchable)},
                },
                "required": ["query", "kb"],
            },
        )

    async def run(self, args: dict[str, Any]) -> ToolOutcome:
        query = str(args.get("query", "")).strip()
        kb = str(args.get("kb", "")).removeprefix(KB_PREFIX)
        if not query:
            raise ToolError("kb_search needs a non-empty 'query'.")
        if kb not in self.scope.searchable:
            raise OutOfScope(await _kb_refusal(self.backend, kb, self.scope))
        chosen = self.scope.chosen(kb)
        hits, total = await self.backend.search(kb, query, 8, ids=chosen)
        if chosen is not None:  # the backend was told; a hit outside the chosen documents never reaches the model
            kept = [h for h in hits if self.scope.may_read(kb, h.id)]
            total -= len(hits) - len(kept)
            hits = kept
        content = _dump(
            {
                "kb": kb,
                "query": query,
                "count": total,
                "hits": [{"id": h.id, "title": h.title, "snippet": h.snippet} for h in hits],
            }
        )
        return ToolOutcome(content, Action(tool="kb_search", kind="search", label=query, count=total, where=kb))


class KbRead(Tool):
    """``kb_read(ids)``: several documents in one call, each checked against the scope."""

    def __init__(self, backend: KnowledgeBackend, scope: Scope) -> None:
        self.backend = backend
        self.scope = scope

    @property
    def spec(self) -> ToolSpec:
        return ToolSpec(
            name="kb_read",
            description=(
                f"Read up to {MAX_IDS_PER_READ} documents by id in one call (ids come from kb_search). "
                "Read every document you need in the same call rather than one per round. "
                f"Each read gives up to {MAX_CHARS_PER_DOCUMENT} characters of a document; a longer one says "
                "where to continue (from_char)." + _chosen_note(self.scope)
            ),
            parameters={
                "type": "object",
                "properties": {
                    "ids": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": MAX_IDS_PER_READ},
                    "from_char": {
                        "type": "integer",
                        "minimum": 0,
                        "description": "Where to start reading in each document (default 0).",
                    },
                },
                "required": ["ids"],
            },
        )

    async def run(self, args: dict[str, Any]) -> ToolOutcome:
        raw = args.get("ids")
        if isinstance(raw, str):
            raw = [raw]
        if not isinstance(raw, list) or not raw:
            raise ToolError("kb_read needs 'ids', a list of document ids from kb_search.")
        ids = [str(i) for i in raw][:MAX_IDS_PER_READ]
        start = args.get("from_char", 0)
        if start is None:
            start = 0
        if isinstance(start, bool) or not isinstance(start, int) or start < 0:
            raise ToolError("kb_read's 'from_char' must be a whole number of characters, 0 or more.")
        found = await self.backend.read(ids)
        documents: list[dict[str, object]] = []
        errors: list[str] = []
        sources: list[Source] = []
        for doc_id in ids:
            doc = found.get(doc_id)
            if doc is None:
                errors.append(f"{doc_id}: no such document.")
            elif not self.scope.may_read(doc.kb, doc.id):
                errors.append(f"{doc_id}: {_read_refusal(doc.kb, self.scope)}")
            else:
                part = _read_part(doc, start)
                documents.append(part)
                returned = len(str(part["text"]))
                sources.append(
                    Source(
                        id=doc.id,
                        title=doc.title,
                        where=doc.kb,
                        start=start if returned else None,
                        end=start + returned if returned else None,
                    )
                )
        if not documents:
            raise OutOfScope(" ".join(errors))
        payload: dict[str, object] = {"documents": documents}
        if errors:
            payload["errors"] = errors
        label = ", ".join(str(d["title"]) for d in documents)
        return ToolOutcome(
            _dump(payload), Action(tool="kb_read", kind="read", label=label, count=len(documents)), tuple(sources)
        )


def _read_part(doc: Document, start: int) -> dict[str, object]:
    """Up to ``MAX_CHARS_PER_DOCUMENT`` characters of ``doc`` from ``start``, saying where the rest goes on."""
    end = start + MAX_CHARS_PER_DOCUMENT
    part: dict[str, object] = {"id": doc.id, "kb": doc.kb, "title": doc.title, "text": doc.text[start:end]}
    if start:
        part["from_char"] = start
    if end < len(doc.text):
        part["continue_from_char"] = end
        part["length"] = len(doc.text)
    elif start >= len(doc.text):
        part["text"] = ""
        part["note"] = f"The document has {len(doc.text)} characters; nothing is left from {start}."
    return part


def _chosen_note(scope: Scope) -> str:
    """What a scope of chosen documents may search and read, for the tools' descriptions."""
    notes = [
        f" In {kb} you may only search and read the documents {', '.join(scope.chosen(kb) or ())}."
        for kb in scope.searchable
        if scope.chosen(kb) is not None
    ]
    return "".join(notes)


def _read_refusal(kb: str, scope: Scope) -> str:
    """Why a document of ``kb`` that exists is not readable in ``scope``."""
    chosen = scope.chosen(kb)
    if kb in scope.searchable and chosen is not None:
        return (
            f"outside your scope; of the knowledge base {kb} you may only read the documents you were given: "
            f"{', '.join(chosen)}."
        )
    whole = ", ".join(scope.knowledge_bases)
    docs = ", ".join(f"{DOC_PREFIX}{b}/{d}" for b, d in scope.documents)
    allowed = "; ".join(p for p in (f"documents of {whole}" if whole else "", docs) if p) or "no knowledge base"
    return f"outside your scope; you may only read {allowed}."


async def _kb_refusal(backend: KnowledgeBackend, kb: str, scope: Scope) -> str:
    allowed = ", ".join(scope.searchable) or "none"
    if await backend.describe(kb) is None:
        return f"Knowledge base '{kb}' does not exist. Knowledge bases you can search: {allowed}."
    return f"Knowledge base '{kb}' is outside your scope. Knowledge bases you can search: {allowed}."


ToolFactory = Callable[[Scope], list[Tool]]
"""Builds the extra read-only tools (web, code) for a scope; returns none when unconfigured."""


class ConnectorSource(Protocol):
    """The connectors (``mcp:<name>``) a run may use; ``connectors.McpConnectors`` is the implementation.

    ``load`` is awaited once per run, before any model call, for the request's connectors; ``tools``
    then builds a scope's tools from what was loaded, without waiting.
    """

    async def load(self, names: Sequence[str]) -> list[str]:
        """Load the named connectors; return the names that do not exist (or are disabled) for this run."""
        ...

    def tools(self, scope: Scope) -> list[Tool]: ...


@dataclass(slots=True)
class Toolbox:
    """Makes the tools a scope gets: knowledge-base tools only when it has knowledge bases."""

    knowledge: KnowledgeBackend | None = None
    factories: list[ToolFactory] = field(default_factory=list)
    connectors: ConnectorSource | None = None

    def tools_for(self, scope: Scope) -> list[Tool]:
        tools: list[Tool] = []
        if scope.searchable and self.knowledge is not None:
            tools += [KbSearch(self.knowledge, scope), KbRead(self.knowledge, scope)]
        for factory in self.factories:
            tools += factory(scope)
        if scope.connectors and self.connectors is not None:
            tools += self.connectors.tools(scope)
        return tools


@dataclass(frozen=True, slots=True)
class ToolRun:
    """The result of running one tool call: what goes back to the model, and what the user sees."""

    call: ToolCall
    content: str
    outcome: ToolOutcome | None
    error: str | None
    stopped: Cause | None = None
    """The cause of the stop that ended the call (its run's), when it was stopped before it returned."""
    started: bool = True
    """False: the call was stopped while it waited for its turn; its work never started."""
    started_at: float = 0.0
    """When it started, in seconds since the epoch (``run_tool_call`` times it)."""
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error is None


async def run_tool_call(
    tools: dict[str, Tool], call: ToolCall, unavailable: str, stop: CancelToken | None = None
) -> ToolRun:
    """Run one call, timed. Business errors (bad arguments, scope) go back to the model; others propagate. Stop
    (``stop`` cancelled) ends the call at once, stopped (see the module)."""
    started_at = time.time()
    run = await _run_tool_call(tools, call, unavailable, stop)
    return ToolRun(
        run.call,
        run.content,
        run.outcome,
        run.error,
        started_at=started_at,
        seconds=max(0.0, time.time() - started_at),
        stopped=run.stopped,
        started=run.started,
    )


async def _run_tool_call(tools: dict[str, Tool], call: ToolCall, unavailable: str, stop: CancelToken | None) -> ToolRun:
    tool = tools.get(call.name)
    if tool is None:
        return _error(call, f"Tool '{call.name}' is not available. {unavailable}")
    try:
        args = call.parsed_arguments()
    except ValueError as e:
        return _error(
            call, f"Invalid arguments for '{call.name}' (not a JSON object: {e}). Call it again with valid JSON."
        )
    if stop is not None and stop.cancelled:
        return _stopped(call, stop, started=False)
    started: list[bool] = []
    work = asyncio.ensure_future(_work(tool, call, args, started))
    if stop is None or tool.stops_itself:
        return await _outcome(call, work)
    try:
        await stop.race(work)
    finally:
        stopped = not work.done()  # Stop, or this call itself cancelled: the tool's work ends with it
        if stopped:
            work.cancel()
            await _wind_down(work)
    if stopped:
        return _stopped(call, stop, started=bool(started))
    return await _outcome(call, work)


async def _work(tool: Tool, call: ToolCall, args: dict[str, Any], started: list[bool]) -> ToolOutcome:
    if tool.turn is None:
        started.append(True)
        return await tool.run_call(call, args)
    async with turn(tool.turn):
        started.append(True)
        return await tool.run_call(call, args)


async def _outcome(call: ToolCall, work: asyncio.Future[ToolOutcome]) -> ToolRun:
    try:
        outcome = await work
    except ToolError as e:
        return _error(call, str(e))
    except EngineError:
        raise  # Stop, a model's error, a failure of the engine's own: not this tool's
    except Exception as e:
        raise ToolFailed(call.name, e) from e
    return ToolRun(call, outcome.content, outcome, outcome.error)


_winding_down: set[asyncio.Future[ToolOutcome]] = set()


async def _wind_down(work: asyncio.Future[ToolOutcome]) -> None:
    """Give a cancelled tool's work a moment to end (its interruption, a kill, a session's close); past it, the work
    ends on its own, kept referenced until then and its outcome dropped."""
    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.wait({work}, timeout=WIND_DOWN_SECONDS)
    if not work.done():
        _winding_down.add(work)
        work.add_done_callback(_dropped)
    elif not work.cancelled():
        work.exception()  # retrieved: a tool that ended with an error as it was stopped says nothing more


def _dropped(work: asyncio.Future[ToolOutcome]) -> None:
    _winding_down.discard(work)
    if not work.cancelled():
        work.exception()


def _stopped(call: ToolCall, stop: CancelToken, *, started: bool) -> ToolRun:
    """A call ended by Stop: its action says so (``run_stopped``, with the run's cause, and whether it had started),
    for the pages and the API to word; the model reads the English."""
    cause = Cause(code="run_stopped", because=stop.stop_cause)
    message = (
        cause.english()[0].upper() + cause.english()[1:]
        if started
        else f"Never started: the run stopped ({stop.stop_cause.english()})"
    ) + "."
    try:
        shown = " ".join(json.dumps(call.parsed_arguments(), ensure_ascii=False).split())
    except ValueError:
        shown = ""
    label = f"{call.name} {shown}" if shown not in ("", "{}") else call.name
    action = Action(tool=call.name, kind="other", label=label[:LABEL_CHARS], ok=False, stopped=cause, started=started)
    content = _dump({"error": message})
    return ToolRun(call, content, ToolOutcome(content, action), message, stopped=cause, started=started)


def _error(call: ToolCall, message: str) -> ToolRun:
    return ToolRun(call, _dump({"error": message}), None, message)
