"""The settings page says whether run_code is offered and, when a sandbox layer is missing, which one."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from typing import Any

import pytest

from assistant.engine import sandbox_probe
from assistant.knowledge.tools import available_resources
from tests.orgs.orgs_support import World, signed_in

pytestmark = pytest.mark.django_db


@pytest.fixture
def no_bwrap(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """This host as it would be without bubblewrap: the probe (``detect``) really runs, only ``which bwrap`` fails;
    what it found before and after is forgotten (it probes once per process)."""
    real_which = shutil.which
    monkeypatch.setattr(shutil, "which", lambda name, **kw: None if name == "bwrap" else real_which(name, **kw))
    sandbox_probe.detect.cache_clear()
    yield
    sandbox_probe.detect.cache_clear()


def test_the_page_lists_the_layers_when_run_code_is_offered(world: World, settings: Any) -> None:
    settings.RUN_CODE_ENABLED = True
    found = sandbox_probe.detect()
    if found is None or not found.complete:
        pytest.skip("run_code is not offered on this machine")
    html = signed_in("demo").get("/settings/").content.decode()
    assert "Python code (run_code)" in html and "bubblewrap: new user, mount" in html and "seccomp" in html
    assert "Missing:" not in html


def test_without_bubblewrap_run_code_is_withheld_and_the_page_says_why(
    world: World, settings: Any, no_bwrap: None
) -> None:
    settings.RUN_CODE_ENABLED = True
    assert available_resources()["code"] is False
    html = signed_in("demo").get("/settings/").content.decode()
    assert "run_code is not offered" in html
    assert "Missing: bubblewrap (bwrap) is not installed" in html


def test_the_page_says_when_run_code_is_disabled(world: World, settings: Any) -> None:
    settings.RUN_CODE_ENABLED = False
    html = signed_in("demo").get("/settings/").content.decode()
    assert "run_code is disabled on this server" in html
