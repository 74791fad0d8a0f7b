from __future__ import annotations

from django import template
from django.utils.formats import number_format
from django.utils.safestring import SafeString

from ..rendering import render_markdown

register = template.Library()


@register.filter
def markdown(text: str) -> SafeString:
    return render_markdown(text or "")


@register.filter
def eur(value: float) -> str:
    # In the reader's number format: 0.0042 € in English, 0,0042 € in French.
    return f"{number_format(value, 4 if value < 1 else 2)} €"
