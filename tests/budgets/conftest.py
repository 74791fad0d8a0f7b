"""PostgreSQL tests here (marker ``postgres``) run in ``make test``'s second pytest run, with DATABASE_URL.

On SQLite they are deselected, and the run says so at the end; nothing is skipped silently.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from budgets_support import World, build_world
from django.conf import settings

_HERE = Path(__file__).parent
_deselected: list[pytest.Item] = []


def _on_postgresql() -> bool:
    return "postgresql" in str(settings.DATABASES["default"]["ENGINE"])


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _on_postgresql():
        return
    pg = [i for i in items if i.get_closest_marker("postgres") is not None and _HERE in Path(str(i.path)).parents]
    if pg:
        _deselected.extend(pg)
        config.hook.pytest_deselected(items=pg)
        items[:] = [i for i in items if i not in pg]


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _deselected:
        terminalreporter.write_line(
            f"{len(_deselected)} PostgreSQL budget tests deselected: this run uses SQLite. "
            "`make test` runs them with DATABASE_URL=postgres://postgres@127.0.0.1:5432/test.",
            yellow=True,
        )


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix: None) -> None:
    # Developers share one PostgreSQL: each run gets its own test database.
    if _on_postgresql():
        db = settings.DATABASES["default"]
        db.setdefault("TEST", {})["NAME"] = f"test_{db['NAME']}_{os.getpid()}"


@pytest.fixture(autouse=True)
def fast_passwords(settings: Any) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def locmem_email(settings: Any) -> None:
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"


@pytest.fixture
def world(db: None) -> World:
    return build_world()


@pytest.fixture
def tworld(transactional_db: None) -> World:
    """The same world, committed: for threads and for runs executing in the event loop."""
    return build_world()
