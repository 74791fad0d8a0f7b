"""A local HTTP server speaking the chat completions wire protocol of OpenAI or of Mistral.

The real SDKs run against it: it reads their JSON requests and answers with JSON (errors) or an
SSE stream of chunks in the dialect's shape. What it answers comes from a queue of scripted
``Reply`` values, then from a ``brain`` function of the request. Every request is recorded.
"""

from __future__ import annotations

import json
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
    """One model answer: text, tool calls (name, raw JSON arguments), usage, finish reason."""

    text: str = ""
    calls: tuple[tuple[str, str], ...] = ()
    usage: Usage | None = Usage(100, 20)
    finish: str | None = None
    thinking: str = ""
    """Mistral: the thinking chunks (a word each) before the text."""
    signature: str = ""
    """Mistral: the thinking's signature, in a chunk of its own after the text."""


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
        for i, w in enumerate(turn.thinking.split(" ") if turn.thinking else []):
            thought = {"type": "text", "text": w if i == 0 else " " + w}
            chunks.append(chunk({"content": [{"type": "thinking", "thinking": [thought]}]}))
    words = turn.text.split(" ") if turn.text else []
    for i, w in enumerate(words):
        chunks.append(chunk({"content": w if i == 0 else " " + w}))
    if dialect == "mistral" and turn.signature:
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


def error_reply(
    dialect: Dialect, status: int, message: str, headers: dict[str, str] | None = None, code: str | None = None
) -> Reply:
    if dialect == "openai":
        body: dict[str, Any] = {"error": {"message": message, "type": "error", "param": None, "code": code}}
    else:
        body = {"object": "error", "message": message, "type": "error", "param": None, "code": code}
    return Reply(status=status, headers=headers or {}, body=body)


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


class WireServer:
    """The server, on 127.0.0.1 and a free port, in a thread."""

    def __init__(self, dialect: Dialect, brain: Callable[[dict[str, Any]], Reply] | None = None) -> None:
        self.dialect = dialect
        self.brain = brain
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
