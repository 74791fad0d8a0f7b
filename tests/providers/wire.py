"""A local HTTP server speaking the chat completions wire protocol of OpenAI or of Mistral.

The real SDKs run against it: it reads their JSON requests and answers with JSON (errors) or an
SSE stream of chunks in the dialect's shape. What it answers comes from a queue of scripted
``Reply`` values, then from a ``brain`` function of the request. Every request is recorded.

In the Mistral dialect it refuses, before any scripted reply, what Mistral's API refuses
(``mistral_refusal``): a message order its validator rejects (400 ``invalid_request_message_order``,
code 3230: a user message right after a tool message, tool calls without their results, a last
message that is not the user's or a tool's), a tool-call id that is not 9 letters or digits (400
``invalid_function_call``, code 3280), an assistant message with neither text nor tool calls, and
any field it does not know (422 ``extra_forbidden``). Its streams can carry Magistral's thinking
chunks (``Turn.thinking``, with their ``signature``).
"""

from __future__ import annotations

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

Dialect = Literal["openai", "mistral"]


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


def error_reply(
    dialect: Dialect, status: int, message: str, headers: dict[str, str] | None = None, code: str | None = None
) -> Reply:
    if dialect == "openai":
        body: dict[str, Any] = {"error": {"message": message, "type": "error", "param": None, "code": code}}
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
        """Refuse what the provider's API refuses (Mistral: ``mistral_refusal``), before any scripted reply."""
        self.refused: list[Reply] = []
        """The refusals sent (``strict``)."""
        self.queue: deque[Reply] = deque()
        self.requests: list[Recorded] = []
        self.replies: list[Reply] = []
        self.hanging = threading.Event()
        """Set when a reply starts hanging (``Reply.hang_after``)."""
        self.answered = 0
        """Error replies (JSON bodies) written whole."""
        self.hung_up: list[int] = []
        """The requests (their index) whose hanging stream the client closed."""
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

    def _answer(self, recorded: Recorded) -> Reply:
        with self._lock:
            self.requests.append(recorded)
            refusal = mistral_refusal(recorded.body) if self.strict else None
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
                frames = [f"data: {e if isinstance(e, str) else json.dumps(e)}\n\n".encode() for e in reply.events]
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
