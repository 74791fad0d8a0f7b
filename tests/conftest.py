"""Fixtures and hooks for the whole suite.

PostgreSQL tests (marker ``postgres``) run in ``make test``'s PostgreSQL pytest runs, with
DATABASE_URL. A run on SQLite deselects them and says so at the end; a run on PostgreSQL that cannot
reach the server fails. Nothing is skipped silently.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from django.conf import settings
from django.core.management import call_command

_deselected: list[pytest.Item] = []


def on_postgresql() -> bool:
    return "postgresql" in str(settings.DATABASES["default"]["ENGINE"])


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if on_postgresql():
        return
    pg = [i for i in items if i.get_closest_marker("postgres") is not None]
    if pg:
        _deselected.extend(pg)
        config.hook.pytest_deselected(items=pg)
        items[:] = [i for i in items if i.get_closest_marker("postgres") is None]


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _deselected:
        terminalreporter.write_line(
            f"{len(_deselected)} PostgreSQL tests deselected: this run uses SQLite. `make test` runs them with "
            "DATABASE_URL=postgres://postgres@127.0.0.1:5432/test (and Redis and Celery workers for tests/scale).",
            yellow=True,
        )


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix: None) -> None:
    # Developers share one PostgreSQL: each pytest process gets its own test database.
    if on_postgresql():
        db = settings.DATABASES["default"]
        db.setdefault("TEST", {})["NAME"] = f"test_{db['NAME']}_{os.getpid()}"


@pytest.fixture
def demo_data(db: None) -> None:
    """The demo organisation, user and knowledge bases, as `make run` loads them."""
    call_command("load_demo", verbosity=0)


@pytest.fixture
def fast_demo(settings: object) -> None:
    """The demo model at full speed."""
    settings.DEMO_PACE = 0.0  # type: ignore[attr-defined]
    settings.DEMO_LATENCY = 0.0  # type: ignore[attr-defined]
