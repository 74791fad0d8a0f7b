"""The OpenAI-compatible API: chat completions with delegation steps, usage and sources; models; runs; cancel.

Every route takes an organisation API key (``Authorization: Bearer …``). A request becomes a run
through the browser's path (``runs.intake.create_run``, ``runs.execution.launch``, ``runs.execution.execute_run``), in a
conversation of its own owned by the organisation's service user (``orgs.keys.api_user``), the
client's earlier messages saved before the question. The key's model restriction replaces the
assistant's. Another organisation's run, and a run started in the browser, do not exist here (404).

Here: the API object, its key (``auth``), its errors in OpenAI's shape and its routes, one module per resource:
``model_list``, ``completions`` (with ``run_requests``, ``request_warnings``, ``endings``), ``runs``. The OpenAPI
document is generated from the ``*_schemas`` modules at ``/v1/openapi.json`` (browsable at ``/v1/docs``).
"""

from __future__ import annotations

import logging
from typing import Any

from django.http import Http404, HttpRequest, HttpResponse
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, HttpError, ValidationError
from ninja.operation import Operation

from . import completions, model_list, runs
from .auth import KeyAuth
from .errors import CODES, ApiError, error_response
from .middleware import request_id
from .stream_schemas import STREAM_SCHEMAS

log = logging.getLogger(__name__)


class DocumentedApi(NinjaAPI):
    """The API whose OpenAPI document also describes what no operation returns as JSON: the streamed chunks
    (``text/event-stream``, ``ChatCompletionChunk``) and a stream's error event (``RunErrorOut``)."""

    def get_openapi_operation_id(self, operation: Operation) -> str:
        # The ids the operations had when they were all in this module (django-ninja names them after the view's
        # module): a client's generated SDK keeps its method names.
        return f"assistant_api_api_{operation.view_func.__name__}"

    def get_openapi_schema(self, *, path_prefix: str | None = None, path_params: dict[str, Any] | None = None) -> Any:
        document = super().get_openapi_schema(path_prefix=path_prefix, path_params=path_params)
        components = document.setdefault("components", {}).setdefault("schemas", {})
        for model in STREAM_SCHEMAS:
            schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
            for name, nested in schema.pop("$defs", {}).items():
                components.setdefault(name, nested)
            components[model.__name__] = schema
        for path, item in document["paths"].items():
            operation = item.get("post") if path.endswith("/chat/completions") else None
            if operation is None:
                continue
            stream = {"schema": {"$ref": "#/components/schemas/ChatCompletionChunk"}}
            ok = operation["responses"][200]  # django-ninja keys the statuses as numbers
            ok.setdefault("content", {})["text/event-stream"] = stream
        return document


api = DocumentedApi(
    title="Assistant API",
    version="1",
    description="OpenAI-compatible chat completions whose main model delegates to budgeted sub-agents.",
    auth=KeyAuth(),
    urls_namespace="api",
)


# Errors in OpenAI's shape ---------------------------------------------------------------------------


@api.exception_handler(ApiError)
def _api_error(request: HttpRequest, exc: ApiError) -> HttpResponse:
    headers = {"Retry-After": exc.extra.pop("retry_after")} if "retry_after" in exc.extra else None
    return error_response(exc, headers)


@api.exception_handler(AuthenticationError)
def _unauthenticated(request: HttpRequest, exc: AuthenticationError) -> HttpResponse:
    return error_response(ApiError(401, "invalid_api_key", "Invalid API key: it is unknown or was revoked."))


@api.exception_handler(ValidationError)
def _invalid(request: HttpRequest, exc: ValidationError) -> HttpResponse:
    errors: list[dict[str, Any]] = list(exc.errors)
    # A union (a message's content: text or parts) reports each branch: the one that says most comes first.
    errors.sort(key=lambda e: (0 if str(e.get("type", "")).startswith("value_error") else 1, -len(e.get("loc", ()))))
    first = errors[0] if errors else {}
    param = _param(first.get("loc", ()))
    message = str(first.get("msg", "invalid body")).removeprefix("Value error, ")
    if param is None and first.get("type") in ("model_type", "dict_type", "model_attributes_type"):
        message = "send a JSON object"
    text = f"Invalid parameter {param}: {message}." if param else f"Invalid body: {message}."
    return error_response(ApiError(400, "invalid_body", text, param=param))


def _param(loc: Any) -> str | None:
    """pydantic's location as OpenAI names a parameter: ``messages[3].content``."""
    param = ""
    for part in loc:
        if part in ("body", "payload") and not param:
            continue
        if isinstance(part, int):
            param += f"[{part}]"
        elif "[" in str(part) or str(part) in ("str", "int", "list", "none", "bool"):
            continue  # a union's branch (``str``, ``list[TextPart]``), not a parameter
        else:
            param += f".{part}" if param else str(part)
    return param or None


@api.exception_handler(HttpError)
def _http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
    if exc.status_code == 400:  # django-ninja could not read the body
        return error_response(ApiError(400, "invalid_json", "The body is not valid JSON: send a JSON object."))
    code = next((c for c, (status, _when) in CODES.items() if status == exc.status_code), "server_error")
    return error_response(ApiError(CODES[code][0], code, str(exc)))


@api.exception_handler(Http404)
def _not_found(request: HttpRequest, exc: Http404) -> HttpResponse:
    return error_response(ApiError(404, "not_found", str(exc) or "Not found."))


@api.exception_handler(Exception)
def _fault(request: HttpRequest, exc: Exception) -> HttpResponse:
    # A fault of the server, not of the request: logged with its traceback, answered without it.
    log.exception("API request failed: %s %s (request %s)", request.method, request.path, request_id(request))
    return error_response(ApiError(500, "server_error", "The server failed to answer this request; it is logged."))


# The routes, in the order the OpenAPI document lists them.
api.add_router("", model_list.router)
api.add_router("", completions.router)
api.add_router("", runs.router)
