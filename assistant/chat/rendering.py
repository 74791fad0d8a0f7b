"""Model and document text to safe HTML: Markdown rendered, then sanitised (no script ever runs)."""

from __future__ import annotations

import markdown
import nh3
from django.utils.safestring import SafeString, mark_safe

_TAGS = {
    "p", "br", "strong", "em", "code", "pre", "blockquote", "ul", "ol", "li", "h1", "h2", "h3", "h4",
    "table", "thead", "tbody", "tr", "th", "td", "a", "hr", "del",
}  # fmt: skip


def render_markdown(text: str) -> SafeString:
    """Markdown to HTML with raw HTML escaped and only harmless tags and attributes kept."""
    html = markdown.markdown(text, extensions=["fenced_code", "tables", "sane_lists"], output_format="html")
    clean = nh3.clean(
        html,
        tags=_TAGS,
        attributes={"a": {"href", "title"}},
        url_schemes={"http", "https", "mailto"},
        link_rel="noopener noreferrer nofollow",
    )
    return mark_safe(clean)  # sanitised by nh3 just above
