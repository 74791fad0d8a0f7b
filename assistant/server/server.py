"""Daphne's server with a request class of ours: bodies are passed on, never parsed, and bounded.

**Not parsed.** Twisted's ``http.Request`` parses a ``multipart/form-data`` body (with the standard library's
``email`` parser, line by line) as soon as it has arrived, to fill ``request.args``, which Daphne never reads:
Django parses the body again in the request's own thread. That first parse runs in the reactor's thread, which
serves every connection: a 19 MB upload held it about a second of CPU (more on a loaded machine), and every other
request waited behind it. Twisted lets a request skip it (``parsePOSTFormSubmission=False``); Daphne's
``WebRequest`` takes Twisted's arguments, and its factory makes the requests: ours passes that argument.

**Bounded.** No request carries more than ``max_body_bytes()``, the largest upload a knowledge base accepts
(``KB_MAX_UPLOAD_FILES`` files of ``KB_MAX_UPLOAD_MB``), and no part of a ``multipart/form-data`` body more than
one file's limit (``PartSizes`` counts each part's bytes as they arrive, finding the boundaries with
``bytes.find``: nothing is parsed). A body declared longer (``Content-Length``) is refused before any of it arrives;
one that grows past a limit as it arrives (a file over the limit, a chunked body) is refused there. A refused body
is no longer stored: the rest is read and dropped (past twice the limit, the connection is closed), and Django gets
the request with an empty body and the ``Body-Refused`` header, which ``assistant.api.middleware`` answers in the
caller's format and language. A client's own ``Body-Refused`` header is dropped first.

**Frozen.** Once Daphne has loaded the application, the objects alive are frozen out of the garbage collector's
full collections (``heap.freeze_startup``).

Its threads hand the GIL over at Python's default interval (5 ms). Issue 34 had set 0.5 ms, so that a request
computing for seconds would delay the others' pages less; once those requests had been made cheaper (the usage CSV
in a worker process of its own), the shorter interval no longer helped them. It still cost the live chat: with 50
chats streaming, the token-to-browser p95 was 49–62 ms at 0.5 ms and 22–33 ms at 5 ms. Another user's page p95 during
each long request stayed under 70 ms on a quiet machine, against a 200 ms target (docs/BENCHMARKS.md, issue 31).
"""

from __future__ import annotations

from typing import Any

from daphne.http_protocol import HTTPFactory as DaphneHTTPFactory
from daphne.http_protocol import WebRequest as DaphneWebRequest
from daphne.server import Server as DaphneServer
from django.conf import settings
from django.utils.http import parse_header_parameters

from .heap import freeze_startup

BODY_REFUSED = b"Body-Refused"
"""The header Django finds on a request whose body was over the limit (its value: the limit in bytes)."""

# A part's headers (its name, file name, type) around a file's bytes; the other fields of an upload's form.
PART_MARGIN = 16 * 1024
FORM_MARGIN = 64 * 1024


def max_part_bytes() -> int:
    """The longest part of a multipart body: one file at a knowledge base's limit, with its part's headers."""
    return int(settings.KB_MAX_UPLOAD_MB * 1024 * 1024) + PART_MARGIN


def max_body_bytes() -> int:
    """The longest request body the server takes: a knowledge base's largest upload, and its form around it."""
    return max_part_bytes() * max(1, settings.KB_MAX_UPLOAD_FILES) + FORM_MARGIN


class PartSizes:
    """The largest part of a multipart body so far, counted as its chunks arrive.

    A part ends where the next delimiter (``--`` and the boundary) begins; the boundary never occurs inside a
    part (RFC 2046), so ``bytes.find`` is enough. The last bytes of a chunk, where a delimiter may begin, are kept
    for the next one.
    """

    def __init__(self, boundary: bytes) -> None:
        self.delimiter = b"--" + boundary
        self.kept = b""
        self.part = 0
        self.largest = 0

    def feed(self, data: bytes) -> int:
        buffer, at = self.kept + data, 0
        while (found := buffer.find(self.delimiter, at)) != -1:
            self.largest = max(self.largest, self.part + found - at)
            self.part, at = 0, found + len(self.delimiter)
        keep = min(len(buffer) - at, len(self.delimiter) - 1)
        self.part += len(buffer) - at - keep
        self.kept = buffer[len(buffer) - keep :]
        self.largest = max(self.largest, self.part)
        return self.largest


def boundary_of(content_type: bytes | None) -> bytes | None:
    """The boundary of a ``multipart/form-data`` body, from its ``Content-Type``; None for another body."""
    if not content_type:
        return None
    kind, params = parse_header_parameters(content_type.decode("latin-1"))
    boundary = params.get("boundary", "")
    return boundary.encode("latin-1") if kind == "multipart/form-data" and boundary else None


class WebRequest(DaphneWebRequest):  # type: ignore[misc]  # Daphne ships no types: its class is Any
    """Daphne's request, its body neither parsed by Twisted nor stored past the limit."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["parsePOSTFormSubmission"] = False
        super().__init__(*args, **kwargs)
        self.limit = max_body_bytes()
        self.part_limit = max_part_bytes()
        self.parts: PartSizes | None = None
        self.received = 0
        self.refused = False

    def gotLength(self, length: int | None) -> None:
        """All headers are in: a body declared over the limit is refused before any of it arrives."""
        self.requestHeaders.removeHeader(BODY_REFUSED)
        boundary = boundary_of((self.requestHeaders.getRawHeaders(b"Content-Type") or [None])[0])
        self.parts = PartSizes(boundary) if boundary else None
        if length is not None and length > self.limit:
            self._refuse()
            length = 0
        super().gotLength(length)

    def handleContentChunk(self, data: bytes) -> None:
        self.received += len(data)
        if not self.refused and (
            self.received > self.limit or (self.parts is not None and self.parts.feed(data) > self.part_limit)
        ):
            self._refuse()
            self.content.seek(0)
            self.content.truncate()
        if self.refused:
            if self.received > 2 * self.limit:
                self.channel.loseConnection()
            return
        super().handleContentChunk(data)

    def _refuse(self) -> None:
        self.refused = True
        self.requestHeaders.setRawHeaders(BODY_REFUSED, [str(self.limit).encode()])


class HTTPFactory(DaphneHTTPFactory):  # type: ignore[misc]  # Daphne ships no types: its class is Any
    """Daphne's factory, its connections making our requests."""

    def buildProtocol(self, addr: Any) -> Any:
        protocol = super().buildProtocol(addr)
        protocol.requestFactory = WebRequest
        return protocol


class Server(DaphneServer):  # type: ignore[misc]  # Daphne ships no types: its class is Any
    """Daphne's server with our factory; what loading the application made is frozen (``heap.freeze_startup``).

    Daphne's ``run()`` makes its factory (``self.http_factory = HTTPFactory(self)``) and listens with it: this
    property gives it ours instead. Everything else is Daphne's.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Daphne's command line has imported the application: what it loaded lives as long as the process.
        freeze_startup()

    @property
    def http_factory(self) -> HTTPFactory:
        return self._http_factory

    @http_factory.setter
    def http_factory(self, factory: DaphneHTTPFactory) -> None:
        self._http_factory = factory if isinstance(factory, HTTPFactory) else HTTPFactory(self)
