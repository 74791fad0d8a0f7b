"""A scope: the resources one caller (the main model or one agent) may read, as its tools enforce them.

Resources are written as the request names them: ``kb:<slug>``, ``web``, ``code``, ``mcp:<name>`` (a connector).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

KB_PREFIX = "kb:"
MCP_PREFIX = "mcp:"


@dataclass(frozen=True, slots=True)
class Scope:
    """The resources a caller may read: knowledge bases by slug, the web, code, connectors by name."""

    knowledge_bases: tuple[str, ...] = ()
    web: bool = False
    code: bool = False
    connectors: tuple[str, ...] = ()

    @classmethod
    def from_resources(cls, resources: Iterable[str]) -> Scope:
        kbs: list[str] = []
        connectors: list[str] = []
        web = code = False
        for r in resources:
            if r.startswith(KB_PREFIX):
                if r[len(KB_PREFIX) :] not in kbs:
                    kbs.append(r[len(KB_PREFIX) :])
            elif r.startswith(MCP_PREFIX):
                if r[len(MCP_PREFIX) :] not in connectors:
                    connectors.append(r[len(MCP_PREFIX) :])
            elif r == "web":
                web = True
            elif r == "code":
                code = True
        return cls(tuple(kbs), web, code, tuple(connectors))

    @property
    def resources(self) -> tuple[str, ...]:
        return (
            tuple(KB_PREFIX + kb for kb in self.knowledge_bases)
            + (("web",) if self.web else ())
            + (("code",) if self.code else ())
            + tuple(MCP_PREFIX + name for name in self.connectors)
        )

    @property
    def is_empty(self) -> bool:
        return not self.resources


__all__ = ["KB_PREFIX", "MCP_PREFIX", "Scope"]
