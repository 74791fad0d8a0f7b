"""Runs executed by Celery workers: live over the websocket, Stop (the agents' hanging calls aborted), scheduled
tasks and their cost cap, a worker killed mid-run, a worker told to shut down mid-run. The web side is this process
(the real ASGI app, the Redis channel layer)."""

from __future__ import annotations

import asyncio
import itertools
import re
import signal
from decimal import Decimal
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django_celery_beat.models import IntervalSchedule, PeriodicTask
from openai.types.chat import ChatCompletionMessageFunctionToolCall
from pytest_django import Settings

from assistant.budgets.models import Reservation
from assistant.engine.causes import Cause
from assistant.engine.events import ToolResultEvent
from assistant.engine.usage import RunUsage
from assistant.orgs.models import Organisation
from assistant.runs import execution, leases
from assistant.runs.models import Message, Run
from assistant.schedules import services as schedules
from assistant.schedules.models import Execution, ScheduledTask
from tests.asgi_app import asgi_transport
from tests.chat.chat_support import ASK, Page, signed_in
from tests.scale.conftest import Process, Processes, executor_pid, new_conversation
from tests.waiting import until

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True), pytest.mark.timeout(180)]


def _kinds(run: Run) -> list[str]:
    return sorted(run.steps.values_list("kind", flat=True))


async def test_a_delegating_run_on_a_worker_is_seen_live_as_in_the_embedded_default(
    workers: list[Process], page: Page, settings: Settings
) -> None:
    client, conversation = page.client, page.conversation
    # A page left quiet for longer than Redis' default read timeout (5 s with redis-py 8) keeps its socket.
    assert await page.communicator.receive_nothing(timeout=6.5)
    response = await client.post(f"/c/{conversation.pk}/send", ASK, headers={"HX-Request": "true"})
    assert response.status_code == 200
    run = await Run.objects.aget(conversation=conversation)
    frames = await page.until_finished(run)
    await page.close()
    await run.arefresh_from_db()
    assert run.status == "ok"
    # Executed by one of the worker processes, not by this one.
    assert await sync_to_async(executor_pid)(run) in {w.pid for w in workers}
    # The page saw what it sees embedded: the new turn, the agents at work, the answer streaming, the end.
    assert f'id="turn-{run.pk}"' in frames[0]
    joined = "".join(frames[:-1])
    assert 'Delegated to an agent (demo-small): "<span class="instruction">Find in your knowledge base what' in joined
    assert "(working…)" in joined and "An agent is working; waiting for its answer to continue" in joined
    assert "Searched “" in joined and "” in Invoices: " in joined
    assert len(re.findall(rf'id="run-{run.pk}-answer"', joined)) > 1  # the answer arrived in several pushes
    assert "returned in 3 rounds" in frames[-1] and "Cost: " in frames[-1]

    # The same request executed embedded (in this process) saves the same steps and the same answer.
    settings.RUNS_EXECUTOR, settings.DEMO_PACE, settings.DEMO_LATENCY = "embedded", 0.002, 0.3
    await client.post(f"/c/{conversation.pk}/send", ASK)
    embedded = await Run.objects.filter(conversation=conversation).alatest("created")
    await execution.wait_for(embedded.pk)
    await embedded.arefresh_from_db()
    assert embedded.status == "ok" and embedded.answer == run.answer
    assert await sync_to_async(_kinds)(embedded) == await sync_to_async(_kinds)(run)
    assert await sync_to_async(executor_pid)(embedded) not in {w.pid for w in workers}


async def test_any_worker_takes_any_run_and_each_runs_several_at_once(workers: list[Process], demo: None) -> None:
    client, _ = await signed_in()
    conversations = [await new_conversation() for _ in range(4)]
    for conversation in conversations:
        await client.post(f"/c/{conversation.pk}/send", ASK)
    ids = [r.pk async for r in Run.objects.filter(conversation__in=conversations)]

    async def all_ended() -> bool:
        return not await Run.objects.filter(pk__in=ids, status="running").aexists()

    await until(all_ended, "every run's end")
    finished = [r async for r in Run.objects.filter(pk__in=ids).select_related("lease")]
    assert {r.status for r in finished} == {"ok"}
    executors = {r.lease.executor for r in finished}
    assert {int(e.rsplit(":", 1)[1]) for e in executors} == {w.pid for w in workers}  # both workers took runs
    # Four runs on two workers of two: a worker with two or more ran two at once (one's claim came before another's
    # end, by the times the database saved), whatever the machine's speed.
    for executor in executors:
        ends = [(r.lease.claimed, r.finished) for r in finished if r.lease.executor == executor]
        mine = sorted((claimed, end) for claimed, end in ends if end is not None)
        assert len(mine) == len(ends)  # every run has ended
        if len(mine) >= 2:
            assert any(later[0] < earlier[1] for earlier, later in itertools.pairwise(mine)), mine


@pytest.mark.parametrize("path", ["broadcast", "button"])
async def test_stop_during_a_delegation_reaches_the_worker(workers: list[Process], page: Page, path: str) -> None:
    await page.client.post(f"/c/{page.conversation.pk}/send", ASK)
    run = await Run.objects.aget(conversation=page.conversation)
    await page.frames_until("(working…)")
    if path == "button":  # the flag and the broadcast, as the page's Stop does
        response = await page.client.post(f"/runs/{run.pk}/stop", headers={"HX-Request": "true"})
        assert "Stopping…" in response.content.decode()
    else:  # the broadcast alone, no flag: the worker hears it at once
        await leases.broadcast_stop(run.pk)
    frames = await page.until_finished(run)
    await page.close()
    await run.arefresh_from_db()
    assert run.status == "stopped" and run.stop_requested == (path == "button")
    final = frames[-1]
    assert final.count('data-status="stopped"') == 3  # the run and its two agents
    assert "stopped on request" in final
    assert "I am handing the search" in final  # the partial answer is kept


async def _until_the_agents_second_calls_hang(run: Run, agents: int) -> None:
    """Each agent has searched and its second call has started: reserved on the run's category, and not settled."""
    second = run.steps.filter(kind="round_started", data__round=2, data__agent_id__isnull=False)

    async def hanging() -> bool:
        return (
            await run.steps.filter(kind="agent_action").acount() >= agents
            and await second.acount() == agents
            and await Reservation.objects.filter(run=run).acount() == agents
        )

    await until(hanging, "each agent's second call to hang", 60)


async def test_the_broadcast_stop_aborts_the_agents_hanging_calls_on_the_worker(
    workers: list[Process], page: Page
) -> None:
    """``#demo-hang=600``: each agent's calls after its search hang ten minutes. The broadcast alone (no flag)
    reaches the worker, which aborts them: the run ends, each call billed as cut, each agent with its findings."""
    await page.client.post(f"/c/{page.conversation.pk}/send", {**ASK, "text": ASK["text"] + " #demo-hang=600"})
    run = await Run.objects.aget(conversation=page.conversation)
    assert run.category
    await _until_the_agents_second_calls_hang(run, 2)
    await leases.broadcast_stop(run.pk)
    frames = await page.until_finished(run)
    await page.close()
    await run.arefresh_from_db()
    assert run.status == "stopped" and not run.stop_requested
    assert await sync_to_async(executor_pid)(run) in {w.pid for w in workers}
    agents = [s.data async for s in run.steps.filter(kind="agent_finished")]
    assert len(agents) == 2
    for agent in agents:
        assert agent["status"] == "stopped" and agent["reason"] == "stopped on request"
        assert "Searched" in agent["report"]
        usage = RunUsage.of(agent["usage"])
        assert usage.calls == 2 and usage.tokens_estimated == 1 and usage.failed_calls == 0
    assert RunUsage.of(run.usage).tokens_estimated == 2
    assert not await run.steps.filter(kind="model_call_failed").aexists()
    assert not await Reservation.objects.filter(run=run).aexists()
    assert frames[-1].count('data-status="stopped"') == 3 and "stopped on request" in frames[-1]


async def test_stop_this_agent_reaches_the_worker_and_stops_that_agent_alone(
    workers: list[Process], page: Page
) -> None:
    """*Stop this agent* on a run a worker executes (``#demo-hang=1``: each agent's calls after its search wait a
    second): the page's post reaches the worker through the run's stop broadcast, which stops that agent alone, its
    call in flight aborted; its sibling and the run go on."""
    await page.client.post(f"/c/{page.conversation.pk}/send", {**ASK, "text": ASK["text"] + " #demo-hang=1"})
    run = await Run.objects.aget(conversation=page.conversation)
    await _until_the_agents_second_calls_hang(run, 2)
    response = await page.client.post(f"/runs/{run.pk}/agents/agent-1/stop", headers={"HX-Request": "true"})
    assert "Stopping this agent…" in response.content.decode()
    frames = await page.until_finished(run)
    await page.close()
    await run.arefresh_from_db()
    assert run.status == "ok" and not run.stop_requested  # the run went on
    assert await sync_to_async(executor_pid)(run) in {w.pid for w in workers}
    ends = {s.agent_id: s.data async for s in run.steps.filter(kind="agent_finished")}
    assert ends["agent-1"]["status"] == "stopped"
    cause = {k: v for k, v in ends["agent-1"]["cause"].items() if v is not None}
    assert cause == {"code": "stopped_by_user", "agent_id": "agent-1"}
    assert "Searched" in ends["agent-1"]["report"]
    usage = RunUsage.of(ends["agent-1"]["usage"])
    assert usage.calls == 2 and usage.tokens_estimated == 1  # its call in flight aborted, billed as cut
    assert ends["agent-2"]["status"] != "stopped"
    assert "this agent was stopped on request" in frames[-1]


async def test_the_broadcast_stop_interrupts_a_slow_query_on_the_worker(workers: list[Process], demo: None) -> None:
    """``#demo-slow=query``: the main model's first round runs a query over a cross join (minutes of work). The
    broadcast reaches the worker, which interrupts it: the run ends stopped, its step saying the run's cause."""
    client, _session = await signed_in()
    conversation = await new_conversation()
    ask = {**ASK, "text": ASK["text"] + " #demo-slow=query", "resources": ["kb:factures"]}
    await client.post(f"/c/{conversation.pk}/send", ask)
    run = await Run.objects.aget(conversation=conversation)
    await until(lambda: run.steps.filter(kind="tool_call").aexists(), "the query to start", 60)
    await leases.broadcast_stop(run.pk)
    await until(lambda: Run.objects.filter(pk=run.pk).exclude(status="running").aexists(), "the run to end", 60)
    await run.arefresh_from_db()
    assert run.status == "stopped" and await sync_to_async(executor_pid)(run) in {w.pid for w in workers}
    [result] = [s.event async for s in run.steps.filter(kind="tool_result")]
    assert isinstance(result, ToolResultEvent) and result.name == "data_query" and result.action is not None
    assert result.action.stopped == Cause(code="run_stopped", because=Cause(code="stopped_by_user"))
    assert not await Reservation.objects.filter(run=run).aexists()


async def test_a_scheduled_task_fired_by_beat_is_stopped_by_its_cost_cap(
    workers: list[Process], processes: Processes, demo: None
) -> None:
    user = await get_user_model().objects.aget(username="demo")
    org = await Organisation.objects.aget(slug="demo")
    task = ScheduledTask(
        organisation=org,
        owner=user,
        name="Bimbamjob watch",
        prompt=ASK["text"],
        model="demo-large",
        level="approfondi",
        resources=ASK["resources"],
        # The main model's first call costs about 0.0032 EUR (its tools describe the bases' tables and chosen
        # documents), the agents' first calls (their searches) about 0.0002 and 0.00013, their second ones about
        # 0.0003 and 0.0002: crossed mid-delegation by the first of the agents' second calls, both having searched.
        # The crossing stops the run at once (the other agent's call then in flight is aborted).
        cost_cap_eur=Decimal("0.0037"),
        schedule="0 7 * * 1-5",
    )
    await sync_to_async(schedules.save_task)(task)
    entry = await PeriodicTask.objects.select_related("crontab").aget(pk=task.periodic_task_id)
    assert (entry.task, entry.args, entry.crontab.hour, str(entry.crontab.timezone)) == (
        "schedules.execute",
        f"[{task.pk}]",
        "7",
        "Europe/Paris",
    )
    # Beat fires it from the database in a second rather than at 7:00: the same entry, once.
    every_second, _ = await IntervalSchedule.objects.aget_or_create(every=1, period=IntervalSchedule.SECONDS)
    entry.crontab, entry.interval, entry.one_off = None, every_second, True
    await entry.asave()
    beat = await asyncio.to_thread(processes.beat)
    try:

        async def executed() -> bool:
            execution = await Execution.objects.filter(task=task).select_related("run").afirst()
            return execution is not None and execution.run is not None and execution.run.status != "running"

        await until(executed, "the task's execution by beat", 90)
    finally:
        await asyncio.to_thread(beat.stop)
    execution = await Execution.objects.select_related("run", "run__conversation").aget(task=task)
    run = execution.run
    assert run is not None
    assert run.status == "stopped", run.error
    assert run.conversation.user_id == user.pk and run.conversation.title.startswith("Bimbamjob watch — ")
    assert run.cost_eur >= 0.0037
    steps = [s async for s in run.steps.all()]
    assert [s.data["message"] for s in steps if s.kind == "stopped"] == ["stopped: the task's cost cap is reached"]
    agents = [s.data for s in steps if s.kind == "agent_finished"]
    assert len(agents) == 2 and {a["status"] for a in agents} == {"stopped"}
    # Each came back with what it had (an agent whose search was not launched before the crossing has nothing but
    # the reason: Stop launches no further tool).
    assert all("the task's cost cap is reached" in a["report"] for a in agents), agents
    # The owner sees it in the conversation as any stopped run, with the cap as the reason.
    client, _ = await signed_in()
    page = (await client.get(f"/c/{run.conversation_id}/")).content.decode()
    assert "Stopped: the task&#x27;s cost cap is reached." in page or "Stopped: the task's cost cap is reached." in page
    listing = (await client.get("/tasks/")).content.decode()
    assert "Bimbamjob watch" in listing and "stopped" in listing


async def test_a_worker_killed_mid_run_fails_the_run_soon_and_keeps_what_it_saved(
    workers: list[Process], page: Page
) -> None:
    await page.client.post(f"/c/{page.conversation.pk}/send", ASK)
    run = await Run.objects.aget(conversation=page.conversation)

    async def delegating() -> bool:
        return await run.steps.filter(kind="agent_action").aexists()

    await until(delegating, "the agents' delegation")
    executor = await sync_to_async(executor_pid)(run)
    victim = next(w for w in workers if w.pid == executor)
    await asyncio.to_thread(victim.kill)  # SIGKILL: no goodbye, no cleanup
    # Its process is gone (kill waits for it); a commit it had already sent may still land, hence the sleep.
    await asyncio.sleep(0.2)
    saved = {pk async for pk in run.steps.values_list("pk", flat=True)}
    # The other worker's reaper ends it once the lease (2 s) has expired.
    frames = await page.until_finished(run)
    await page.close()
    await run.arefresh_from_db()
    # The other worker saw the lease expire (2 s) and failed the run: bounded, never "running" forever.
    assert run.status == "error" and run.error == leases.DIED.english()
    # Everything saved up to the kill is kept, and the reaper's error step (its cause) follows it.
    steps = [(pk, kind) async for pk, kind in run.steps.order_by("seq").values_list("pk", "kind")]
    assert {pk for pk, _ in steps[:-1]} == saved
    assert steps[-1][1] == "error" and steps[-1][0] not in saved
    assert run.cost_eur > 0  # what its saved calls cost
    final = frames[-1]
    assert "The assistant could not finish this answer; what it had written is kept." in final
    assert "stopped unexpectedly" in final
    assert "(working…)" not in final and "the run ended before this agent returned" in final
    if run.answer.strip():
        assert await Message.objects.filter(run=run, role="assistant").aexists()


async def test_a_worker_told_to_shut_down_mid_run_stops_its_run_and_exits(workers: list[Process], demo: None) -> None:
    """SIGTERM (a deployment restarting its workers) while the agents' calls hang: Celery's warm shutdown waits for
    its tasks, so the worker stops its runs as Stop does; the run ends with what it had, and the worker exits."""
    client, _ = await signed_in()
    conversation = await new_conversation()
    await client.post(f"/c/{conversation.pk}/send", {**ASK, "text": ASK["text"] + " #demo-hang=600"})
    run = await Run.objects.aget(conversation=conversation)
    await _until_the_agents_second_calls_hang(run, 2)
    executor = await sync_to_async(executor_pid)(run)
    worker = next(w for w in workers if w.pid == executor)
    worker.popen.send_signal(signal.SIGTERM)
    # A guard, not a measure: without stopping its runs the worker would wait for the hanging calls (600 s).
    code = await asyncio.to_thread(worker.popen.wait, 60)
    assert code == 0, worker.output()[-3000:]
    assert "run(s) stopped" in worker.output()
    await run.arefresh_from_db()
    assert run.status == "stopped", run.error
    [stopped] = [s.data async for s in run.steps.filter(kind="stopped")]
    assert stopped["message"] == "stopped: the server executing it was shut down"
    assert stopped["cause"]["code"] == "server_shutdown"
    agents = [s.data async for s in run.steps.filter(kind="agent_finished")]
    assert len(agents) == 2 and {a["status"] for a in agents} == {"stopped"}
    assert all("Searched" in a["report"] for a in agents)
    assert RunUsage.of(run.usage).tokens_estimated == 2  # the aborted calls, billed as cut
    assert not await Reservation.objects.filter(run=run).aexists()
    page = (await client.get(f"/c/{conversation.pk}/")).content.decode()
    assert "the server executing it was shut down" in page


async def test_a_client_tool_loop_through_the_api_runs_on_the_workers(workers: list[Process], demo: None) -> None:
    """An API client's tools on Celery workers: the turn that ends on the client's call, then its follow-up, whose
    messages and tools a worker reads back from the run (``Run.prompt``, ``Run.client_tools``)."""
    import httpx2
    import openai

    from assistant.orgs import keys

    org = await Organisation.objects.aget(slug="demo")
    secret = (await sync_to_async(keys.create_key)(org, "scale"))[1]
    reminder: Any = {
        "type": "function",
        "function": {
            "name": "send_reminder",
            "parameters": {"type": "object", "properties": {"invoice": {"type": "string"}}, "required": ["invoice"]},
        },
    }
    question: Any = [{"role": "user", "content": "Remind Bimbamjob of its unpaid invoices."}]
    extensions = {"tools_enabled": ["kb:factures"]}
    http = httpx2.AsyncClient(transport=asgi_transport(), base_url="http://testserver", timeout=90)
    async with openai.AsyncOpenAI(base_url="http://testserver/v1", api_key=secret, http_client=http) as client:
        first = await client.chat.completions.create(
            model="demo-large",
            messages=question,
            tools=[reminder],
            tool_choice={"type": "function", "function": {"name": "send_reminder"}},
            extra_body=extensions,
        )
        message = first.choices[0].message
        assert first.choices[0].finish_reason == "tool_calls"
        [call] = message.tool_calls or []
        assert isinstance(call, ChatCompletionMessageFunctionToolCall) and call.function.name == "send_reminder"
        answered = [
            *question,
            {"role": "assistant", "content": message.content, "tool_calls": [call.model_dump(mode="json")]},
            {"role": "tool", "tool_call_id": call.id, "content": '{"sent": true}'},
        ]
        done = await client.chat.completions.create(
            model="demo-large", messages=answered, tools=[reminder], extra_body=extensions
        )
    assert done.choices[0].finish_reason == "stop" and done.choices[0].message.content
    runs = [await Run.objects.aget(pk=(c.model_extra or {})["run_id"]) for c in (first, done)]
    pids = {w.pid for w in workers}
    executors = [await sync_to_async(executor_pid)(r) for r in runs]
    assert set(executors) <= pids  # each executed by a worker
    kept = runs[1].prompt
    assert [m["role"] for m in kept] == ["user", "assistant", "tool"]
    assert kept[1]["tool_calls"][0]["name"] == "send_reminder" and kept[2]["content"] == '{"sent": true}'
