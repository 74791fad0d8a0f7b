"""A local HTTP server speaking the chat completions wire protocol of OpenAI or of Mistral, and OpenAI's Responses API.

The real SDKs run against it: it reads their JSON requests and answers with JSON (errors) or an
SSE stream of chunks in the dialect's shape. What it answers comes from a queue of scripted
``Reply`` values, then from a ``brain`` function of the request. Every request is recorded.

On ``/v1/responses`` it speaks the Responses API's streaming events (``response.created``,
``response.output_item.added`` / ``done``, ``response.reasoning_summary_text.delta``,
``response.function_call_arguments.delta``, ``response.output_text.delta``, ``response.completed`` with the
usage), gives each reasoning item its encrypted content only when asked (``include``) and its summary only when
asked (``reasoning.summary``), and refuses what OpenAI refuses: a reasoning item sent back without its encrypted
content when nothing is stored (404), with content it did not issue, or without the item that followed it (400);
a summary for an organisation it has not verified (``refuse_summary``: 400 ``unsupported_value``).

In the Mistral dialect it refuses, before any scripted reply, what Mistral's API refuses
(``mistral_refusal``): a message order its validator rejects (400 ``invalid_request_message_order``,
code 3230: a user message right after a tool message, tool calls without their results, a last
message that is not the user's or a tool's), a tool-call id that is not 9 letters or digits (400
``invalid_function_call``, code 3280), an assistant message with neither text nor tool calls, and
any field it does not know (422 ``extra_forbidden``). Its streams can carry Magistral's thinking
chunks (``Turn.thinking``, with their ``signature``).
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import re
import select
import socket
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

Dialect = Literal["openai", "mistral", "responses"]
"""``responses``: OpenAI's server, answering the Responses API (``/v1/responses``) with its streaming events."""
_ids = itertools.count(1)


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int = 0
    reasoning_tokens: int = 0

    def wire(self) -> dict[str, Any]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": self.cached_tokens},
            "completion_tokens_details": {"reasoning_tokens": self.reasoning_tokens},
        }

    def responses_wire(self) -> dict[str, Any]:
        """The Responses API's usage: output tokens count the reasoning tokens."""
        return {
            "input_tokens": self.prompt_tokens,
            "input_tokens_details": {"cached_tokens": self.cached_tokens},
            "output_tokens": self.completion_tokens,
            "output_tokens_details": {"reasoning_tokens": self.reasoning_tokens},
            "total_tokens": self.prompt_tokens + self.completion_tokens,
        }


@dataclass(frozen=True)
class Turn:
    """One model answer: text, tool calls (name, raw JSON arguments), usage, finish reason.

    ``thinking`` (Mistral dialect): streamed first, word by word, as Magistral's ``thinking`` chunks; its
    ``signature`` ("": none) rides alone in a thinking chunk of its own after the answer's text (``signature_at``
    ``"after"``), or on the first thinking chunk (``"start"``), or on the last one (``"end"``)."""

    text: str = ""
    calls: tuple[tuple[str, str], ...] = ()
    usage: Usage | None = Usage(100, 20)
    finish: str | None = None
    thinking: str = ""
    signature: str = ""
    signature_at: Literal["start", "end", "after"] = "after"


@dataclass(frozen=True)
class Reply:
    """What the server sends back to one request."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: Any = None
    events: tuple[Any, ...] = ()
    cut_after: int | None = None
    """Close the connection after this many events, in the middle of the declared body."""
    done: bool = True
    """End with ``data: [DONE]``."""
    hang_after: int | None = None
    """Send this many events, then send nothing more until the client closes the connection (a model that hangs)."""
    named: bool = False
    """Name each event (``event: <its type>``), as the Responses API does."""


def sse_reply(
    dialect: Dialect,
    model: str,
    turn: Turn,
    *,
    piece: int = 7,
    cut_after: int | None = None,
    done: bool = True,
    hang_after: int | None = None,
) -> Reply:
    """A streamed answer in the dialect's chunks: words of text, then each tool call split into pieces."""
    if dialect == "responses":
        return responses_reply(model, turn, piece=piece, cut_after=cut_after, hang_after=hang_after)
    chunks: list[dict[str, Any]] = []

    def chunk(delta: dict[str, Any], finish: str | None = None, usage: Usage | None = None) -> dict[str, Any]:
        c: dict[str, Any] = {
            "id": "cmpl-1",
            "object": "chat.completion.chunk",
            "created": 1_700_000_000,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        if usage is not None:
            c["usage"] = usage.wire()
        return c

    chunks.append(chunk({"role": "assistant", "content": ""}))
    if dialect == "mistral":
        chunks += [chunk({"content": [c]}) for c in thinking_chunks(turn)]
    words = turn.text.split(" ") if turn.text else []
    for i, w in enumerate(words):
        chunks.append(chunk({"content": w if i == 0 else " " + w}))
    if dialect == "mistral" and turn.signature and turn.signature_at == "after":
        chunks.append(chunk({"content": [{"type": "thinking", "thinking": [], "signature": turn.signature}]}))
    for index, (name, arguments) in enumerate(turn.calls):
        call_id = f"call{index:05d}{len(arguments) % 10}"[:9]
        pieces = [arguments[i : i + piece] for i in range(0, len(arguments), piece)] or [""]
        for n, part in enumerate(pieces):
            if n == 0:
                call = {
                    "index": index,
                    "id": call_id,
                    "type": "function",
                    "function": {"name": name, "arguments": part},
                }
            elif dialect == "openai":
                call = {"index": index, "function": {"arguments": part}}
            else:  # the Mistral SDK requires a name in every piece
                call = {"index": index, "function": {"name": "", "arguments": part}}
            chunks.append(chunk({"tool_calls": [call]}))
    finish = turn.finish or ("tool_calls" if turn.calls else "stop")
    if dialect == "openai":
        chunks.append(chunk({}, finish))
        if turn.usage is not None:
            chunks.append({**chunk({}), "choices": [], "usage": turn.usage.wire()})
    else:  # Mistral sends the usage with the last choice
        chunks.append(chunk({"content": ""}, finish, turn.usage))
    return Reply(events=tuple(chunks), cut_after=cut_after, done=done, hang_after=hang_after)


def thinking_chunks(turn: Turn) -> list[dict[str, Any]]:
    """Magistral's ``thinking`` content chunks for the turn's thinking, a word each (the signature on the first or
    the last, per ``signature_at``; ``sse_reply`` sends the ``"after"`` one itself)."""
    if not turn.thinking:
        return []
    words = turn.thinking.split(" ")
    chunks: list[dict[str, Any]] = [
        {"type": "thinking", "thinking": [{"type": "text", "text": w if i == 0 else " " + w}]}
        for i, w in enumerate(words)
    ]
    if turn.signature and turn.signature_at != "after":
        chunks[0 if turn.signature_at == "start" else -1]["signature"] = turn.signature
    return chunks


def text_lead(dialect: Dialect) -> int:
    """How many events of ``sse_reply`` come before its first word of text (and its reasoning, if any)."""
    return 4 if dialect == "responses" else 1


def responses_reply(
    model: str, turn: Turn, *, piece: int = 7, cut_after: int | None = None, hang_after: int | None = None
) -> Reply:
    """A streamed answer in the Responses API's events: a reasoning item (``turn.thinking``: its summary, in words),
    the text's message item (in words), each function call (its arguments in pieces), then the response completed
    with its usage (incomplete, cut at the output cap, when ``turn.finish`` is ``length``)."""
    n = next(_ids)
    numbers = itertools.count()
    events: list[dict[str, Any]] = []
    output: list[dict[str, Any]] = []

    def event(kind: str, **fields: Any) -> None:
        events.append({"type": kind, "sequence_number": next(numbers), **fields})

    def words(text: str) -> list[str]:
        return [w if i == 0 else " " + w for i, w in enumerate(text.split(" "))] if text else []

    response = {"id": f"resp_{n}", "object": "response", "created_at": 1_700_000_000, "model": model,
                "status": "in_progress", "output": [], "usage": None, "error": None, "incomplete_details": None}  # fmt: skip
    event("response.created", response=response)
    event("response.in_progress", response=response)
    if turn.thinking:
        at, item_id = len(output), f"rs_{n:05d}"
        where = {"item_id": item_id, "output_index": at, "summary_index": 0}
        event("response.output_item.added", output_index=at, item={"id": item_id, "type": "reasoning", "summary": []})
        event("response.reasoning_summary_part.added", **where, part={"type": "summary_text", "text": ""})
        for w in words(turn.thinking):
            event("response.reasoning_summary_text.delta", **where, delta=w)
        event("response.reasoning_summary_text.done", **where, text=turn.thinking)
        event("response.reasoning_summary_part.done", **where, part={"type": "summary_text", "text": turn.thinking})
        encrypted = "gAAA" + hashlib.sha256(f"{item_id}:{turn.thinking}".encode()).hexdigest()
        item = {"id": item_id, "type": "reasoning", "summary": [{"type": "summary_text", "text": turn.thinking}],
                "encrypted_content": encrypted}  # fmt: skip
        event("response.output_item.done", output_index=at, item=item)
        output.append(item)
    if turn.text:
        at, item_id = len(output), f"msg_{n:05d}"
        where = {"item_id": item_id, "output_index": at, "content_index": 0}
        message = {"id": item_id, "type": "message", "role": "assistant", "status": "in_progress", "content": []}
        event("response.output_item.added", output_index=at, item=message)
        event("response.content_part.added", **where, part={"type": "output_text", "text": "", "annotations": []})
        for w in words(turn.text):
            event("response.output_text.delta", **where, delta=w, logprobs=[])
        event("response.output_text.done", **where, text=turn.text, logprobs=[])
        part = {"type": "output_text", "text": turn.text, "annotations": []}
        event("response.content_part.done", **where, part=part)
        item = {**message, "status": "completed", "content": [part]}
        event("response.output_item.done", output_index=at, item=item)
        output.append(item)
    for index, (name, arguments) in enumerate(turn.calls):
        at, item_id = len(output), f"fc_{n:05d}_{index}"
        call = {"id": item_id, "type": "function_call", "call_id": f"call_{n}_{index}", "name": name, "arguments": "",
                "status": "in_progress"}  # fmt: skip
        event("response.output_item.added", output_index=at, item=call)
        for i in range(0, len(arguments), piece):
            event(
                "response.function_call_arguments.delta",
                item_id=item_id,
                output_index=at,
                delta=arguments[i : i + piece],
            )
        event("response.function_call_arguments.done", item_id=item_id, output_index=at, arguments=arguments, name=name)
        item = {**call, "arguments": arguments, "status": "completed"}
        event("response.output_item.done", output_index=at, item=item)
        output.append(item)
    cut = turn.finish == "length"
    final = {**response, "status": "incomplete" if cut else "completed", "output": output,
             "usage": turn.usage.responses_wire() if turn.usage is not None else None,
             "incomplete_details": {"reason": "max_output_tokens"} if cut else None}  # fmt: skip
    event("response.incomplete" if cut else "response.completed", response=final)
    return Reply(events=tuple(events), cut_after=cut_after, done=False, hang_after=hang_after, named=True)


def _shaped(body: dict[str, Any], reply: Reply) -> Reply:
    """A Responses reply as the request asked for it: reasoning summaries only when asked (``reasoning.summary``),
    encrypted content only when asked (``include``)."""
    summary = bool((body.get("reasoning") or {}).get("summary"))
    encrypted = "reasoning.encrypted_content" in (body.get("include") or [])
    if summary and encrypted:
        return reply
    events = []
    for e in copy.deepcopy(list(reply.events)):
        if not summary and e["type"].startswith("response.reasoning_summary_"):
            continue
        items = [e["item"]] if "item" in e else e.get("response", {}).get("output", [])
        for item in items:
            if item.get("type") == "reasoning":
                if not summary:
                    item["summary"] = []
                if not encrypted:
                    item.pop("encrypted_content", None)
        events.append(e)
    return Reply(events=tuple(events), cut_after=reply.cut_after, done=reply.done, hang_after=reply.hang_after,
                 named=reply.named)  # fmt: skip


def _following(output: list[dict[str, Any]], at: int) -> tuple[str, str] | None:
    """What followed an output item: a message, or a function call (its call id); None when nothing did."""
    if at + 1 >= len(output):
        return None
    item = output[at + 1]
    return ("function_call", item["call_id"]) if item["type"] == "function_call" else (item["type"], "")


def _input_kind(item: dict[str, Any]) -> tuple[str, str]:
    kind = item.get("type") or "message"
    return (kind, item.get("call_id", "")) if kind == "function_call" else (kind, "")


def error_reply(
    dialect: Dialect,
    status: int,
    message: str,
    headers: dict[str, str] | None = None,
    code: str | None = None,
    param: str | None = None,
) -> Reply:
    if dialect in ("openai", "responses"):
        body: dict[str, Any] = {
            "error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}
        }
    else:
        body = {"object": "error", "message": message, "type": "error", "param": None, "code": code}
    return Reply(status=status, headers=headers or {}, body=body)


MISTRAL_REQUEST_FIELDS = frozenset(
    {
        "model", "messages", "temperature", "top_p", "max_tokens", "stream", "stop", "random_seed", "metadata",
        "response_format", "tools", "tool_choice", "presence_penalty", "frequency_penalty", "min_tokens",
        "repetition_penalty", "top_k", "logprobs", "top_logprobs", "prompt_logprobs", "top_prompt_logprobs", "n",
        "prediction", "parallel_tool_calls", "reasoning_effort", "prompt_mode", "guardrails", "prompt_cache_key",
        "service_tier", "safe_prompt",
    }
)  # fmt: skip
"""The fields of Mistral's chat completion request (its API reference); any other is refused (422)."""
MISTRAL_MESSAGE_FIELDS = {
    "system": frozenset({"role", "content"}),
    "user": frozenset({"role", "content"}),
    "assistant": frozenset({"role", "content", "tool_calls", "prefix"}),
    "tool": frozenset({"role", "content", "tool_call_id", "name"}),
}
MISTRAL_CHUNK_FIELDS = {
    "text": frozenset({"type", "text"}),
    "thinking": frozenset({"type", "thinking", "signature", "closed"}),
}
MISTRAL_ID = re.compile(r"[a-zA-Z0-9]{9}")
# What Mistral's validator expects after each role (mistral-common's ``_validate_message_order``).
MISTRAL_NEXT_ROLES = {
    "system": {"system", "user", "assistant"},
    "user": {"system", "user", "assistant"},
    "assistant": {"user", "assistant", "tool"},
    "tool": {"assistant", "tool"},
}


def _mistral_error(status: int, message: Any, type_: str, code: str | None) -> Reply:
    return Reply(
        status=status, body={"object": "error", "message": message, "type": type_, "param": None, "code": code}
    )


def _order_error(message: str) -> Reply:
    return _mistral_error(400, message, "invalid_request_message_order", "3230")


def _extra_fields(body: dict[str, Any]) -> list[dict[str, Any]]:
    """Mistral's ``extra_forbidden`` details for the fields of ``body`` it does not know (pydantic's shape)."""
    extra: list[dict[str, Any]] = []

    def forbid(loc: tuple[Any, ...], value: Any) -> None:
        extra.append({"type": "extra_forbidden", "loc": ["body", *loc], "msg": "Extra inputs are not permitted",
                      "input": value})  # fmt: skip

    def check(fields: frozenset[str], obj: Any, loc: tuple[Any, ...]) -> None:
        if isinstance(obj, dict):
            for key, value in obj.items():
                if key not in fields:
                    forbid((*loc, key), value)

    check(MISTRAL_REQUEST_FIELDS, body, ())
    for i, m in enumerate(body.get("messages") or []):
        role = m.get("role") if isinstance(m, dict) else None
        if role not in MISTRAL_MESSAGE_FIELDS:
            continue
        check(MISTRAL_MESSAGE_FIELDS[role], m, ("messages", i, role))
        content = m.get("content")
        for j, c in enumerate(content if isinstance(content, list) else []):
            kind = c.get("type") if isinstance(c, dict) else None
            if kind in MISTRAL_CHUNK_FIELDS:
                check(MISTRAL_CHUNK_FIELDS[kind], c, ("messages", i, role, "content", j, kind))
        for j, call in enumerate(m.get("tool_calls") or [] if role == "assistant" else []):
            check(frozenset({"id", "type", "function", "index"}), call, ("messages", i, role, "tool_calls", j))
            check(
                frozenset({"name", "arguments"}),
                call.get("function"),
                ("messages", i, role, "tool_calls", j, "function"),
            )
    return extra


def mistral_refusal(body: dict[str, Any]) -> Reply | None:
    """Mistral's answer to a request its API refuses (the rules of its validator), or None when it takes it."""
    extra = _extra_fields(body)
    if extra:
        return _mistral_error(422, {"detail": extra}, "invalid_request_error", None)
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    previous: str | None = None
    expected: list[str] = []  # the ids of the last assistant message's tool calls still without a result
    for m in messages:
        role = m.get("role")
        if previous is not None and role not in MISTRAL_NEXT_ROLES.get(previous, set()):
            return _order_error(f"Unexpected role '{role}' after role '{previous}'")
        if role == "assistant":
            if expected:
                return _order_error("Not the same number of function calls and responses")
            calls = m.get("tool_calls") or []
            if not m.get("content") and not calls:
                return _mistral_error(
                    400, "Assistant message must have either content or tool_calls", "invalid_request_error", None
                )
            for call in calls:
                if not MISTRAL_ID.fullmatch(str(call.get("id"))):
                    return _id_error(call.get("id"))
            expected = [call["id"] for call in calls]
        elif role == "tool":
            call_id = m.get("tool_call_id")
            if not MISTRAL_ID.fullmatch(str(call_id)):
                return _id_error(call_id)
            if call_id not in expected:
                return _order_error(f"Unexpected tool call id {call_id} in tool results")
            expected.remove(call_id)
        elif expected:
            return _order_error("Not the same number of function calls and responses")
        previous = role
    if expected:
        return _order_error("Not the same number of function calls and responses")
    if len(messages) > 1 and messages[-1].get("role") not in ("user", "tool") and not messages[-1].get("prefix"):
        last = messages[-1].get("role")
        return _order_error(
            f"Expected last role User or Tool (or Assistant with prefix True) for serving but got {last}"
        )
    return None


def _id_error(call_id: Any) -> Reply:
    return _mistral_error(
        400,
        f"Tool call id was {call_id} but must be a-z, A-Z, 0-9, with a length of 9.",
        "invalid_function_call",
        "3280",
    )


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


class WireServer:
    """The server, on 127.0.0.1 and a free port, in a thread."""

    def __init__(
        self, dialect: Dialect, brain: Callable[[dict[str, Any]], Reply] | None = None, *, strict: bool = True
    ) -> None:
        self.dialect = dialect
        self.brain = brain
        self.strict = strict and dialect == "mistral"
        """Refuse what Mistral's API refuses (``mistral_refusal``), before any scripted reply."""
        self.queue: deque[Reply] = deque()
        self.requests: list[Recorded] = []
        self.replies: list[Reply] = []
        self.hanging = threading.Event()
        """Set when a reply starts hanging (``Reply.hang_after``)."""
        self.answered = 0
        """Error replies (JSON bodies) written whole."""
        self.hung_up: list[int] = []
        """The requests (their index) whose hanging stream the client closed."""
        self.hung: list[int] = []
        """The requests (their index) whose reply started hanging."""
        self.refuse_summary = False
        """Responses: answer a reasoning summary with OpenAI's 400 for an organisation it has not verified."""
        self.issued: dict[str, tuple[str, tuple[str, str] | None]] = {}
        """Responses: each reasoning item sent, by id: its encrypted content and what followed it."""
        self.refused: list[Reply] = []
        """What the server refused as the real API would (before any scripted reply)."""
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def script(self, *replies: Reply) -> None:
        self.queue.extend(replies)

    def start(self) -> WireServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()

    def _hang(self, index: int, connection: socket.socket) -> None:
        """Send nothing more; note when the client closes the connection (end of file on it)."""
        with self._lock:
            self.hung.append(index)
        self.hanging.set()
        while not self._stopping.is_set():
            readable, _, _ = select.select([connection], [], [], 0.02)
            if readable:
                try:
                    if connection.recv(1024) == b"":
                        break
                except OSError:
                    break
        else:
            return
        with self._lock:
            self.hung_up.append(index)

    def _refusal(self, recorded: Recorded) -> Reply | None:
        """What Mistral's API (``strict``) or OpenAI's Responses API refuses in a request, as it says it; None when it
        takes it."""
        if self.strict:
            return mistral_refusal(recorded.body)
        if not recorded.path.endswith("/responses"):
            return None
        body = recorded.body
        if self.refuse_summary and (body.get("reasoning") or {}).get("summary"):
            message = ("Your organization must be verified to generate reasoning summaries. Please go to: "
                       "https://platform.openai.com/settings/organization/general and click on Verify Organization.")  # fmt: skip
            return error_reply("responses", 400, message, code="unsupported_value", param="reasoning.summary")
        items = body.get("input") or []
        for at, item in enumerate(items):
            if not isinstance(item, dict) or item.get("type") != "reasoning":
                continue
            item_id = item.get("id", "")
            if not item.get("encrypted_content"):
                if body.get("store") is False:
                    message = (f"Item with id '{item_id}' not found. Items are not persisted when `store` is set to "
                               "false. Try again with `store` set to true, or remove this item from your input.")  # fmt: skip
                    return error_reply("responses", 404, message, param="input")
                continue
            issued = self.issued.get(item_id)
            if issued is None or issued[0] != item["encrypted_content"]:
                message = f"The encrypted content for item {item_id} could not be verified."
                return error_reply("responses", 400, message, code="invalid_encrypted_content")
            following = issued[1]
            if following is not None and (at + 1 >= len(items) or _input_kind(items[at + 1]) != following):
                message = f"Item '{item_id}' of type 'reasoning' was provided without its required following item."
                return error_reply("responses", 400, message, param="input")
        return None

    def _issue(self, reply: Reply) -> None:
        """Note each reasoning item a Responses reply carries, with what followed it."""
        for e in reply.events:
            if isinstance(e, dict) and e.get("type") in ("response.completed", "response.incomplete"):
                output = e["response"]["output"]
                for at, item in enumerate(output):
                    if item["type"] == "reasoning" and item.get("encrypted_content"):
                        self.issued[item["id"]] = (item["encrypted_content"], _following(output, at))

    def _answer(self, recorded: Recorded) -> Reply:
        with self._lock:
            self.requests.append(recorded)
            refusal = self._refusal(recorded)
            if refusal is not None:
                self.refused.append(refusal)
                self.replies.append(refusal)
                return refusal
            if self.queue:
                reply = self.queue.popleft()
            elif self.brain is not None:
                reply = self.brain(recorded.body)
            else:
                reply = error_reply(self.dialect, 500, "no scripted reply left")
            if recorded.path.endswith("/responses") and reply.events:
                reply = _shaped(recorded.body, reply)
                self._issue(reply)
            self.replies.append(reply)
            return reply

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return None

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                recorded = Recorded(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                reply = server._answer(recorded)
                index = next(i for i, r in enumerate(server.requests) if r is recorded)
                if reply.body is not None or not reply.events:
                    data = json.dumps(reply.body or {}).encode()
                    self.send_response(reply.status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    for k, v in reply.headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                    self.wfile.flush()
                    with server._lock:
                        server.answered += 1
                    return
                frames = [
                    (
                        (f"event: {e['type']}\n" if reply.named and isinstance(e, dict) else "")
                        + f"data: {e if isinstance(e, str) else json.dumps(e)}\n\n"
                    ).encode()
                    for e in reply.events
                ]
                if reply.done:
                    frames.append(b"data: [DONE]\n\n")
                total = sum(len(f) for f in frames)
                self.send_response(reply.status)
                self.send_header("content-type", "text/event-stream")
                self.send_header("content-length", str(total))
                for k, v in reply.headers.items():
                    self.send_header(k, v)
                self.end_headers()
                for n, frame in enumerate(frames):
                    if reply.hang_after is not None and n >= reply.hang_after:
                        server._hang(index, self.connection)
                        self.close_connection = True
                        return
                    if reply.cut_after is not None and n >= reply.cut_after:
                        self.wfile.flush()
                        self.connection.shutdown(socket.SHUT_RDWR)
                        self.close_connection = True
                        return
                    self.wfile.write(frame)
                    self.wfile.flush()

        return Handler
