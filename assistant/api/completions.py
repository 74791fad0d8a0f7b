"""``POST /v1/chat/completions``: a request becomes a run, answered when it ends or streamed as OpenAI's chunks."""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import AsyncIterator
from typing import Any

from asgiref.sync import sync_to_async
from django.http import HttpRequest, StreamingHttpResponse
from ninja import Router

from assistant.engine.events import ErrorEvent
from assistant.engine.policy import Policy
from assistant.orgs.models import ApiKey
from assistant.runs import execution
from assistant.runs.follow import RunFollower
from assistant.runs.models import Run
from assistant.runs.steps import events_of

from .auth import key_of
from .endings import client_tool_calls, finish_reason, reason_of
from .errors import ApiError, error_body, run_failure
from .middleware import request_id
from .request_schemas import ChatCompletionRequest
from .request_warnings import warnings_for
from .response_schemas import (
    ChatCompletion,
    Choice,
    OutputMessage,
    RequestWarning,
    errors_schema,
)
from .run_requests import create_run
from .stream_schemas import RunErrorOut
from .trace import TraceBuilder, built_from

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


router = Router()


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
    reason, reason_code = reason_of(run, builder.ended)
    done = ChatCompletion(
        id=f"chatcmpl-{run.pk.hex}",
        created=int(run.created.timestamp()),
        model=run.model,
        choices=[Choice(message=_message(run, builder), finish_reason=finish_reason(run, builder))],
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
    calls = client_tool_calls(run, builder)
    reasoning = builder.reasoning_content
    if calls is None:
        return OutputMessage(content=run.answer, reasoning_content=reasoning)
    return OutputMessage(content=run.answer or None, tool_calls=calls, reasoning_content=reasoning)


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
    warnings = warnings_for(body, policy)  # the catalogue's snapshot, in memory: no database read in the loop
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


@router.post(
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
    key = key_of(request)
    start = await sync_to_async(create_run)(key, body)
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
    done, failure = await _completed(run.pk, warnings_for(body, policy), heard=heard)
    if failure is not None:
        raise failure
    return done
