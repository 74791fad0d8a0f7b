from __future__ import annotations

import functools

from django import template
from django.urls import get_script_prefix, get_urlconf, reverse
from django.utils.formats import number_format
from django.utils.safestring import SafeString
from django.utils.translation import gettext, ngettext

from assistant.catalogue.naming import model_label
from assistant.engine.events import Action
from assistant.runs.wording import cause_text

from ..rendering import render_markdown

register = template.Library()


@register.simple_tag
def link(name: str, *args: object) -> str:
    """``{% url name arg … %}`` for the links an agent's line and panel render at each push: each address worked out
    once (for its script prefix and URLconf), then read back."""
    return _reversed(name, tuple(str(a) for a in args), get_script_prefix(), get_urlconf())


@functools.lru_cache(maxsize=4096)
def _reversed(name: str, args: tuple[str, ...], prefix: str, urlconf: str | None) -> str:
    del prefix  # part of the key only: ``reverse`` reads it itself
    return reverse(name, args=args, urlconf=urlconf)


@register.filter
def markdown(text: str) -> SafeString:
    return render_markdown(text or "")


@register.filter(name="model_label")
def model_label_filter(label: str) -> str:
    """A model's label in the reader's language (a demo model says it is one)."""
    return model_label(label)


@register.filter
def eur(value: float) -> str:
    # In the reader's number format: 0.0042 € in English, 0,0042 € in French.
    return f"{number_format(value, 4 if value < 1 else 2)} €"


@register.filter
def grouped(value: int) -> str:
    """A whole number in the reader's format, its thousands grouped: 12,300 in English, 12 300 in French."""
    return number_format(value, 0, force_grouping=True)


@register.filter
def action_text(action: Action) -> str:
    """One action in the reader's words: a search with its query, its base (by name, ``named_action``) and count, a read with its titles, a query
    (``data_query``) with its SQL and row count; a search or a fetch of the demo web says so."""
    # A filter rather than an included template: the agents' block is rendered at each of their steps.
    if action.stopped is not None:  # stopped with its run (``run_stopped``, the run's cause in ``because``)
        if action.started:
            return gettext("%(call)s — %(why)s") % {"call": action.label, "why": cause_text(action.stopped)}
        why = cause_text(action.stopped.because or action.stopped)
        return gettext("%(call)s — never started: %(why)s") % {"call": action.label, "why": why}
    if action.kind == "search" and action.demo_web:
        n = action.count or 0
        return ngettext(
            "Search of the demo web “%(query)s”: %(n)s result", "Search of the demo web “%(query)s”: %(n)s results", n
        ) % {"query": action.label, "n": grouped(n)}
    if action.kind == "search" and action.where:
        n = action.count or 0
        return ngettext(
            "Searched “%(query)s” in %(base)s: %(n)s result", "Searched “%(query)s” in %(base)s: %(n)s results", n
        ) % {"query": action.label, "base": action.where, "n": grouped(n)}
    if action.kind == "search":
        n = action.count or 0
        return ngettext("Search “%(query)s”: %(n)s result", "Search “%(query)s”: %(n)s results", n) % {
            "query": action.label,
            "n": grouped(n),
        }
    if action.kind == "read":
        return gettext("Read: %(title)s") % {"title": action.label}
    if action.kind == "fetch" and action.demo_web:
        return gettext("Fetch from the demo web: %(address)s") % {"address": action.label}
    if action.kind == "fetch":
        return gettext("Fetch: %(address)s") % {"address": action.label}
    if action.kind == "code":
        return gettext("Code: %(line)s") % {"line": action.label}
    if action.kind == "query":
        n = int(action.count or 0)
        return ngettext("Query “%(sql)s”: %(n)s row", "Query “%(sql)s”: %(n)s rows", n) % {
            "sql": action.label,
            "n": grouped(n),
        }
    if action.kind == "result":
        if action.ok:
            return gettext("Corrected result accepted")
        return gettext("Result refused, sent back to be corrected: %(why)s") % {"why": action.label}
    return action.label


@register.filter
def script(action: Action) -> SafeString:
    """A ``run_code`` step's whole script, highlighted as the answers' Python blocks are."""
    fence = "~~~~" if "~~~" in action.detail else "~~~"
    return render_markdown(f"{fence}python\n{action.detail}\n{fence}\n")


@register.filter
def document_pk(source_id: str) -> int | None:
    """The database id of a knowledge-base document's source id (``doc-12`` → 12); None for anything else."""
    head, _, tail = str(source_id).partition("-")
    return int(tail) if head == "doc" and tail.isdigit() else None


@register.tag
def once(parser: template.base.Parser, token: template.base.Token) -> OnceNode:
    """``{% once "name" key… %}…{% endonce %}``: a part of a fragment that never changes for its keys (an agent's
    instruction, model and links in its line), rendered once when the context carries a ``once`` dict to keep it in
    (``chat.live.LiveRun``: its pushes render an agent's line at each of its steps), else rendered as it stands."""
    name, *keys = token.split_contents()[1:]
    nodelist = parser.parse(("endonce",))
    parser.delete_first_token()
    return OnceNode(nodelist, parser.compile_filter(name), [parser.compile_filter(k) for k in keys])


class OnceNode(template.Node):
    def __init__(
        self,
        nodelist: template.NodeList,
        name: template.base.FilterExpression,
        keys: list[template.base.FilterExpression],
    ) -> None:
        self.nodelist, self.name, self.keys = nodelist, name, keys

    def render(self, context: template.Context) -> SafeString:
        kept = context.get("once")
        if not isinstance(kept, dict):
            return self.nodelist.render(context)
        key = (self.name.resolve(context), *(k.resolve(context) for k in self.keys))
        html = kept.get(key)
        if html is None:
            html = kept[key] = self.nodelist.render(context)
        return html
