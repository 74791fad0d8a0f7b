"""The demo's way with words: the content words of a question, and the sentences of a document that mention them."""

from __future__ import annotations

import re
from typing import Any

_STOPWORDS = frozenset(
    """a an and are as at be by for from has have how i in is it its me my of on or our please that the their
    them they this to was what when where which who why will with you your about all any can could do does did
    tell give show find list summary summarise summarize everything know say said over into than then there
    le la les un une des du de et est sont ou où que qui quoi quel quelle quels quelles pour par sur dans avec
    au aux ce cet cette ces se sa son ses leur leurs nous vous il elle ils elles je tu on pas plus moins très
    fiche complète complet complete sheet fais fait faire donne donner dis dire tout tous toute toutes comment pourquoi quand entre chez depuis""".split()
)


def keywords(text: str, limit: int = 6) -> list[str]:
    """The content words of a text, in order, without duplicates (an English possessive's "'s" left off)."""
    seen: list[str] = []
    for word in re.findall(r"[\w][\w'-]*", text):
        w = word.strip("'-").removesuffix("'s")  # an English possessive names its owner: Bimbamjob's
        if len(w) < 3 or w.lower() in _STOPWORDS or w.lower() in (s.lower() for s in seen):
            continue
        seen.append(w)
        if len(seen) == limit:
            break
    return seen


def sentences(text: str) -> list[str]:
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+|\n+", text) if s.strip()]


# The line the product writes before a table's rows in its document ("Table factures: 20 rows; columns: …"), in
# English for the models: not a sentence of the document, and never quoted in an answer in French.
_TABLE_LINE = re.compile(r"^Table [^:\n]+: \d+ rows?; columns: ")


def extract(doc: dict[str, Any], words: list[str], limit: int = 2) -> list[str]:
    """The sentences of a document that mention the words, else its first sentences (a table's listing line
    left out)."""
    found = [s for s in sentences(str(doc.get("text", ""))) if not _TABLE_LINE.match(s)]
    lowered = [w.lower() for w in words]
    hits = [s for s in found if any(w in s.lower() for w in lowered)]
    return (hits or found)[:limit]
