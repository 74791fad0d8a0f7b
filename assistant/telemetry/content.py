"""Whether message content leaves the server: ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``, read as
the OpenTelemetry GenAI instrumentations read it (``NO_CONTENT`` by default, ``SPAN_ONLY``, ``EVENT_ONLY``,
``SPAN_AND_EVENT``; ``true`` is ``SPAN_ONLY``, ``false`` and anything else ``NO_CONTENT``)."""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping

VARIABLE = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"


class ContentMode(enum.Enum):
    NO_CONTENT = "NO_CONTENT"
    SPAN_ONLY = "SPAN_ONLY"
    EVENT_ONLY = "EVENT_ONLY"
    SPAN_AND_EVENT = "SPAN_AND_EVENT"

    @property
    def captures(self) -> bool:
        return self is not ContentMode.NO_CONTENT

    @property
    def on_spans(self) -> bool:
        return self in (ContentMode.SPAN_ONLY, ContentMode.SPAN_AND_EVENT)

    @property
    def as_events(self) -> bool:
        return self in (ContentMode.EVENT_ONLY, ContentMode.SPAN_AND_EVENT)


def content_mode(environ: Mapping[str, str]) -> ContentMode:
    value = environ.get(VARIABLE, "").strip().upper()
    if value == "TRUE":
        return ContentMode.SPAN_ONLY
    try:
        return ContentMode(value)
    except ValueError:
        return ContentMode.NO_CONTENT


def messages(role: str, text: str, finish_reason: str | None = None) -> str:
    """One message as ``gen_ai.input.messages`` / ``gen_ai.output.messages`` hold it (a JSON array of messages,
    each with its parts)."""
    message: dict[str, object] = {"role": role, "parts": [{"type": "text", "content": text}]}
    if finish_reason is not None:
        message["finish_reason"] = finish_reason
    return json.dumps([message], ensure_ascii=False)
