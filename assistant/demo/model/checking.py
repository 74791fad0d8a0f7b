"""A check handed to an agent profile: the main model picks, among the profiles the ``agents`` tool offers, the
one whose name says it checks («Vérificateur», "Checker", "Contrôle"...); that agent quotes the sentences
that mention the claim and says which of its points the documents do not establish.

Profiles are the organisation's (an admin defines them; ``load_demo`` adds «Vérificateur»); an agent learns
its profile from its system prompt (``Profile «name»:``, ``engine/agent.py``).
"""

from __future__ import annotations

import re
from typing import Any

import assistant.demo.model.reading as reading
from assistant.engine.types import ModelRequest, ToolSpec

from .words import sentences

CHECKER = re.compile(r"v[ée]rif|check|contr[ôo]l|audit", re.IGNORECASE)
_PROFILE = re.compile(r"^Profile «([^»]+)»:", re.MULTILINE)


def checker_profile(agents: ToolSpec) -> str | None:
    """The checking profile the ``agents`` tool offers, if one."""
    offered = reading.enum(agents, "properties", "tasks", "items", "properties", "profile")
    return next((p for p in offered if CHECKER.search(p)), None)


def profile_of(request: ModelRequest) -> str | None:
    """The profile an agent runs under, from its system prompt."""
    if not request.messages or request.messages[0].role != "system":
        return None
    found = _PROFILE.search(request.messages[0].content)
    return found.group(1) if found else None


def is_checker(request: ModelRequest) -> bool:
    profile = profile_of(request)
    return profile is not None and CHECKER.search(profile) is not None


def claim_of(instruction: str) -> str:
    """The claim an instruction asks to check: what follows its first colon, up to the sentence's end."""
    after = instruction.split(":", 1)[-1].strip()
    return re.split(r"(?<=[.!?])\s", after, maxsplit=1)[0].rstrip(".")


def quoted(reads: list[dict[str, Any]], words: list[str], limit: int = 4) -> list[tuple[str, str]]:
    """(sentence, document id) of the sentences of what was read that mention most words of the claim, in the
    order they were read."""
    lowered = [w.lower() for w in words]
    found = []
    for doc in reads:
        for sentence in sentences(str(doc.get("text", ""))):
            count = sum(w in sentence.lower() for w in lowered)
            if count:
                found.append((count, sentence, str(doc["id"])))
    best = sorted(range(len(found)), key=lambda i: -found[i][0])[:limit]
    return [(found[i][1], found[i][2]) for i in sorted(best)]
