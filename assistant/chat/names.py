"""How the page words what a run names by slug or in another language: the organisation's knowledge bases by name, its
agent profiles and documents' titles in the reader's language (``base_names``), a source as shown."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from assistant.knowledge.models import Document, KnowledgeBase
from assistant.orgs.models import AgentProfile

PROFILE = "profile:"
"""The key of an agent profile's name among ``base_names``'s (a base's slug never holds a colon)."""
TITLE = "title:"
"""The key of a document's title among ``base_names``'s, before its public id."""


def base_names(organisation_id: int) -> dict[str, str]:
    """The organisation's knowledge bases, slug to name in the reader's language: how the page words the
    resources ``kb:<slug>``; and what it words in other languages besides, each to its words in the reader's: its
    agent profiles (``profile:<name>``) and documents' titles (``title:doc-<id>``)."""
    bases = KnowledgeBase.objects.filter(organisation_id=organisation_id).only("slug", "name", "translations")
    names = {kb.slug: kb.shown_name for kb in bases}
    names.update({f"{PROFILE}{name}": shown for name, shown in AgentProfile.shown_names(organisation_id).items()})
    names.update({f"{TITLE}{doc}": title for doc, title in Document.shown_titles(organisation_id).items()})
    return names


def named_source(source: Mapping[str, Any], names: Mapping[str, str]) -> dict[str, Any]:
    """A source as the page shows it: its base by its name, a document's title in the reader's language."""
    where, title = source.get("where", ""), source.get("title", "")
    return {**source, "where": names.get(where, where), "title": names.get(f"{TITLE}{source.get('id')}", title)}


def profile_name(profile: str | None, names: Mapping[str, str]) -> str | None:
    """An agent profile's name in the reader's language (as written when it has no other words)."""
    return names.get(f"{PROFILE}{profile}", profile) if profile else profile
