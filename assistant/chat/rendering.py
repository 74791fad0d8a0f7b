"""Model and document text to safe HTML: Markdown rendered, then sanitised (no script ever runs).

Raw HTML in the text is not HTML: a model or a document that writes ``<script>`` or
``<img onerror=…>`` shows those characters as text. The Markdown is CommonMark with GitHub's
tables, strikethrough and bare links (markdown-it-py, raw HTML off, unsafe link schemes refused); nh3
then keeps only harmless tags and attributes, as a second line of defence.

Between the two, a fenced code block that names its language and is closed is highlighted by
Pygments, with CSS classes (``static/css/pygments.css``, written by ``manage.py pygments_css``)
that the sanitiser keeps and nothing else; a fence still open (an answer being written) is left
plain until it closes. Headings are demoted below the page's own (``heading_base``: where ``#``
lands), and a table is wrapped so that it scrolls inside its answer rather than widening the page.

A link to a page of the demo web (a fictional ``https://….demo.example/…`` address, which opens nothing) is
pointed at that page's text here (``/demo-web/?url=…``), as its source is.

``StreamingMarkdown`` renders a text that only grows (a streamed answer) without rendering it all
again at each delta: blocks that can no longer change are rendered once and kept.

A live answer is rendered on the server's event loop while the database's thread runs other runs' steps. The
renderer is pure Python, so it never lets that thread take the GIL in the middle of a render (cmark-gfm, through
cffi, released it around each of its calls, and the loop then waited up to the switch interval for it each time;
it also never freed the tree it parsed nor the HTML it wrote: 65 KiB lost for each render of a 1,000-character
text). The demo web's links are pointed as the text is parsed, not by a callback nh3 would make for each attribute.
"""

from __future__ import annotations

import functools
import html
import re
from urllib.parse import urlencode

import nh3
from django.urls import reverse
from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt
from markdown_it.common.normalize_url import validateLink
from markdown_it.rules_core import StateCore
from markdown_it.token import Token
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import get_lexer_by_name
from pygments.token import STANDARD_TYPES
from pygments.util import ClassNotFound

from assistant.orgs.web import offline_web

_TAGS = {
    "p", "br", "strong", "em", "code", "pre", "blockquote", "ul", "ol", "li", "h1", "h2", "h3", "h4",
    "h5", "h6", "table", "thead", "tbody", "tr", "th", "td", "a", "hr", "del", "span", "div",
}  # fmt: skip
# tabindex: a block that scrolls sideways (a wide table, long code) can be scrolled from the keyboard.
_ATTRIBUTES = {
    "a": {"href", "title"}, "th": {"align"}, "td": {"align"}, "ol": {"start"}, "pre": {"tabindex"}, "div": {"tabindex"},
}  # fmt: skip
# The only classes kept: Pygments' token classes on spans, and this module's own wrappers.
_CLASSES = {
    "span": {name for name in STANDARD_TYPES.values() if name},
    "pre": {"highlight"},
    "div": {"table-scroll"},
}
_FORMATTER = HtmlFormatter(nowrap=True)
# A fenced block with a language, as markdown-it writes it (its text escaped, "<" still _LT below).
_CODE_BLOCK = re.compile(r'<pre><code class="language-([^"]*)">(.*?)</code></pre>', re.DOTALL)
_PLAIN_PRE = re.compile(r"<pre>")
_HEADING = re.compile(r"<(/?)h([1-6])>")
# A fence's opening or closing line (CommonMark: up to 3 spaces, 3 or more ` or ~).
_FENCE_LINE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")

# Every "<" of the text becomes this private-use character before rendering, so that no HTML tag
# is ever parsed (whatever the renderer's options), and "&lt;" after: "<" shows as text,
# in a paragraph as in a code block.
_LT = "\ue000"

_ALIGN = re.compile(r"text-align:(left|right|center)")

# The bare links GitHub makes: an address with its scheme, one that starts with www., an e-mail address.
_BARE_LINK = re.compile(r"(?:https?://|www\.|mailto:)|[^\s@]+@[^\s@]+$", re.IGNORECASE)


def _as_github(state: StateCore) -> None:
    """What GitHub's Markdown does that markdown-it does otherwise: struck text as ``<del>``, a column's alignment
    as ``align`` (the sanitiser drops ``<s>`` and every ``style``), and a bare link only where it has a scheme or
    starts with www. (``t.id`` in a SQL query or ``c.name`` in code is not an address); and each link's address
    through ``_address``."""
    for token in state.tokens:
        if token.type in ("th_open", "td_open"):
            style = token.attrs.pop("style", None)
            align = _ALIGN.fullmatch(str(style)) if style is not None else None
            if align is not None:
                token.attrs["align"] = align[1]
        if token.children:
            token.children = _github_inline(token.children)


def _github_inline(children: list[Token]) -> list[Token]:
    kept: list[Token] = []
    unlinked = 0  # link_close tokens still to drop, of the bare links unwrapped
    for position, child in enumerate(children):
        if child.type in ("s_open", "s_close"):
            child.tag = "del"
        elif child.type == "link_open":
            text = children[position + 1].content if position + 1 < len(children) else ""
            if child.markup == "linkify" and not _BARE_LINK.match(text):
                unlinked += 1
                continue
            child.attrs["href"] = _address(str(child.attrs["href"]))
        elif child.type == "link_close" and child.markup == "linkify" and unlinked:
            unlinked -= 1
            continue
        kept.append(child)
    return kept


def _address(href: str) -> str:
    """Where a link goes: nowhere for an unsafe address (``javascript:…``: its text stays, without a link), a page
    of the demo web to its text here, any other address to itself."""
    if not validateLink(href):
        return ""
    web = offline_web()
    address = web.address(href) if web is not None else None
    return href if address is None else f"{reverse('demo_web_page')}?{urlencode({'url': address})}"


def _markdown() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": True}).enable(["table", "strikethrough", "linkify"])
    md.validateLink = _every_link  # type: ignore[method-assign]  # an unsafe address is dropped by _as_github
    md.core.ruler.push("as_github", _as_github)
    return md


def _every_link(url: str) -> bool:
    """Every link is parsed as one: ``_as_github`` then drops an unsafe address and keeps the link's text, as
    GitHub does, where markdown-it would show the brackets and the address as text."""
    return True


_MARKDOWN = _markdown()  # read only once made: every thread renders with it


def render_markdown(text: str, heading_base: int = 3) -> SafeString:
    """Markdown to HTML with raw HTML shown as text and only harmless tags and attributes kept.

    ``heading_base`` is the level a ``#`` heading gets (3 in an answer, below the page's title and the
    conversation's; 4 in an agent's report and the documents it quotes); deeper ones follow, down to h6.
    """
    source = text.replace(_LT, "").replace("<", _LT)
    rendered = _MARKDOWN.render(source)
    rendered = _highlight_blocks(rendered, last_is_open=_ends_in_open_fence(source))
    rendered = _PLAIN_PRE.sub('<pre tabindex="0">', rendered)
    rendered = _HEADING.sub(lambda m: f"<{m[1]}h{min(6, int(m[2]) + heading_base - 1)}>", rendered)
    rendered = rendered.replace("<table>", '<div class="table-scroll" tabindex="0"><table>').replace(
        "</table>", "</table></div>"
    )
    clean = nh3.clean(
        rendered.replace(_LT, "&lt;"),
        tags=_TAGS,
        attributes=_ATTRIBUTES,
        allowed_classes=_CLASSES,
        url_schemes={"http", "https", "mailto"},
        link_rel="noopener noreferrer nofollow",
    )
    # A link whose address was unsafe (javascript:…) is left without one.
    return mark_safe(clean.replace(' href=""', ""))  # sanitised by nh3 just above


def _ends_in_open_fence(source: str) -> bool:
    """Whether the text ends inside a fenced code block (its closing fence not written yet)."""
    fence = ""
    for line in source.splitlines():
        match = _FENCE_LINE.match(line)
        if match is None:
            continue
        marks, rest = match[1], match[2]
        if not fence:
            if not (marks[0] == "`" and "`" in rest):  # an info string may not hold a backtick
                fence = marks
        elif marks[0] == fence[0] and len(marks) >= len(fence) and not rest.strip():
            fence = ""
    return bool(fence)


def _highlight_blocks(rendered: str, *, last_is_open: bool) -> str:
    blocks = list(_CODE_BLOCK.finditer(rendered))
    if last_is_open and blocks:
        blocks.pop()  # still being written: highlighted once it is closed
    out, position = [], 0
    for block in blocks:
        code = html.unescape(block[2]).replace(_LT, "<")
        highlighted = _highlight(html.unescape(block[1]).split(" ")[0], code)
        if highlighted is None:
            continue
        out += [rendered[position : block.start()], highlighted]
        position = block.end()
    return "".join(out) + rendered[position:]


@functools.lru_cache(maxsize=512)
def _highlight(language: str, code: str) -> str | None:
    """A closed block's code with Pygments' token classes (None: a language Pygments does not know).

    Cached: the same block is rendered again at each delta while the rest of its answer streams."""
    try:
        lexer = get_lexer_by_name(language)
    except ClassNotFound:
        return None
    spans = highlight(code, lexer, _FORMATTER)  # Pygments escapes the code itself
    return f'<pre class="highlight" tabindex="0"><code>{spans}</code></pre>'


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
