"""The demo organisation (admin ``demo``, member ``mia``, the seed's three categories, Europe/Paris) and
another organisation (admin ``mallory``) with a category of its own, so that a slip in a filter shows.
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime

from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db import connection
from django.test import Client

from assistant.budgets import reservations, state
from assistant.budgets.models import Category, CategoryMonth
from assistant.budgets.months import month_of, zone
from assistant.engine.errors import BudgetExceeded
from assistant.orgs.models import Membership, Organisation
from assistant.runs import intake
from assistant.runs.start import RunStart
from tests.chat.chat_support import ComposerPost

# What the budget tests post from the composer: a plain question (no category: the organisation's default) and a
# synthesis charged to the category ``syntheses``.
QUESTION: ComposerPost = {
    "text": "What does contract C-2024-002 cover?",
    "model": "demo-large",
    "level": "rapide",
    "resources": [],
}
SYNTHESIS: ComposerPost = {
    "text": "Bimbamjob: invoices 2024, payments and relationship",
    "model": "demo-large",
    "level": "approfondi",
    "resources": ["kb:factures", "kb:comptes-rendus", "agents"],
    "category": "syntheses",
}

Admissions = Callable[[intake.Ask, type[Exception]], Awaitable[tuple[list[RunStart], list[Exception]]]]
"""``twenty_admissions`` (conftest): twenty runs of an ask, one after the other; those created, those refused."""


@dataclass
class World:
    demo: Organisation
    other: Organisation
    admin: User
    member: User
    mallory: User
    catalogue: Category
    syntheses: Category
    administration: Category
    other_category: Category


def _user(name: str, email: str = "") -> User:
    return get_user_model().objects.create_user(name, email=email, password=f"{name}-password")


def build_world() -> World:
    call_command("load_demo", verbosity=0)
    demo = Organisation.objects.get(slug="demo")
    member = _user("mia", "mia@example.com")
    Membership.objects.create(organisation=demo, user=member, role="member")
    other = Organisation.objects.create(name="Other Company", slug="other", time_zone="America/New_York")
    mallory = _user("mallory", "mallory@example.com")
    Membership.objects.create(organisation=other, user=mallory, role="admin")
    other_category = Category.objects.create(
        organisation=other, slug="obsidian", name="Obsidian research", monthly_tokens=1_000_000, is_default=True
    )
    cats = {c.slug: c for c in Category.objects.filter(organisation=demo)}
    return World(
        demo,
        other,
        get_user_model().objects.get(username="demo"),
        member,
        mallory,
        cats["catalogue"],
        cats["syntheses"],
        cats["administration"],
        other_category,
    )


def signed_in(username: str) -> Client:
    client = Client()
    assert client.login(username=username, password="demo-password" if username == "demo" else f"{username}-password")
    return client


def this_month(category: Category, now: datetime | None = None) -> CategoryMonth:
    """The category's counters for the month of ``now`` (created when missing)."""
    from django.utils import timezone

    tz = zone(category.organisation.time_zone)
    return state.month_row(category, month_of(now or timezone.now(), tz))


def use(category: Category, tokens: int, cost_eur: float = 0.0, now: datetime | None = None) -> None:
    """Charge ``tokens`` to the category as one call would (reserve, then settle the same amount)."""
    reservations.settle(reservations.reserve(category.pk, tokens, now), tokens, cost_eur, now)


@dataclass
class Attempt:
    reserved: bool
    seen_after: int = 0
    """used + reserved right after this reservation (what an overshoot would show)."""


def hammer(category_id: int, workers: int, tokens: int, spend: Callable[[int], int]) -> list[Attempt]:
    """``workers`` threads, each with its own database connection, reserve ``tokens`` at the same instant,
    then settle ``spend(i)`` tokens."""
    barrier = threading.Barrier(workers)
    attempts: list[Attempt | None] = [None] * workers
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            barrier.wait(timeout=30)
            try:
                reservation = reservations.reserve(category_id, tokens)
            except BudgetExceeded:
                attempts[i] = Attempt(False)
                return
            row = CategoryMonth.objects.get(pk=reservation.month_id)
            attempts[i] = Attempt(True, row.used + row.reserved)
            reservations.settle(reservation, spend(i), 0.001)
        except BaseException as e:  # surfaced in the test, not lost in a thread
            errors.append(e)
        finally:
            connection.close()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors, errors
    return [a for a in attempts if a is not None]
