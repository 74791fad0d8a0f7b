"""Markdown to HTML: highlighted code (only closed blocks, only Pygments' classes), demoted headings,
tables that scroll, and everything a model or a document writes still sanitised."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from django.core.management import call_command

from assistant.chat.management.commands import pygments_css
from assistant.chat.rendering import StreamingMarkdown, render_markdown

CODE = "Before.\n\n```python\ndef total(x):\n    return x < 3  # <b>not bold</b>\n```\n\nAfter."


def test_a_closed_code_block_is_highlighted_with_pygments_classes() -> None:
    html = render_markdown(CODE)
    assert '<pre class="highlight" tabindex="0"><code>' in html
    assert '<span class="k">def</span>' in html and '<span class="nf">total</span>' in html
    assert '<span class="c1"># &lt;b&gt;not bold&lt;/b&gt;</span>' in html  # the code's markup is text
    assert "<b>" not in html


def test_an_unclosed_fence_is_not_highlighted_until_it_closes() -> None:
    open_fence = CODE.rsplit("```", 1)[0]  # the closing fence not written yet
    html = render_markdown(open_fence)
    assert "<span" not in html and 'class="highlight"' not in html
    assert "def total(x):" in html and "&lt;b&gt;" in html
    # Two blocks, the first closed: only the first is highlighted.
    two = render_markdown("```python\na = 1\n```\n\n```python\nb = 2\n")
    assert two.count('class="highlight"') == 1 and "b = 2" in two


def test_a_streamed_answer_highlights_a_block_once_it_is_closed() -> None:
    stream = StreamingMarkdown()
    seen = []
    for end in range(1, len(CODE) + 1):
        seen.append(("highlight" in stream.render(CODE[:end]), CODE[:end]))
    closed_at = CODE.index("```\n\nAfter") + 3
    assert not any(lit for lit, text in seen if len(text) < closed_at)
    assert all(lit for lit, text in seen if len(text) >= closed_at)
    assert stream.render(CODE).replace("\n", "") == render_markdown(CODE).replace("\n", "")


def test_an_unknown_language_or_a_block_without_one_stays_plain() -> None:
    for text in ("```klingon-script\nqapla'\n```", "```\nplain <i>x</i>\n```", "    indented code"):
        html = render_markdown(text)
        assert "<span" not in html and "<pre" in html, text


def test_markup_and_classes_written_in_the_text_are_still_sanitised() -> None:
    hostile = (
        '<span class="k">x</span> <script>alert(1)</script> <img src=x onerror="alert(2)">\n\n'
        "```html\n<script>alert(3)</script>\n```\n\n[x](javascript:alert(4))"
    )
    html = render_markdown(hostile)
    assert "<script" not in html and "<img" not in html and "javascript:" not in html
    assert "&lt;span class=" in html  # a class written in the text stays text
    assert re.findall(r'class="([^"]+)"', html) and all(
        c == "highlight" or re.fullmatch(r"[a-z0-9]{1,3}", c) for c in re.findall(r'class="([^"]+)"', html)
    )


def test_headings_are_demoted_in_answers_and_further_in_reports() -> None:
    text = "# Title\n\n## Part\n\n#### Deep\n\ntext"
    assert re.findall(r"<(h\d)>", render_markdown(text)) == ["h3", "h4", "h6"]
    assert re.findall(r"<(h\d)>", render_markdown(text, heading_base=4)) == ["h4", "h5", "h6"]


def test_tables_are_wrapped_to_scroll_and_lists_and_quotes_kept() -> None:
    html = render_markdown("| a | b |\n|---|---|\n| 1 | 2 |\n\n> quoted\n\n- one\n- two\n\n1. first")
    assert '<div class="table-scroll" tabindex="0"><table>' in html and "</table></div>" in html
    assert "<blockquote>" in html and "<ul>" in html and "<ol>" in html


def test_the_stylesheet_is_the_one_pygments_generates() -> None:
    """static/css/pygments.css is up to date: light by default, dark when chosen or preferred."""
    css = pygments_css.PATH.read_text()
    assert css == pygments_css.stylesheet()
    assert ".highlight .k {" in css and ":root[data-theme=dark] .highlight .k {" in css
    assert "@media (prefers-color-scheme: dark)" in css


def test_the_command_writes_the_stylesheet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = Path(str(tmp_path)) / "pygments.css"
    monkeypatch.setattr(pygments_css, "PATH", target)
    call_command("pygments_css", verbosity=0)
    assert target.read_text() == pygments_css.stylesheet()


def test_github_markdown_tables_strikethrough_and_bare_links() -> None:
    """What a model writes for GitHub's Markdown renders as it would there: a table's column aligned, struck text,
    an address with its scheme or www. and an e-mail address linked; a dotted name in code or SQL is not an
    address; a task's box stays as its brackets (the sanitiser keeps no form field, so whether it is done shows)."""
    html = render_markdown(
        "| Invoice | Amount |\n|---|---:|\n| F-118 | 4,200 € |\n\n"
        "~~struck~~ www.example.com/a https://example.com/b?c=1&d=2 team@example.com\n\n"
        "SELECT * FROM t JOIN c ON t.id = c.id WHERE c.name = 'x'\n\n- [ ] to do\n- [x] done"
    )
    assert '<th align="right">Amount</th>' in html and '<td align="right">4,200 €</td>' in html
    assert "<del>struck</del>" in html
    assert '<a href="http://www.example.com/a" rel="noopener noreferrer nofollow">www.example.com/a</a>' in html
    assert '<a href="https://example.com/b?c=1&amp;d=2"' in html and '<a href="mailto:team@example.com"' in html
    assert "ON t.id = c.id WHERE c.name" in html  # no link in the query
    assert "<li>[ ] to do</li>" in html and "<li>[x] done</li>" in html


def test_a_link_reference_defined_in_one_text_is_not_one_in_the_next() -> None:
    assert "<a" in render_markdown("[ref]: https://example.com/defined-here\n\nA [ref] link.")
    assert "<a" not in render_markdown("A [ref] link whose definition was in the text before.")


def test_rendering_keeps_no_memory_behind() -> None:
    """Each render's tree and HTML are freed (cmark-gfm, through cmarkgfm, kept 65 KiB of each render of a
    1,000-character text: 190 MiB for these renders)."""
    text = (
        "Some **text** with a [link](https://example.com) and `code`.\n\n- one\n- two\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n"
        * 10
    )
    for _ in range(200):
        render_markdown(text)
    before = _resident_kib()
    for _ in range(3000):
        render_markdown(text)
    assert _resident_kib() - before < 16 * 1024


def _resident_kib() -> int:
    with open("/proc/self/statm", encoding="ascii") as statm:
        return int(statm.read().split()[1]) * 4


def test_threads_rendering_at_once_each_get_their_own_text() -> None:
    """Django's threads and the event loop render at the same time, with the same renderer."""
    texts = [f"Text **{n}** with a [link {n}](https://example.com/{n})\n\n- item {n}" for n in range(200)]
    expected = [render_markdown(text) for text in texts]
    with ThreadPoolExecutor(max_workers=4) as pool:
        assert list(pool.map(render_markdown, texts)) == expected
