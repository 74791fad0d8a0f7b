"""The engine's ``UsageLedger`` for category budgets: every model call of a run, agents included, is
reserved against the run's category before it starts and settled to its real usage after it ends.

The run's first call was reserved at intake, before the run was saved (``CategoryAccounting.reserve``): the
ledger's first ``reserve`` takes that hold over, resized to the call, rather than reserving twice.

A call's settlement is written with the run's next reservation, in the same trip to the database's thread and the
same transaction (an agent's next call, another agent's, the main model's), or after ``SETTLE_SECONDS`` when none comes, or with the
run's end (``take_unsettled``, which the execution writes with the run's outcome): one trip a call instead of two.
Meanwhile the call's hold stays on the category, so the month counts the call at its hold, never at less than it
used; only a process killed in that moment loses the settlement (its holds are then freed by the reaper): a call
served and not charged, never one charged and not served.
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import Callable
from datetime import datetime

from asgiref.sync import sync_to_async
from django.utils import timezone

from assistant.catalogue import snapshot
from assistant.engine.tokens import estimate_tokens
from assistant.engine.types import UsagePart
from assistant.engine.usage import Ledgers, UsageLedger
from assistant.orgs.models import ApiKey, Organisation
from assistant.runs.accounting import Admission, take_unsettled
from assistant.runs.commits import lazy_atomic
from assistant.runs.models import Run

from . import reservations, services, spend, spend_months
from .models import Category, Reservation

SETTLE_SECONDS = 0.2
"""How long a call's settlement may wait for the run's next reservation before it is written on its own."""

_Settlement = tuple[Reservation, int, float, datetime]


class CategoryLedger:
    """Charges one run's calls to one category (``reserve`` raises ``BudgetExceeded`` when it is full)."""

    def __init__(
        self,
        category_id: int,
        clock: Callable[[], datetime] = timezone.now,
        run_id: uuid.UUID | None = None,
        place: reservations.Place | None = None,
    ) -> None:
        self.category_id = category_id
        self.clock = clock
        self.run_id = run_id
        self._first = run_id is not None
        # The category's month row: intake's when it read it, else read at the first call.
        self._place: reservations.Place | None = place
        self._unsettled: list[_Settlement] = []  # calls answered, written with the next reservation
        self._timer: asyncio.TimerHandle | None = None
        self._writing: set[asyncio.Future[None]] = set()  # settlements written after SETTLE_SECONDS, not done yet

    def _reserve(self, tokens: int, now: datetime, unsettled: list[_Settlement] | None = None) -> Reservation:
        if unsettled and not self._first:
            # The settlements and the hold in one transaction; a hold that does not fit is tried again after it on
            # the full path (stale holds, the month's state), the settlements committed whatever it says.
            with lazy_atomic():
                self._settle(unsettled)
                self._place = reservations.place_of(self.category_id, now, self._place)
                held = reservations.hold(self.category_id, tokens, now, self.run_id, self._place)
            return held or reservations.reserve(self.category_id, tokens, now, self.run_id, self._place)
        if unsettled:
            self._settle(unsettled)
        self._place = reservations.place_of(self.category_id, now, self._place)
        if self._first:
            self._first = False
            assert self.run_id is not None
            held = reservations.take_over(self.category_id, self.run_id, tokens, now, self._place)
            if held is not None:
                return held
        return reservations.reserve(self.category_id, tokens, now, self.run_id, self._place)

    def _settle(self, unsettled: list[_Settlement]) -> None:
        for reservation, spent, cost_eur, now in unsettled:
            reservations.settle(reservation, spent, cost_eur, now, self._place)

    async def reserve(self, model: str, tokens: int) -> object:
        return await sync_to_async(self._reserve)(tokens, self.clock(), self._take())

    async def settle(self, reservation: object, model: str, usage: UsagePart | None, cost_eur: float) -> None:
        assert isinstance(reservation, Reservation)
        if usage is None:  # a call that was not served (refused by the provider, or not made): nothing is charged
            await sync_to_async(reservations.release)(reservation)
            return
        self._unsettled.append((reservation, usage.prompt_tokens + usage.completion_tokens, cost_eur, self.clock()))
        if self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(SETTLE_SECONDS, self._settle_soon)

    def _take(self) -> list[_Settlement]:
        """The settlements not written yet, to be written now by the caller."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        unsettled, self._unsettled = self._unsettled, []
        return unsettled

    def _settle_soon(self) -> None:
        self._timer = None
        unsettled = self._take()
        if unsettled:
            task = asyncio.ensure_future(sync_to_async(self._settle)(unsettled))
            self._writing.add(task)
            task.add_done_callback(self._writing.discard)

    def take_unsettled(self) -> Callable[[], None] | None:
        """What is left to settle, to be called in the database's thread (by the run's end); None when nothing is."""
        unsettled = self._take()
        return (lambda: self._settle(unsettled)) if unsettled else None

    async def drain(self) -> None:
        """Write every settlement now, and wait for those being written."""
        writing = list(self._writing)
        unsettled = self._take()
        if unsettled:
            await sync_to_async(self._settle)(unsettled)
        if writing:
            await asyncio.gather(*writing)


def _category(organisation_id: int, category_slug: str) -> Category | None:
    if not category_slug:
        return None
    return Category.objects.filter(organisation_id=organisation_id, slug=category_slug).first()


def ledger_for(organisation_id: int, category_slug: str, run_id: uuid.UUID | None = None) -> CategoryLedger | None:
    """The ledger of a run's category; a run with no category (an organisation without any) has none."""
    category = _category(organisation_id, category_slug)
    return CategoryLedger(category.pk, run_id=run_id) if category is not None else None


class BudgetLedgers(Ledgers):
    """A run's spend limit and its category as one ledger (a call must fit both), whose settlements wait for the run's
    next reservation or its end in each (``runs.accounting.Deferred``)."""

    def take_unsettled(self) -> Callable[[], None] | None:
        parts = [part for ledger in self.ledgers if (part := take_unsettled(ledger)) is not None]
        if not parts:
            return None

        def settle_all() -> None:
            for part in parts:
                part()

        return settle_all


class CategoryAccounting:
    """The runs' accounting (``runs.accounting``): a request is admitted against its category's budget and its spend
    limit (its key's, else its member's), and its run's calls are charged to both."""

    def admit(
        self,
        org: Organisation,
        category: str,
        text: str,
        model: str,
        *,
        user_id: int | None = None,
        api_key: ApiKey | None = None,
    ) -> Admission:
        admitted = services.admit_at(org, category, text, model)
        catalogue = snapshot.catalogue()
        first = estimate_tokens(text) + (catalogue[model].output_cap if model in catalogue else 0)
        place = spend.admit(org, user_id, api_key, model, first)
        spending = _Spending(place, model) if place is not None else None
        if admitted is None:
            return Admission("", spend=spending)
        found, month = admitted
        return Admission(found.slug, _Reserved(found, month) if month is not None else found, spending)

    def reserve(self, organisation_id: int, admission: Admission, run_id: uuid.UUID, tokens: int) -> Admission:
        if isinstance(admission.spend, _Spending):
            spend.reserve_for_run(admission.spend.place, run_id, admission.spend.model, tokens, timezone.now())
        found = _admitted(organisation_id, admission)
        if found is None:
            return admission
        now = timezone.now()
        # The month row the admission's check read (``reservations.place_of`` reads it when the month changed since).
        read = admission.held.place if isinstance(admission.held, _Reserved) else None
        place = reservations.place_of(found.pk, now, read, category=found)
        reservations.reserve_for_run(found.pk, run_id, tokens, now, category=found, place=place)
        return dataclasses.replace(admission, held=_Reserved(found, place))

    def ledger(
        self, organisation_id: int, category: str, run_id: uuid.UUID | None = None, admission: Admission | None = None
    ) -> UsageLedger | None:
        if admission is not None:
            spending = admission.spend.place if isinstance(admission.spend, _Spending) else None
        else:
            spending = _spend_place_of(run_id)
        books = self._category_ledger(organisation_id, category, run_id, admission)
        if spending is None:
            return books
        limited = spend.SpendLedger(dataclasses.replace(spending, alerted=set()), run_id)
        return limited if books is None else BudgetLedgers(limited, books)

    def _category_ledger(
        self, organisation_id: int, category: str, run_id: uuid.UUID | None, admission: Admission | None
    ) -> CategoryLedger | None:
        if admission is not None and admission.category == category:
            found = _admitted(organisation_id, admission)
            if found is None:
                return None
            held = admission.held
            # Its own copy of intake's month row: the thresholds a run has seen crossed are that run's.
            place = dataclasses.replace(held.place, alerted=set()) if isinstance(held, _Reserved) else None
            return CategoryLedger(found.pk, run_id=run_id, place=place)
        return ledger_for(organisation_id, category, run_id)

    def release(self, run_id: uuid.UUID) -> int:
        spend.release_run(run_id)
        return reservations.release_run(run_id)


@dataclasses.dataclass(frozen=True, slots=True)
class _Spending:
    """What intake's admission read of the spend limit: the month the run counts against, and the main model (the
    first call's price)."""

    place: spend_months.SpendPlace
    model: str


def _spend_place_of(run_id: uuid.UUID | None) -> spend_months.SpendPlace | None:
    """The spend month a saved run counts against (a worker's, which has no admission), when a limit applies."""
    if run_id is None:
        return None
    run = Run.objects.select_related("organisation", "api_key").filter(pk=run_id).first()
    if run is None:
        return None
    return spend_months.place_for(run.organisation, run.user_id, run.api_key, run.created)


@dataclasses.dataclass(frozen=True, slots=True)
class _Reserved:
    """What intake's admission or reservation read (``CategoryAccounting.admit``, ``reserve``): the category and its
    month row."""

    category: Category
    place: reservations.Place


def _admitted(organisation_id: int, admission: Admission) -> Category | None:
    """The category ``admit`` read for ``admission`` (read again if it holds none)."""
    held = admission.held.category if isinstance(admission.held, _Reserved) else admission.held
    if isinstance(held, Category) and held.organisation_id == organisation_id and held.slug == admission.category:
        return held
    return _category(organisation_id, admission.category)
