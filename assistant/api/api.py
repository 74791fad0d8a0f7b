"""The OpenAI-compatible API: chat completions with delegation steps, usage and sources; models; runs; cancel.

Every route takes an organisation API key (``Authorization: Bearer …``). A request becomes a run
through the browser's path (``runs.intake.create_run``, ``runs.execution.launch``, ``runs.execution.execute_run``), in a
conversation of its own owned by the organisation's service user (``orgs.keys.api_user``), the
client's earlier messages saved before the question. The key's model restriction replaces the
assistant's. Another organisation's run, and a run started in the browser, do not exist here (404).

The OpenAPI document is generated from the ``*_schemas`` modules at ``/v1/openapi.json`` (browsable at ``/v1/docs``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import AsyncIterator
from typing import Any, cast

from asgiref.sync import sync_to_async
from django.db.migrations.recorder import MigrationRecorder
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.utils import translation
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, HttpError, ValidationError
from ninja.security import HttpBearer

from assistant.catalogue import snapshot
from assistant.catalogue.models import CatalogueEntry
from assistant.engine.errors import RequestRefused
from assistant.engine.events import ErrorEvent, StoppedEvent
from assistant.engine.policy import Policy
from assistant.engine.types import Message as EngineMessage
from assistant.engine.types import ToolCall
from assistant.orgs import keys
from assistant.orgs.models import ApiKey
from assistant.orgs.services import policy_for
from assistant.orgs.signin import client_address
from assistant.runs import client_turns, execution, intake
from assistant.runs.follow import RunFollower
from assistant.runs.models import Run, Step
from assistant.runs.start import RunStart
from assistant.runs.steps import events_of

from . import limits
from .errors import CODES, ApiError, error_body, error_response, refusal_error, run_failure
from .middleware import request_id
from .request_schemas import ChatCompletionRequest, InputMessage
from .response_schemas import (
    ChatCompletion,
    Choice,
    FinishReason,
    FunctionCallOut,
    ModelList,
    ModelOut,
    OutputMessage,
    RequestWarning,
    RunOut,
    ToolCallOut,
    errors_schema,
)
from .stream_schemas import STREAM_SCHEMAS, RunErrorOut
from .trace import TraceBuilder, built_from
from .trace_schemas import AgentOut

log = logging.getLogger(__name__)

STREAM_DESCRIPTION = """With `"stream": true` the answer comes as server-sent events in OpenAI's
`chat.completion.chunk` format (`ChatCompletionChunk`), ending with `data: [DONE]`. A run that was admitted always
answers 200; its first chunk carries `run_id` and `warnings`. Chunks with an empty `choices` carry an `event`
(`StreamEvent`): each agent's start (with its `agent_id`), its actions and its end, and the main model's tool calls,
as they happen. A reasoning model's summary of each round comes as a `delta.reasoning_content` before that round's
`delta.content` (as OpenAI-compatible clients expect it; not streamed: `message.reasoning_content`). When the main
model called the client's `tools`, one tool-call delta per call (`delta.tool_calls`, OpenAI's shape, each call whole)
comes after the text. The answer's last chunk has `finish_reason` (`stop`, `length` when a limit cut it, `tool_calls`
when the turn ended on the client's tools); the last
chunk before `[DONE]` carries `usage`, `steps`, `rounds`, `sources`, `run_id`, `status` (`ok`, `stopped`) and
`reason`, as in the non-streamed response. A run that fails ends its stream, after the deltas already sent, with
one event whose data is `{"error": {...}}` (`StreamError`: the same object as the non-streamed error, with the
run's figures), which OpenAI's SDK raises as `APIError` while iterating; no `[DONE]` follows it."""


def _authenticate(request: HttpRequest, token: str) -> ApiKey | None:
    """The usable key ``token`` is, after the address's and the key's limits (``limits``); None: 401."""
    address = client_address(request)
    limits.refuse_blocked(address)
    key = keys.find(token)
    if key is None or not key.is_usable():
        limits.failed_key(address)
        if key is not None and key.is_expired:
            end = key.expires.isoformat() if key.expires else ""
            message = (
                f"This API key was replaced by a rotation; its grace period ended at {end}."
                if key.rotated
                else f"This API key expired at {end}."
            )
            raise ApiError(401, "expired_api_key", message)
        return None
    limits.take_request(key)
    keys.touch(key)
    return key


class KeyAuth(HttpBearer):
    async def authenticate(self, request: HttpRequest, token: str) -> ApiKey | None:
        return await sync_to_async(_authenticate)(request, token)


class DocumentedApi(NinjaAPI):
    """The API whose OpenAPI document also describes what no operation returns as JSON: the streamed chunks
    (``text/event-stream``, ``ChatCompletionChunk``) and a stream's error event (``RunErrorOut``)."""

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


def _key(request: HttpRequest) -> ApiKey:
    return cast(ApiKey, request.auth)  # type: ignore[attr-defined]  # django-ninja sets request.auth after authentication; HttpRequest's stubs do not have it


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


# Models ---------------------------------------------------------------------------------------------


def _created(model_ids: list[str]) -> dict[str, int]:
    """When each model was added to this server's catalogue (Unix seconds): its entry's ``created``; a shipped
    model with no entry (an offline demo model) has been in it since the catalogue was made (its first migration)."""
    found = dict(CatalogueEntry.objects.filter(model_id__in=model_ids).values_list("model_id", "created"))
    if len(found) < len(model_ids):
        first = MigrationRecorder.Migration.objects.filter(app="catalogue").order_by("applied").first()
        since = first.applied if first is not None else None
        found.update({i: since for i in model_ids if i not in found and since is not None})
    return {i: int(when.timestamp()) for i, when in found.items()}


def _models(key: ApiKey) -> list[ModelOut]:
    catalogue = snapshot.catalogue()
    allowed = policy_for(key.organisation, key).allowed_ids(catalogue)
    created = _created(list(allowed))
    return [
        ModelOut(
            id=m.id,
            created=created.get(m.id, 0),
            owned_by=m.provider,
            name=m.label,
            input_price_eur=m.input_price,
            cached_input_price_eur=m.cached_input_price,
            output_price_eur=m.output_price,
            price_date=m.price_date.isoformat() if m.price_date else None,
            context_window=m.context_window,
            output_cap=m.output_cap,
            reasoning_efforts=list(m.reasoning_efforts),
        )
        for m in (catalogue[i] for i in allowed)
    ]


@api.get("/models", response={200: ModelList, **errors_schema(401, 429)}, summary="The models this key may use")
async def list_models(request: HttpRequest) -> ModelList:
    return ModelList(data=await sync_to_async(_models)(_key(request)))


@api.get(
    "/models/{model_id}", response={200: ModelOut, **errors_schema(401, 404, 429)}, summary="One model this key may use"
)
async def retrieve_model(request: HttpRequest, model_id: str) -> ModelOut:
    for model in await sync_to_async(_models)(_key(request)):
        if model.id == model_id:
            return model
    raise ApiError(
        404, "model_not_found", f"The model '{model_id}' does not exist or this key may not use it.", param="model"
    )


# Chat completions -----------------------------------------------------------------------------------


def _warnings(key: ApiKey, body: ChatCompletionRequest, policy: Policy) -> list[RequestWarning]:
    """What of the request the run will not do: said in the response, never dropped silently; ``policy``: the
    key's, as the request was checked with."""
    return _agents_warnings(body, policy) + _sampling_warnings(body) + _strict_warnings(body)


def _strict_warnings(body: ChatCompletionRequest) -> list[RequestWarning]:
    """A client tool's ``strict``: not sent (the arguments are the model's, as it wrote them)."""
    return [
        RequestWarning(
            code="parameter_not_sent",
            message=f"`strict` of the tool {t.function.name} is not sent to the model: check its arguments.",
            param=f"tools[{i}].function.strict",
        )
        for i, t in enumerate(body.tools or ())
        if t.function.strict
    ]


def _sampling_warnings(body: ChatCompletionRequest) -> list[RequestWarning]:
    """The sampling parameters the main model does not take (``Model.dropped``): not sent to it."""
    sampling = body.sampling()
    if sampling is None:
        return []
    return [
        RequestWarning(
            code="parameter_not_sent",
            message=f"{body.model} does not take `{name}`: it was not sent to the model.",
            param=name,
        )
        for name in snapshot.resolve(body.model).dropped(sampling)
    ]


def _agents_warnings(body: ChatCompletionRequest, policy: Policy) -> list[RequestWarning]:
    if "agents" not in body.tools_enabled:
        return []
    catalogue = snapshot.catalogue()
    level = body.reasoning_level
    rounds = policy.levels[level].agent_rounds if level is not None else policy.default_agent_rounds
    named = (level or "approfondi").capitalize()  # the levels' names are the product's words
    if rounds == 0:
        used = f"at {named}" if level is not None else f"without a level (the {named} settings apply)"
        return [
            RequestWarning(
                code="agents_off_at_level",
                message=f"Agents are off {used}: its agent round budget is 0. The main model answers alone.",
                param="tools_enabled",
            )
        ]
    if not catalogue.cheaper_than(body.model, policy.allowed_ids(catalogue), policy.cheaper_factor):
        return [
            RequestWarning(
                code="agents_without_cheaper_model",
                message=f"Agents are off: no model this key may use is at least {policy.cheaper_factor:g} times "
                f"cheaper than {body.model}. The main model answers alone.",
                param="tools_enabled",
            )
        ]
    return []


def _create(key: ApiKey, body: ChatCompletionRequest) -> RunStart:
    """The run of a request, checked by the one request check (``intake``) before anything is kept: its start."""
    org = key.organisation
    policy = policy_for(org, key)
    # The question: the last user message (a request with the results of the client's tools ends with them).
    asked = max(i for i, m in enumerate(body.messages) if m.role == "user" and m.text.strip())
    question = body.messages[asked].text
    ask = intake.Ask(
        text=question,
        model=body.model,
        level=body.reasoning_level,
        resources=tuple(body.tools_enabled),
        category=body.category,
        language=translation.get_language() or "",  # Accept-Language (LocaleMiddleware), else the site's
        sampling=body.sampling(),
        client_tools=body.client_tools(),
        max_delegation_eur=body.max_delegation_eur,
    )
    # The text of the messages before the question, kept in the run's conversation (tool results are not text of it).
    earlier = [_earlier(m) for m in body.messages[:asked] if m.role != "tool" and m.text.strip()]
    try:
        # A conversation of its own, saved with the client's earlier messages and the run in intake's transaction.
        return intake.create_run(
            keys.api_user(org),
            org,
            None,
            ask,
            api_key=key,
            policy=policy,
            earlier=earlier,
            prompt=_prompt(org.pk, body),
        )
    except RequestRefused as e:  # nothing was kept: the transaction is rolled back
        raise refusal_error(e.refusal, question=f"messages[{asked}].content") from e


def _earlier(m: InputMessage) -> tuple[str, str]:
    """A message before the question, as the run's conversation keeps it and the main model reads it: the client's
    system prompt as an earlier message (the model has its own)."""
    if m.role in ("system", "developer"):
        return "user", f"Instructions for this conversation:\n{m.text}"
    return ("assistant" if m.role == "assistant" else "user"), m.text


def _prompt(organisation_id: int, body: ChatCompletionRequest) -> list[EngineMessage] | None:
    """The main model's messages for a request that holds tool calls (else None: the conversation's text says them).

    A follow-up carrying the results of the client's tools that a run of the organisation ended on (recognised by our
    ids for them, ``client_turns``) continues that run's own messages, the results added; any other is taken as
    sent."""
    messages = body.messages
    calling = [i for i, m in enumerate(messages) if m.role == "assistant" and m.tool_calls]
    if not calling:
        return None
    last = calling[-1]
    calls = messages[last].tool_calls or []
    continued = client_turns.continued(organisation_id, [c.id for c in calls])
    if continued is None:
        return _as_sent(messages)
    answers = len(calls)  # each call is answered right after it (``request_schemas._answered``)
    results = {m.tool_call_id or "": m.text for m in messages[last + 1 : last + 1 + answers]}
    return [*continued.with_results(results), *_as_sent(messages[last + 1 + answers :])]


def _as_sent(messages: list[InputMessage]) -> list[EngineMessage]:
    """The client's messages as the main model reads them, tool calls and results as the client sent them."""
    out: list[EngineMessage] = []
    names: dict[str, str] = {}
    for m in messages:
        if m.role == "tool":
            call = ToolCall(m.tool_call_id or "", names.get(m.tool_call_id or "", ""))
            out.append(EngineMessage.tool(call, m.text))
        elif m.tool_calls:
            calls = tuple(ToolCall(c.id, c.function.name, c.function.arguments or "{}") for c in m.tool_calls)
            names.update((c.id, c.name) for c in calls)
            out.append(EngineMessage.assistant(m.text, calls))
        elif m.text.strip():
            role, content = _earlier(m)
            out.append(EngineMessage(role="user" if role == "user" else "assistant", content=content))
    return out


# The stops that a limit made (a budget, a cost cap, a spend limit): the answer was cut, OpenAI's ``finish_reason``
# ``length``.
LIMIT_STOPS = frozenset({"category_budget", "cost_cap", "spend_limit"})


def _reason(run: Run, ended: ErrorEvent | StoppedEvent | None) -> tuple[str, str]:
    """Why the run stopped or failed, in English, and its ``reason_code``: the cause's code (``engine.causes``: the
    one vocabulary of the run's and its agents' causes), empty when it ended ok. ``ended``: the run's ``error`` or
    ``stopped`` step's event (``TraceBuilder.ended``)."""
    if run.status == "error":
        cause = ended.cause if isinstance(ended, ErrorEvent) else None
        return run.error, cause.code if cause is not None else "unexpected"
    if run.status != "stopped":
        return "", ""
    if not isinstance(ended, StoppedEvent):
        return "", "stopped_by_user"
    return ended.message, ended.cause.code if ended.cause is not None else "stopped_by_user"


def _finish_reason(run: Run, builder: TraceBuilder) -> FinishReason:
    """OpenAI's ``finish_reason``: ``tool_calls`` when the turn ended on the client's tools, ``length`` when a limit
    cut the answer (the output cap, ``max_tokens``, a budget, a cost cap), else ``stop``."""
    if run.status == "ok" and builder.tool_calls:
        return "tool_calls"
    ended = builder.ended
    if run.status == "stopped" and isinstance(ended, StoppedEvent) and ended.cause is not None:
        return "length" if ended.cause.code in LIMIT_STOPS else "stop"
    return "length" if run.status == "ok" and builder.cut else "stop"


def _completion(
    run_id: uuid.UUID,
    warnings: list[RequestWarning],
    builder: TraceBuilder | None = None,
    heard: execution.Heard | None = None,
) -> tuple[ChatCompletion, ApiError | None]:
    """The finished run as the response says it, and, when it failed, the error that says it to the client (the
    run's figures in it); ``builder``: the stream's, which has taken every step already (the follower misses
    none), so that they are not read and parsed again; ``heard``: the run's events and its end, when it executed
    in this process to its end (``execution.Heard``): then nothing is read from the database."""
    events = heard.events if heard is not None and heard.complete else None
    run = heard.run if heard is not None and heard.run is not None else Run.objects.get(pk=run_id)
    if builder is None:
        builder = built_from(events if events is not None else events_of(run.steps.all()))
    trace = builder.finish(run.usage, run.sources)
    reason, reason_code = _reason(run, builder.ended)
    done = ChatCompletion(
        id=f"chatcmpl-{run.pk.hex}",
        created=int(run.created.timestamp()),
        model=run.model,
        choices=[Choice(message=_message(run, builder), finish_reason=_finish_reason(run, builder))],
        run_id=str(run.pk),
        status=run.status,  # type: ignore[arg-type]  # run.status is a Run.Status value, which the stubs type as str, not the API's Literal
        reason=reason,
        reason_code=reason_code,
        warnings=warnings,
        **trace.model_dump(),
    )
    if run.status != "error":
        return done, None
    ended = builder.ended
    failure = builder.main_failure
    figures = done.model_dump(mode="json", include=FAILURE_FIGURES)
    return done, run_failure(
        ended.cause if isinstance(ended, ErrorEvent) else None,
        reason,
        failure.retry_after if failure is not None else None,
        answer=run.answer,
        **figures,
    )


def _message(run: Run, builder: TraceBuilder) -> OutputMessage:
    """The answer, or the client's tools the main model called (``content`` then null when it wrote nothing), with
    our ids for them (``client_turns.client_call_id``)."""
    calls = _tool_calls(run, builder)
    reasoning = builder.reasoning_content
    if calls is None:
        return OutputMessage(content=run.answer, reasoning_content=reasoning)
    return OutputMessage(content=run.answer or None, tool_calls=calls, reasoning_content=reasoning)


def _tool_calls(run: Run, builder: TraceBuilder) -> list[ToolCallOut] | None:
    """The client's tools the run ended on, with our ids for them; None when it ended otherwise."""
    if run.status != "ok" or not builder.tool_calls:
        return None
    return [
        ToolCallOut(
            id=client_turns.client_call_id(run.pk, i), function=FunctionCallOut(name=c.name, arguments=c.arguments)
        )
        for i, c in enumerate(builder.tool_calls)
    ]


# What a failed run's error object carries of the run (beside ``answer``, the text written before it failed).
FAILURE_FIGURES = {"run_id", "status", "reason", "reason_code", "steps", "rounds", "usage", "sources", "warnings"}


async def _completed(
    run_id: uuid.UUID,
    warnings: list[RequestWarning],
    builder: TraceBuilder | None = None,
    heard: execution.Heard | None = None,
) -> tuple[ChatCompletion, ApiError | None]:
    """``_completion``: here, in the event loop, when the run executed in this process to its end (nothing to read),
    else in the database's thread."""
    if heard is not None and heard.complete:
        return _completion(run_id, warnings, builder, heard)
    return await sync_to_async(_completion)(run_id, warnings, builder, heard)


def _sse(data: dict[str, Any]) -> str:
    return f"data: {json.dumps(data, ensure_ascii=False)}\n\n"


async def _client_gone(run: Run, body: ChatCompletionRequest) -> None:
    """The client closed its connection before the run ended: the run stops as Stop does (nothing more is asked of
    the provider, what was served is billed), unless the request set ``background``."""
    if body.background:
        return
    if await execution.request_stop(run.pk):
        log.info("run %s stopped: its client closed the connection", run.pk)


async def _stream(
    run: Run,
    follower: RunFollower,
    key: ApiKey,
    body: ChatCompletionRequest,
    policy: Policy,
    heard: execution.Heard | None = None,
) -> AsyncIterator[str]:
    """The run as OpenAI chunks: its events, the answer's deltas, the end; a client that closes the stream stops
    the run (``_client_gone``)."""
    warnings = _warnings(key, body, policy)  # the catalogue's snapshot, in memory: no database read in the loop
    base = {
        "id": f"chatcmpl-{run.pk.hex}",
        "object": "chat.completion.chunk",
        "created": int(run.created.timestamp()),
        "model": run.model,
    }
    builder = TraceBuilder()
    try:
        yield _sse(
            {
                **base,
                "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}],
                "run_id": str(run.pk),
                "warnings": [w.model_dump() for w in warnings],
            }
        )
        async for item in follower.items():
            if isinstance(item, str):
                yield _sse({**base, "choices": [{"index": 0, "delta": {"content": item}, "finish_reason": None}]})
                continue
            said = len(builder.reasoning)
            event = builder.add(item)
            for n, summary in enumerate(builder.reasoning[said:], start=said):
                # The main model's reasoning summary, before that round's text (OpenAI-compatible clients show it).
                thought = {"reasoning_content": f"\n\n{summary}" if n else summary}
                yield _sse({**base, "choices": [{"index": 0, "delta": thought, "finish_reason": None}]})
            if event is not None:
                data = {k: v for k, v in event.model_dump(mode="json").items() if v is not None}
                yield _sse({**base, "choices": [], "event": data})
    except asyncio.CancelledError:  # the client closed the stream (Django cancels the response on its disconnect)
        await _client_gone(run, body)
        raise
    finally:
        await follower.close()
    done, failure = await _completed(run.pk, warnings, builder, heard)
    if failure is not None:
        # After the deltas already sent, one error event: OpenAI's SDK raises it as ``APIError`` while iterating.
        failure.extra.pop("retry_after", None)
        yield _sse({"error": error_body(failure)})
        return
    for i, call in enumerate(done.choices[0].message.tool_calls or ()):
        delta = {"tool_calls": [{"index": i, **call.model_dump(mode="json")}]}
        yield _sse({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
    yield _sse({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": done.choices[0].finish_reason}]})
    final = done.model_dump(
        mode="json",
        include={"usage", "steps", "rounds", "sources", "run_id", "status", "reason", "reason_code", "warnings"},
    )
    yield _sse({**base, "choices": [], **final})
    yield "data: [DONE]\n\n"


@api.post(
    "/chat/completions",
    response={
        200: ChatCompletion,
        **errors_schema(400, 401, 403, 404, 413, 429),
        500: RunErrorOut,
        502: RunErrorOut,
        504: RunErrorOut,
    },
    summary="Create a chat completion (a run)",
    description=STREAM_DESCRIPTION,
)
async def chat_completions(request: HttpRequest, body: ChatCompletionRequest) -> ChatCompletion | StreamingHttpResponse:
    key = _key(request)
    start = await sync_to_async(_create)(key, body)
    run, policy = start.run, start.policy
    log.info("run %s for request %s", run.pk, request_id(request))
    # Before the run starts: nothing it publishes is missed. Not streamed, only its end is listened for.
    follower = await RunFollower(run.pk).open(events=body.stream)
    # The response is built from the run's events and its end as this process executes it, if it does.
    heard = execution.Heard()
    execution.launch(start, heard=heard)
    # What the request's warnings say is worked out after the run has started, off its way to its first call.
    if body.stream:
        response = StreamingHttpResponse(
            _stream(run, follower, key, body, policy, heard), content_type="text/event-stream"
        )
        response["Cache-Control"] = "no-cache"
        response["X-Accel-Buffering"] = "no"
        return response
    try:
        await follower.finished()
    except asyncio.CancelledError:  # the client went away (Django cancels the view on its disconnect)
        await _client_gone(run, body)
        raise
    finally:
        await follower.close()
    done, failure = await _completed(run.pk, _warnings(key, body, policy), heard=heard)
    if failure is not None:
        raise failure
    return done


# Runs -------------------------------------------------------------------------------------------------


def _run_of(key: ApiKey, run_id: str) -> Run:
    """A run started through the API by the key's organisation; anything else does not exist here."""
    try:
        pk = uuid.UUID(run_id)
    except ValueError:
        pk = None
    run = Run.objects.filter(pk=pk, organisation=key.organisation, api_key__isnull=False).first() if pk else None
    if run is None:
        raise ApiError(404, "run_not_found", f"No run '{run_id[:100]}' here.", param="run_id")
    return run


def _run_out(run: Run) -> RunOut:
    finished = not run.is_running
    builder = built_from(events_of(run.steps.all()))
    trace = builder.finish(run.usage if finished else None, run.sources if finished else None)
    reason, reason_code = _reason(run, builder.ended)
    return RunOut(
        id=str(run.pk),
        created=int(run.created.timestamp()),
        finished=int(run.finished.timestamp()) if run.finished else None,
        model=run.model,
        reasoning_level=run.level or None,
        tools_enabled=list(run.resources),
        category=run.category,
        status=run.status,  # type: ignore[arg-type]  # run.status is a Run.Status value, which the stubs type as str, not the API's Literal
        stop_requested=run.stop_requested,
        answer=run.answer,
        reason=reason,
        reason_code=reason_code,
        tool_calls=_tool_calls(run, builder),
        **trace.model_dump(),
    )


@api.get(
    "/runs/{run_id}",
    response={200: RunOut, **errors_schema(401, 404, 429)},
    summary="A run with its steps, live or finished",
)
async def retrieve_run(request: HttpRequest, run_id: str) -> RunOut:
    key = _key(request)
    return await sync_to_async(lambda: _run_out(_run_of(key, run_id)))()


@api.post(
    "/runs/{run_id}/cancel", response={200: RunOut, **errors_schema(401, 404, 429)}, summary="Stop a run (as Stop does)"
)
async def cancel_run(request: HttpRequest, run_id: str) -> RunOut:
    key = _key(request)
    run = await sync_to_async(_run_of)(key, run_id)
    await execution.request_stop(run.pk)
    return await sync_to_async(lambda: _run_out(Run.objects.get(pk=run.pk)))()


AGENT_STOP_WAIT_SECONDS = 2.0
"""How long the cancel of one agent waits for it to end (it does within 250 ms) before it answers with the agent as
it stands."""


def _agent_out(run: Run, agent_id: str) -> AgentOut:
    """One agent of the run as ``GET /v1/runs/{id}`` gives it (its figures so far while it works), or 404."""
    agent = built_from(events_of(run.steps.all())).agent(agent_id)
    if agent is None:
        raise ApiError(404, "agent_not_found", f"No agent '{agent_id[:100]}' in this run.", param="agent_id")
    if agent.status == "running" and not run.is_running:  # its run ended without it (its process died)
        agent.status, agent.reason_code = "error", "run_ended"
    return agent


@api.post(
    "/runs/{run_id}/agents/{agent_id}/cancel",
    response={200: AgentOut, **errors_schema(401, 404, 429)},
    summary="Stop one agent of a run, alone: its siblings and the run go on",
)
async def cancel_agent(request: HttpRequest, run_id: str, agent_id: str) -> AgentOut:
    """The agent (the id the stream's `agent_started` event and `GET /v1/runs/{id}` give) stops as Stop stops it, at
    once, with what it had found (`status` `stopped`, `reason_code` `stopped_by_user`); the main model is told that
    the user stopped it. Answers with the agent once it has ended (as it stands when it had already ended)."""
    key = _key(request)
    run = await sync_to_async(_run_of)(key, run_id)
    agent = await sync_to_async(_agent_out)(run, agent_id)
    if agent.status != "running":
        return agent
    await execution.request_agent_stop(run.pk, agent_id)
    deadline = asyncio.get_running_loop().time() + AGENT_STOP_WAIT_SECONDS
    while asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.05)
        if await Step.objects.filter(run_id=run.pk, kind="agent_finished", agent_id=agent_id).aexists():
            break
    return await sync_to_async(lambda: _agent_out(Run.objects.get(pk=run.pk), agent_id))()


__all__ = ["api"]
