"""``web_search`` then ``web_fetch``: the demo searches the web for the topic, reads the first pages found and
reports what they say, citing each page by its address.

The tools' shapes (``engine/web.py``): ``web_search(query)`` returns ``{"query", "count", "results": [{"url",
"title", "snippet"}]}``; ``web_fetch(url)`` returns ``{"url", "title", "text"}`` (``truncated`` when cut); either
returns ``{"error"}`` when it could not. Whatever backend is behind them (a SearxNG server, the demo web) is
the same to the demo.
"""

from __future__ import annotations

from typing import Any

import assistant.demo.model.reading as reading
from assistant.engine.types import Message, ModelResponse

from .language import detect
from .parts import own_first
from .texts import Language
from .words import extract

PAGES_READ = 2


def offered(request_tools: tuple[Any, ...]) -> bool:
    return any(t.name in ("web_search", "web_fetch") for t in request_tools)


def searched(messages: tuple[Message, ...]) -> list[dict[str, Any]]:
    return reading.tool_results(messages, "web_search")


def pages(messages: tuple[Message, ...]) -> list[dict[str, Any]]:
    """The pages ``web_fetch`` read (its errors left out)."""
    return [p for p in reading.tool_results(messages, "web_fetch") if "error" not in p]


def errors(messages: tuple[Message, ...]) -> list[str]:
    return [
        str(r["error"])
        for name in ("web_search", "web_fetch")
        for r in reading.tool_results(messages, name)
        if "error" in r
    ]


def to_read(messages: tuple[Message, ...], language: Language) -> list[str]:
    """The addresses of the first results, to read: those in the question's language (by their title and snippet)
    when there are some."""
    results = [r for s in searched(messages) for r in s.get("results", []) if r.get("url")]
    ranked = own_first(results, language)
    own = [r for r in ranked if detect(f"{r.get('title', '')} {r.get('snippet', '')}") in (language, None)]
    urls = [str(r["url"]) for r in own or ranked]
    return list(dict.fromkeys(urls))[:PAGES_READ]


def next_call(step: Any, query: str, url: str | None) -> ModelResponse | None:
    """The next web round: search (or read the address the question gives), then read the results; None when
    nothing is left to do (then write what was found)."""
    request, messages = step.request, step.messages
    names = {t.name for t in request.tools}
    if not reading.called(messages, "web_search") and not reading.called(messages, "web_fetch"):
        if url and "web_fetch" in names:
            return ModelResponse(tool_calls=[step.call("web_fetch", {"url": url}, 0)])
        if "web_search" in names:
            return ModelResponse(
                text=step.say("web_searching"), tool_calls=[step.call("web_search", {"query": query}, 0)]
            )
        return None
    if not reading.called(messages, "web_fetch") and "web_fetch" in names:
        urls = to_read(messages, step.language)
        if urls:
            calls = [step.call("web_fetch", {"url": u}, i) for i, u in enumerate(urls)]
            return ModelResponse(text=step.say("web_reading"), tool_calls=calls)
    return None


def findings(messages: tuple[Message, ...], words: list[str]) -> list[str]:
    """What the pages say about the words, each sentence with its page's address."""
    found = []
    for page in pages(messages):
        for sentence in extract(page, words):
            found.append(f"{sentence} [{page['url']}]")
    return found


def summaries(messages: tuple[Message, ...]) -> list[str]:
    """The results' titles and snippets, when no page could be read."""
    return [
        f"{r.get('title', '')}: {r.get('snippet', '')} [{r['url']}]"
        for s in searched(messages)
        for r in s.get("results", [])[:PAGES_READ]
        if r.get("url")
    ]
