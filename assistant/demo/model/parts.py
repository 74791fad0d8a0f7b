"""A long document read part after part with ``kb_read``'s ``from_char``: what was read of it, and in words.

``kb_read`` gives at most so many characters of a document; a longer one says where to go on
(``continue_from_char``) and its ``length``. :func:`readings` gathers, per document, the parts the tool
returned (in the order they came), so a behaviour knows where to go on and the answer can say which
characters were read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import assistant.demo.model.numbers as numbers
import assistant.demo.model.reading as reading
from assistant.engine.types import Message

from .language import detect
from .texts import Language
from .words import sentences

_SECTION = re.compile(r"^\d{1,2}\.\s+\S.{0,70}$")


@dataclass(slots=True)
class Part:
    start: int
    end: int
    text: str


@dataclass(slots=True)
class Reading:
    """What was read of one document: its parts, and where it goes on (None once its end was read)."""

    id: str
    title: str
    kb: str
    parts: list[Part] = field(default_factory=list)
    length: int = 0
    next_char: int | None = None

    @property
    def complete(self) -> bool:
        return self.next_char is None

    @property
    def end(self) -> int:
        return max((p.end for p in self.parts), default=0)


def readings(messages: tuple[Message, ...]) -> dict[str, Reading]:
    """Each document ``kb_read`` returned, with the parts it returned of it, in order."""
    found: dict[str, Reading] = {}
    for result in reading.tool_results(messages, "kb_read"):
        for doc in result.get("documents", []):
            text = str(doc.get("text", ""))
            start = int(doc.get("from_char") or 0)
            entry = found.setdefault(str(doc["id"]), Reading(str(doc["id"]), str(doc.get("title", "")), str(doc["kb"])))
            if text:
                entry.parts.append(Part(start, start + len(text), text))
            more = doc.get("continue_from_char")
            entry.next_char = int(more) if more is not None else None
            entry.length = int(doc.get("length") or max(entry.length, start + len(text)))
    return found


def own_first(items: list[dict[str, Any]], language: Language) -> list[dict[str, Any]]:
    """Search results (hits, web results) in ``language`` first, by their title and snippet, then those whose
    language cannot be told, then the others; each group in its order."""

    def rank(item: dict[str, Any]) -> int:
        found = detect(f"{item.get('title', '')} {item.get('snippet', '')}")
        return 0 if found == language else 1 if found is None else 2

    return sorted(items, key=rank)


def best_hit(messages: tuple[Message, ...], words: list[str], language: Language) -> dict[str, Any] | None:
    """The hit whose title holds most of the words (on a tie, the first in ``language``): the document asked for."""
    hits = own_first([h for s in reading.tool_results(messages, "kb_search") for h in s.get("hits", [])], language)
    if not hits:
        return None
    lowered = [w.lower() for w in words]

    def score(hit: dict[str, Any]) -> int:
        title = str(hit.get("title", "")).lower()
        return sum(w in title for w in lowered)

    best: dict[str, Any] = max(hits, key=score)  # max keeps the first of equal scores
    return best


def read_next(doc: Reading) -> dict[str, Any] | None:
    """The arguments of the ``kb_read`` that goes on with ``doc``, or None once its end was read."""
    if doc.next_char is None:
        return None
    return {"ids": [doc.id], "from_char": doc.next_char}


def number(n: int, language: Language) -> str:
    """``18,000`` in English, ``18 000`` (a no-break space) in French."""
    return numbers.number(n, language)


def ranges(doc: Reading, language: Language) -> str:
    return ", ".join(f"{number(p.start, language)}–{number(p.end, language)}" for p in doc.parts)


def sections(text: str) -> list[str]:
    """The numbered section headings a part holds (``3. How this report was prepared``)."""
    return [line.strip() for line in text.splitlines() if _SECTION.match(line.strip())]


def _sentences(text: str) -> list[str]:
    """The sentences of a text's paragraphs (headings and title lines left out), long enough to say something."""
    lines = [line for line in text.splitlines() if len(line.strip()) > 60 and not _SECTION.match(line.strip())]
    return [s for s in sentences("\n".join(lines)) if len(s) > 40]


def _body(part: Part) -> list[str]:
    """A part's sentences, without the piece of sentence it may start with (begun in the previous part)."""
    return _sentences(part.text.partition("\n")[2] if part.start else part.text)


def mentions(part: Part, words: list[str], limit: int = 2) -> list[str]:
    """The sentences of a part that mention the words."""
    lowered = [w.lower() for w in words]
    return [s for s in _body(part) if any(w in s.lower() for w in lowered)][:limit]


def last_section_opening(part: Part) -> list[str]:
    """The first sentence of the last section that begins in a part (what a part says when no word of the topic is
    in it: a report's last part holds its conclusions)."""
    lines = part.text.splitlines()
    starts = [i for i, line in enumerate(lines) if _SECTION.match(line.strip())]
    if not starts:
        return _body(part)[:1]
    return _sentences("\n".join(lines[starts[-1] + 1 :]))[:1] or _body(part)[:1]
