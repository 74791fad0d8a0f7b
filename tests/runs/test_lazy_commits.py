"""``lazy_atomic``: a run's per-call transactions commit without waiting for the disk on PostgreSQL, and only those."""

from __future__ import annotations

import pytest
from django.db import connection, transaction

from assistant.runs.commits import lazy_atomic


def _setting() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SHOW synchronous_commit")
        (value,) = cursor.fetchone()
    return str(value)


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_lazy_transaction_does_not_wait_for_the_disk_and_the_next_one_does() -> None:
    assert _setting() == "on"
    with lazy_atomic():
        assert _setting() == "off"
    assert _setting() == "on"  # SET LOCAL: it ended with its transaction
    with transaction.atomic():
        assert _setting() == "on"


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_inside_another_transaction_it_is_a_savepoint_that_leaves_the_commit_as_it_was() -> None:
    with transaction.atomic():
        with lazy_atomic():
            assert _setting() == "on"
        assert _setting() == "on"


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_lazy_transaction_is_still_atomic() -> None:
    from assistant.orgs.models import Organisation

    with pytest.raises(RuntimeError), lazy_atomic():
        Organisation.objects.create(name="Gone", slug="gone")
        raise RuntimeError("rolled back")
    assert not Organisation.objects.filter(slug="gone").exists()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_connections_come_from_a_pool() -> None:
    """Each request's thread borrows a connection rather than connecting anew (settings: ``pool``)."""
    assert connection.settings_dict["CONN_MAX_AGE"] == 0
    assert connection.pool is not None  # type: ignore[attr-defined]  # Django 5.1's pool: not in django-stubs yet
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    assert connection.pool.get_stats()["pool_size"] >= 1  # type: ignore[attr-defined]  # Django 5.1's pool: not in django-stubs yet
