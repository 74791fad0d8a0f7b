"""A scripted model server speaking OpenAI's chat-completions wire protocol, for the whole-server benchmark.

It plays every model of the scenario of ``bench/benchmarks/whole_server.py`` (and of the peer,
``bench/peer.py``): what it answers is decided from the request alone (the tools offered and the
messages so far), so the same request always gets the same answer:

- a request offering ``submit_result`` is an agent's: no tool result yet → ``kb_search``; a search
  result and no read → ``kb_read`` of the hits (at most 3); a read → ``submit_result`` with findings
  quoting the documents read (or, when ``submit_result`` is not offered but ``kb_read`` is, as the
  peer's agents may be built, the same findings as text);
- a request offering the ``agents`` tool (this project's delegation) whose last message is the
  user's → one ``agents`` call with two tasks, one per knowledge base offered (or two over the one);
- a request offering tools named ``research_*`` (the peer's agents as tools) whose last message is
  the user's → one call of each of the first two (in parallel, one assistant message);
- a request whose last message is a tool result of the above → the final answer, as text.

Wire details as OpenAI sends them: with ``"stream": true`` server-sent events (``data: {...}``),
a first chunk with the role, text deltas a few words at a time, each tool call's arguments split
across three chunks after a first chunk with its id and name, a chunk with ``finish_reason``, then
(when ``stream_options.include_usage`` asks) a last chunk with empty ``choices`` and the ``usage``
(``prompt_tokens_details.cached_tokens``, ``completion_tokens_details.reasoning_tokens``), then
``data: [DONE]``; without it, one ``chat.completion`` JSON body. Each call waits a fixed latency
(``--latency``, changeable while it runs) before its first byte.

Every request's arrival is logged (``time.monotonic()``, the same clock in every process of the
machine, and ``time.time()``): ``GET /_log`` returns the log, ``POST /_reset`` clears it,
``POST /_latency`` with ``{"seconds": s}`` sets the latency.

Use it from the command line (``python -m bench.scripted --port 0 --latency 0.3`` prints the base URL
to use as ``OPENAI_BASE_URL`` on its first line, then serves until killed), in a process of its own
from Python (``spawn()``), or in a thread of the caller (``start()``), e.g. in a test.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
AGENT_FINDINGS = "According to the documents read: "
FINAL_ANSWER = (
    "Bimbamjob paid invoice F-2024-031 76 days late and invoice F-2024-077 (6,250 EUR) is still unpaid; "
    "the meeting reports say the relationship is tense. Sources are given by the agents' reports."
)


# What to answer -----------------------------------------------------------------------------------


@dataclass(slots=True)
class Answer:
    """What one call answers: text, tool calls (name, arguments as a dict), why it finished."""

    text: str = ""
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    @property
    def finish_reason(self) -> str:
        return "tool_calls" if self.calls else "stop"


def _tools(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The tools offered, by name: their JSON schema of parameters."""
    out: dict[str, dict[str, Any]] = {}
    for tool in body.get("tools") or []:
        fn = tool.get("function") or {}
        if fn.get("name"):
            out[fn["name"]] = fn.get("parameters") or {}
    return out


def _tool_results(messages: list[dict[str, Any]], calls_named: dict[str, str]) -> dict[str, list[Any]]:
    """The tool results so far by tool name (the name found from the assistant call they answer)."""
    out: dict[str, list[Any]] = {}
    for m in messages:
        if m.get("role") != "tool":
            continue
        name = calls_named.get(m.get("tool_call_id", ""), m.get("name", ""))
        content = m.get("content")
        if isinstance(content, list):  # content parts
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        if isinstance(content, str):  # without the budget note the engine appends to a request's last tool result
            content = content.partition("\n\nBudget left: ")[0]
        try:
            value = json.loads(content or "")
        except (TypeError, ValueError):
            value = content
        out.setdefault(name, []).append(value)
    return out


def _call_names(messages: list[dict[str, Any]]) -> dict[str, str]:
    names: dict[str, str] = {}
    for m in messages:
        for call in m.get("tool_calls") or []:
            names[call.get("id", "")] = (call.get("function") or {}).get("name", "")
    return names


def _enum(schema: dict[str, Any], *path: str) -> list[Any]:
    node: Any = schema
    for key in path:
        node = (node or {}).get(key) if isinstance(node, dict) else None
    return list(node or []) if isinstance(node, list) else []


def _hits(result: Any) -> list[str]:
    if isinstance(result, dict):
        return [str(h["id"]) for h in result.get("hits", []) if isinstance(h, dict) and "id" in h]
    return []


def _documents(result: Any) -> list[dict[str, Any]]:
    if isinstance(result, dict):
        return [d for d in result.get("documents", []) if isinstance(d, dict)]
    return []


def decide(body: dict[str, Any]) -> Answer:
    """What the scenario answers to one chat-completions request body (deterministic)."""
    tools = _tools(body)
    messages: list[dict[str, Any]] = list(body.get("messages") or [])
    results = _tool_results(messages, _call_names(messages))
    last = messages[-1].get("role") if messages else "user"

    if "submit_result" in tools or ("kb_read" in tools and "agents" not in tools and not _research(tools)):
        return _agent(tools, messages, results)
    if last == "tool":
        return Answer(text=FINAL_ANSWER)
    if "agents" in tools:
        task = _enum(tools["agents"], "properties", "tasks", "items", "properties", "model", "enum")
        model = next((m for m in task if not str(m).startswith("demo-")), task[0] if task else "")
        kbs = [
            r
            for r in _enum(tools["agents"], "properties", "tasks", "items", "properties", "resources", "items", "enum")
            if str(r).startswith("kb:")
        ]
        kbs = (kbs * 2)[:2] if kbs else []
        tasks = [
            {
                "instruction": f"Find in {kb} what the documents say about Bimbamjob's invoices and payments. "
                "Read the relevant documents and report the facts with their document ids.",
                "model": model,
                "resources": [kb],
            }
            for kb in kbs
        ]
        return Answer(text="I am handing the two searches to agents.", calls=[("agents", {"tasks": tasks})])
    research = _research(tools)
    if research:
        return Answer(
            calls=[
                (name, {"input": f"Find what the documents say about Bimbamjob's invoices and payments ({i + 1})."})
                for i, name in enumerate(research[:2])
            ]
        )
    return Answer(text=FINAL_ANSWER)


def _research(tools: dict[str, Any]) -> list[str]:
    return sorted(name for name in tools if name.startswith("research_"))


def _agent(tools: dict[str, dict[str, Any]], messages: list[dict[str, Any]], results: dict[str, list[Any]]) -> Answer:
    if "kb_read" in results:
        docs = [d for r in results["kb_read"] for d in _documents(r)]
        findings = AGENT_FINDINGS + " ".join(
            f"{d.get('title', '')}: {str(d.get('text', ''))[:160]} [{d.get('id', '')}]" for d in docs
        )
        if "submit_result" in tools:
            report = {"findings": findings, "sources": [str(d.get("id", "")) for d in docs], "gaps": []}
            return Answer(calls=[("submit_result", report)])
        return Answer(text=findings)
    if "kb_search" in results:
        ids = [i for r in results["kb_search"] for i in _hits(r)][:3]
        if ids and "kb_read" in tools:
            return Answer(calls=[("kb_read", {"ids": ids})])
    if "kb_search" in tools:
        args: dict[str, Any] = {"query": "Bimbamjob invoice payment"}
        kbs = _enum(tools["kb_search"], "properties", "kb", "enum")
        if kbs:
            args["kb"] = kbs[0]
        return Answer(calls=[("kb_search", args)])
    return Answer(calls=[("submit_result", {"findings": AGENT_FINDINGS + "nothing.", "sources": [], "gaps": []})])


# The wire -----------------------------------------------------------------------------------------

_ids = itertools.count(1)


def _usage(body: dict[str, Any], answer: Answer) -> dict[str, Any]:
    """Token counts from the request's size (about 4 characters a token); the earlier turns count as cached."""
    messages = body.get("messages") or []
    prompt = max(1, len(json.dumps(messages)) // 4 + len(json.dumps(body.get("tools") or [])) // 4)
    earlier = max(0, len(json.dumps(messages[:-1])) // 4) if len(messages) > 2 else 0
    cached = min(prompt, earlier // 128 * 128)
    completion = max(1, (len(answer.text) + sum(len(json.dumps(a)) for _, a in answer.calls)) // 4)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0},
    }


def _split(text: str, parts: int) -> list[str]:
    size = max(1, -(-len(text) // parts))
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def chunks(body: dict[str, Any], answer: Answer, completion_id: str, created: int) -> Iterator[dict[str, Any]]:
    """The ``chat.completion.chunk`` objects of one streamed answer."""
    model = body.get("model", "")
    base = {"id": completion_id, "object": "chat.completion.chunk", "created": created, "model": model}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}

    yield chunk({"role": "assistant", "content": ""})
    words = answer.text.split(" ")
    for i in range(0, len(words), 3):
        piece = " ".join(words[i : i + 3])
        yield chunk({"content": piece if i == 0 else " " + piece})
    for index, (name, arguments) in enumerate(answer.calls):
        call_id = f"call_{completion_id[-6:]}_{index}"
        yield chunk(
            {
                "tool_calls": [
                    {"index": index, "id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}
                ]
            }
        )
        for piece in _split(json.dumps(arguments, ensure_ascii=False), 3):
            yield chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
    yield chunk({}, answer.finish_reason)
    if (body.get("stream_options") or {}).get("include_usage"):
        yield {**base, "choices": [], "usage": _usage(body, answer)}


def completion(body: dict[str, Any], answer: Answer, completion_id: str, created: int) -> dict[str, Any]:
    """The ``chat.completion`` object of one answer not streamed."""
    message: dict[str, Any] = {"role": "assistant", "content": answer.text or None, "refusal": None}
    if answer.calls:
        message["tool_calls"] = [
            {
                "id": f"call_{completion_id[-6:]}_{i}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments, ensure_ascii=False)},
            }
            for i, (name, arguments) in enumerate(answer.calls)
        ]
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": created,
        "model": body.get("model", ""),
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": answer.finish_reason}],
        "usage": _usage(body, answer),
    }


class ScriptedServer:
    """The HTTP/1.1 server (keep-alive; SSE sent with chunked transfer encoding) on asyncio."""

    def __init__(self, latency: float = 0.0) -> None:
        self.latency = latency
        self.log: list[dict[str, Any]] = []
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self.port = 0

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self._server = await asyncio.start_server(self._connection, host, port, backlog=256)
        self.port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            for writer in list(self._writers):  # keep-alive connections: closed, not left to the garbage collector
                writer.close()
                with contextlib.suppress(Exception):
                    await writer.wait_closed()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                arrived, arrived_wall = time.monotonic(), time.time()
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                headers = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in lines[1:] if h)}
                length = int(headers.get("content-length", "0") or 0)
                raw = await reader.readexactly(length) if length else b""
                await self._handle(method, path.split("?", 1)[0], raw, writer, arrived, arrived_wall)
                if headers.get("connection", "").lower() == "close":
                    break
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        finally:
            self._writers.discard(writer)
            with contextlib.suppress(Exception):
                writer.close()

    async def _handle(
        self, method: str, path: str, raw: bytes, writer: asyncio.StreamWriter, arrived: float, wall: float
    ) -> None:
        if path == "/_log":
            return await _send_json(writer, 200, {"requests": self.log})
        if path == "/_reset" and method == "POST":
            self.log.clear()
            return await _send_json(writer, 200, {"ok": True})
        if path == "/_latency" and method == "POST":
            self.latency = float(json.loads(raw or b"{}").get("seconds", 0.0))
            return await _send_json(writer, 200, {"latency": self.latency})
        if not path.endswith("/chat/completions") or method != "POST":
            return await _send_json(writer, 404, {"error": {"message": f"no route {path}", "type": "not_found"}})
        body = json.loads(raw)
        answer = decide(body)
        tools = sorted(_tools(body))
        self.log.append(
            {
                "arrived": arrived,
                "arrived_wall": wall,
                "model": body.get("model", ""),
                "stream": bool(body.get("stream")),
                "tools": tools,
                "messages": len(body.get("messages") or []),
                "answer": [name for name, _ in answer.calls] or ["text"],
            }
        )
        if self.latency > 0:
            await asyncio.sleep(self.latency)
        completion_id = f"chatcmpl-scripted{next(_ids):08d}"
        created = int(wall)
        if not body.get("stream"):
            return await _send_json(writer, 200, completion(body, answer, completion_id, created))
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
            b"transfer-encoding: chunked\r\n\r\n"
        )
        for c in chunks(body, answer, completion_id, created):
            _chunk(writer, b"data: " + json.dumps(c, ensure_ascii=False).encode() + b"\n\n")
            await writer.drain()
        _chunk(writer, b"data: [DONE]\n\n")
        writer.write(b"0\r\n\r\n")
        await writer.drain()


def _chunk(writer: asyncio.StreamWriter, data: bytes) -> None:
    writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")


async def _send_json(writer: asyncio.StreamWriter, status: int, data: dict[str, Any]) -> None:
    payload = json.dumps(data, ensure_ascii=False).encode()
    reason = {200: "OK", 404: "Not Found"}.get(status, "Error")
    writer.write(
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {len(payload)}\r\n\r\n".encode()
        + payload
    )
    await writer.drain()


# Handles ------------------------------------------------------------------------------------------


class Handle:
    """A running scripted server, driven over HTTP: its base URL, its log, its latency."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.root = f"http://127.0.0.1:{port}"
        self.base_url = f"{self.root}/v1"

    def _call(self, path: str, data: dict[str, Any] | None = None) -> dict[str, Any]:
        payload = None if data is None else json.dumps(data).encode()
        request = urllib.request.Request(self.root + path, payload, method="GET" if data is None else "POST")
        with urllib.request.urlopen(request, timeout=30) as response:
            value: dict[str, Any] = json.loads(response.read())
            return value

    def requests(self) -> list[dict[str, Any]]:
        """Every model request logged since the last reset, in order of arrival."""
        return list(self._call("/_log")["requests"])

    def reset(self) -> None:
        self._call("/_reset", {})

    def set_latency(self, seconds: float) -> None:
        self._call("/_latency", {"seconds": seconds})

    def stop(self) -> None:
        pass


class ProcessHandle(Handle):
    def __init__(self, process: subprocess.Popen[str], port: int) -> None:
        super().__init__(port)
        self.process = process

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()


class ThreadHandle(Handle):
    def __init__(self, loop: asyncio.AbstractEventLoop, server: ScriptedServer, thread: threading.Thread) -> None:
        super().__init__(server.port)
        self.loop, self.server, self.thread = loop, server, thread

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.server.close(), self.loop).result(timeout=10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)


def spawn(latency: float = 0.0, python: str = sys.executable) -> ProcessHandle:
    """The scripted server in a process of its own (its CPU is not the caller's); ``stop()`` ends it."""
    process = subprocess.Popen(
        [python, "-m", "bench.scripted", "--port", "0", "--latency", str(latency)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line.startswith("http://"):
        process.kill()
        raise RuntimeError(f"the scripted server did not start: {line!r}")
    return ProcessHandle(process, int(line.rsplit(":", 1)[1].split("/", 1)[0]))


def start(latency: float = 0.0) -> ThreadHandle:
    """The scripted server on an event loop in a thread of the caller; ``stop()`` ends it."""
    loop = asyncio.new_event_loop()
    server = ScriptedServer(latency)
    ready = threading.Event()

    def serve() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(server.start())
        ready.set()
        loop.run_forever()
        loop.close()

    thread = threading.Thread(target=serve, name="scripted-openai", daemon=True)
    thread.start()
    ready.wait(10)
    return ThreadHandle(loop, server, thread)


async def _serve(port: int, latency: float) -> None:
    server = ScriptedServer(latency)
    await server.start(port=port)
    print(f"http://127.0.0.1:{server.port}/v1", flush=True)
    await asyncio.Event().wait()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.scripted", description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0, help="0 for a free one (the URL is printed)")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds each call waits before its first byte")
    args = parser.parse_args(argv)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve(args.port, args.latency))


if __name__ == "__main__":
    main()
