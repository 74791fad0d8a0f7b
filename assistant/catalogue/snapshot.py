"""The catalogue and the models users can pick, as the Django side wires them into the engine.

The catalogue is the database's enabled entries whose provider has a key (``assistant.catalogue``),
then the offline demo models. It is read into a snapshot, because ``catalogue()`` is called from
sync code and from a run's event loop, and ``resolve()`` from the event loop: neither may query the
database there. An edited entry drops the snapshot (``forget_catalogue``); otherwise it is re-read
after ``SNAPSHOT_SECONDS`` by the next sync caller.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar, cast

from django.conf import settings
from django.db import connection

from assistant.catalogue.models import DEMO_PROVIDER, CatalogueEntry
from assistant.engine.catalogue import Catalogue
from assistant.engine.models.base import Model
from assistant.engine.models.demo import DEMO_MODELS, DemoModel
from assistant.engine.models.mistral import MistralModel
from assistant.engine.models.openai import OpenAIModel
from assistant.engine.providers.mistral import MistralProvider
from assistant.engine.providers.openai import OpenAIProvider

SNAPSHOT_SECONDS = 30.0
P = TypeVar("P", OpenAIProvider, MistralProvider)


@dataclass(frozen=True, slots=True)
class _Offer:
    """How to reach one catalogue model."""

    provider: str
    api_model: str
    adjustable_reasoning: bool


@dataclass(frozen=True, slots=True)
class _Snapshot:
    catalogue: Catalogue
    offers: dict[str, _Offer]
    config: tuple[str | None, ...]
    taken: float


_snapshot: _Snapshot | None = None
# One provider (one connection pool) per event loop and configuration: a pool must not outlive its loop.
_providers: weakref.WeakKeyDictionary[
    asyncio.AbstractEventLoop, dict[tuple[str | None, ...], OpenAIProvider | MistralProvider]
] = weakref.WeakKeyDictionary()


def catalogue() -> Catalogue:
    return _current().catalogue


def resolve(model_id: str) -> Model:
    snapshot = _current()
    info = snapshot.catalogue[model_id]
    offer = snapshot.offers.get(model_id)
    if offer is None:
        return DemoModel(info, pace=settings.DEMO_PACE, latency=settings.DEMO_LATENCY)
    if offer.provider == "openai":
        key, url = settings.OPENAI_API_KEY, settings.OPENAI_BASE_URL
        openai = _shared(("openai", key, url), lambda: OpenAIProvider(api_key=key, base_url=url))
        return OpenAIModel(info, openai, api_model=offer.api_model)
    key, url = settings.MISTRAL_API_KEY, settings.MISTRAL_BASE_URL
    mistral = _shared(("mistral", key, url), lambda: MistralProvider(api_key=key, base_url=url))
    return MistralModel(info, mistral, api_model=offer.api_model, adjustable_reasoning=offer.adjustable_reasoning)


async def aclose_providers() -> None:
    """Close the connections this event loop's providers hold (shutdown, tests)."""
    for provider in _providers.pop(asyncio.get_running_loop(), {}).values():
        await provider.aclose()


def forget_catalogue() -> None:
    """Drop the snapshot: the next caller reads the database again."""
    global _snapshot
    _snapshot = None


def _config() -> tuple[str | None, ...]:
    return (settings.MISTRAL_API_KEY, settings.MISTRAL_BASE_URL, settings.OPENAI_API_KEY, settings.OPENAI_BASE_URL)


def _in_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _current() -> _Snapshot:
    global _snapshot
    snapshot = _snapshot
    in_loop = _in_event_loop()
    fresh = snapshot is not None and time.monotonic() - snapshot.taken < SNAPSHOT_SECONDS
    if snapshot is not None and snapshot.config == _config() and (fresh or in_loop):
        return snapshot
    if in_loop:
        # No query from the event loop: read in a worker thread (once, until a sync caller refreshes).
        with ThreadPoolExecutor(max_workers=1) as pool:
            snapshot = pool.submit(_read_in_thread).result()
    else:
        snapshot = _read()
    _snapshot = snapshot
    return snapshot


def _read() -> _Snapshot:
    rows = list(CatalogueEntry.objects.all())
    entries = [e for e in rows if e.provider != DEMO_PROVIDER and not e.unavailable_reason()]
    offers = {e.model_id: _Offer(e.provider, e.api_model, e.reasoning == "adjustable") for e in entries}
    # The demo models stay out of real work: offered next to real models only when an admin says so.
    demo_rows = {e.model_id: e for e in rows if e.provider == DEMO_PROVIDER}
    demo = []
    for m in DEMO_MODELS:
        row = demo_rows.get(m.id)
        if m.id in offers or (row.unavailable_reason(bool(entries)) if row else entries):
            continue
        demo.append(row.to_info() if row else m)
    return _Snapshot(Catalogue([*(e.to_info() for e in entries), *demo]), offers, _config(), time.monotonic())


def _read_in_thread() -> _Snapshot:
    try:
        return _read()
    finally:
        connection.close()


def _shared(key: tuple[str | None, ...], make: Callable[[], P]) -> P:
    """The provider for ``key`` in the running event loop, made once per loop."""
    if not _in_event_loop():
        return make()
    per_loop = _providers.setdefault(asyncio.get_running_loop(), {})
    if key not in per_loop:
        per_loop[key] = make()
    return cast(P, per_loop[key])
