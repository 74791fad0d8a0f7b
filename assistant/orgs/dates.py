"""A day as a sentence says it, in the reader's language: "1 December 2025", «1er décembre 2025» (French says the
first of a month as an ordinal)."""

from __future__ import annotations

from datetime import date

from django.utils import formats
from django.utils.translation import get_language


def long_date(day: date) -> str:
    shown = formats.date_format(day, "j F Y")
    if day.day == 1 and (get_language() or "").startswith("fr"):
        return "1er" + shown[1:]
    return shown
