"""What a test's WebSocket communicator receives, as text (the pages' socket sends text frames only)."""

from __future__ import annotations

from channels.testing import WebsocketCommunicator


async def text_from(communicator: WebsocketCommunicator, timeout: float = 1) -> str:
    """The next frame; fails if it is binary (Channels types a frame as text or bytes)."""
    frame = await communicator.receive_from(timeout=timeout)
    assert isinstance(frame, str), frame
    return frame
