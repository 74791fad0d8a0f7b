"""Category limits hold under concurrent posts: at most 4 categories per organisation, names unique in any case.

SQLite: threads in a child process on a file copy of the database (as the server runs it); PostgreSQL
(``postgres`` marker, run by ``make test``): threads in this process on the test database.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.db import connection

from assistant.budgets.models import MAX_CATEGORIES, Category
from tests.budgets.budgets_support import World, signed_in
from tests.contend_forms import post_at_once, rows_of, run_on_sqlite_file

NEW = "/settings/budgets/categories/new"


def new_posts(names: list[str]) -> list[dict[str, Any]]:
    return [
        {"new-name": name, "new-slug": f"cat-{i}", "new-monthly_tokens": "1000", "new-alert_thresholds": "80, 100"}
        for i, name in enumerate(names)
    ]


def categories_on(db: Path, org_id: int) -> list[str]:
    return [r[0] for r in rows_of(db, f"SELECT name FROM budgets_category WHERE organisation_id = {org_id}")]


@pytest.fixture
def sqlite_only() -> None:
    if connection.vendor != "sqlite":
        pytest.skip("the PostgreSQL run has its own versions below")


def test_eight_concurrent_new_categories_leave_four(tworld: World, tmp_path: Path, sqlite_only: None) -> None:
    assert Category.objects.filter(organisation=tworld.demo).count() == 3
    statuses, db = run_on_sqlite_file(tmp_path, "demo", NEW, new_posts([f"Research {i}" for i in range(8)]))
    assert sorted(statuses) == [302] + [422] * 7, statuses  # one created, seven refused: never a 500
    assert len(categories_on(db, tworld.demo.pk)) == MAX_CATEGORIES


def test_concurrent_names_differing_in_case_leave_one(tworld: World, tmp_path: Path, sqlite_only: None) -> None:
    Category.objects.filter(pk=tworld.administration.pk).delete()
    names = ["Research", "RESEARCH", "research", "Research ", "ReSeArCh", "research"]
    statuses, db = run_on_sqlite_file(tmp_path, "demo", NEW, new_posts(names))
    assert sorted(statuses) == [302] + [422] * 5, statuses
    assert sum(1 for n in categories_on(db, tworld.demo.pk) if n.lower() == "research") == 1


@pytest.mark.postgres
def test_eight_concurrent_new_categories_leave_four_on_postgresql(tworld: World) -> None:
    statuses = post_at_once("demo", NEW, new_posts([f"Research {i}" for i in range(8)]))
    assert sorted(statuses) == [302] + [422] * 7, statuses
    assert Category.objects.filter(organisation=tworld.demo).count() == MAX_CATEGORIES


@pytest.mark.postgres
def test_concurrent_names_differing_in_case_leave_one_on_postgresql(tworld: World) -> None:
    Category.objects.filter(pk=tworld.administration.pk).delete()
    statuses = post_at_once("demo", NEW, new_posts(["Research", "RESEARCH", "research", "ReSeArCh"]))
    assert sorted(statuses) == [302] + [422] * 3, statuses
    assert Category.objects.filter(organisation=tworld.demo, name__iexact="research").count() == 1


def test_the_database_refuses_a_name_that_differs_only_in_case(world: World) -> None:
    from django.db import IntegrityError, transaction

    with pytest.raises(IntegrityError), transaction.atomic():
        Category.objects.create(
            organisation=world.demo, slug="other-slug", name=world.catalogue.name.upper(), monthly_tokens=5
        )
    # Another organisation may use the same name.
    Category.objects.create(organisation=world.other, slug="x", name=world.catalogue.name, monthly_tokens=5)


def test_saving_two_categories_with_the_same_name_is_refused(world: World) -> None:
    client = signed_in("demo")
    cats = [world.catalogue, world.syntheses, world.administration]
    data: dict[str, Any] = {"default": str(world.catalogue.pk)}
    for c in cats:
        data |= {
            f"c{c.pk}-name": "Same" if c != world.administration else "SAME",
            f"c{c.pk}-monthly_tokens": "1 000 000",
            f"c{c.pk}-alert_thresholds": "80, 100",
        }
    response = client.post("/settings/budgets/categories", data)
    assert response.status_code == 422
    assert "same name" in response.content.decode() or "already has this name" in response.content.decode()
    assert {c.name for c in Category.objects.filter(organisation=world.demo)} == {c.name for c in cats}
