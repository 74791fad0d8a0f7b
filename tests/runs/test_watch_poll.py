"""The stop flags and leases of the runs a process executes are read and renewed together (``leases._Poller``): one
query each ``STOP_POLL_SECONDS`` however many runs, and Stop from the flag still reaches the run it is for."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from assistant.engine.cancel import CancelToken
from assistant.engine.causes import Cause
from assistant.orgs.models import Organisation
from assistant.runs import intake, leases
from assistant.runs.models import Lease, Run

pytestmark = pytest.mark.django_db(transaction=True)

ASK = intake.Ask(text="Bimbamjob?", model="demo-small", level="rapide", resources=(), category="administration")


def _claimed_runs(count: int) -> list[Run]:
    user = get_user_model().objects.get(username="demo")
    org = Organisation.objects.get(slug="demo")
    runs = [intake.create_run(user, org, None, ASK).run for _ in range(count)]  # type: ignore[arg-type]
    for run in runs:
        assert leases.claim_read(run.pk) is False
    return runs


def _counting_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Each read of the flags (the real one) and how many runs it was for."""
    reads: list[int] = []
    real = leases._flags

    def counted(run_ids: list[Any], **kwargs: Any) -> dict[Any, tuple[str, bool]]:
        with CaptureQueriesContext(connection) as sent:
            flags = real(run_ids, **kwargs)
        assert len(sent) == 1 + kwargs.get("renew", False)  # one query for all of them (and one renewal)
        reads.append(len(run_ids))
        return flags

    monkeypatch.setattr(leases, "_flags", counted)
    return reads


async def _until(condition: Any, seconds: float = 10.0) -> None:
    """A guard against hanging, not a measure; ``condition`` may be a coroutine function (a read of the database)."""
    deadline = asyncio.get_running_loop().time() + seconds
    while not (await condition() if asyncio.iscoroutinefunction(condition) else condition()):
        assert asyncio.get_running_loop().time() < deadline
        await asyncio.sleep(0.02)


async def test_the_flag_of_every_watched_run_is_read_in_one_query_and_stops_only_its_run(
    demo_data: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(leases, "STOP_POLL_SECONDS", 0.05)
    reads = _counting_reads(monkeypatch)
    runs = await sync_to_async(_claimed_runs)(5)
    tokens = [CancelToken() for _ in runs]
    watches = [leases.Watch(run.pk, token) for run, token in zip(runs, tokens, strict=True)]
    for watch in watches:
        await watch.start(flag_read=True)
    try:
        await _until(lambda: len(reads) >= 3, seconds=10)
        # Each poll is one query for the five runs (one query a run would read one run each time).
        assert set(reads) == {5}, reads
        assert not any(token.cancelled for token in tokens)

        await Run.objects.filter(pk=runs[2].pk).aupdate(stop_requested=True)  # Stop with no broadcast heard
        await _until(lambda: tokens[2].cancelled)
        assert tokens[2].cause == Cause(code="stopped_by_user")
        await Run.objects.filter(pk=runs[4].pk).aupdate(status="failed")  # failed meanwhile by a reaper
        await _until(lambda: tokens[4].cancelled)
        assert [token.cancelled for token in tokens] == [False, False, True, False, True]
    finally:
        for watch in watches:
            await watch.close()
    poller = leases._Poller.of_this_loop()
    assert not poller.watches and poller.task is None  # the last watch's close ended the poll


async def test_the_leases_of_the_watched_runs_are_renewed_together(
    demo_data: None, monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    monkeypatch.setattr(leases, "STOP_POLL_SECONDS", 0.05)
    settings.RUNS_HEARTBEAT_SECONDS = 0.1
    runs = await sync_to_async(_claimed_runs)(3)
    old = timezone.now() - timedelta(seconds=60)
    await Lease.objects.filter(run_id__in=[r.pk for r in runs]).aupdate(heartbeat=old)
    watches = [leases.Watch(run.pk, CancelToken()) for run in runs]
    for watch in watches:
        await watch.start(flag_read=True)
    try:

        async def renewed() -> bool:
            return await Lease.objects.filter(run_id__in=[r.pk for r in runs], heartbeat__gt=old).acount() == 3

        await _until(renewed)
    finally:
        for watch in watches:
            await watch.close()


async def test_a_watch_that_reads_the_flag_itself_hears_a_stop_sent_before_it_started(demo_data: None) -> None:
    (run,) = await sync_to_async(_claimed_runs)(1)
    await Run.objects.filter(pk=run.pk).aupdate(stop_requested=True)
    token = CancelToken()
    watch = leases.Watch(run.pk, token)
    await watch.start()  # the flag is read as it starts, not at the next poll
    try:
        assert token.cancelled
    finally:
        await watch.close()
