"""*Stop this agent*: the page's button stops one working agent, alone, for the conversation's owner only; its line
says so live, its sibling and the run go on. (The engine's side: tests/engine/test_stop_one_agent.py; on Celery
workers: tests/scale/test_workers.py.)

The demo's ``#demo-hang=1`` makes each agent's calls after its first round wait a second: the stop comes while a
call is in flight.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db.models import QuerySet
from django.test import Client

from assistant.orgs.models import Membership, Organisation
from assistant.runs import execution
from assistant.runs.models import Conversation, Run, Step
from tests.chat.chat_support import ASK, Page
from tests.waiting import until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fresh_channel_layer")]

HANGING = {**ASK, "text": ASK["text"] + " #demo-hang=1"}


async def _until_both_agents_wait_on_their_second_call(run: Run) -> None:
    second = Step.objects.filter(run=run, kind="round_started", data__round=2, data__agent_id__isnull=False)
    await until(lambda: _at_least(second, 2), "both agents to wait on their second call")


async def _at_least(steps: QuerySet[Step], n: int) -> bool:
    return await steps.acount() >= n


async def test_stop_this_agent_stops_it_alone_and_its_line_says_so(settings: Any, demo_page: Page) -> None:
    settings.DEMO_PACE, settings.DEMO_LATENCY = 0.0, 0.0
    client, conversation = demo_page.client, demo_page.conversation
    await client.post(f"/c/{conversation.pk}/send", HANGING)
    run = await Run.objects.aget(conversation=conversation)
    await _until_both_agents_wait_on_their_second_call(run)
    page = (await client.get(f"/c/{conversation.pk}/")).content.decode()
    stop_url = f"/runs/{run.pk}/agents/agent-1/stop"
    assert page.count('class="link stop-agent"') == 2 and f'hx-post="{stop_url}"' in page
    response = await client.post(stop_url, headers={"HX-Request": "true"})
    assert response.status_code == 200 and "Stopping this agent…" in response.content.decode()
    frames = await demo_page.until_finished(run)
    await demo_page.close()
    await execution.wait_for(run.pk)

    await run.arefresh_from_db()
    assert run.status == "ok"  # the run went on
    ends = {s.agent_id: s.data async for s in Step.objects.filter(run=run, kind="agent_finished")}
    assert ends["agent-1"]["status"] == "stopped"
    cause = {k: v for k, v in ends["agent-1"]["cause"].items() if v is not None}
    assert cause == {"code": "stopped_by_user", "agent_id": "agent-1"}
    assert "Searched" in ends["agent-1"]["report"]  # what it had found is kept
    assert ends["agent-2"]["status"] != "stopped"  # its sibling went on
    final = frames[-1]
    line = re.search(rf'<div class="delegation status-stopped" id="agent-{run.pk}-agent-1".*?</details>', final, re.S)
    assert line is not None and "this agent was stopped on request" in line.group(0)
    assert "stop-agent" not in final  # no button once the agents have ended
    # Stopping it again: it has ended, and stays as it is.
    again = await client.post(stop_url)
    assert again.status_code == 302


def test_only_the_owner_can_stop_an_agent_and_only_an_agent_the_run_started(demo_data: None) -> None:
    demo = get_user_model().objects.get(username="demo")
    org = Organisation.objects.get(slug="demo")
    conversation = Conversation.objects.create(organisation=org, user=demo, title="secret")
    run = Run.objects.create(conversation=conversation, organisation=org, user=demo, model="demo-large")
    Step.objects.create(run=run, seq=1, kind="agent_started", agent_id="agent-1", data={})
    url = f"/runs/{run.pk}/agents/agent-1/stop"

    colleague = get_user_model().objects.create_user("colleague", password="colleague-password")
    Membership.objects.create(organisation=org, user=colleague)
    other_org = Organisation.objects.create(name="Other", slug="other")
    mallory = get_user_model().objects.create_user("mallory", password="mallory-password")
    Membership.objects.create(organisation=other_org, user=mallory)
    for username in ("colleague", "mallory"):
        client = Client()
        assert client.login(username=username, password=f"{username}-password")
        assert client.post(url).status_code == 404

    owner = Client(enforce_csrf_checks=True)
    assert owner.login(username="demo", password="demo-password")
    assert owner.post(url).status_code == 403  # no CSRF token
    owner = Client()
    assert owner.login(username="demo", password="demo-password")
    assert owner.post(f"/runs/{run.pk}/agents/agent-9/stop").status_code == 404  # no such agent in this run
    assert owner.get(url).status_code == 405
    assert owner.post(url).status_code == 302  # its own, running: stopped (nothing executes it here)
