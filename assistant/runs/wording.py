"""What statuses, causes, refusals and resources say, in the reader's language: written once, for every page.

The engine says why with data (``engine.causes.Cause``, ``engine.refusals.Refusal``: a code and its numbers);
these functions word it with gettext, in the active language: the chat page (presenters), the usage page,
scheduled tasks. The API words a refusal with ``refusal_text`` under English, next to its stable code, and
gives a cause's English (``Cause.english``) with its code.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from decimal import Decimal
from zoneinfo import ZoneInfo

from django.utils import formats
from django.utils.translation import gettext as _
from django.utils.translation import pgettext_lazy

from assistant.catalogue.providers import carbon_as
from assistant.engine.causes import Cause
from assistant.engine.refusals import Refusal
from assistant.engine.scope import KB_PREFIX, MCP_PREFIX
from assistant.orgs.dates import long_date

STATUS_WORDS = {
    "ok": pgettext_lazy("status", "ok"),
    "interrupted": pgettext_lazy("status", "interrupted"),
    "stopped": pgettext_lazy("status", "stopped"),
    "error": pgettext_lazy("status", "error"),
    "running": pgettext_lazy("status", "running"),
}


def status_text(status: str) -> str:
    """A run's or an agent's status: ok, interrupted, stopped, error, running (only its own word translated: a
    conversation's export asks for hundreds)."""
    word = STATUS_WORDS.get(status)
    return status if word is None else str(word)


def _number(value: float | None) -> str:
    return "?" if value is None else formats.number_format(round(value), 0, force_grouping=True)


def euros(value: float) -> str:
    """An amount in EUR in the reader's number format: 0.0042 € in English, 0,0042 € in French."""
    return f"{formats.number_format(value, 4 if value < 1 else 2)} €"


def cause_text(cause: Cause) -> str:
    """Why, in a phrase that follows a status («interrompu : budget de tours atteint (5/5 tours)»)."""
    used, limit = _number(cause.used), _number(cause.limit)
    match cause.code:
        case "rounds":
            return _("round budget reached (%(used)s/%(limit)s rounds)") % {"used": used, "limit": limit}
        case "tokens":
            return _("token budget reached (%(used)s/%(limit)s tokens)") % {"used": used, "limit": limit}
        case "seconds":
            return _("time budget reached (%(limit)s s)") % {"limit": limit}
        case "output_cut":
            return _("output cut at the model's output cap")
        case "stopped_by_user":
            return _("stopped on request") if cause.agent_id is None else _("this agent was stopped on request")
        case "category_budget":
            return _("stopped: the category's monthly budget is reached")
        case "cost_cap":
            return _("stopped: the task's cost cap is reached")
        case "spend_limit":
            if cause.used is None or cause.limit is None:
                return _("stopped: the spend limit is reached")
            return _("stopped: the spend limit is reached (%(used)s of %(limit)s EUR)") % {
                "used": formats.number_format(cause.used, 2),
                "limit": formats.number_format(cause.limit, 2),
            }
        case "delegation_cap":
            if cause.used is None or cause.limit is None:
                return _("not launched: the delegation could cost more than its cap")
            amounts = {"most": euros(cause.used), "cap": euros(cause.limit)}
            if cause.kind == "declined":
                return _("not launched: it could cost up to %(most)s, over the cap of %(cap)s; answered without it") % (
                    amounts
                )
            if cause.kind == "unanswered":
                return (
                    _("not launched: it could cost up to %(most)s, over the cap of %(cap)s; no answer came in time")
                    % amounts
                )
            return _("not launched: it could cost up to %(most)s, over the cap of %(cap)s") % amounts
        case "server_shutdown":
            return _("stopped: the server executing it was shut down")
        case "run_stopped":
            if cause.because is None:
                return _("stopped because its run stopped")
            return _("stopped because its run stopped: %(cause)s") % {"cause": cause_text(cause.because)}
        case "model_error":
            return model_error_text(cause.kind)
        case "invalid_result":
            return _("its result was invalid twice")
        case "no_result":
            return _("it returned no result at its forced landing, even when relaunched")
        case "tool_failed":
            return _("a tool failed unexpectedly")
        case "run_ended":
            return _("the run ended before this agent returned")
        case "process_died":
            return _(
                "the process writing this answer stopped unexpectedly (it was killed, or its machine was lost); "
                "ask again for a complete answer"
            )
        case "not_taken":
            return _("no worker took this request in time; ask again in a moment")
        case "not_queued":
            return _("the request could not be handed to a worker (the queue is unreachable); ask again in a moment")
        case "server_stopped":
            return _("the server stopped while this answer was being written")
        case "refused":
            return _("the request was refused when it was about to start")
        case "infrastructure":
            return _("a service the assistant needs failed; what it had written so far is kept")
        case "unexpected":
            return _("the assistant failed unexpectedly")


def model_error_text(kind: str | None) -> str:
    """How a model call failed (``causes.ModelErrorKind``)."""
    words = {
        "timeout": _("the model did not answer in time"),
        "unreachable": _("the model's provider could not be reached"),
        "server_error": _("the model's provider answered with an error"),
        "rate_limited": _("the model's provider refused the call: too many requests"),
        "authentication": _("the model's provider refused the key"),
        "bad_request": _("the model's provider rejected the request"),
        "broken_stream": _("the model's answer broke off or could not be read"),
    }
    return words.get(kind or "", _("the model call failed"))


def agent_status_text(status: str, cause: Cause | None) -> str:
    """An agent's status with its cause: «ok», «interrompu : budget de tours atteint (2/2 tours)», «arrêté à la
    demande», «erreur : le modèle n'a pas répondu à temps»."""
    if status == "stopped":
        return cause_text(cause) if cause is not None else _("stopped on request")
    if cause is None or status in ("ok", "running"):
        return status_text(status)
    return _("%(status)s: %(cause)s") % {"status": status_text(status), "cause": cause_text(cause)}


def resource_text(resource: str, base_names: Mapping[str, str]) -> str:
    """A resource as the user knows it: a knowledge base by its name, the web, code, agents."""
    if resource.startswith(KB_PREFIX):
        slug = resource[len(KB_PREFIX) :]
        return base_names.get(slug, slug)
    if resource.startswith(MCP_PREFIX):
        return _("%(name)s (connector)") % {"name": resource[len(MCP_PREFIX) :]}
    words = {"web": _("Web"), "code": _("Code"), "agents": _("Agents")}
    return words.get(resource, resource)


def refusal_text(refusal: Refusal) -> str:
    """Why a request is refused, as a sentence the reader can act on."""
    match refusal.code:
        case "empty_message":
            return _("Write a message first.")
        case "message_too_long":
            return _(
                "A message has at most %(max)s characters; this one has %(count)s. Shorten it, or attach the text "
                "as a document of a knowledge base."
            ) % {
                "max": formats.number_format(refusal.limit or 0, force_grouping=True),
                "count": formats.number_format(refusal.used or 0, force_grouping=True),
            }
        case "model_not_found":
            return _("The model '%(model)s' does not exist or is not allowed here. Allowed models: %(allowed)s.") % {
                "model": refusal.model,
                "allowed": ", ".join(refusal.allowed) or _("none"),
            }
        case "model_not_allowed":
            return _("The model '%(model)s' is not allowed here. Allowed models: %(allowed)s.") % {
                "model": refusal.model,
                "allowed": ", ".join(refusal.allowed) or _("none"),
            }
        case "unknown_level":
            return _("Unknown reasoning level '%(level)s'.") % {"level": refusal.level}
        case "unknown_resource":
            return _(
                "Unknown resource '%(resource)s': use kb:<slug>, doc:<slug>/<id>, mcp:<name>, web, code or agents."
            ) % {"resource": refusal.resource}
        case "agents_need_resource":
            return _(
                "The agents tool needs at least one other resource (a knowledge base, the web or code): "
                "an agent with nothing to read would be of no use."
            )
        case "knowledge_base_not_found":
            return _("The knowledge base '%(kb)s' does not exist or you may not read it.") % {
                "kb": (refusal.resource or "").removeprefix(KB_PREFIX)
            }
        case "connector_not_found":
            return _("The connector '%(name)s' does not exist or you may not use it.") % {
                "name": (refusal.resource or "").removeprefix(MCP_PREFIX)
            }
        case "document_not_found":
            return _(
                "The document '%(resource)s' does not exist or you may not read it (doc:<slug>/<id>, e.g. doc:factures/doc-12)."
            ) % {"resource": refusal.resource}
        case "document_not_ready":
            return _("The document '%(resource)s' is not ready to be read (its text is not extracted).") % {
                "resource": refusal.resource
            }
        case "resource_unavailable":
            return _("%(names)s: not configured on this server.") % {"names": resource_text(refusal.resource or "", {})}
        case "no_categories":
            return _("This organisation has no task categories: send the request without one.")
        case "unknown_category":
            return _("The category “%(slug)s” does not exist here. Categories: %(known)s.") % {
                "slug": refusal.category,
                "known": ", ".join(refusal.allowed),
            }
        case "category_spent" | "category_busy":
            figures = {
                "name": refusal.name or refusal.category,
                "used": formats.number_format(refusal.used or 0, force_grouping=True),
                "budget": formats.number_format(refusal.limit or 0, force_grouping=True),
                "percent": refusal.percent or 0,
                "tokens": formats.number_format(refusal.tokens or 0, force_grouping=True),
                "reserved": formats.number_format(refusal.reserved or 0, force_grouping=True),
                "date": _reset_day(refusal),
                "zone": refusal.zone or "UTC",
            }
            if refusal.code == "category_busy":
                return (
                    _(
                        "The category “%(name)s” has used %(used)s of %(budget)s tokens this month (%(percent)s %%) "
                        "and the rest is reserved by running requests (%(reserved)s tokens): try again in a few seconds."
                    )
                    % figures
                )
            return (
                _(
                    "The category “%(name)s” has used %(used)s of %(budget)s tokens this month (%(percent)s %%): "
                    "what is left cannot take this request (about %(tokens)s tokens). It resets on %(date)s at "
                    "midnight (%(zone)s). Only an admin can raise it in the meantime."
                )
                % figures
            )
        case "spend_limit_spent" | "spend_limit_busy":
            amounts = {
                "used": formats.number_format(refusal.used_eur or 0, 2),
                "limit": formats.number_format(refusal.limit_eur or 0, 2),
                "percent": refusal.percent or 0,
                "cost": formats.number_format(refusal.cost_eur or 0, 4),
                "reserved": formats.number_format(refusal.reserved_eur or 0, 2),
                "date": _reset_day(refusal),
                "zone": refusal.zone or "UTC",
            }
            key = refusal.limit_kind == "key"
            if refusal.code == "spend_limit_busy":
                if key:
                    text = _(
                        "This API key has spent %(used)s EUR of its monthly spend limit of %(limit)s EUR (%(percent)s %%) "
                        "and the rest is reserved by running requests (%(reserved)s EUR): try again in a few seconds."
                    )
                else:
                    text = _(
                        "You have spent %(used)s EUR of your monthly spend limit of %(limit)s EUR (%(percent)s %%) "
                        "and the rest is reserved by your running requests (%(reserved)s EUR): try again in a few "
                        "seconds."
                    )
                return text % amounts
            if key:
                text = _(
                    "This API key has spent %(used)s EUR of its monthly spend limit of %(limit)s EUR (%(percent)s %%): "
                    "what is left cannot take this request (up to %(cost)s EUR). It resets on %(date)s at midnight "
                    "(%(zone)s). Only an admin can change the limit in the meantime."
                )
            else:
                text = _(
                    "You have spent %(used)s EUR of your monthly spend limit of %(limit)s EUR (%(percent)s %%): "
                    "what is left cannot take this request (up to %(cost)s EUR). It resets on %(date)s at midnight "
                    "(%(zone)s). Only an admin can change your limit in the meantime."
                )
            return text % amounts
        case "owner_left":
            return _("The task's owner is no longer a member of the organisation.")
        case "context_too_long":
            return _(
                "The request is too long for %(model)s: its first call needs about %(tokens)s tokens (the messages, "
                "the tools and room for the answer) and the model's context window is %(window)s tokens. "
                "Shorten the message."
            ) % {
                "model": refusal.model,
                "tokens": formats.number_format(refusal.used or 0, force_grouping=True),
                "window": formats.number_format(refusal.limit or 0, force_grouping=True),
            }


def _reset_day(refusal: Refusal) -> str:
    if refusal.resets_at is None:
        return "?"
    when = refusal.resets_at.astimezone(ZoneInfo(refusal.zone or "UTC"))
    return long_date(when.date())


def with_demo_estimate(carbon: str, model_ids: Iterable[str], *, short: bool = False) -> str:
    """A carbon figure, marked as the offline demo's estimate when demo models made it (they carry the carbon
    parameters of a real model of their size, named here; ``short``: in a table, which ``demo_carbon_hint``
    explains once)."""
    stands_for = carbon_as()
    real = list(dict.fromkeys(stands_for[m][1] for m in model_ids if m in stands_for))
    if not real:
        return carbon
    if short:
        note = _("the demo’s estimate")
    else:
        note = _("the offline demo’s estimate, with the parameters of %(models)s") % {"models": ", ".join(real)}
    return _("%(carbon)s (%(note)s)") % {"carbon": carbon, "note": note}


def demo_carbon_hint(model_ids: Iterable[str]) -> str:
    """What a table's «the demo's estimate» means, when demo models are among ``model_ids`` (else empty)."""
    stands_for = carbon_as()
    demo = [m for m in dict.fromkeys(model_ids) if m in stands_for]
    if not demo:
        return ""
    pairs = ", ".join(_("%(real)s for %(demo)s") % {"real": stands_for[m][1], "demo": m} for m in sorted(demo))
    return _(
        "The offline demo models’ carbon is the demo’s estimate: the parameters of a real model of their size "
        "(%(pairs)s)."
    ) % {"pairs": pairs}


def grams(value: float, *, significant: int = 2, above: float = 1, decimals: int = 1) -> str:
    """A carbon figure in the reader's number format («0,042» in French): ``significant`` digits below ``above``,
    else ``decimals`` decimals."""
    if value < above:
        text = f"{value:.{significant}g}"
        if "e" in text:  # tiny: written out rather than as 4.2e-05
            text = f"{value:.{significant - 1}e}"
            mantissa, exponent = text.split("e")
            places = max(0, -int(exponent) + len(mantissa.replace(".", "")) - 1)
            text = f"{value:.{places}f}"
    else:
        text = f"{value:.{decimals}f}"
    return formats.number_format(Decimal(text), use_l10n=True)
