"""Each read records the range of the document it returned (``Source.start``/``end``): what the document page marks."""

from __future__ import annotations

import asyncio

from assistant.engine.knowledge import MemoryKnowledge
from assistant.engine.scope import Scope
from assistant.engine.tools import MAX_CHARS_PER_DOCUMENT, Document, KbRead


def _read(**args: object) -> list[tuple[int | None, int | None]]:
    long = Document(id="doc-1", kb="factures", title="Long", text="x" * (MAX_CHARS_PER_DOCUMENT + 500))
    short = Document(id="doc-2", kb="factures", title="Short", text="twelve chars")
    tool = KbRead(MemoryKnowledge({"factures": [long, short]}), Scope.from_resources(["kb:factures"]))
    outcome = asyncio.run(tool.run({"ids": ["doc-1", "doc-2"], **args}))
    return [(s.start, s.end) for s in outcome.sources]


def test_a_read_records_the_range_it_returned() -> None:
    assert _read() == [(0, MAX_CHARS_PER_DOCUMENT), (0, 12)]


def test_a_read_from_a_character_records_where_it_began_and_ended() -> None:
    start = MAX_CHARS_PER_DOCUMENT
    # Past the end of the short one nothing was returned: no range to mark.
    assert _read(from_char=start) == [(start, start + 500), (None, None)]
