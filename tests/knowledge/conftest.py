"""PostgreSQL tests (marker ``postgres``) run in ``make test``'s second pytest run, with DATABASE_URL.

A run on SQLite deselects them and says so at the end; a run on PostgreSQL that cannot reach the
server fails (pytest-django cannot create the test database). Nothing is skipped silently.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings

# The engine tests' builders (scripted models, the harness) serve the agent-level tests here too.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "engine"))

_HERE = Path(__file__).resolve().parent
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
            f"{len(_deselected)} PostgreSQL full-text tests deselected: this run uses SQLite. "
            "`make test` runs them with DATABASE_URL=postgres://postgres@127.0.0.1:5432/test.",
            yellow=True,
        )


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix: None) -> None:
    # Developers share one PostgreSQL: each run gets its own test database.
    if _on_postgresql():
        db = settings.DATABASES["default"]
        db.setdefault("TEST", {})["NAME"] = f"test_{db['NAME']}_{os.getpid()}"


@pytest.fixture
def media(settings: Any, tmp_path: Path) -> Path:
    """Uploaded files go to a fresh directory, so a test can check that nothing was left behind."""
    root = tmp_path / "media"
    root.mkdir()
    settings.MEDIA_ROOT = root
    return root
