"""In the chat, a delegation that can cost more than the organisation's cap is asked of the user before its agents
launch: the run pauses, the page shows the estimate with "Launch the agents" / "Answer without them" (also after a
reload), the answer reaches the run, no answer in time answers without them, Stop works while it waits. Only the
run's own user answers, and only the question it asks now."""

from __future__ import annotations

import html
import re
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model

from assistant.engine.events import AgentStarted, DelegationEstimated
from assistant.orgs.models import Membership, Organisation
from assistant.runs import execution
from assistant.runs.models import Run
from assistant.runs.steps import events_of
from tests.chat.chat_support import ASK, Page, signed_in
from tests.waiting import until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fresh_channel_layer")]

QUESTION_KEY = re.compile(r'name="question" value="([0-9a-f]{32})"')


def _decisions(run: Run) -> list[str]:
    return [e.decision for e in events_of(run.steps.all()) if isinstance(e, DelegationEstimated)]


async def _decided(run: Run, decisions: list[str]) -> bool:
    return await sync_to_async(_decisions)(run) == decisions


def _agents(run: Run) -> int:
    return sum(isinstance(e, AgentStarted) for e in events_of(run.steps.all()))


async def _asked(page: Page, settings: Any, cap: float | None = 0.0001) -> tuple[Run, str, str]:
    """A run of the demo's delegating question on the page, its organisation capped under what it costs, followed
    until the page shows the question; the question's key and the frames so far."""
    settings.DEMO_PACE, settings.DEMO_LATENCY = 0.0, 0.05
    await Organisation.objects.filter(slug="demo").aupdate(delegation_confirm_eur=cap)
    await page.client.post(f"/c/{page.conversation.pk}/send", ASK)
    run = await Run.objects.aget(conversation=page.conversation)
    if cap is None:
        return run, "", ""
    frames = await page.frames_until("Launch the agents")
    keys = QUESTION_KEY.findall(frames)
    assert keys, "the question has its key"
    return run, keys[-1], frames


async def _finish(page: Page, run: Run) -> Run:
    await page.close()
    await execution.wait_for(run.pk)
    await run.arefresh_from_db()
    return run


async def test_the_question_shows_with_its_figures_survives_a_reload_and_launching_launches(
    settings: Any, demo_page: Page
) -> None:
    settings.DELEGATION_CONFIRM_SECONDS = 15
    client = demo_page.client
    run, key, frames = await _asked(demo_page, settings)
    try:
        shown = html.unescape(frames)
        assert "The assistant wants to launch 2 agents." in shown
        assert "more than 0.0001 €, the most your organisation lets a delegation cost without asking" in shown
        assert "Answer without them" in shown
        # The run waits: no agent started, and a reload shows the question with its buttons.
        assert await sync_to_async(_agents)(run) == 0
        # The question's step written (the page heard it as it was published).
        await until(lambda: _decided(run, ["asking"]), "the question's step to be written")
        page = html.unescape((await client.get(f"/c/{run.conversation_id}/")).content.decode())
        assert "Launch the agents" in page and f'value="{key}"' in page

        response = await client.post(
            f"/c/{run.conversation_id}/runs/{run.pk}/delegation",
            {"question": key, "launch": "1"},
            headers={"HX-Request": "true"},
        )
        assert response.status_code == 204
    finally:
        run = await _finish(demo_page, run)
    assert run.status == "ok"
    assert await sync_to_async(_decisions)(run) == ["asking", "launched"]
    assert await sync_to_async(_agents)(run) == 2


async def test_answering_without_them_answers_without_agents(settings: Any, demo_page: Page) -> None:
    client = demo_page.client
    run, key, _ = await _asked(demo_page, settings)
    try:
        await client.post(f"/c/{run.conversation_id}/runs/{run.pk}/delegation", {"question": key, "launch": "0"})
        frames = await demo_page.frames_until("answered without it")
    finally:
        run = await _finish(demo_page, run)
    assert "Delegation not launched: it could cost up to" in html.unescape(frames)
    assert run.status == "ok" and run.answer
    assert await sync_to_async(_decisions)(run) == ["asking", "declined"]
    assert await sync_to_async(_agents)(run) == 0
    page = html.unescape((await client.get(f"/c/{run.conversation_id}/")).content.decode())
    assert "answered without it" in page and "Launch the agents" not in page


async def test_no_answer_in_time_answers_without_them(settings: Any, demo_page: Page) -> None:
    settings.DELEGATION_CONFIRM_SECONDS = 0.5
    run, _key, _ = await _asked(demo_page, settings)
    try:
        await demo_page.frames_until("no answer came in time")
    finally:
        run = await _finish(demo_page, run)
    assert run.status == "ok"
    assert await sync_to_async(_decisions)(run) == ["asking", "unanswered"]
    assert await sync_to_async(_agents)(run) == 0


async def test_stop_works_while_the_run_waits_for_the_answer(settings: Any, demo_page: Page) -> None:
    client = demo_page.client
    run, key, _ = await _asked(demo_page, settings)
    try:
        await client.post(f"/runs/{run.pk}/stop", headers={"HX-Request": "true"})
        await execution.wait_for(run.pk)
    finally:
        run = await _finish(demo_page, run)
    assert run.status == "stopped"
    assert await sync_to_async(_decisions)(run) == ["asking", "stopped"]
    # Too late to answer: nothing happens.
    late = await client.post(f"/c/{run.conversation_id}/runs/{run.pk}/delegation", {"question": key, "launch": "1"})
    assert late.status_code == 302
    assert await sync_to_async(_agents)(run) == 0


async def test_only_the_run_s_user_answers_and_only_the_question_asked_now(settings: Any, demo_page: Page) -> None:
    client = demo_page.client
    run, key, _ = await _asked(demo_page, settings)
    try:
        org = await Organisation.objects.aget(slug="demo")
        intruder = await sync_to_async(get_user_model().objects.create_user)("mia2", password="mia2-password")
        await Membership.objects.acreate(organisation=org, user=intruder)
        other, _ = await signed_in("mia2", "mia2-password")
        url = f"/c/{run.conversation_id}/runs/{run.pk}/delegation"
        assert (await other.post(url, {"question": key, "launch": "1"})).status_code == 404
        assert (await client.post(url, {"question": key, "launch": "maybe"})).status_code == 400
        assert (await client.post(url, {"question": "<script>", "launch": "1"})).status_code == 400
        # Another key: not the question the run asks. Said to launch, the run does not: it still waits, and takes the
        # answer to its own question (without them) when it comes.
        await client.post(url, {"question": "0" * 32, "launch": "1"}, headers={"HX-Request": "true"})
        assert (await client.get(url)).status_code == 405  # an answer is a POST
        await client.post(url, {"question": key, "launch": "0"})
        await demo_page.frames_until("answered without it")
    finally:
        run = await _finish(demo_page, run)
    assert await sync_to_async(_decisions)(run) == ["asking", "declined"]


async def test_without_a_cap_nothing_is_asked(settings: Any, demo_page: Page) -> None:
    run, _key, _ = await _asked(demo_page, settings, cap=None)
    run = await _finish(demo_page, run)
    assert run.status == "ok"
    assert await sync_to_async(_decisions)(run) == ["launched"]
    assert await sync_to_async(_agents)(run) == 2
