"""The settings forms hold their limits under concurrent posts: profile names unique in any case, one row per
level. SQLite: threads in a child process on a file copy of the database; PostgreSQL (``postgres``): in process."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.db import connection

from assistant.orgs.models import AgentProfile, ReasoningLevel
from tests.contend_forms import post_at_once, rows_of, run_on_sqlite_file
from tests.orgs.orgs_support import World, levels_post


def profile(name: str) -> dict[str, Any]:
    return {"name": name, "instructions": "Check every figure twice.", "default_model": "demo-small", "tools": ["kb"]}


NAMES = ["Verifier", "verifier", "VERIFIER", "Verifier", "veRifier", "verifier"]


@pytest.fixture
def sqlite_only() -> None:
    if connection.vendor != "sqlite":
        pytest.skip("the PostgreSQL run has its own versions below")


def test_concurrent_profiles_named_alike_leave_one(aworld: World, tmp_path: Path, sqlite_only: None) -> None:
    statuses, db = run_on_sqlite_file(tmp_path, "demo", "/settings/profiles/new", [profile(n) for n in NAMES])
    assert sorted(statuses) == [302] + [422] * (len(NAMES) - 1), statuses
    names = [r[0] for r in rows_of(db, f"SELECT name FROM orgs_agentprofile WHERE organisation_id = {aworld.demo.pk}")]
    assert sum(1 for n in names if n.lower() == "verifier") == 1


def test_concurrent_first_saves_of_the_levels_leave_one_row_each(
    aworld: World, tmp_path: Path, sqlite_only: None
) -> None:
    ReasoningLevel.objects.filter(organisation=aworld.demo).delete()
    posts = [levels_post(approfondi__agent_rounds=n) for n in (2, 3, 4, 6)]
    statuses, db = run_on_sqlite_file(tmp_path, "demo", "/settings/levels", posts)
    assert statuses == [302] * 4, statuses
    rows = rows_of(db, f"SELECT level FROM orgs_reasoninglevel WHERE organisation_id = {aworld.demo.pk}")
    assert sorted(r[0] for r in rows) == ["approfondi", "maximal", "rapide", "standard"]


@pytest.mark.postgres
def test_concurrent_profiles_named_alike_leave_one_on_postgresql(aworld: World) -> None:
    statuses = post_at_once("demo", "/settings/profiles/new", [profile(n) for n in NAMES])
    assert sorted(statuses) == [302] + [422] * (len(NAMES) - 1), statuses
    assert AgentProfile.objects.filter(organisation=aworld.demo, name__iexact="verifier").count() == 1


@pytest.mark.postgres
def test_concurrent_first_saves_of_the_levels_leave_one_row_each_on_postgresql(aworld: World) -> None:
    ReasoningLevel.objects.filter(organisation=aworld.demo).delete()
    statuses = post_at_once("demo", "/settings/levels", [levels_post(approfondi__agent_rounds=n) for n in (2, 3, 4)])
    assert statuses == [302] * 3, statuses
    assert ReasoningLevel.objects.filter(organisation=aworld.demo).count() == 4
