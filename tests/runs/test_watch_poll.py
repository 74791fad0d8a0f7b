"""The stop flags and leases of the runs a process executes are read and renewed together (``leases._Poller``): one
query each ``STOP_POLL_SECONDS`` however many runs, and Stop from the flag still reaches the run it is for."""

from __future__ import annotations

from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from pytest_django import Settings

from assistant.engine.cancel import CancelToken
from assistant.engine.causes import Cause
from assistant.orgs.models import Organisation
from assistant.runs import intake, leases
from assistant.runs.models import Lease, Run
from tests.database_thread import statements_of_the_database_thread
from tests.waiting import until

pytestmark = pytest.mark.django_db(transaction=True)

ASK = intake.Ask(text="Bimbamjob?", model="demo-small", level="rapide", resources=(), category="administration")


def _claimed_runs(count: int) -> list[Run]:
    user = get_user_model().objects.get(username="demo")
    org = Organisation.objects.get(slug="demo")
    runs = [intake.create_run(user, org, None, ASK).run for _ in range(count)]
    for run in runs:
        assert leases.claim_read(run.pk) is False
    return runs


def _flag_reads(sent: CaptureQueriesContext, runs: list[Run]) -> list[str]:
    """The reads of the runs' flags among the statements sent: each names the runs it reads."""
    return [
        q["sql"]
        for q in sent.captured_queries
        if q["sql"].startswith("SELECT") and "stop_requested" in q["sql"] and any(_named(r, q["sql"]) for r in runs)
    ]


def _named(run: Run, sql: str) -> bool:
    return run.pk.hex in sql or str(run.pk) in sql


async def test_the_flag_of_every_watched_run_is_read_in_one_query_and_stops_only_its_run(
    demo_data: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(leases, "STOP_POLL_SECONDS", 0.05)
    runs = await sync_to_async(_claimed_runs)(5)
    tokens = [CancelToken() for _ in runs]
    watches = [leases.Watch(run.pk, token) for run, token in zip(runs, tokens, strict=True)]
    async with statements_of_the_database_thread() as sent:
        for watch in watches:
            await watch.start(flag_read=True)
        try:
            await until(lambda: len(_flag_reads(sent, runs)) >= 3, "three polls of the flags")
            # Each poll is one statement for the five runs (one a run would name one run each time).
            polls = _flag_reads(sent, runs)
            assert all(all(_named(run, sql) for run in runs) for sql in polls), polls
            assert not any(token.cancelled for token in tokens)

            await Run.objects.filter(pk=runs[2].pk).aupdate(stop_requested=True)  # Stop with no broadcast heard
            await until(lambda: tokens[2].cancelled, "the flag's stop")
            assert tokens[2].cause == Cause(code="stopped_by_user")
            await Run.objects.filter(pk=runs[4].pk).aupdate(status="failed")  # failed meanwhile by a reaper
            await until(lambda: tokens[4].cancelled, "the stop of a run failed meanwhile")
            assert [token.cancelled for token in tokens] == [False, False, True, False, True]
        finally:
            for watch in watches:
                await watch.close()
    poller = leases._Poller.of_this_loop()
    assert not poller.watches and poller.task is None  # the last watch's close ended the poll


async def test_the_leases_of_the_watched_runs_are_renewed_together(
    demo_data: None, monkeypatch: pytest.MonkeyPatch, settings: Settings
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

        await until(renewed, "the leases renewed")
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
