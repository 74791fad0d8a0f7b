"""The in-memory knowledge backend indexes each document once: a search tokenises only its query, and a
document added after a search is ranked by the next one as if it had been there from the start."""

from __future__ import annotations

from typing import ClassVar

from assistant.engine.knowledge import MemoryKnowledge, bm25
from assistant.engine.tools import Document
from tests.engine.engine_support import FACTURES, knowledge


class WatchedDocument(Document):
    """A document that notes each read of its text (what indexing it takes)."""

    reads: ClassVar[list[str]] = []

    @property  # a read-write property over the dataclass's field, to note its reads
    def text(self) -> str:
        WatchedDocument.reads.append(self.id)
        return str(self.__dict__["_text"])

    @text.setter
    def text(self, value: str) -> None:
        self.__dict__["_text"] = value


async def test_a_search_reads_no_document_again() -> None:
    """Each document is tokenised once, when it is added: a search tokenises only its query."""
    WatchedDocument.reads.clear()
    watched = [WatchedDocument(d.id, d.kb, d.title, d.text) for d in FACTURES]
    kb = MemoryKnowledge({"factures": watched})
    indexed = sorted(WatchedDocument.reads)
    assert indexed and set(indexed) == {d.id for d in FACTURES}
    WatchedDocument.reads.clear()
    for _ in range(3):
        hits, total = await kb.search("factures", "Zorglub retard", 10)
        assert hits and total == len(hits)
        assert hits == bm25(FACTURES, "Zorglub retard")  # the same ranking as the documents read afresh
    assert WatchedDocument.reads == []


async def test_a_document_added_after_a_search_is_found_by_the_next_one() -> None:
    kb = knowledge()
    before, _ = await kb.search("factures", "Zorglub pénalités", 10)
    added = Document("fac-9", "factures", "Pénalités Zorglub", "Pénalités de retard facturées à Zorglub.")
    kb.add(added)
    after, total = await kb.search("factures", "Zorglub pénalités", 10)

    assert "fac-9" not in {h.id for h in before} and "fac-9" in {h.id for h in after}
    # Ranked with the statistics of the whole base, as a base built with it from the start ranks it.
    assert after == bm25([*FACTURES, added], "Zorglub pénalités")
    assert (
        after
        == (await MemoryKnowledge({"factures": [*FACTURES, added]}).search("factures", "Zorglub pénalités", 10))[0]
    )
    assert total == len(after)
    assert (await kb.read(["fac-9"])) == {"fac-9": added}
    info = await kb.describe("factures")
    assert info is not None and info.document_count == len(FACTURES) + 1


async def test_a_document_added_to_a_new_base_makes_the_base() -> None:
    kb = MemoryKnowledge({})
    assert await kb.describe("notes") is None
    assert await kb.search("notes", "hello", 5) == ([], 0)
    kb.add(Document("n-1", "notes", "Note", "hello world"))
    hits, total = await kb.search("notes", "hello", 5)
    assert [h.id for h in hits] == ["n-1"] and total == 1
    assert [d.id for d in await kb.documents("notes")] == ["n-1"]
