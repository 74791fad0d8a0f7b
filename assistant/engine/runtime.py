"""What a run shares with its agents: models, tools, policy, usage, sources, events and the cancel token."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from .cancel import CancelToken, RunStopped
from .carbon import DEFAULT_ZONE, call_impact
from .catalogue import Catalogue
from .causes import Cause, error_kind, stop_cause
from .errors import (
    BudgetExceeded,
    ModelError,
    ModelTimeout,
    RateLimited,
)
from .estimate import DelegationCap, GrowthSource
from .events import Event, ModelCallFailed, Source, UsageEvent, keep_sources
from .models.base import ModelResolver
from .models.streaming import CallState, tracked_call
from .policy import Policy
from .tokens import estimate_tokens, prompt_tokens
from .tools import Toolbox
from .types import ModelRequest, ModelResponse, Reasoning, ReasoningPart, TextDelta, UsagePart
from .usage import RunUsage, UsageLedger, cap_reached

Emit = Callable[[Event], Awaitable[None]]

log = logging.getLogger(__name__)

ABORT_GRACE_SECONDS = 0.1
"""How long an aborted call's stream may take to close before the run goes on without waiting for it."""
_closing: set[asyncio.Future[None]] = set()  # aborted calls still closing their stream (kept from the collector)


async def _discard(event: Event) -> None:
    return None


@dataclass(kw_only=True)
class RunContext:
    """The state of one run, shared by the main loop and its agents."""

    catalogue: Catalogue
    models: ModelResolver
    toolbox: Toolbox
    policy: Policy = field(default_factory=Policy)
    emit: Emit = _discard
    cancel: CancelToken = field(default_factory=CancelToken)
    ledger: UsageLedger | None = None
    electricity_zone: str = DEFAULT_ZONE
    """Where the energy of model calls is counted for carbon (ISO 3166-1 alpha-3, ``WOR`` = world)."""
    language: str | None = None
    """The reader's interface language (e.g. ``fr``), given to every model request of the run."""
    delegation_cap: DelegationCap | None = None
    """What a delegation of the run may cost at most, and who to ask when one is over it (``estimate.py``)."""
    agent_growth: GrowthSource | None = None
    """How the organisation's recent agents on a model spent a round, for the delegations' estimates (None: the
    documented default)."""
    usage: RunUsage = field(default_factory=RunUsage)
    sources: dict[str, Source] = field(default_factory=dict)
    started: float = field(default_factory=time.monotonic)
    active_agents: int = 0
    agents_started: int = 0

    @property
    def seconds_left(self) -> float:
        return self.policy.request_seconds - (time.monotonic() - self.started)

    def add_sources(self, sources: tuple[Source, ...]) -> None:
        keep_sources(self.sources, sources)

    async def call_model(
        self,
        model_id: str,
        request: ModelRequest,
        *,
        agent_id: str | None = None,
        timeout: float | None = None,
        on_text: Callable[[str], Awaitable[None]] | None = None,
        on_reasoning: Callable[[Reasoning], Awaitable[None]] | None = None,
        usage: RunUsage | None = None,
        cancel: CancelToken | None = None,
    ) -> ModelResponse:
        """One model call: reserve, stream, count usage once (into the run and ``usage``), settle.

        Stop (the token cancelled: the page, the API's cancel, a category budget, the cost cap) aborts the
        call at once, wherever it is (the provider's stream is closed), and raises ``RunStopped`` carrying the
        stop's cause, ``usage`` (or the run's) and the text received so far. No call starts after Stop, nor
        one whose reservation was being made when Stop came (its reservation is released): ``RunStopped`` too. A call
        longer than ``timeout`` raises ``ModelTimeout``; the adapters' retries wait neither past it nor past
        the run's time left (``streaming.tracked_call``).

        Billed by how it ended: answered, the provider's usage; refused by the provider with an HTTP
        error before anything streamed, or never sent (``ModelError.bills_nothing``), nothing (its
        reservation is released); cut after it was sent (a broken stream, the timeout, Stop),
        ``bill_cut_call``; aborted by Stop while the adapter waited to try again after the provider refused
        the call (``CallState.waiting``, nothing in flight), nothing. A failure (not a Stop) is counted in
        ``failed_calls`` and emitted as ``ModelCallFailed``.

        ``on_text`` hears each piece of text as it arrives; ``on_reasoning`` each reasoning of the turn as it
        completes, once (a later version of the same one, e.g. Mistral's signature coming after, only replaces it in
        the response). ``cancel``: the token that stops this call, an agent's own (``CancelToken.agent``: its run's
        Stop cancels it too); the run's by default.
        """
        token = cancel or self.cancel
        token.check(usage or self.usage)  # nothing is spent after Stop
        info = self.catalogue[model_id]
        model = self.models(model_id)
        cap = request.max_output_tokens or info.output_cap
        reservation = None
        if self.ledger is not None:
            try:
                reservation = await self.ledger.reserve(model_id, prompt_tokens(request) + cap)
            except BudgetExceeded as e:
                self.cancel.cancel(stop_cause(e))
                raise RunStopped(self.cancel.stop_cause, usage or self.usage) from e
            if token.cancelled:  # Stop came while the reservation was being made: the call is not made
                await self.ledger.settle(reservation, model_id, None, 0.0)
                token.check(usage or self.usage)
        response = ModelResponse()
        started = time.monotonic()
        # Retries wait no longer than the call may last, nor past the run's time.
        deadline = started + min(self.seconds_left, math.inf if timeout is None else timeout)
        state = CallState(deadline=deadline, api_model=model.api_model or model_id)

        async def consume() -> None:
            heard: set[str | None] = set()
            with tracked_call(state):
                async for part in model.stream(request):
                    response.add(part)
                    if on_text is not None and isinstance(part, TextDelta):
                        await on_text(part.text)
                    elif on_reasoning is not None and isinstance(part, ReasoningPart):
                        said, heard = part.reasoning.id in heard, heard | {part.reasoning.id or None}
                        if not said:
                            await on_reasoning(part.reasoning)

        task = asyncio.ensure_future(consume())
        await token.race(task, timeout)
        timed_out = not task.done() and not token.cancelled
        aborted = not task.done()
        if aborted:
            await _abort(task)
        seconds = time.monotonic() - started
        # A call cut after it was sent (it failed, timed out or was aborted by Stop) is billed as such.
        bill_cut = functools.partial(
            self.bill_cut_call,
            model_id,
            request,
            response,
            agent_id=agent_id,
            usage=usage,
            reservation=reservation,
            seconds=seconds,
            state=state,
        )
        if task.done() and not task.cancelled() and task.exception() is not None:
            exc = task.exception()
            error = exc if isinstance(exc, ModelError) else ModelError(f"{type(exc).__name__}: {exc}")
            billed = not (error.bills_nothing and not response.text and not response.tool_calls)
            if billed:
                await bill_cut(failed=True)
            elif self.ledger is not None:
                await self.ledger.settle(reservation, model_id, None, 0.0)  # released: nothing was served
            await self._failed(model_id, error, billed, agent_id, usage, state)
            if error is exc:
                raise error
            raise error from exc
        if timed_out:
            await bill_cut(failed=True)
            error = ModelTimeout(f"the model call was cut after {timeout:.1f} s")
            await self._failed(model_id, error, True, agent_id, usage, state)
            raise error
        if aborted:  # by Stop: billed as cut, not a failure
            served = response.text or response.tool_calls or response.usage is not None or response.cut_attempts
            if state.waiting and not served:
                # Aborted while waiting to try again after the provider refused the call: nothing was served.
                if self.ledger is not None:
                    await self.ledger.settle(reservation, model_id, None, 0.0)
            else:
                await bill_cut()
            raise RunStopped(token.stop_cause, usage or self.usage, response.text)
        await self._account(
            model_id,
            _with_cut_attempts(response.usage or _estimate(request, response), request, response),
            response.usage,
            agent_id,
            usage,
            reservation,
            seconds,
            _timing(state),
            finish_reason=response.finish_reason,
            response_model=response.model,
        )
        return response

    async def bill_cut_call(
        self,
        model_id: str,
        request: ModelRequest,
        response: ModelResponse,
        *,
        agent_id: str | None = None,
        usage: RunUsage | None = None,
        reservation: object = None,
        seconds: float = 0.0,
        state: CallState | None = None,
        failed: bool = False,
    ) -> UsagePart:
        """Bill a call cut after it was sent: a stream that broke off, a client timeout, an abort by Stop.

        The provider's usage when it reported one (``response.usage``); else an estimate of everything
        sent (the messages and the tool specs: ``tokens.prompt_tokens``) and of what streamed back (the
        text and the tool calls), counted as ``tokens_estimated``. It settles ``reservation`` on the
        run's ledger, adds the call to the run's usage (and to ``usage``, an agent's) and emits its
        ``UsageEvent``, as any answered call. Returns what was billed (also put in ``response.usage``).
        A call the provider refused with an HTTP error is not billed: release its reservation instead.
        ``state``: the call's tries, for its event; ``failed``: it failed (its ``ModelCallFailed`` follows).
        """
        reported = response.usage
        part = _with_cut_attempts(response.usage or _estimate(request, response), request, response)
        response.usage = part
        finish = "" if failed else response.finish_reason
        await self._account(
            model_id,
            part,
            reported,
            agent_id,
            usage,
            reservation,
            seconds,
            _timing(state),
            finish,
            failed=failed,
            response_model=response.model,
        )
        return part

    async def _failed(
        self,
        model_id: str,
        error: ModelError,
        billed: bool,
        agent_id: str | None,
        usage: RunUsage | None,
        state: CallState | None = None,
    ) -> None:
        """Count a failed call in the run's usage (and the agent's) and say so in the run's steps."""
        self.usage.failed(model_id)
        if usage is not None:
            usage.failed(model_id)
        await self.emit(
            ModelCallFailed(
                agent_id=agent_id,
                model=model_id,
                error_kind=error_kind(error),
                billed=billed,
                status=error.status,
                retry_after=error.retry_after if isinstance(error, RateLimited) else None,
                message=str(error)[:500],
                **_timing(state),
            )
        )

    async def _account(
        self,
        model_id: str,
        part: UsagePart,
        reported: UsagePart | None,
        agent_id: str | None,
        usage: RunUsage | None,
        reservation: object,
        seconds: float,
        timing: dict[str, Any] | None = None,
        finish_reason: str = "",
        *,
        failed: bool = False,
        response_model: str = "",
    ) -> None:
        """Bill ``part``, of which ``reported`` is what the provider reported (None: nothing; the rest of ``part`` was
        counted locally, and its cost is the call's ``estimated_eur``)."""
        info = self.catalogue[model_id]
        cost = info.cost_eur(part)
        estimated = reported is None or reported != part
        estimated_eur = cost if reported is None else max(0.0, cost - info.cost_eur(reported))
        impact = call_impact(info, part.completion_tokens, seconds, self.electricity_zone)
        self.usage.add(model_id, part, cost, impact, estimated=estimated, estimated_eur=estimated_eur)
        if usage is not None:
            usage.add(model_id, part, cost, impact, estimated=estimated, estimated_eur=estimated_eur)
        if self.ledger is not None:
            await self.ledger.settle(reservation, model_id, part, cost)
            if cap_reached(self.ledger):  # the call that crossed a cost cap is the run's Stop: the others abort
                self.cancel.cancel(Cause(code="cost_cap"))
        await self.emit(
            UsageEvent(
                agent_id=agent_id,
                model=model_id,
                prompt_tokens=part.prompt_tokens,
                completion_tokens=part.completion_tokens,
                cached_prompt_tokens=part.cached_prompt_tokens,
                reasoning_tokens=part.reasoning_tokens,
                cost_eur=cost,
                energy_wh=impact.energy_kwh * 1000 if impact else 0.0,
                carbon_g=impact.carbon_g if impact else 0.0,
                estimated=estimated,
                cost_source="estimated" if estimated else "reported",
                estimated_eur=estimated_eur,
                finish_reason=finish_reason,
                failed=failed,
                response_model=response_model,
                **(timing or {}),
            )
        )


def _timing(state: CallState | None) -> dict[str, Any]:
    """What a call's event says of its tries (a ``chat`` span each): when the last one was sent and how long it
    took to the call's end, the tries before it, and the model's name at its provider."""
    if state is None:
        return {}
    return {
        "started_at": state.sent_at,
        "seconds": max(0.0, time.time() - state.sent_at),
        "retried": tuple(state.retried),
        "api_model": state.api_model,
    }


async def _abort(task: asyncio.Future[None]) -> None:
    """Cancel a call's stream (the adapter closes its connection) and give it ``ABORT_GRACE_SECONDS`` to close.

    A stream that takes longer (an adapter that does not close at once) finishes closing on its own: the run
    does not wait for it, and what it might still yield is not read.
    """
    task.cancel()
    await asyncio.wait([task], timeout=ABORT_GRACE_SECONDS)
    if not task.done():
        log.warning("an aborted model call did not close its stream within %.1f s", ABORT_GRACE_SECONDS)
        _closing.add(task)
        task.add_done_callback(_closed)


def _closed(task: asyncio.Future[None]) -> None:
    _closing.discard(task)
    if not task.cancelled() and task.exception() is not None:
        log.info("an aborted model call ended with %r", task.exception())


def _estimate(request: ModelRequest, response: ModelResponse) -> UsagePart:
    """What a call certainly consumed when its provider reported nothing: everything sent (messages and tool
    specs), and the text and tool calls that came back."""
    streamed = estimate_tokens(response.text) if response.text else 0
    streamed += sum(estimate_tokens(c.name) + estimate_tokens(c.arguments) for c in response.tool_calls)
    return UsagePart(prompt_tokens=prompt_tokens(request), completion_tokens=streamed)


def _with_cut_attempts(part: UsagePart, request: ModelRequest, response: ModelResponse) -> UsagePart:
    """``part`` plus what the attempts the adapter tried again were sent (``AttemptCut``): the provider bills them."""
    if not response.cut_attempts:
        return part
    return dataclasses.replace(part, prompt_tokens=part.prompt_tokens + response.cut_attempts * prompt_tokens(request))
