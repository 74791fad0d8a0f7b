"""Errors in OpenAI's shape: ``{"error": {"message", "type", "param", "code"}}`` with a fitting status."""

from __future__ import annotations

from typing import Any

from django.http import JsonResponse

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
