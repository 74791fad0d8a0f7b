"""Errors in OpenAI's shape: ``{"error": {"message", "type", "param", "code"}}`` with a fitting status.

A refused request (``RequestRefused``, from the one request check ``runs.intake.check``) becomes one with
``refusal_error``: its status, a stable ``code`` and its ``param`` by the refusal's code (``REFUSALS``), the
message worded once (``runs.wording.refusal_text``) in English.
"""

from __future__ import annotations

from typing import Any

from django.http import JsonResponse
from django.utils import timezone, translation

from assistant.engine.refusals import Refusal, RefusalCode
from assistant.runs import wording

# OpenAI's error types by status.
TYPES = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    403: "permission_error",
    404: "invalid_request_error",
    422: "invalid_request_error",
    429: "insufficient_quota",
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
        self.status = status
        self.code = code
        self.message = message
        self.param = param
        self.type = type  # OpenAI's ``type`` when the status's usual one does not fit (``requests``: a rate limit)
        self.retry = retry  # the client may retry after Retry-After (a rate limit), not a month's budget
        self.extra = extra


def error_response(error: ApiError, headers: dict[str, str] | None = None) -> JsonResponse:
    body = {
        "message": error.message,
        "type": error.type
        or TYPES.get(error.status, "server_error" if error.status >= 500 else "invalid_request_error"),
        "param": error.param,
        "code": error.code,
        **error.extra,
    }
    response = JsonResponse({"error": body}, status=error.status)
    # The openai client retries a 429 after its delay; a month's budget will not be back in seconds.
    response["x-should-retry"] = "true" if error.retry else "false"
    for name, value in (headers or {}).items():
        response[name] = value
    return response


# Each refusal's status, its code in the API (stable: the codes it had before refusals were data) and its param.
REFUSALS: dict[RefusalCode, tuple[int, str, str | None]] = {
    "empty_message": (400, "empty_message", "messages"),
    "model_not_found": (404, "model_not_found", "model"),
    "model_not_allowed": (403, "model_not_allowed", "model"),
    "unknown_level": (400, "unknown_level", "reasoning_level"),
    "unknown_resource": (400, "unknown_resource", "tools_enabled"),
    "agents_need_resource": (400, "agents_without_resource", "tools_enabled"),
    "knowledge_base_not_found": (404, "knowledge_base_not_found", "tools_enabled"),
    "resource_unavailable": (400, "resource_unavailable", "tools_enabled"),
    "no_categories": (400, "unknown_category", "category"),
    "unknown_category": (400, "unknown_category", "category"),
    "category_spent": (429, "category_budget_exhausted", "category"),
    "owner_left": (400, "request_refused", None),
}


def refusal_error(refusal: Refusal) -> ApiError:
    """A refused request as the API answers it; a spent category says when it resets (and not to retry before)."""
    status, code, param = REFUSALS[refusal.code]
    with translation.override("en"):
        message = wording.refusal_text(refusal)
    extra: dict[str, Any] = {}
    if refusal.resets_at is not None:
        seconds = max(0, int((refusal.resets_at - timezone.now()).total_seconds()))
        extra = {"resets_at": refusal.resets_at.isoformat(), "retry_after": str(seconds)}
    return ApiError(status, code, message, param=param, **extra)
