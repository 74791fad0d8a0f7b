from __future__ import annotations

import pytest
from django.core.management import call_command


@pytest.fixture
def demo_data(db: None) -> None:
    """The demo organisation, user and knowledge bases, as `make run` loads them."""
    call_command("load_demo", verbosity=0)


@pytest.fixture
def fast_demo(settings: object) -> None:
    """The demo model at full speed."""
    settings.DEMO_PACE = 0.0  # type: ignore[attr-defined]
    settings.DEMO_LATENCY = 0.0  # type: ignore[attr-defined]
