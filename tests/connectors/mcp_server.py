"""A local MCP server for the connector tests: the official SDK's ``MCPServer`` over streamable HTTP.

``crm`` has one read tool (``search_customers``, annotated ``readOnlyHint: true``) and one write tool
(``delete_customer``). It runs in a thread on a free port; ``calls`` records every tool call it
received, ``headers`` the headers of the last request and ``messages`` the JSON-RPC methods posted to it (and
``DELETE``, a session closed), so tests see what reached the server.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

from tests.waiting import wait_until

CUSTOMERS = {"c-1": "Acme SA, Lyon", "c-2": "Bolt SARL, Nantes"}


@dataclass
class CrmServer:
    url: str
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)
    reply: str | None = None
    """When set, search_customers answers this text (injection tests)."""
    hold: bool = False
    """When set, search_customers does not answer until it is unset (a server that hangs)."""
    messages: list[str] = field(default_factory=list)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _app(state: CrmServer) -> Any:
    server = MCPServer("crm")

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    async def search_customers(query: str) -> str:
        """Find customers whose name or city contains one of the query's words."""
        state.calls.append(("search_customers", {"query": query}))
        while state.hold:
            await asyncio.sleep(0.02)
        if state.reply is not None:
            return state.reply
        words = query.lower().split()
        found = [f"{cid}: {name}" for cid, name in CUSTOMERS.items() if any(w in name.lower() for w in words)]
        return "\n".join(found) or "no customer matches"

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True))
    def delete_customer(customer_id: str) -> str:
        """Delete a customer."""
        state.calls.append(("delete_customer", {"customer_id": customer_id}))
        return "deleted"

    app = server.streamable_http_app()

    async def recording(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        state.headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        if scope["method"] == "DELETE":
            state.messages.append("DELETE")

        async def reading() -> Any:
            message = await receive()
            if message["type"] == "http.request" and message.get("body"):
                with contextlib.suppress(ValueError):
                    body = json.loads(message["body"])
                    for m in body if isinstance(body, list) else [body]:
                        if isinstance(m, dict) and "method" in m:
                            state.messages.append(str(m["method"]))
            return message

        await app(scope, reading, send)

    return recording


@contextmanager
def crm_server() -> Iterator[CrmServer]:
    port = _free_port()
    state = CrmServer(url=f"http://127.0.0.1:{port}/mcp")
    config = uvicorn.Config(_app(state), host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()

    def started() -> bool:
        if not thread.is_alive():
            raise RuntimeError("the MCP test server stopped before it started")
        return bool(server.started)

    wait_until(started, "the MCP test server to start")
    try:
        yield state
    finally:
        server.should_exit = True
        thread.join(5)
