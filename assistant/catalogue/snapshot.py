"""The catalogue and the models users can pick, as the Django side wires them into the engine.

The catalogue is the database's enabled entries whose provider has a key (``assistant.catalogue``),
then the offline models a provider ships (the demo's, see ``providers``). It is read into a snapshot, because ``catalogue()`` is called from
sync code and from a run's event loop, and ``resolve()`` from the event loop: neither may query the
database there. An edited entry drops the snapshot (``forget_catalogue``); otherwise it is re-read
after ``SNAPSHOT_SECONDS`` by the next sync caller.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from django.db import connection

from assistant.catalogue import providers
from assistant.catalogue.models import DEMO_PROVIDER, RESPONSES, CatalogueEntry
from assistant.catalogue.providers import Offer
from assistant.engine.catalogue import Catalogue
from assistant.engine.models.base import Model

SNAPSHOT_SECONDS = 30.0


@dataclass(frozen=True, slots=True)
class _Snapshot:
    catalogue: Catalogue
    offers: dict[str, Offer]
    config: tuple[str | None, ...]
    taken: float


_snapshot: _Snapshot | None = None


def catalogue() -> Catalogue:
    return _current().catalogue


def resolve(model_id: str) -> Model:
    snapshot = _current()
    info = snapshot.catalogue[model_id]
    offer = snapshot.offers.get(model_id) or Offer(info.provider, model_id, bool(info.reasoning_efforts))
    provider = providers.provider(offer.provider)
    if provider is None:
        raise KeyError(f"no provider '{offer.provider}' for {model_id}")
    return provider.model(info, offer)


async def aclose_providers() -> None:
    """Close the connections this event loop's providers hold (shutdown, tests)."""
    await providers.aclose_clients()


def forget_catalogue() -> None:
    """Drop the snapshot: the next caller reads the database again."""
    global _snapshot
    _snapshot = None


def _config() -> tuple[str | None, ...]:
    return providers.config()


def _current() -> _Snapshot:
    global _snapshot
    snapshot = _snapshot
    in_loop = providers.in_event_loop()
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
    offers = {
        e.model_id: Offer(e.provider, e.api_model, e.reasoning == "adjustable", responses=e.api == RESPONSES)
        for e in entries
    }
    # The demo models stay out of real work: offered next to real models only when an admin says so.
    demo_rows = {e.model_id: e for e in rows if e.provider == DEMO_PROVIDER}
    demo = []
    shipped = providers.provider(DEMO_PROVIDER)
    for m in shipped.models if shipped else ():
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
