"""Errors in OpenAI's shape: ``{"error": {"message", "type", "param", "code"}}`` with OpenAI's statuses.

``CODES`` is every ``code`` the API answers with, its status and when: ``ApiError`` takes only
those, and a test checks docs/API.md's error table against it.

A refused request (``RequestRefused``, from the one request check ``runs.intake.check``) becomes one with
``refusal_error``: its status, a stable ``code`` and its ``param`` by the refusal's code (``REFUSALS``), the
message worded once (``runs.wording.refusal_text``) in English.
"""

from __future__ import annotations

import math
from typing import Any, Final

from django.http import JsonResponse
from django.utils import translation

from assistant.engine.causes import Cause
from assistant.engine.refusals import Refusal, RefusalCode
from assistant.runs import wording

# OpenAI's error types by status.
TYPES = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    403: "permission_error",
    404: "invalid_request_error",
    405: "invalid_request_error",
    413: "invalid_request_error",
    429: "insufficient_quota",
    500: "server_error",
    502: "server_error",
    504: "server_error",
}

# code -> (status, when): docs/API.md's error table says the same.
CODES: Final[dict[str, tuple[int, str]]] = {
    "invalid_json": (400, "the body is not a JSON object"),
    "invalid_body": (
        400,
        "an invalid parameter (`param` names it, e.g. `messages[3].content`): a wrong type, an unknown role or "
        "resource, `stream` not a boolean, an unknown `reasoning_level`, a lone surrogate or a control character "
        "in a message, messages that do not end with a non-empty user message (or with the results of tool calls), a "
        "`tool` message that answers no call of the assistant message before it or a call left unanswered, more "
        "messages than `API_MAX_MESSAGES`, a client tool named as a server tool or twice, a `tool_choice` naming none "
        "of `tools`",
    ),
    "agents_without_resource": (400, "`agents` without another resource"),
    "string_above_max_length": (
        400,
        "the question (the last message) is over `CHAT_MAX_MESSAGE_CHARS` characters, as the page refuses it: "
        "`param` `messages[N].content`",
    ),
    "context_length_exceeded": (
        400,
        "the first call cannot fit the model's context window, even with the oldest earlier messages left out: "
        "OpenAI's sentence (\"This model's maximum context length is N tokens. However, your messages resulted in M "
        'tokens."), `tokens` and `context_window` in the body, `param` `messages`',
    ),
    "resource_unavailable": (400, "`web` or `code` not set up on this server"),
    "unknown_category": (400, "a `category` the organisation does not have"),
    "request_refused": (400, "the organisation's policy refuses the request (the message says why)"),
    "document_not_ready": (400, "a `doc:<slug>/<id>` whose text is not extracted yet (or failed)"),
    "invalid_api_key": (401, "a missing, unknown or revoked key"),
    "expired_api_key": (401, "an expired key, or a rotated one past its grace period"),
    "model_not_allowed": (403, "a model the key may not use (the message lists those it may)"),
    "model_not_found": (404, "an unknown model"),
    "knowledge_base_not_found": (404, "an unknown knowledge base (another organisation's is unknown)"),
    "document_not_found": (404, "a `doc:<slug>/<id>` not in that base, or in no base of the organisation"),
    "connector_not_found": (404, "an unknown or disabled connector (another organisation's is unknown)"),
    "run_not_found": (404, "an unknown run, or one this key may not see"),
    "agent_not_found": (404, "an agent id the run never started (`POST /v1/runs/{id}/agents/{agent_id}/cancel`)"),
    "not_found": (404, "no such endpoint"),
    "method_not_allowed": (405, "a method the endpoint does not take (`Allow` lists those it does)"),
    "body_too_large": (413, "a body over `MAX_REQUEST_BODY_MB`"),
    "category_budget_exhausted": (
        429,
        "the category cannot take the request's first call (reserved at intake, before any response starts, "
        "streamed or not; nothing is saved): the message gives its true share; `resets_at` in the body; when the "
        "month is spent, `Retry-After` is the seconds to its end and `x-should-retry: false`; when running requests "
        "hold the rest, `Retry-After: 5` and `x-should-retry: true`",
    ),
    "spend_limit_exhausted": (
        429,
        "a spend limit's hard cap (the key's: `limit` `key`; a member's: `limit` `member`) cannot take the request's "
        "first call (reserved at intake; nothing is saved): `param` null; `resets_at` in the body; when the month is "
        "spent, `Retry-After` is the seconds to its end and `x-should-retry: false`; when running requests hold the "
        "rest, `Retry-After: 5` and `x-should-retry: true`",
    ),
    "rate_limit_exceeded": (429, "the key is over its requests per minute (type `requests`, `Retry-After`)"),
    "too_many_failed_keys": (429, "too many invalid keys from this address lately (type `requests`, `Retry-After`)"),
    "server_error": (500, "a fault of the server (logged), never a bad request"),
    # A run that was admitted and then failed (``run_failure``): the run's figures in the error object.
    "upstream_error": (502, "the run failed: the provider failed (5xx, or could not be reached) after our retries"),
    "upstream_timeout": (504, "the run failed: the provider did not answer in time"),
    "upstream_rate_limited": (
        429,
        "the run failed: the provider kept rate-limiting after our retries (`Retry-After`: the provider's delay, "
        "else 5; `x-should-retry: true`)",
    ),
    "upstream_rejected": (502, "the run failed: the provider refused the request (a 4xx other than 429)"),
    "upstream_auth": (
        502,
        "the run failed: the provider refused the server's key (its configuration, not the client's key)",
    ),
    "upstream_incomplete": (502, "the run failed: the model's answer broke off after it had started"),
    "internal_error": (500, "the run failed in the server (a tool, the server itself); logged"),
}


class ApiError(Exception):
    """A request the API refuses: its status, OpenAI's ``code`` and ``param``, and a plain message."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        param: str | None = None,
        type: str | None = None,
        retry: bool = False,
        **extra: Any,
    ) -> None:
        super().__init__(message)
        if CODES.get(code, (None,))[0] != status:
            raise ValueError(f"'{code}' with {status} is not in api.errors.CODES")
        self.status = status
        self.code = code
        self.message = message
        self.param = param
        self.type = type  # OpenAI's ``type`` when the status's usual one does not fit (``requests``: a rate limit)
        self.retry = retry  # the client may retry after Retry-After (a rate limit), not a month's budget
        self.extra = extra


def error_body(error: ApiError) -> dict[str, Any]:
    """The ``error`` object of OpenAI's error JSON (also the data of a stream's error event)."""
    return {
        "message": error.message,
        "type": error.type
        or TYPES.get(error.status, "server_error" if error.status >= 500 else "invalid_request_error"),
        "param": error.param,
        "code": error.code,
        **error.extra,
    }


def error_response(error: ApiError, headers: dict[str, str] | None = None) -> JsonResponse:
    response = JsonResponse({"error": error_body(error)}, status=error.status)
    # The openai client retries a 429 after its delay; a month's budget will not be back in seconds.
    response["x-should-retry"] = "true" if error.retry else "false"
    for name, value in (headers or {}).items():
        response[name] = value
    return response


# Each refusal's status, its code in the API (one of ``CODES``, stable) and its param.
REFUSALS: dict[RefusalCode, tuple[int, str, str | None]] = {
    "empty_message": (400, "invalid_body", "messages"),
    "model_not_found": (404, "model_not_found", "model"),
    "model_not_allowed": (403, "model_not_allowed", "model"),
    "unknown_level": (400, "invalid_body", "reasoning_level"),
    "unknown_resource": (400, "invalid_body", "tools_enabled"),
    "agents_need_resource": (400, "agents_without_resource", "tools_enabled"),
    "knowledge_base_not_found": (404, "knowledge_base_not_found", "tools_enabled"),
    "connector_not_found": (404, "connector_not_found", "tools_enabled"),
    "document_not_found": (404, "document_not_found", "tools_enabled"),
    "document_not_ready": (400, "document_not_ready", "tools_enabled"),
    "resource_unavailable": (400, "resource_unavailable", "tools_enabled"),
    "no_categories": (400, "unknown_category", "category"),
    "unknown_category": (400, "unknown_category", "category"),
    "category_spent": (429, "category_budget_exhausted", "category"),
    "category_busy": (429, "category_budget_exhausted", "category"),
    "spend_limit_spent": (429, "spend_limit_exhausted", None),
    "spend_limit_busy": (429, "spend_limit_exhausted", None),
    "owner_left": (400, "request_refused", None),
    "message_too_long": (400, "string_above_max_length", "messages"),
    "context_too_long": (400, "context_length_exceeded", "messages"),
}


def refusal_error(refusal: Refusal, *, question: str | None = None) -> ApiError:
    """A refused request as the API answers it. A spent month says when it resets and not to retry before it;
    a category that running requests fill may be retried in a few seconds; a request over the window says its size.
    ``question``: where the request's question is (``messages[3].content``), named by a refusal of its text."""
    status, code, param = REFUSALS[refusal.code]
    if refusal.code in ("message_too_long", "empty_message") and question is not None:
        param = question
    with translation.override("en"):
        message = wording.refusal_text(refusal)
    extra: dict[str, Any] = {}
    if refusal.code in ("category_spent", "category_busy", "spend_limit_spent", "spend_limit_busy"):
        if refusal.limit_kind is not None:
            extra["limit"] = refusal.limit_kind
        if refusal.resets_at is not None:
            extra["resets_at"] = refusal.resets_at.isoformat()
        if refusal.retry_after is not None:
            extra["retry_after"] = str(refusal.retry_after)
        busy = refusal.code in ("category_busy", "spend_limit_busy")
        return ApiError(status, code, message, param=param, retry=busy, **extra)
    if refusal.code == "context_too_long":
        # OpenAI's own sentence, which clients (litellm, pydantic-ai) parse to recognise the error.
        message = (
            f"This model's maximum context length is {refusal.limit or 0} tokens. However, your messages resulted "
            f"in {refusal.used or 0} tokens. Please reduce the length of the messages."
        )
        extra = {"tokens": refusal.used, "context_window": refusal.limit}
    if refusal.code == "message_too_long":
        # OpenAI's sentence for a string over its limit.
        message = (
            f"Invalid '{param}': string too long. Expected a string with maximum length {refusal.limit or 0}, "
            f"but got a string with length {refusal.used or 0} instead."
        )
    return ApiError(status, code, message, param=param, **extra)


# How a run that was admitted and then failed is answered, by how its main model's call failed
# (``causes.ModelErrorKind``): the status and the code. Any other cause is ours: 500 ``internal_error``.
FAILURES: Final[dict[str, tuple[int, str]]] = {
    "server_error": (502, "upstream_error"),
    "unreachable": (502, "upstream_error"),
    "timeout": (504, "upstream_timeout"),
    "rate_limited": (429, "upstream_rate_limited"),
    "bad_request": (502, "upstream_rejected"),
    "authentication": (502, "upstream_auth"),
    "broken_stream": (502, "upstream_incomplete"),
}
UPSTREAM_RETRY_AFTER = 5
"""Seconds a client is told to wait after the provider kept rate-limiting, when the provider gave no delay."""


def run_failure(cause: Cause | None, message: str, retry_after: float | None, **extra: Any) -> ApiError:
    """A failed run as the API answers it: by its cause (``FAILURES``), its English ``message`` (the run's
    ``reason``), the run's figures in ``extra``; ``retry_after``: the provider's delay, for a rate limit."""
    kind = cause.kind if cause is not None and cause.code == "model_error" else None
    status, code = FAILURES.get(kind or "", (500, "internal_error"))
    if code == "upstream_rate_limited":
        wait = math.ceil(retry_after) if retry_after is not None else UPSTREAM_RETRY_AFTER
        error = ApiError(status, code, message, type="requests", retry=True, retry_after=str(max(1, wait)))
    else:
        error = ApiError(status, code, message)
    error.extra.update(extra)  # the run's own ``status`` among them: not the keyword's
    return error
