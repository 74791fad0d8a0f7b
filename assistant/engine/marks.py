"""The erase/keep marks of the events' fields (``Annotated[str, ERASE]``), read by ``events.erased``.

A conversation's deletion empties every field marked ``Erase``, the text a user wrote or a model or
document produced, and keeps every field marked ``Keep`` (names, ids, statuses, resources) with the
numbers, which need no mark.
"""

from __future__ import annotations

from typing import Annotated, TypeAlias


class Erase:
    """The mark of a field holding text a user wrote or a model or document produced: emptied on deletion."""

    def __repr__(self) -> str:
        return "Erase"


class Keep:
    """The mark of a text or list field kept on deletion: a name, an id, a status, resources."""

    def __repr__(self) -> str:
        return "Keep"


ERASE, KEEP = Erase(), Keep()
Text: TypeAlias = Annotated[str, ERASE]
Name: TypeAlias = Annotated[str, KEEP]
