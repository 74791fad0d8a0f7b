from __future__ import annotations

from django import template
from django.utils.safestring import SafeString

from ..rendering import render_markdown

register = template.Library()


@register.filter
def markdown(text: str) -> SafeString:
    return render_markdown(text or "")


@register.filter
def eur(value: float) -> str:
    return f"{value:.4f} €" if value < 1 else f"{value:.2f} €"
