"""Model and document text to safe HTML: Markdown rendered, then sanitised (no script ever runs).

Raw HTML in the text is not HTML: a model or a document that writes ``<script>`` or
``<img onerror=…>`` shows those characters as text. The Markdown is GitHub's (cmark-gfm, in C:
a streamed answer is rendered many times a second); nh3 then keeps only harmless tags and
attributes, as a second line of defence.

``StreamingMarkdown`` renders a text that only grows (a streamed answer) without rendering it all
again at each delta: blocks that can no longer change are rendered once and kept.
"""

from __future__ import annotations

import re

import cmarkgfm
import nh3
from cmarkgfm.cmark import Options
from django.utils.safestring import SafeString, mark_safe

_TAGS = {
    "p", "br", "strong", "em", "code", "pre", "blockquote", "ul", "ol", "li", "h1", "h2", "h3", "h4",
    "table", "thead", "tbody", "tr", "th", "td", "a", "hr", "del",
}  # fmt: skip
_ATTRIBUTES = {"a": {"href", "title"}, "th": {"align"}, "td": {"align"}, "ol": {"start"}}

# Every "<" of the text becomes this private-use character before rendering, so that no HTML tag
# is ever parsed (not even one cmark would have omitted), and "&lt;" after: "<" shows as text,
# in a paragraph as in a code block.
_LT = "\ue000"


def render_markdown(text: str) -> SafeString:
    """Markdown to HTML with raw HTML shown as text and only harmless tags and attributes kept."""
    source = text.replace(_LT, "").replace("<", _LT)
    html = cmarkgfm.github_flavored_markdown_to_html(source, options=Options.CMARK_OPT_VALIDATE_UTF8)
    clean = nh3.clean(
        html.replace(_LT, "&lt;"),
        tags=_TAGS,
        attributes=_ATTRIBUTES,
        url_schemes={"http", "https", "mailto"},
        link_rel="noopener noreferrer nofollow",
    )
    # A link whose address was unsafe (javascript:…) is left without one.
    return mark_safe(clean.replace(' href=""', ""))  # sanitised by nh3 just above


_BLOCK_END = re.compile(r"\n[ \t]*\n")
_FENCE = re.compile(r"^[ \t]{0,3}(```|~~~)", re.MULTILINE)


class StreamingMarkdown:
    """Renders a growing text: what precedes the last blank line outside a code fence is final.

    Each final block is rendered once, on its own; the open tail is rendered at each call. The
    result can differ from rendering the whole text in rare cases (a list interrupted by a blank
    line becomes two lists), which is why a finished answer is rendered whole.
    """

    def __init__(self) -> None:
        self._done = 0  # characters of the text already rendered into ``_html``
        self._html = ""

    def render(self, text: str) -> SafeString:
        if len(text) < self._done:  # not the same text any more: start again
            self._done, self._html = 0, ""
        end = self._stable_end(text)
        if end > self._done:
            self._html += render_markdown(text[self._done : end])
            self._done = end
        return mark_safe(self._html + render_markdown(text[self._done :]))  # both parts sanitised

    def _stable_end(self, text: str) -> int:
        end = self._done
        fences = 0
        position = self._done
        for match in _BLOCK_END.finditer(text, self._done):
            fences += len(_FENCE.findall(text, position, match.start()))
            position = match.start()
            if fences % 2 == 0:
                end = match.end()
        return end
