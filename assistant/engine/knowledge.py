"""Ranking helpers and an in-memory ``KnowledgeBackend`` (tests, benchmarks, small corpora).

``Bm25Index`` ranks documents by the Okapi BM25 score of the query's terms, with a snippet around
the first match. Each document is tokenised once, when it is added; a search tokenises its query only.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .tools import Document, Hit, KnowledgeBaseInfo


def terms(text: str) -> list[str]:
    """Lower-case, accent-free word terms."""
    folded = unicodedata.normalize("NFKD", text.lower())
    folded = "".join(c for c in folded if not unicodedata.combining(c))
    return [t for t in re.findall(r"\w+", folded) if len(t) > 1]


def snippet(text: str, query_terms: set[str], width: int = 180) -> str:
    words = text.split()
    for i, w in enumerate(words):
        if set(terms(w)) & query_terms:
            return _snippet_at(words, i, width)
    return _snippet_at(words, None, width)


def _snippet_at(words: Sequence[str], match: int | None, width: int) -> str:
    """The text around the word at ``match`` (its beginning when nothing matched)."""
    if match is None:
        return " ".join(words)[:width]
    start = max(0, match - 8)
    piece = " ".join(words[start : start + 30])
    return ("…" if start else "") + piece[:width] + ("…" if len(piece) > width else "")


@dataclass(frozen=True, slots=True)
class _Entry:
    """A document as the index keeps it: tokenised once, when it is added."""

    document: Document
    length: int
    """Its number of terms, title and text."""
    tf: Counter[str]
    """Each term's count, in the order of its first occurrence (the order a score is summed in)."""
    rank: dict[str, int]
    """Each term's place in ``tf``."""
    words: list[str]
    """The text's words, for the snippet."""
    first_word: dict[str, int]
    """For each term of the text, the first of ``words`` that holds it: where the snippet starts."""

    @classmethod
    def of(cls, document: Document) -> _Entry:
        tf = Counter(terms(document.title + " " + document.text))
        words = document.text.split()
        first_word: dict[str, int] = {}
        for i, w in enumerate(words):
            for t in terms(w):
                first_word.setdefault(t, i)
        return cls(document, sum(tf.values()), tf, {t: i for i, t in enumerate(tf)}, words, first_word)


class Bm25Index:
    """Documents tokenised once, with the statistics BM25 needs; a search tokenises only its query.

    ``add`` keeps the statistics (document count, total length, document frequencies) up to date,
    so a document added after a search is ranked by the next one.
    """

    def __init__(self, documents: Iterable[Document] = (), k1: float = 1.2, b: float = 0.75) -> None:
        self.k1 = k1
        self.b = b
        self._entries: list[_Entry] = []
        self._postings: dict[str, list[int]] = {}  # term -> the entries holding it, in order
        self._total_length = 0
        for document in documents:
            self.add(document)

    def __len__(self) -> int:
        return len(self._entries)

    def add(self, document: Document) -> None:
        entry = _Entry.of(document)
        index = len(self._entries)
        self._entries.append(entry)
        self._total_length += entry.length
        for term in entry.tf:
            self._postings.setdefault(term, []).append(index)

    def search(self, query: str) -> list[Hit]:
        """Documents matching at least one query term, best first."""
        q = set(terms(query))
        if not q or not self._entries:
            return []
        n = len(self._entries)
        avg = self._total_length / n
        df = {term: len(self._postings[term]) for term in q if term in self._postings}
        matching = sorted({i for term in df for i in self._postings[term]})
        k1, b = self.k1, self.b
        hits: list[Hit] = []
        for i in matching:
            entry = self._entries[i]
            score = 0.0
            for term in sorted((t for t in df if t in entry.tf), key=entry.rank.__getitem__):
                f = entry.tf[term]
                idf = math.log(1 + (n - df[term] + 0.5) / (df[term] + 0.5))
                score += idf * f * (k1 + 1) / (f + k1 * (1 - b + b * entry.length / avg))
            first = min((entry.first_word[t] for t in q if t in entry.first_word), default=None)
            doc = entry.document
            hits.append(
                Hit(
                    id=doc.id,
                    kb=doc.kb,
                    title=doc.title,
                    snippet=_snippet_at(entry.words, first, 180),
                    score=round(score, 4),
                )
            )
        hits.sort(key=lambda h: (-h.score, h.id))
        return hits


def bm25(documents: Sequence[Document], query: str, k1: float = 1.2, b: float = 0.75) -> list[Hit]:
    """Documents matching at least one query term, best first (``Bm25Index`` for repeated searches)."""
    return Bm25Index(documents, k1, b).search(query)


class MemoryKnowledge:
    """Knowledge bases held in memory: ``{slug: [Document, ...]}``, each indexed once (``add`` for more)."""

    def __init__(self, bases: dict[str, Iterable[Document]], names: dict[str, str] | None = None) -> None:
        self.bases = {slug: list(docs) for slug, docs in bases.items()}
        self.names = names or {}
        self.by_id = {d.id: d for docs in self.bases.values() for d in docs}
        self._indexes = {slug: Bm25Index(docs) for slug, docs in self.bases.items()}

    def add(self, document: Document) -> None:
        """Add a document to its knowledge base (``document.kb``, created if new): the next search finds it."""
        self.bases.setdefault(document.kb, []).append(document)
        self._indexes.setdefault(document.kb, Bm25Index()).add(document)
        self.by_id[document.id] = document

    async def describe(self, kb: str) -> KnowledgeBaseInfo | None:
        if kb not in self.bases:
            return None
        return KnowledgeBaseInfo(
            slug=kb, name=self.names.get(kb, kb), description="", document_count=len(self.bases[kb])
        )

    async def existing(self, kbs: Sequence[str]) -> set[str]:
        return {kb for kb in kbs if kb in self.bases}

    async def search(self, kb: str, query: str, limit: int, ids: Sequence[str] | None = None) -> tuple[list[Hit], int]:
        index = self._indexes.get(kb)
        hits = index.search(query) if index is not None else []
        if ids is not None:
            chosen = set(ids)
            hits = [h for h in hits if h.id in chosen]
        return hits[:limit], len(hits)

    async def read(self, ids: Sequence[str]) -> dict[str, Document]:
        return {i: self.by_id[i] for i in ids if i in self.by_id}

    async def documents(self, kb: str) -> list[Document]:
        """Every document of ``kb`` (``run_code``'s read-only export)."""
        return list(self.bases.get(kb, []))
