"""Numbers as the demo writes them for a person, in the language it writes in: ``39,350`` and ``57.5`` in English,
``39 350`` and ``57,5`` in French (a no-break space between thousands).

What the tools return stays as they gave it (a query's table holds ``39350``, the model's data); only what the
demo writes for the reader (its answers, its agents' reports) is formatted here, the one place that does it.
"""

from __future__ import annotations

import re

from .texts import Language

_PLAIN = re.compile(r"-?\d+(?:\.\d+)?")
"""A number as a query's table or a script prints it: digits, maybe a sign and a decimal part (no exponent)."""


def number(value: float, language: Language, decimals: int | None = None) -> str:
    """``value`` with its thousands grouped and ``decimals`` decimals (None: those it has, none for a whole number),
    in ``language``'s format."""
    if decimals is not None:
        text = f"{value:,.{decimals}f}"
    elif isinstance(value, float) and value.is_integer():
        text = f"{int(value):,}"
    else:
        text = f"{value:,}"
    return _in(text, language)


def cell(text: str, language: Language) -> str:
    """A table's cell in ``language``'s format when it is a plain number (its decimals kept), else as it is."""
    stripped = text.strip()
    if not _PLAIN.fullmatch(stripped):
        return text
    sign, digits = ("-", stripped[1:]) if stripped.startswith("-") else ("", stripped)
    whole, point, decimals = digits.partition(".")
    if not decimals.strip("0"):  # 18400.0, a whole amount as a table's DOUBLE column prints it
        point = decimals = ""
    return text.replace(stripped, sign + _in(f"{int(whole):,}{point}{decimals}", language))


def row(text: str, language: Language) -> str:
    """A table's row quoted from its document (``a | b | c``, as the product writes a table's rows) with its numbers
    in ``language``'s format; any other text as it is."""
    if " | " not in text:
        return text
    return " | ".join(cell(c, language) for c in text.split(" | "))


def _in(text: str, language: Language) -> str:
    """An English-formatted number (``39,350.5``) in ``language``'s format."""
    return text.replace(",", "\u00a0").replace(".", ",") if language == "fr" else text


def table(markdown: str, language: Language) -> str:
    """A Markdown table (a ``data_query`` result's) with its numbers in ``language``'s format: its header and rule
    as they are, each body cell that is a plain number grouped and with the language's decimal mark."""
    lines = markdown.splitlines()
    out = []
    for i, line in enumerate(lines):
        if i < 2 or not line.startswith("|") or not line.endswith("|"):
            out.append(line)
            continue
        cells = re.split(r"(?<!\\)\|", line[1:-1])
        out.append("|" + "|".join(cell(c, language) for c in cells) + "|")
    return "\n".join(out)


__all__ = ["cell", "number", "row", "table"]
