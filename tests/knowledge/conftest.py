"""Fixtures of the knowledge tests (the PostgreSQL hooks are in tests/conftest.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pytest_django import Settings

from assistant.engine.sandbox import Isolation
from assistant.engine.sandbox_probe import detect


@pytest.fixture
def media(settings: Settings, tmp_path: Path) -> Path:
    """Uploaded files go to a fresh directory, so a test can check that nothing was left behind."""
    root = tmp_path / "media"
    root.mkdir()
    settings.MEDIA_ROOT = root
    return root


@pytest.fixture(scope="module")
def isolation() -> Isolation:
    """The sandbox's layers on this machine; the test is skipped where run_code is not offered."""
    found = detect()
    if found is None or not found.complete:
        pytest.skip(f"run_code is not offered on this machine: {found.missing if found else 'not Linux'}")
    return found
