"""The live server as the API tests see it: its address, the keys created for it, and clients."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import httpx2
import openai

from tests.asgi_app import asgi_transport


@dataclass
class Live:
    url: str
    keys: dict[str, str]
    database: Path | None = None
    """The server's SQLite database, for the tests that read its counters."""
    _open: list[openai.OpenAI | httpx2.Client] = field(default_factory=list)

    def client(self, key: str = "demo") -> openai.OpenAI:
        """The official client with one of the keys (or any string as a key); closed after the test."""
        client = openai.OpenAI(base_url=f"{self.url}/v1", api_key=self.keys.get(key, key), max_retries=0, timeout=60)
        self._open.append(client)
        return client

    def http(self, key: str = "demo") -> httpx2.Client:
        """A plain HTTP client sending the key (none for ``""``); closed after the test."""
        headers = {"Authorization": f"Bearer {self.keys.get(key, key)}"} if key else {}
        client = httpx2.Client(base_url=self.url, headers=headers, timeout=60)
        self._open.append(client)
        return client

    def close(self) -> None:
        while self._open:
            self._open.pop().close()


def asgi_client(secret: str) -> httpx2.AsyncClient:
    """A plain HTTP client on the application itself (no server), with the key ``secret``."""

    return httpx2.AsyncClient(
        transport=asgi_transport(),
        base_url="http://testserver",
        headers={"Authorization": f"Bearer {secret}"},
        timeout=30,
    )
