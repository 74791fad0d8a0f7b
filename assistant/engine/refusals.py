"""Why a request is refused before it starts: a code and its parameters, not a sentence.

The one request check (``runs.intake``, with ``policy.plan_request`` and ``loop.run_chat`` for what the
engine itself checks) raises ``RequestRefused`` carrying a ``Refusal``; the page, the API and scheduled
tasks word it in their reader's language (``runs.wording.refusal_text``), the API with a stable code.
``Refusal.english`` is the engine's own English (logs, a refusal met where no reader is).
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal, TypeAlias
from zoneinfo import ZoneInfo

from pydantic import BaseModel, ConfigDict

RefusalCode: TypeAlias = Literal[
    "empty_message",  # no text to answer
    "message_too_long",  # ``used`` (its characters), ``limit`` (the most a message may have)
    "model_not_found",  # ``model``, ``allowed``: not in the catalogue
    "model_not_allowed",  # ``model``, ``allowed`` (the models it allows): the organisation or the key does not allow it
    "unknown_level",  # ``level``
    "unknown_resource",  # ``resource``: not kb:<slug>, web, code or agents
    "agents_need_resource",  # agents asked for with nothing for them to read
    "knowledge_base_not_found",  # ``resource`` (kb:<slug>): none such, or not readable here
    "connector_not_found",  # ``resource`` (mcp:<name>): none such, or not usable here
    "document_not_found",  # ``resource`` (doc:<slug>/<id>): malformed, or no such document in that base here
    "document_not_ready",  # ``resource`` (doc:<slug>/<id>): its text is not extracted (processing, or failed)
    "resource_unavailable",  # ``resource`` (web or code): not configured on this server
    "no_categories",  # ``category`` named while the organisation has none
    "unknown_category",  # ``category``, ``allowed`` (the organisation's categories)
    "category_spent",  # ``category`` (its slug), ``name``, ``used``, ``limit``, ``percent``, ``tokens`` (the request's
    # first call): the month cannot take it; it resets at ``resets_at`` in ``zone`` (``retry_after`` seconds)
    "category_busy",  # the same figures and ``reserved``: running requests hold the rest; retry in ``retry_after`` s
    "spend_limit_spent",  # ``limit_kind`` (``member`` or ``key``), ``used_eur``, ``limit_eur``, ``cost_eur`` (the
    # request's first call, at most), ``percent``: the month's hard cap cannot take it; it resets at ``resets_at`` in
    # ``zone`` (``retry_after`` seconds)
    "spend_limit_busy",  # the same figures and ``reserved_eur``: running requests hold the rest; retry in ``retry_after`` s
    "owner_left",  # a scheduled task whose owner is no longer a member
    "context_too_long",  # ``model``, ``used`` (the first call's estimated tokens), ``limit`` (its context window)
]


class Refusal(BaseModel):
    model_config = ConfigDict(frozen=True)

    code: RefusalCode
    model: str | None = None
    allowed: tuple[str, ...] = ()
    level: str | None = None
    resource: str | None = None
    category: str | None = None
    name: str | None = None
    used: int | None = None
    limit: int | None = None
    reserved: int | None = None
    tokens: int | None = None
    percent: int | None = None
    resets_at: datetime | None = None
    zone: str | None = None
    retry_after: int | None = None
    limit_kind: Literal["member", "key"] | None = None
    used_eur: float | None = None
    limit_eur: float | None = None
    reserved_eur: float | None = None
    cost_eur: float | None = None

    def english(self) -> str:
        match self.code:
            case "empty_message":
                return "Write a message first."
            case "message_too_long":
                return (
                    f"A message has at most {self.limit or 0:,} characters; this one has {self.used or 0:,}. "
                    "Shorten it, or attach the text as a document of a knowledge base."
                )
            case "model_not_found":
                return (
                    f"The model '{self.model}' does not exist or is not allowed here. "
                    f"Allowed models: {', '.join(self.allowed) or 'none'}."
                )
            case "model_not_allowed":
                return f"The model '{self.model}' is not allowed here. Allowed models: {', '.join(self.allowed) or 'none'}."
            case "unknown_level":
                return f"Unknown reasoning level '{self.level}'."
            case "unknown_resource":
                return f"Unknown resource '{self.resource}': use kb:<slug>, doc:<slug>/<id>, mcp:<name>, web, code or agents."
            case "agents_need_resource":
                return (
                    "The agents tool needs at least one other resource (a knowledge base, the web or code): "
                    "an agent with nothing to read would be of no use."
                )
            case "knowledge_base_not_found":
                return f"The knowledge base '{(self.resource or '').removeprefix('kb:')}' does not exist or you may not read it."
            case "connector_not_found":
                return f"The connector '{(self.resource or '').removeprefix('mcp:')}' does not exist or you may not use it."
            case "document_not_found":
                return (
                    f"The document '{self.resource}' does not exist or you may not read it "
                    "(doc:<slug>/<id>, e.g. doc:factures/doc-12)."
                )
            case "document_not_ready":
                return f"The document '{self.resource}' is not ready to be read (its text is not extracted)."
            case "resource_unavailable":
                return f"'{self.resource}' is not available on this server."
            case "no_categories":
                return "This organisation has no task categories: send the request without one."
            case "unknown_category":
                return f"The category '{self.category}' does not exist here. Categories: {', '.join(self.allowed)}."
            case "category_spent":
                text = (
                    f"The category “{self.name or self.category}” has used {self.used or 0:,} of {self.limit or 0:,} "
                    f"tokens this month ({self.percent or 0} %): what is left cannot take this request "
                    f"(about {self.tokens or 0:,} tokens)."
                )
                if self.resets_at is not None:
                    day = self.resets_at.astimezone(ZoneInfo(self.zone or "UTC"))
                    text += f" It resets on {day.day} {day:%B %Y} at midnight ({self.zone or 'UTC'})."
                return text + " Only an admin can raise it in the meantime."
            case "category_busy":
                return (
                    f"The category “{self.name or self.category}” has used {self.used or 0:,} of {self.limit or 0:,} "
                    f"tokens this month ({self.percent or 0} %) and the rest is reserved by running requests "
                    f"({self.reserved or 0:,} tokens): try again in a few seconds."
                )
            case "spend_limit_spent":
                whose = "This API key has spent" if self.limit_kind == "key" else "You have spent"
                its = "its" if self.limit_kind == "key" else "your"
                text = (
                    f"{whose} {self.used_eur or 0:.2f} EUR of {its} monthly spend limit of {self.limit_eur or 0:.2f} "
                    f"EUR ({self.percent or 0} %): what is left cannot take this request (up to {self.cost_eur or 0:.4f} EUR)."
                )
                if self.resets_at is not None:
                    day = self.resets_at.astimezone(ZoneInfo(self.zone or "UTC"))
                    text += f" It resets on {day.day} {day:%B %Y} at midnight ({self.zone or 'UTC'})."
                return text + " Only an admin can change the limit in the meantime."
            case "spend_limit_busy":
                if self.limit_kind == "key":
                    whose, its, running = "This API key has spent", "its", "running requests"
                else:
                    whose, its, running = "You have spent", "your", "your running requests"
                return (
                    f"{whose} {self.used_eur or 0:.2f} EUR of {its} monthly spend limit of {self.limit_eur or 0:.2f} "
                    f"EUR ({self.percent or 0} %) and the rest is reserved by {running} "
                    f"({self.reserved_eur or 0:.2f} EUR): try again in a few seconds."
                )
            case "owner_left":
                return "The task's owner is no longer a member of the organisation."
            case "context_too_long":
                return (
                    f"The request is too long for {self.model}: its first call needs about {self.used or 0:,} tokens "
                    f"(the messages, the tools and room for the answer) and the model's context window is "
                    f"{self.limit or 0:,} tokens. Shorten the message."
                )
