"""What a question asks of the demo beyond a search, in French or in English, by its wording (it does not
understand language): a computation, the web, a check, a whole document.

Each trigger is a pattern of what people naturally write: "totals per client of the invoices" /
«total des factures par client», "what does the web say about…" / «que dit le web sur…», "check
whether…" / «vérifie si…», "read the whole report" / «lis tout le rapport». The words that only say
what to do (compute, check, read whole…) are left out of the topic the demo searches for.
"""

from __future__ import annotations

import re
from typing import Literal

from .words import keywords

Trigger = Literal["code", "web", "check", "whole"]

_FLAGS = re.IGNORECASE | re.UNICODE

COMPUTE = re.compile(
    r"\b(totals?|sums?|subtotals?|compute|calculate|count|how much|per client|by client|for each client"
    r"|totaux|sommes?|calcule[rsz]?|compter|combien|par client|pour chaque client)\b",
    _FLAGS,
)
WEB = re.compile(
    r"\b(the web|on the web|web search|internet|online|on line|the net"
    r"|le web|sur le web|sur internet|en ligne|sur la toile)\b",
    _FLAGS,
)
CHECK = re.compile(
    r"\b(check|verify|confirm|double-check|is it true|is it correct"
    r"|vérifie[rsz]?|verifie[rsz]?|contrôle[rsz]?|controle[rsz]?|confirme[rsz]?|est-ce vrai|est-il vrai)\b",
    _FLAGS,
)
WHOLE = re.compile(
    r"\b(the whole|whole|entire|entirely|in full|all of the|from start to finish|from beginning to end|cover to cover"
    r"|en entier|tout le|toute la|entier|entière|intégral|intégrale|intégralement|jusqu'au bout|jusqu’au bout"
    r"|de bout en bout|du début à la fin)\b",
    _FLAGS,
)
_PATTERNS: dict[Trigger, re.Pattern[str]] = {"code": COMPUTE, "web": WEB, "check": CHECK, "whole": WHOLE}

# Words that say what to do, not what about: left out of the topic.
_DOING = frozenset(
    """read reading whole entire entirely full start finish beginning end cover check verify confirm whether
    true correct compute calculate count much totals total sum sums subtotal subtotals per each web internet online
    net search says say lis lire lisez relis entier entière intégral intégrale intégralement bout début fin
    vérifie vérifier verifie verifier vérifiez contrôle contrôler controle confirme confirmer vrai exact
    calcule calculer calculez compte compter combien totaux sommes somme chaque toile ligne cherche chercher
    dit disent""".split()
)


def asks(question: str, trigger: Trigger) -> bool:
    """Whether the question's wording asks for ``trigger``."""
    return _PATTERNS[trigger].search(question) is not None


def topic(question: str, limit: int = 6) -> list[str]:
    """The question's content words, without those that only say what to do."""
    return [w for w in keywords(question, limit + 8) if w.lower() not in _DOING][:limit]


def web_query(question: str) -> str:
    """What to search the web for, as the question words it: what follows "the web" / «le web» and its verb
    ("say about" / «dit sur»), else the question's topic."""
    found = WEB.search(question)
    rest = question[found.end() :] if found else ""
    for lead in (
        r"^\W*((says?|tells?|writes?|has|have)\s+)?(about|on|of|regarding|for)\s+",
        r"^\W*((dit|disent|raconte|écrit)\s+)?(sur|à propos de|au sujet de|de|des)\s+",
    ):
        rest = re.sub(lead, "", rest, count=1, flags=_FLAGS)
    rest = rest.strip().rstrip("?.!").strip()
    return rest if keywords(rest) else " ".join(topic(question))


def url_in(text: str) -> str | None:
    """The first http(s) address a text holds."""
    found = re.search(r"https?://[^\s<>\"'»)]+", text)
    return found.group(0).rstrip(".,;:") if found else None
