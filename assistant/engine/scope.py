"""A scope: the resources one caller (the main model or one agent) may read, as its tools enforce them.

Resources are written as the request names them: ``kb:<slug>``, ``web``, ``code``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

KB_PREFIX = "kb:"


@dataclass(frozen=True, slots=True)
class Scope:
    """The resources a caller may read: knowledge bases by slug, the web, code."""

    knowledge_bases: tuple[str, ...] = ()
    web: bool = False
    code: bool = False

    @classmethod
    def from_resources(cls, resources: Iterable[str]) -> Scope:
        kbs: list[str] = []
        web = code = False
        for r in resources:
            if r.startswith(KB_PREFIX):
                if r[len(KB_PREFIX) :] not in kbs:
                    kbs.append(r[len(KB_PREFIX) :])
            elif r == "web":
                web = True
            elif r == "code":
                code = True
        return cls(tuple(kbs), web, code)

    @property
    def resources(self) -> tuple[str, ...]:
        return (
            tuple(KB_PREFIX + kb for kb in self.knowledge_bases)
            + (("web",) if self.web else ())
            + (("code",) if self.code else ())
        )

    @property
    def is_empty(self) -> bool:
        return not self.resources


__all__ = ["KB_PREFIX", "Scope"]
