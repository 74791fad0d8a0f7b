"""What a run shares with its agents: models, tools, policy, usage, sources, events and the cancel token."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from .cancel import CancelToken
from .carbon import DEFAULT_ZONE, call_impact
from .catalogue import Catalogue
from .errors import BudgetExceeded, CostCapReached, ModelError, ModelTimeout
from .events import Event, Source, UsageEvent, keep_sources
from .models.base import ModelResolver
from .policy import Policy
from .tokens import estimate_tokens, prompt_tokens, request_tokens
from .tools import Toolbox
from .types import ModelRequest, ModelResponse, TextDelta, UsagePart
from .usage import RunUsage, UsageLedger

Emit = Callable[[Event], Awaitable[None]]


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
        interruptible: bool = False,
        usage: RunUsage | None = None,
    ) -> ModelResponse:
        """One model call: reserve, stream, count usage once (into the run and ``usage``), settle.

        ``interruptible`` calls end at once when the token is cancelled (the main stream); the
        response then has ``finish_reason == "cancelled"`` and keeps the text received so far.
        A call longer than ``timeout`` raises ``ModelTimeout``.
        """
        info = self.catalogue[model_id]
        model = self.models(model_id)
        cap = request.max_output_tokens or info.output_cap
        reservation = None
        if self.ledger is not None:
            try:
                reservation = await self.ledger.reserve(model_id, prompt_tokens(request) + cap)
            except BudgetExceeded as e:
                self.cancel.cancel("cost_cap" if isinstance(e, CostCapReached) else "budget")
                return ModelResponse(finish_reason="cancelled")
        response = ModelResponse()
        started = time.monotonic()

        async def consume() -> None:
            async for part in model.stream(request):
                response.add(part)
                if on_text is not None and isinstance(part, TextDelta):
                    await on_text(part.text)

        task = asyncio.ensure_future(consume())
        waiter = asyncio.ensure_future(self.cancel.wait()) if interruptible else None
        try:
            await asyncio.wait(
                [task] if waiter is None else [task, waiter], timeout=timeout, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            if waiter is not None:
                waiter.cancel()
        timed_out = not task.done() and not self.cancel.cancelled
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            response.finish_reason = "cancelled"
        elif task.exception() is not None:
            exc = task.exception()
            await self._account(model_id, request, response, agent_id, usage, reservation, time.monotonic() - started)
            if isinstance(exc, ModelError):
                raise exc
            raise ModelError(f"{type(exc).__name__}: {exc}") from exc
        await self._account(model_id, request, response, agent_id, usage, reservation, time.monotonic() - started)
        if timed_out:
            raise ModelTimeout(f"the model call was cut after {timeout:.1f} s")
        return response

    async def _account(
        self,
        model_id: str,
        request: ModelRequest,
        response: ModelResponse,
        agent_id: str | None,
        usage: RunUsage | None,
        reservation: object,
        seconds: float,
    ) -> None:
        part = response.usage
        if part is None:
            # A call cut short reports nothing; bill what it certainly consumed.
            part = UsagePart(
                prompt_tokens=request_tokens(request.messages),
                completion_tokens=estimate_tokens(response.text) if response.text else 0,
            )
            response.usage = part
        info = self.catalogue[model_id]
        cost = info.cost_eur(part)
        impact = call_impact(info, part.completion_tokens, seconds, self.electricity_zone)
        self.usage.add(model_id, part, cost, impact)
        if usage is not None:
            usage.add(model_id, part, cost, impact)
        if self.ledger is not None:
            await self.ledger.settle(reservation, model_id, part, cost)
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
            )
        )
