"""What several chat tests send: the composer's request with two knowledge bases and agents."""

from typing import NotRequired, TypedDict


class ComposerPost(TypedDict):
    """The composer's form, as posted."""

    text: str
    model: str
    level: str
    resources: list[str]
    category: NotRequired[str]


QUESTION = "Bimbamjob: invoices 2024, payments and relationship"
ASK: ComposerPost = {
    "text": QUESTION,
    "model": "demo-large",
    "level": "approfondi",
    "resources": ["kb:factures", "kb:comptes-rendus", "agents"],
}
