"""What several chat tests send (the composer's request with two knowledge bases and agents), and the page that
receives what a run pushes (a signed-in client, its websocket)."""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from typing import NotRequired, TypedDict

from channels.testing import WebsocketCommunicator
from django.test import AsyncClient

from assistant.asgi import application
from assistant.runs.models import Conversation, Run


class ComposerPost(TypedDict):
    """The composer's form, as posted."""

    text: str
    model: str
    level: str
    resources: list[str]
    category: NotRequired[str]


QUESTION = "Bimbamjob: invoices 2024, payments and relationship"
ASK: ComposerPost = {
    "text": QUESTION,
    "model": "demo-large",
    "level": "approfondi",
    "resources": ["kb:factures", "kb:comptes-rendus", "agents"],
}


# A signed-in user's page, its websocket open (the fixtures ``demo_conversation`` and ``demo_page``, conftest) ----------

PAGE_SECONDS = 60.0
"""The longest a test waits for what the page should receive (a guard against hanging: the machine may be loaded)."""


async def signed_in(username: str = "demo", password: str = "demo-password") -> tuple[AsyncClient, str]:
    """The page's client signed in, and its session's key (for the websocket's cookie)."""
    client = AsyncClient()
    assert await client.alogin(username=username, password=password)
    return client, client.cookies["sessionid"].value


async def open_socket(path: str, session: str | None, origin: str = "http://testserver") -> WebsocketCommunicator:
    """The page's websocket at ``path``, connected (with the session's cookie, unless None)."""
    headers = [(b"origin", origin.encode()), (b"host", b"testserver")]
    if session is not None:
        headers.append((b"cookie", f"sessionid={session}".encode()))
    communicator = WebsocketCommunicator(application, path, headers=headers)
    connected, _ = await communicator.connect(timeout=PAGE_SECONDS)
    assert connected
    return communicator


async def frames_until(communicator: WebsocketCommunicator, pattern: str, seconds: float = PAGE_SECONDS) -> str:
    """What the page receives until it has received ``pattern`` (a regular expression: ``re.escape`` a plain text)."""
    frames = ""
    try:
        async with asyncio.timeout(seconds):
            while not re.search(pattern, frames, re.S):
                frames += str(await communicator.receive_from(timeout=seconds))
    except TimeoutError as e:
        raise AssertionError(f"waited {seconds:g} s for {pattern!r} on the page; it had: {frames[-3000:]}") from e
    return frames


async def frames_until_finished(communicator: WebsocketCommunicator, run: Run) -> list[str]:
    """Every frame received until the finished run arrives (its article, not running any more)."""
    frames: list[str] = []
    finished = re.compile(rf'<article class="answer" id="run-{run.pk}" data-status="(ok|stopped|error)"')
    try:
        async with asyncio.timeout(PAGE_SECONDS):
            while not frames or not finished.search(frames[-1]):
                frames.append(str(await communicator.receive_from(timeout=PAGE_SECONDS)))
    except TimeoutError as e:
        raise AssertionError(f"waited {PAGE_SECONDS:g} s for run {run.pk} to finish on the page") from e
    return frames


@dataclass
class Page:
    """The demo user's conversation page: their signed-in client, the conversation, its websocket open."""

    client: AsyncClient
    conversation: Conversation
    communicator: WebsocketCommunicator
    closed: bool = False

    async def frames_until(self, text: str) -> str:
        """What the page receives until it shows ``text``."""
        return await frames_until(self.communicator, re.escape(text))

    async def until_finished(self, run: Run) -> list[str]:
        return await frames_until_finished(self.communicator, run)

    async def close(self) -> None:
        """Close the page (its websocket); again, nothing happens."""
        if not self.closed:
            self.closed = True
            await self.communicator.disconnect()
