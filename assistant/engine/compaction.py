"""A history shortened before it nears its model's context window: an agent's, and the main model's.

What stays whole: the system prompt, the first message (the instruction and the scope), the agent's
own messages (what it wrote and the calls it made) and the latest round (the call whose results it
has not read yet, those results, and any notice after them). What shrinks, oldest first: the tool
results of earlier rounds, each replaced by a digest that keeps what was found (the ids, titles and
opening lines of the documents read; the ids and titles of the search hits), so the findings so far
remain in the history.

It triggers at ``TRIGGER`` of the window (or sooner, when the room left for the answer and the tool
specs is smaller) and then goes down to ``TARGET``, so that it does not happen again at every round:
each compaction changes the prompt's prefix, and with it what the provider has cached. When the
latest round alone does not fit, its results are cut too, since the call would certainly fail.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from .notes import without_note
from .tokens import request_tokens
from .types import Message

TRIGGER = 0.75
TARGET = 0.5
EXCERPT_CHARS = 300
COMPACTED = (
    "This earlier tool result was shortened to fit the context; what it found is kept below. "
    "Read a document again if you need more of its text."
)
CUT = " …[cut: the rest of this result did not fit in the context]"


def compact(messages: list[Message], context_window: int, reserve: int = 0) -> bool:
    """Shorten ``messages`` in place when they near the window; return whether anything changed.

    ``reserve`` is what the call needs besides the history: its tool specs and its answer.
    """
    room = max(context_window - reserve, context_window // 4)
    if _tokens(messages) <= min(int(context_window * TRIGGER), room):
        return False
    target = min(int(context_window * TARGET), room)
    latest = _latest_round(messages)
    changed = False
    for i in range(2, latest):
        m = messages[i]
        if m.role != "tool" or m.content.startswith('{"compacted"'):
            continue
        digest = _digest(m.content)
        if len(digest) < len(m.content):
            messages[i] = replace(m, content=digest)
            changed = True
            if _tokens(messages) <= target:
                return True
    over = _tokens(messages) - room
    results = [i for i in range(latest, len(messages)) if messages[i].role == "tool"]
    if over > 0 and results:
        # The latest results are cut to share what room is left, longest first (about 4 characters a token).
        excess = over * 4 + 4
        for i in sorted(results, key=lambda i: -len(messages[i].content)):
            m = messages[i]
            keep = max(EXCERPT_CHARS, len(m.content) - excess - len(CUT))
            if keep < len(m.content):
                excess -= len(m.content) - keep - len(CUT)
                messages[i] = replace(m, content=m.content[:keep] + CUT)
                changed = True
            if excess <= 0:
                break
    return changed


def fit_conversation(messages: list[Message], context_window: int, reserve: int, current: int) -> int:
    """Leave out the oldest earlier messages of the conversation when the main model's history nears its window.

    ``messages`` is the system prompt, the conversation's earlier messages, the request's message at
    index ``current``, then this run's rounds. The earlier messages go first, oldest first, down to
    ``TARGET`` of the window (the next one left starting with a user's message); the request's
    message and this run's rounds stay, their earlier tool results shortened as an agent's are.
    Returns how many earlier messages were left out, so that the caller can say so.
    """
    room = max(context_window - reserve, context_window // 4)
    if _tokens(messages) <= min(int(context_window * TRIGGER), room):
        return 0
    target = min(int(context_window * TARGET), room)
    size = _tokens(messages)
    left_out = 0
    while current - left_out > 1 and (size > target or messages[1].role != "user"):
        size -= request_tokens((messages[1],))
        del messages[1]
        left_out += 1
    compact(messages, context_window, reserve)
    return left_out


def _tokens(messages: list[Message]) -> int:
    return request_tokens(tuple(messages))


def _latest_round(messages: list[Message]) -> int:
    """Where the latest round starts: the last message of the agent's own, else the end."""
    for i in range(len(messages) - 1, 1, -1):
        if messages[i].role == "assistant":
            return i
    return len(messages)


def _digest(content: str) -> str:
    """What an earlier tool result found, in a few lines."""
    content = without_note(content)  # an earlier round's budget note is out of date: left out
    try:
        value = json.loads(content)
    except ValueError:
        value = None
    digest: dict[str, Any] = {"compacted": COMPACTED}
    if isinstance(value, dict) and isinstance(value.get("documents"), list):
        digest["documents"] = [
            {
                "id": d.get("id"),
                "title": d.get("title"),
                "excerpt": " ".join(str(d.get("text", "")).split())[:EXCERPT_CHARS],
            }
            for d in value["documents"]
            if isinstance(d, dict)
        ]
        if value.get("errors"):
            digest["errors"] = value["errors"]
    elif isinstance(value, dict) and isinstance(value.get("hits"), list):
        digest.update({k: value[k] for k in ("kb", "query", "count") if k in value})
        digest["hits"] = [{"id": h.get("id"), "title": h.get("title")} for h in value["hits"] if isinstance(h, dict)]
    elif isinstance(value, dict) and set(value) == {"error"}:
        return content
    else:
        digest["excerpt"] = content[: EXCERPT_CHARS * 2]
    return json.dumps(digest, ensure_ascii=False)
