"""How an organisation's recent agents on a model spent a round: what a delegation's estimate grows each round by.

Read from their saved usage steps (``steps.agent_calls``): for each agent, how many calls it made, how much its
request grew from one call to the next (what each round added: its call and its tools' results) and what each call
wrote; averaged over the agents of the organisation's ``RECENT_RUNS`` latest runs of the last ``RECENT_DAYS`` days.
A run's delegations read it from the cache (``GROWTH_CACHE_SECONDS``): an average of hundreds of runs moves little
from one run to the next, and reading it for every delegation took the database's thread from the live pushes of
every open chat (the websocket benchmark's p95 tripled with 50 chats at once).
"""

from __future__ import annotations

from datetime import timedelta

from asgiref.sync import sync_to_async
from django.core.cache import cache
from django.utils import timezone

from assistant.engine.estimate import AgentGrowth, GrowthSource, growth_of

from .models import Run, Step
from .steps import agent_calls

RECENT_RUNS = 200
RECENT_DAYS = 30
GROWTH_CACHE_SECONDS = 600
"""How long a run's delegations reuse an organisation's figures on a model before they are read again."""


def agent_growth(organisation_id: int, model: str) -> AgentGrowth | None:
    """The organisation's recent agents on ``model``, or None when none ran."""
    since = timezone.now() - timedelta(days=RECENT_DAYS)
    runs = Run.objects.filter(organisation_id=organisation_id, created__gte=since).order_by("-created")
    return growth_of(agent_calls(Step.objects.filter(run__in=runs.values("pk")[:RECENT_RUNS]), model).values())


def cached_growth(organisation_id: int, model: str) -> AgentGrowth | None:
    """``agent_growth``, read again at most every ``GROWTH_CACHE_SECONDS`` (the cache is the processes' own, or
    Redis when scaled out); "none ran" is remembered too."""
    key = f"agent-growth:{organisation_id}:{model}"
    held: tuple[AgentGrowth | None] | None = cache.get(key)
    if held is None:
        held = (agent_growth(organisation_id, model),)
        cache.set(key, held, GROWTH_CACHE_SECONDS)
    return held[0]


def growth_source(organisation_id: int) -> GrowthSource:
    """``cached_growth`` for a run's delegations (read when one is estimated, in the database's thread)."""

    async def growth(model: str) -> AgentGrowth | None:
        return await sync_to_async(cached_growth)(organisation_id, model)

    return growth
