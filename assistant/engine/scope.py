"""A scope: the resources one caller (the main model or one agent) may read, as its tools enforce them.

Resources are written as the request names them: ``kb:<slug>``, ``doc:<slug>/<id>`` (one chosen document of
a base), ``web``, ``code``, ``mcp:<name>`` (a connector).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

KB_PREFIX = "kb:"
MCP_PREFIX = "mcp:"
DOC_PREFIX = "doc:"


def parse_document(resource: str) -> tuple[str, str] | None:
    """``(slug, id)`` of ``doc:<slug>/<id>``; None when it is no well-formed chosen document."""
    if not resource.startswith(DOC_PREFIX):
        return None
    kb, sep, doc_id = resource[len(DOC_PREFIX) :].partition("/")
    return (kb, doc_id) if sep and kb and doc_id and "/" not in doc_id else None


@dataclass(frozen=True, slots=True)
class Scope:
    """The resources a caller may read: knowledge bases by slug, the web, code, connectors by name, chosen
    documents."""

    knowledge_bases: tuple[str, ...] = ()
    web: bool = False
    code: bool = False
    connectors: tuple[str, ...] = ()
    documents: tuple[tuple[str, str], ...] = ()
    """Chosen documents as ``(slug, id)``: of a base given only this way, these documents and nothing else."""

    @classmethod
    def from_resources(cls, resources: Iterable[str]) -> Scope:
        kbs: list[str] = []
        connectors: list[str] = []
        docs: list[tuple[str, str]] = []
        web = code = False
        for r in resources:
            if r.startswith(KB_PREFIX):
                if r[len(KB_PREFIX) :] not in kbs:
                    kbs.append(r[len(KB_PREFIX) :])
            elif (doc := parse_document(r)) is not None:
                if doc not in docs:
                    docs.append(doc)
            elif r.startswith(MCP_PREFIX):
                if r[len(MCP_PREFIX) :] not in connectors:
                    connectors.append(r[len(MCP_PREFIX) :])
            elif r == "web":
                web = True
            elif r == "code":
                code = True
        # A whole base holds its documents: choosing some of them as well narrows nothing.
        chosen = tuple(d for d in docs if d[0] not in kbs)
        return cls(tuple(kbs), web, code, tuple(connectors), chosen)

    @property
    def resources(self) -> tuple[str, ...]:
        return (
            tuple(KB_PREFIX + kb for kb in self.knowledge_bases)
            + tuple(f"{DOC_PREFIX}{kb}/{doc_id}" for kb, doc_id in self.documents)
            + (("web",) if self.web else ())
            + (("code",) if self.code else ())
            + tuple(MCP_PREFIX + name for name in self.connectors)
        )

    @property
    def searchable(self) -> tuple[str, ...]:
        """The bases ``kb_search`` may search: the whole ones, then those of the chosen documents."""
        chosen = tuple(dict.fromkeys(kb for kb, _ in self.documents if kb not in self.knowledge_bases))
        return self.knowledge_bases + chosen

    def chosen(self, kb: str) -> tuple[str, ...] | None:
        """The ids a search of ``kb`` may return: None for a whole base, else its chosen documents."""
        if kb in self.knowledge_bases:
            return None
        return tuple(doc_id for base, doc_id in self.documents if base == kb)

    def may_read(self, kb: str, doc_id: str) -> bool:
        return kb in self.knowledge_bases or (kb, doc_id) in self.documents

    @property
    def is_empty(self) -> bool:
        return not self.resources


__all__ = ["DOC_PREFIX", "KB_PREFIX", "MCP_PREFIX", "Scope", "parse_document"]
