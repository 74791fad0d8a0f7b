"""``GET /v1/runs/{id}``, a run with its steps, live or finished; cancelling a run, or one of its agents alone."""

from __future__ import annotations

import asyncio
import uuid

from asgiref.sync import sync_to_async
from django.http import HttpRequest
from ninja import Router

from assistant.orgs.models import ApiKey
from assistant.runs import execution
from assistant.runs.models import Run, Step
from assistant.runs.steps import events_of

from .auth import key_of
from .endings import client_tool_calls, reason_of
from .errors import ApiError
from .response_schemas import (
    RunOut,
    errors_schema,
)
from .trace import built_from
from .trace_schemas import AgentOut

router = Router()


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
    reason, reason_code = reason_of(run, builder.ended)
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
        tool_calls=client_tool_calls(run, builder),
        **trace.model_dump(),
    )


@router.get(
    "/runs/{run_id}",
    response={200: RunOut, **errors_schema(401, 404, 429)},
    summary="A run with its steps, live or finished",
)
async def retrieve_run(request: HttpRequest, run_id: str) -> RunOut:
    key = key_of(request)
    return await sync_to_async(lambda: _run_out(_run_of(key, run_id)))()


@router.post(
    "/runs/{run_id}/cancel", response={200: RunOut, **errors_schema(401, 404, 429)}, summary="Stop a run (as Stop does)"
)
async def cancel_run(request: HttpRequest, run_id: str) -> RunOut:
    key = key_of(request)
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


@router.post(
    "/runs/{run_id}/agents/{agent_id}/cancel",
    response={200: AgentOut, **errors_schema(401, 404, 429)},
    summary="Stop one agent of a run, alone: its siblings and the run go on",
)
async def cancel_agent(request: HttpRequest, run_id: str, agent_id: str) -> AgentOut:
    """The agent (the id the stream's `agent_started` event and `GET /v1/runs/{id}` give) stops as Stop stops it, at
    once, with what it had found (`status` `stopped`, `reason_code` `stopped_by_user`); the main model is told that
    the user stopped it. Answers with the agent once it has ended (as it stands when it had already ended)."""
    key = key_of(request)
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
