"""What the engine adds to a model's request besides its history: the budget left, and the last round's notice.

Every request of an agent after its first carries one short line, ``Budget left: 3 rounds (this one included),
41,000 tokens, 95 s.``: its rounds, tokens and seconds left, rounded; the main loop's requests after its first carry
the same for its round limit and the request's time. On the last round the line is followed by its notice (an agent
may only call ``submit_result``; the main model answers without tools). The note is appended to the content of the
request's last message, its last tool result, never sent as a user message after a tool message (Mistral refuses
that), and it stays in the history as it was sent: each request extends the one before it byte for byte, so the
provider's prompt cache keeps holding. ``without_note`` gives a tool result's content back without it (what the
compaction, or a fake model, parses).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .types import Message

BUDGET_LEFT = "Budget left:"
_SEPARATOR = "\n\n"


@dataclass(frozen=True, slots=True)
class BudgetLeft:
    """What an agent (or the main loop) has left at the start of a round: rounds (this one included), tokens
    (None: no token budget) and whole seconds, as the engine counts them before rounding them for the model."""

    rounds: int
    tokens: int | None
    seconds: int

    def agent_line(self) -> str:
        """The line an agent reads, rounded (tokens to the thousand, or to the hundred below 10,000)."""
        line = f"{BUDGET_LEFT} {_rounds(self.rounds)} (this one included)"
        if self.tokens is not None:
            line += f", {rounded_tokens(self.tokens):,} tokens"
        return f"{line}, {self.seconds} s."

    def main_line(self) -> str:
        """The line the main model reads: its rounds with tools left (this one included) and the request's seconds."""
        return f"{BUDGET_LEFT} {_rounds(self.rounds)} with tools (this one included), {self.seconds} s."


def rounded_tokens(tokens: int) -> int:
    """Tokens as the budget line gives them: down to the thousand, or to the hundred below 10,000."""
    step = 1000 if tokens >= 10_000 else 100
    return max(0, tokens) // step * step


def _rounds(n: int) -> str:
    return f"{n} round" if n == 1 else f"{n} rounds"


def add_note(messages: list[Message], note: str) -> None:
    """Append ``note`` to the history's last message when it is a tool result (or a user's message), else as a user's
    message (after the model's own message: allowed everywhere). Kept in the history as sent."""
    last = messages[-1]
    if last.role in ("tool", "user"):
        messages[-1] = replace(last, content=f"{last.content}{_SEPARATOR}{note}")
    else:
        messages.append(Message.user(note))


def without_note(content: str) -> str:
    """A tool result's content without the budget note the engine appended to it (when it carries one)."""
    head, found, _ = content.partition(f"{_SEPARATOR}{BUDGET_LEFT} ")
    return head if found else content


__all__ = ["BUDGET_LEFT", "BudgetLeft", "add_note", "rounded_tokens", "without_note"]
