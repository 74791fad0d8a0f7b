"""Following a run as the API does (``runs.follow``): in order, nothing twice, gaps filled from the database, the end
of the run noticed even when its last message is lost; its messages handed over in the publisher's call where every
run executes in this process (``runs.local``), through the channel layer's group otherwise."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.contrib.auth import get_user_model

from assistant.orgs.models import Organisation
from assistant.runs import follow, groups, local
from assistant.runs.follow import RunFollower
from assistant.runs.groups import run_group
from assistant.runs.messages import RunEvent
from assistant.runs.models import Conversation, Run, Step
from tests.database_thread import statements_of_the_database_thread
from tests.shared_layer import use_shared_layer

pytestmark = pytest.mark.django_db(transaction=True)

ROUND: dict[str, Any] = {"kind": "round_started", "agent_id": None, "round": 1, "model": "demo-large", "forced": False}
RESULT: dict[str, Any] = {"kind": "tool_result", "agent_id": None, "call_id": "c1", "name": "kb_search", "ok": True}
STARTED: dict[str, Any] = {"kind": "agent_started", "agent_id": "agent-1", "instruction": "Look", "model": "demo-small"}


def _run() -> Run:
    org = Organisation.objects.create(name="Org", slug="org")
    user = get_user_model().objects.create(username="u")
    conversation = Conversation.objects.create(organisation=org, user=user, title="t")
    return Run.objects.create(conversation=conversation, organisation=org, user=user, model="demo-large")


async def _collect(follower: RunFollower, into: list[Any]) -> None:
    async for item in follower.items():
        into.append(item if isinstance(item, str) else (item.seq, item.kind))


async def test_a_gap_is_filled_from_the_database_and_nothing_comes_twice() -> None:
    run = await sync_to_async(_run)()
    layer = get_channel_layer()
    assert layer is not None
    follower = await RunFollower(run.pk).open()
    items: list[Any] = []
    task = asyncio.ensure_future(_collect(follower, items))

    async def publish(seq: int, event: dict[str, Any], offset: int | None = None) -> None:
        message: RunEvent = {"type": "run.event", "run": run.pk.hex, "seq": seq, "event": event, "t": 0.0}
        if offset is not None:
            message["offset"] = offset
        await groups.publish(run.pk, message)
        await asyncio.sleep(0.02)  # the follower's turn, as between a run's events

    # Steps 1 and 2 and the first words reached the database, but their messages were lost.
    await Step.objects.abulk_create(
        [Step(run=run, seq=1, kind="round_started", data=ROUND), Step(run=run, seq=2, kind="tool_result", data=RESULT)]
    )
    await Run.objects.filter(pk=run.pk).aupdate(answer="Hello ")
    await publish(2, {"kind": "text_delta", "agent_id": None, "text": "Hello "}, offset=0)
    await publish(2, RESULT)  # a repeat
    await publish(3, STARTED)
    await publish(3, {"kind": "text_delta", "agent_id": None, "text": "lo world"}, offset=3)
    await Run.objects.filter(pk=run.pk).aupdate(status="ok", answer="Hello world")
    await groups.publish(run.pk, {"type": "run.finished", "run": run.pk.hex, "status": "ok"})
    await asyncio.wait_for(task, 60)  # a guard against hanging, not a measure
    await follower.close()
    assert items == [(1, "round_started"), (2, "tool_result"), "Hello ", (3, "agent_started"), "world"]


async def test_the_end_is_noticed_when_its_message_is_lost(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(follow, "QUIET_SECONDS", 0.05)
    run = await sync_to_async(_run)()
    follower = await RunFollower(run.pk).open()
    items: list[Any] = []
    task = asyncio.ensure_future(_collect(follower, items))
    await Step.objects.acreate(run=run, seq=1, kind="round_started", data=ROUND)
    await Run.objects.filter(pk=run.pk).aupdate(status="stopped", answer="Partial")
    await asyncio.wait_for(task, 60)  # a guard against hanging, not a measure
    await follower.close()
    assert items == [(1, "round_started"), "Partial"]


async def test_waiting_for_the_end_only_ends_with_the_run_and_reads_none_of_its_events(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The API's response not streamed: ``finished`` returns at the run's ``run.finished``, or when the database says
    it ended after a silence; the events published meanwhile are not applied (nothing is read of them)."""
    monkeypatch.setattr(follow, "QUIET_SECONDS", 0.05)
    layer = get_channel_layer()
    assert layer is not None
    run = await sync_to_async(_run)()
    follower = await RunFollower(run.pk).open()
    waiting = asyncio.ensure_future(follower.finished())
    await groups.publish(run.pk, {"type": "run.event", "run": run.pk.hex, "seq": 1, "event": ROUND, "t": 0.0})
    await asyncio.sleep(0.2)  # several silences while the run goes on: still waiting
    assert not waiting.done() and follower.seq == 0
    await groups.publish(run.pk, {"type": "run.finished", "run": run.pk.hex, "status": "ok"})
    await asyncio.wait_for(waiting, 60)  # a guard against hanging, not a measure
    await follower.close()

    lost = await RunFollower(run.pk).open()  # the run has ended, its last message lost: the database says so
    await Run.objects.filter(pk=run.pk).aupdate(status="ok")
    await asyncio.wait_for(lost.finished(), 60)  # a guard against hanging, not a measure
    await lost.close()


async def test_a_follower_of_the_end_only_is_not_sent_the_events_and_hears_the_end() -> None:
    """``open(events=False)``: the run's events are not even delivered to its channel; ``announce_finished`` ends it."""
    run = await sync_to_async(_run)()
    follower = await RunFollower(run.pk).open(events=False)
    for seq in range(1, 4):
        await groups.publish(run.pk, {"type": "run.event", "run": run.pk.hex, "seq": seq, "event": ROUND, "t": 0.0})
    assert follower._heard is not None and follower._heard.empty()  # nothing was handed over
    waiting = asyncio.ensure_future(follower.finished())
    await asyncio.sleep(0.05)
    assert not waiting.done()
    await groups.announce_finished(run.pk, "ok")
    await asyncio.wait_for(waiting, 60)  # a guard against hanging, not a measure
    await follower.close()


async def test_in_this_process_a_message_is_handed_over_in_the_publishers_call() -> None:
    """With the in-memory channel layer every run executes here: a follower hears a message before ``publish``
    returns (no turn of the event loop), and nothing of it goes through the layer, nor to a follower that closed."""
    assert local.in_process()
    run = await sync_to_async(_run)()
    follower = await RunFollower(run.pk).open()
    other = await RunFollower(run.pk).open()
    await other.close()
    message: RunEvent = {"type": "run.event", "run": run.pk.hex, "seq": 1, "event": ROUND, "t": 0.0}
    await groups.publish(run.pk, message)
    assert follower._heard is not None and follower._heard.qsize() == 1
    assert follower._channel == ""  # no channel of the layer
    assert other._heard is None
    await groups.publish(run.pk, {"type": "run.finished", "run": run.pk.hex, "status": "ok"})
    await Run.objects.filter(pk=run.pk).aupdate(status="ok")
    items: list[Any] = []
    await asyncio.wait_for(_collect(follower, items), 60)  # a guard against hanging, not a measure
    await follower.close()
    assert items == [(1, "round_started")]
    assert run.pk.hex not in local._listeners  # every listener gone


async def test_with_a_shared_layer_a_follower_hears_the_group(settings: Any) -> None:
    """Where runs may execute in another process (a shared layer), a follower joins the run's group."""
    use_shared_layer(settings)
    assert not local.in_process()
    layer = get_channel_layer()
    assert layer is not None
    run = await sync_to_async(_run)()
    follower = await RunFollower(run.pk).open()
    assert follower._heard is None and follower._channel
    items: list[Any] = []
    task = asyncio.ensure_future(_collect(follower, items))
    await layer.group_send(
        run_group(run.pk), {"type": "run.event", "run": run.pk.hex, "seq": 1, "event": ROUND, "t": 0.0}
    )
    await Run.objects.filter(pk=run.pk).aupdate(status="ok")
    await layer.group_send(run_group(run.pk), {"type": "run.finished", "run": run.pk.hex, "status": "ok"})
    await asyncio.wait_for(task, 60)  # a guard against hanging, not a measure
    await follower.close()
    assert items == [(1, "round_started")]


@pytest.mark.parametrize("heard_all", [True, False])
async def test_an_end_that_says_what_the_run_saved_spares_the_read_of_what_was_heard(
    heard_all: bool,
) -> None:
    """The recorder's end names its last step and its answer's length: a follower that heard them all reads nothing
    back; one that missed a step (a message lost) reads it from the database."""
    run = await sync_to_async(_run)()
    async with statements_of_the_database_thread() as sent:  # what the follower asks the database, at its boundary
        follower = await RunFollower(run.pk).open()
        await _follow_to_the_end(follower, run, heard_all)
    since = f'"{Step._meta.db_table}"."seq" >'  # a read of the steps after those heard
    reads = [q["sql"] for q in sent.captured_queries if q["sql"].startswith("SELECT") and since in q["sql"]]
    assert len(reads) == (0 if heard_all else 1), reads
    if reads:
        assert f"{since} 1" in reads[0]  # after the last step heard


async def _follow_to_the_end(follower: RunFollower, run: Run, heard_all: bool) -> None:
    items: list[Any] = []
    task = asyncio.ensure_future(_collect(follower, items))
    await Step.objects.abulk_create(
        [Step(run=run, seq=1, kind="round_started", data=ROUND), Step(run=run, seq=2, kind="tool_result", data=RESULT)]
    )
    await Run.objects.filter(pk=run.pk).aupdate(answer="Hi", status="ok")
    await groups.publish(run.pk, {"type": "run.event", "run": run.pk.hex, "seq": 1, "event": ROUND, "t": 0.0})
    if heard_all:  # else the last step's message and the text's were lost
        await groups.publish(run.pk, {"type": "run.event", "run": run.pk.hex, "seq": 2, "event": RESULT, "t": 0.0})
        text = {"kind": "text_delta", "agent_id": None, "text": "Hi"}
        await groups.publish(
            run.pk, {"type": "run.event", "run": run.pk.hex, "seq": 2, "event": text, "t": 0.0, "offset": 0}
        )
    await groups.announce_finished(run.pk, "ok", seq=2, answer_length=2)
    await asyncio.wait_for(task, 60)  # a guard against hanging, not a measure
    await follower.close()
    assert items == [(1, "round_started"), (2, "tool_result"), "Hi"]
