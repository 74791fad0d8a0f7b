"""Ranking helpers and an in-memory ``KnowledgeBackend`` (tests, benchmarks, small corpora).

``bm25`` ranks documents by the Okapi BM25 score of the query's terms, with a snippet around the
first match.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence

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
            start = max(0, i - 8)
            piece = " ".join(words[start : start + 30])
            return ("…" if start else "") + piece[:width] + ("…" if len(piece) > width else "")
    return " ".join(words)[:width]


def bm25(documents: Sequence[Document], query: str, k1: float = 1.2, b: float = 0.75) -> list[Hit]:
    """Documents matching at least one query term, best first."""
    q = set(terms(query))
    if not q or not documents:
        return []
    tokenised = [terms(d.title + " " + d.text) for d in documents]
    avg = sum(len(t) for t in tokenised) / len(tokenised)
    df: Counter[str] = Counter()
    for toks in tokenised:
        df.update(set(toks) & q)
    n = len(documents)
    hits: list[Hit] = []
    for doc, toks in zip(documents, tokenised, strict=True):
        tf = Counter(t for t in toks if t in q)
        if not tf:
            continue
        score = 0.0
        for term, f in tf.items():
            idf = math.log(1 + (n - df[term] + 0.5) / (df[term] + 0.5))
            score += idf * f * (k1 + 1) / (f + k1 * (1 - b + b * len(toks) / avg))
        hits.append(Hit(id=doc.id, kb=doc.kb, title=doc.title, snippet=snippet(doc.text, q), score=round(score, 4)))
    hits.sort(key=lambda h: (-h.score, h.id))
    return hits


class MemoryKnowledge:
    """Knowledge bases held in memory: ``{slug: [Document, ...]}``."""

    def __init__(self, bases: dict[str, Iterable[Document]], names: dict[str, str] | None = None) -> None:
        self.bases = {slug: list(docs) for slug, docs in bases.items()}
        self.names = names or {}
        self.by_id = {d.id: d for docs in self.bases.values() for d in docs}

    async def describe(self, kb: str) -> KnowledgeBaseInfo | None:
        if kb not in self.bases:
            return None
        return KnowledgeBaseInfo(slug=kb, name=self.names.get(kb, kb), description="", document_count=len(self.bases[kb]))

    async def search(self, kb: str, query: str, limit: int) -> tuple[list[Hit], int]:
        hits = bm25(self.bases.get(kb, []), query)
        return hits[:limit], len(hits)

    async def read(self, ids: Sequence[str]) -> dict[str, Document]:
        return {i: self.by_id[i] for i in ids if i in self.by_id}

    async def documents(self, kb: str) -> list[Document]:
        """Every document of ``kb`` (``run_code``'s read-only export)."""
        return list(self.bases.get(kb, []))
