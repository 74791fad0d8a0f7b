"""The engine's ``UsageLedger`` for category budgets: every model call of a run, agents included, is
reserved against the run's category before it starts and settled to its real usage after it ends.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from asgiref.sync import sync_to_async
from django.utils import timezone

from assistant.engine.types import UsagePart
from assistant.orgs.models import Organisation

from . import services
from .models import Category, Reservation


class CategoryLedger:
    """Charges one run's calls to one category (``reserve`` raises ``BudgetExceeded`` when it is full)."""

    def __init__(self, category_id: int, clock: Callable[[], datetime] = timezone.now) -> None:
        self.category_id = category_id
        self.clock = clock

    async def reserve(self, model: str, tokens: int) -> object:
        return await sync_to_async(services.reserve)(self.category_id, tokens, self.clock())

    async def settle(self, reservation: object, model: str, usage: UsagePart | None, cost_eur: float) -> None:
        assert isinstance(reservation, Reservation)
        spent = usage.prompt_tokens + usage.completion_tokens if usage is not None else 0
        await sync_to_async(services.settle)(reservation, spent, cost_eur, self.clock())


def ledger_for(organisation_id: int, category_slug: str) -> CategoryLedger | None:
    """The ledger of a run's category; a run with no category (an organisation without any) has none."""
    if not category_slug:
        return None
    category = Category.objects.filter(organisation_id=organisation_id, slug=category_slug).first()
    return CategoryLedger(category.pk) if category is not None else None


class CategoryAccounting:
    """The runs' accounting (``runs.accounting``): a request is admitted against its category's budget, and
    its run's calls are charged to that category."""

    def admit(self, org: Organisation, category: str, text: str, model: str) -> str:
        admitted = services.admit(org, category, text, model)
        return admitted.slug if admitted is not None else ""

    def ledger(self, organisation_id: int, category: str) -> CategoryLedger | None:
        return ledger_for(organisation_id, category)
