"""Fixtures of the knowledge tests (the PostgreSQL hooks are in tests/conftest.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pytest_django import Settings


@pytest.fixture
def media(settings: Settings, tmp_path: Path) -> Path:
    """Uploaded files go to a fresh directory, so a test can check that nothing was left behind."""
    root = tmp_path / "media"
    root.mkdir()
    settings.MEDIA_ROOT = root
    return root
