"""The composer's queue and limit, one run at a time per conversation, edit and regenerate (superseded turns),
the conversation search, export, and sources that open (document pages with the read ranges, downloads)."""

from __future__ import annotations

import json
import uuid
from html import unescape
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db import IntegrityError, transaction
from django.test import AsyncClient, Client
from pytest_django import Settings

from assistant.chat import search
from assistant.chat.models import ConversationText
from assistant.demo.management.commands.load_demo import TABLE_TITLE, TABLE_WORDS
from assistant.demo.model import say
from assistant.demo.model.texts import Language
from assistant.knowledge.models import Document, KnowledgeBase
from assistant.orgs import keys
from assistant.orgs.models import Membership, Organisation
from assistant.runs import execution, intake
from assistant.runs.models import Conversation, Message, Run, Step
from assistant.runs.start import history_of
from tests.chat.chat_support import ASK
from tests.waiting import until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fresh_channel_layer")]


def _user(username: str, org: Organisation) -> Any:
    user = get_user_model().objects.create_user(username, password=f"{username}-password")
    Membership.objects.create(organisation=org, user=user, role="member")
    return user


def _client(username: str = "demo") -> Client:
    client = Client()
    assert client.login(username=username, password=f"{username}-password")
    return client


def _turn(conv: Conversation, text: str, answer: str, status: str = "ok", **run: Any) -> Run:
    r = Run.objects.create(
        conversation=conv,
        organisation=conv.organisation,
        user=conv.user,
        model=run.pop("model", "demo-large"),
        status=status,
        answer=answer,
        **run,
    )
    Message.objects.create(conversation=conv, role="user", content=text, run=r)
    if answer:
        Message.objects.create(conversation=conv, role="assistant", content=answer, run=r)
    return r


def _conv(title: str = "Invoices of March", user: Any = None) -> Conversation:
    user = user or get_user_model().objects.get(username="demo")
    org = Organisation.objects.filter(memberships__user=user).first()
    assert org is not None
    return Conversation.objects.create(organisation=org, user=user, title=title)


async def _client_async() -> AsyncClient:
    client = AsyncClient()
    assert await client.alogin(username="demo", password="demo-password")
    return client


# The composer ----------------------------------------------------------------------------------------------------


def test_the_composer_keeps_the_last_messages_choices(demo_data: None) -> None:
    conv = _conv()
    _turn(conv, "First", "One", level="rapide", resources=["kb:factures"], model="demo-small")
    html = _client().get(f"/c/{conv.pk}/").content.decode()
    assert '<option value="rapide" selected' in html
    assert '<option value="demo-small" selected' in html
    assert 'value="kb:factures" checked' in html
    assert 'value="kb:comptes-rendus" checked' not in html and 'value="agents" checked' not in html


def test_a_message_over_the_limit_is_refused_with_422_and_kept(demo_data: None, settings: Settings) -> None:
    settings.CHAT_MAX_MESSAGE_CHARS = 50
    text = "x" * 51
    response = _client().post("/c/new", {**ASK, "text": text}, headers={"HX-Request": "true"})
    assert response.status_code == 422
    html = response.content.decode()
    assert 'id="composer"' in html and text in html and "at most 50 characters" in html
    assert not Run.objects.exists()
    assert _client().post("/c/new", {**ASK, "text": "x" * 50}).status_code == 302


def test_the_limit_is_said_in_french(demo_data: None, settings: Settings) -> None:
    settings.CHAT_MAX_MESSAGE_CHARS = 10
    client = _client()
    client.cookies["django_language"] = "fr"
    html = client.post("/c/new", {**ASK, "text": "y" * 11}, headers={"HX-Request": "true"}).content.decode()
    assert "au plus 10 caractères" in html


async def test_a_message_sent_during_a_run_is_queued_then_sent_when_it_ends(settings: Settings) -> None:
    settings.DEMO_PACE = 0.0
    settings.DEMO_LATENCY = 0.3
    await sync_to_async(call_command)("load_demo", verbosity=0)
    client = await _client_async()
    await client.post("/c/new", ASK)
    first = await Run.objects.order_by("-created").afirst()
    assert first is not None
    assert first.is_running
    response = await client.post(
        f"/c/{first.conversation_id}/send", {**ASK, "text": "And the late ones?"}, headers={"HX-Request": "true"}
    )
    assert response.status_code == 200
    queued = await Message.objects.aget(content="And the late ones?")
    assert queued.queued and queued.run_id is None
    assert f'id="queued-{queued.pk}"' in response.content.decode()
    assert response["HX-Trigger"] == "sent"  # the page forgets its draft (static/js/chat.js)
    # It survives a reload, shown as queued, and is not a turn yet.
    page = (await client.get(f"/c/{first.conversation_id}/")).content.decode()
    assert f'id="queued-{queued.pk}"' in page and "Queued" in page
    assert await Run.objects.filter(conversation_id=first.conversation_id).acount() == 1
    # The run's end sends it, with the choices it was written with.
    await execution.wait_for(first.pk)
    await until(sync_to_async(lambda: Message.objects.get(pk=queued.pk).run_id is not None), "the queued message's run")
    await queued.arefresh_from_db()
    assert not queued.queued
    second = await Run.objects.aget(pk=queued.run_id)
    assert second.resources == ASK["resources"] and second.level == "approfondi"
    await execution.wait_for(second.pk)
    await second.arefresh_from_db()
    assert second.status == "ok"


@pytest.mark.parametrize("language", ["fr", "en"])
async def test_a_run_carries_the_page_s_language_to_the_demo_and_a_queued_message_keeps_it(
    fast_demo: None, language: Language
) -> None:
    await sync_to_async(call_command)("load_demo", verbosity=0)
    client = await _client_async()
    client.cookies["django_language"] = language
    # A bare name: the demo cannot tell its language, so it writes in the page's.
    await client.post("/c/new", {**ASK, "text": "Bimbamjob", "resources": []})
    run = await Run.objects.order_by("-created").afirst()
    assert run is not None
    assert run.language == language
    await execution.wait_for(run.pk)
    await run.arefresh_from_db()
    assert run.answer.endswith(say("footer", language))
    conversation = await Conversation.objects.aget(pk=run.conversation_id)
    queued = await sync_to_async(intake.enqueue)(
        conversation, intake.Ask(text="Acme", model="demo-large", level=None, resources=(), language=language)
    )
    assert intake.ask_of(queued).language == language


def test_a_queued_message_can_be_removed_by_its_owner_only(demo_data: None) -> None:
    conv = _conv()
    _turn(conv, "Running", "", status="running")
    response = _client().post(f"/c/{conv.pk}/send", {**ASK, "text": "later"}, headers={"HX-Request": "true"})
    assert response.status_code == 200
    queued = Message.objects.get(content="later", queued=True)
    other = _user("other", Organisation.objects.get(slug="demo"))
    assert other and _client("other").post(f"/c/{conv.pk}/queued/{queued.pk}/remove").status_code == 404
    assert Message.objects.filter(pk=queued.pk).exists()
    assert _client().post(f"/c/{conv.pk}/queued/{queued.pk}/remove", headers={"HX-Request": "true"}).status_code == 200
    assert not Message.objects.filter(pk=queued.pk).exists()


def test_two_runs_never_run_at_once_in_one_conversation(demo_data: None) -> None:
    conv = _conv()
    _turn(conv, "Running", "", status="running")
    # The database refuses a second running run (a second tab, a second process).
    with pytest.raises(IntegrityError), transaction.atomic():
        Run.objects.create(conversation=conv, organisation=conv.organisation, user=conv.user, model="demo-large")
    # Intake sees it and says so, and the page's post queues the message instead.
    ask = intake.Ask(text="Again", model="demo-large", level=None, resources=("kb:factures",))
    with pytest.raises(intake.Busy):
        intake.create_run(conv.user, conv.organisation, conv, ask)
    assert isinstance(intake.submit(conv.user, conv.organisation, conv, ask), Message)
    assert Run.objects.filter(conversation=conv, status="running").count() == 1


# Edit and regenerate ---------------------------------------------------------------------------------------------


async def test_regenerate_supersedes_the_last_turn_and_keeps_its_cost(fast_demo: None) -> None:
    await sync_to_async(call_command)("load_demo", verbosity=0)
    client = await _client_async()
    await client.post("/c/new", ASK)
    old = await Run.objects.order_by("-created").afirst()
    assert old is not None
    await execution.wait_for(old.pk)
    await old.arefresh_from_db()
    cost, usage = old.cost_eur, old.usage
    assert cost > 0
    response = await client.post(f"/c/{old.conversation_id}/turns/{old.pk}/regenerate", headers={"HX-Request": "true"})
    assert response.status_code == 200 and response["HX-Redirect"] == f"/c/{old.conversation_id}/"
    new = await Run.objects.order_by("-created").afirst()
    assert new is not None
    assert new.pk != old.pk and (new.model, new.level, new.resources) == (old.model, old.level, old.resources)
    await execution.wait_for(new.pk)
    await old.arefresh_from_db()
    assert old.replaced_by_id == new.pk and old.superseded
    assert (old.cost_eur, old.usage) == (cost, usage)  # its cost stays in the usage figures
    page = (await client.get(f"/c/{old.conversation_id}/")).content.decode()
    assert f'id="turn-{new.pk}"' in page and f'id="turn-{old.pk}"' not in page
    assert "Previous version (1)" in page
    usage_csv = (await client.get("/settings/usage.csv")).content.decode()
    assert str(old.pk) in usage_csv and str(new.pk) in usage_csv


def test_edit_resends_the_last_message_and_the_model_no_longer_reads_the_old_turn(demo_data: None) -> None:
    conv = _conv()
    _turn(conv, "First question", "First answer")
    last = _turn(conv, "Second question, badly put", "An answer to the bad question")
    ask = intake.Ask(text="Second question, well put", model="demo-large", level=None, resources=())
    start = intake.create_run(conv.user, conv.organisation, conv, ask, replaces=last)
    new = start.run
    history = [m.content for m in history_of(new)]
    assert history == ["First question", "First answer", "Second question, well put"]
    assert list(start.request.messages) == list(history_of(new))  # intake's request is the one the database says
    # Edited again: every earlier version points at the latest.
    Run.objects.filter(pk=new.pk).update(status="ok")
    newer = intake.create_run(conv.user, conv.organisation, conv, ask, replaces=new).run
    assert set(Run.objects.filter(replaced_by=newer).values_list("pk", flat=True)) == {last.pk, new.pk}


def test_only_the_last_finished_turn_can_be_edited(demo_data: None) -> None:
    conv = _conv()
    first = _turn(conv, "First", "One")
    last = _turn(conv, "Second", "", status="running")
    client = _client()
    response = client.post(f"/c/{conv.pk}/turns/{first.pk}/edit", {"text": "x"}, headers={"HX-Request": "true"})
    assert response.status_code == 422 and "last turn" in response.content.decode()
    response = client.post(f"/c/{conv.pk}/turns/{last.pk}/regenerate", headers={"HX-Request": "true"})
    assert response.status_code == 422 and "Wait for this answer" in response.content.decode()
    other = _user("other", Organisation.objects.get(slug="demo"))
    assert other and _client("other").post(f"/c/{conv.pk}/turns/{first.pk}/regenerate").status_code == 404
    assert Run.objects.filter(conversation=conv).count() == 2


def test_deleting_a_conversation_erases_every_version(demo_data: None) -> None:
    conv = _conv()
    old = _turn(conv, "Old question", "Old answer")
    Run.objects.filter(pk=old.pk).update(cost_eur=0.5)
    new = _turn(conv, "New question", "New answer")
    Run.objects.filter(pk=old.pk).update(replaced_by=new)
    assert _client().post(f"/c/{conv.pk}/delete").status_code == 302
    assert not Message.objects.filter(conversation=conv).exists()
    assert list(Run.objects.filter(conversation=conv).values_list("answer", flat=True)) == ["", ""]
    assert Run.objects.get(pk=old.pk).cost_eur == 0.5


# Search ----------------------------------------------------------------------------------------------------------


def test_search_finds_titles_and_messages_of_the_owners_conversations_only(demo_data: None) -> None:
    mine = _conv("Quarterly report")
    _turn(mine, "What did Bimbamjob pay?", "Bimbamjob paid the invoice in full.")
    other_user = _user("other", Organisation.objects.get(slug="demo"))
    theirs = _conv("Bimbamjob secrets", user=other_user)
    _turn(theirs, "Bimbamjob again", "Hidden")
    client = _client()
    html = client.get("/c/search", {"q": "bimbam"}, headers={"HX-Request": "true"}).content.decode()
    assert f"/c/{mine.pk}/" in html and f"/c/{theirs.pk}/" not in html and "<mark>" in html
    assert f"/c/{mine.pk}/" in client.get("/c/search", {"q": "quarterly"}).content.decode()
    # Renamed: the new title is found, the old one no more.
    client.post(f"/c/{mine.pk}/rename", {"title": "Zanzibar notes"})
    assert f"/c/{mine.pk}/" in client.get("/c/search", {"q": "zanzibar"}).content.decode()
    assert f"/c/{mine.pk}/" not in client.get("/c/search", {"q": "quarterly"}).content.decode()
    # Deleted: its text leaves the index.
    client.post(f"/c/{mine.pk}/delete")
    assert f"/c/{mine.pk}/" not in client.get("/c/search", {"q": "bimbamjob"}).content.decode()
    assert not ConversationText.objects.filter(conversation=mine).exists()
    assert search.search(mine.organisation_id, mine.user_id, "paid") == []


def test_an_inactive_users_conversations_are_not_indexed_until_it_is_active_again(demo_data: None) -> None:
    """The API's conversations belong to the organisation's service user, never active: nothing to index for it."""
    org = Organisation.objects.get(slug="demo")
    api_conv = Conversation.objects.create(organisation=org, user=keys.api_user(org), title="Bimbamjob, the API")
    _turn(api_conv, "What did Bimbamjob pay?", "Bimbamjob paid the invoice in full.")
    assert not ConversationText.objects.filter(conversation=api_conv).exists()
    member = _user("paused", Organisation.objects.get(slug="demo"))
    conv = _conv("Zanzibar", user=member)
    get_user_model().objects.filter(pk=member.pk).update(is_active=False)
    _turn(conv, "Quarterly figures?", "Up 4%.")
    assert ConversationText.objects.get(conversation=conv).body == ""  # indexed with its title, at creation
    get_user_model().objects.filter(pk=member.pk).update(is_active=True)
    _turn(conv, "And the year?", "Up 9%.")
    body = ConversationText.objects.get(conversation=conv).body
    assert "Quarterly figures?" in body and "Up 9%." in body
    assert search.search(conv.organisation_id, member.pk, "quarterly")[0].conversation_id == conv.pk


def test_search_with_odd_input_answers_without_error(demo_data: None) -> None:
    client = _client()
    for q in ['"', "*", "NEAR(", "\x00", "a" * 500, ""]:
        assert client.get("/c/search", {"q": q}, headers={"HX-Request": "true"}).status_code == 200


# Export ----------------------------------------------------------------------------------------------------------


async def test_export_has_answers_delegations_with_whole_reports_sources_and_cost(fast_demo: None) -> None:
    await sync_to_async(call_command)("load_demo", verbosity=0)
    client = await _client_async()
    await client.post("/c/new", ASK)
    run = await Run.objects.order_by("-created").afirst()
    assert run is not None
    await execution.wait_for(run.pk)
    await run.arefresh_from_db()
    reports = [s.data["report"] async for s in Step.objects.filter(run=run, kind="agent_finished")]
    response = await client.get(f"/c/{run.conversation_id}/export.json")
    assert response.status_code == 200
    assert response["Content-Disposition"].startswith("attachment") and response["X-Content-Type-Options"] == "nosniff"
    data = json.loads(response.content)
    turn = data["turns"][0]
    assert turn["answer"] == run.answer and turn["cost_eur"] == run.cost_eur and turn["sources"] == run.sources
    assert sorted(d["report"] for d in turn["delegations"]) == sorted(reports) and all(reports)  # start vs end order
    md = (await client.get(f"/c/{run.conversation_id}/export.md")).content.decode()
    assert run.answer in md and all(r in md for r in reports) and run.sources[0]["title"] in md
    # A person's export names the bases and words the searches, never the resources' codes.
    assert "kb:" not in md and "Invoices" in md and "Searched “" in md and "factures:" not in md
    assert (await client.get(f"/c/{run.conversation_id}/export.exe")).status_code == 404


# Sources ---------------------------------------------------------------------------------------------------------


def _document_read(conv: Conversation) -> tuple[Document, Run]:
    kb = KnowledgeBase.objects.get(organisation=conv.organisation, slug="factures")
    doc = Document.objects.create(knowledge_base=kb, title="Memo <b>", text="alpha beta gamma delta epsilon")
    run = _turn(conv, "Read it", "Done")
    source = {"id": doc.public_id, "title": doc.title, "kind": "document", "where": "factures"}
    Step.objects.create(
        run=run,
        seq=1,
        kind="tool_result",
        data={"kind": "tool_result", "name": "kb_read", "sources": [{**source, "start": 6, "end": 10}]},
    )
    Step.objects.create(
        run=run,
        seq=2,
        kind="agent_action",
        agent_id="a1",
        data={"kind": "agent_action", "agent_id": "a1", "sources": [{**source, "start": 17, "end": 22}]},
    )
    Run.objects.filter(pk=run.pk).update(sources=[source])
    return doc, run


def test_the_document_page_marks_the_passages_the_run_read(demo_data: None) -> None:
    conv = _conv()
    doc, run = _document_read(conv)
    client = _client()
    page = client.get(f"/c/{conv.pk}/").content.decode()
    assert f'href="/documents/{doc.pk}/?run={run.pk}"' in page
    html = client.get(f"/documents/{doc.pk}/", {"run": str(run.pk)}).content.decode()
    # The passages read marked, the first one the page's anchor (#read).
    assert '<mark class="read" id="read">beta</mark>' in html and '<mark class="read">delta</mark>' in html
    assert f'href="/c/{conv.pk}/#turn-{run.pk}"' in html  # the way back to the answer that opened it
    assert "Memo &lt;b&gt;" in html and "Knowledge base: Invoices" in html
    assert "<mark" not in client.get(f"/documents/{doc.pk}/").content.decode().split("document-text")[1]
    assert client.get(f"/documents/{doc.pk}/", {"run": str(uuid.uuid4())}).status_code == 200
    assert client.get(f"/documents/{doc.pk}/", {"run": "nope"}).status_code == 200


def test_a_long_document_is_shown_a_part_at_a_time_and_whole_as_the_reader_scrolls(demo_data: None) -> None:
    """A text of several parts: the page holds the first, which ends with the request for the next (htmx, on
    scroll), and so on to the end; put together, the parts are the whole text. A passage read across two parts is
    marked in both; one read beyond the first part has a link to the part that holds it."""
    import html as html_module
    import re

    from assistant.chat.sources import PART_CHARS

    conv = _conv()
    kb = KnowledgeBase.objects.get(organisation=conv.organisation, slug="factures")
    words = "".join(f"w{i} <i> " for i in range(100_000))  # about 1.1 million characters, markup included
    doc = Document.objects.create(knowledge_base=kb, title="Large", text=words)
    run = _turn(conv, "Read it", "Done")
    read = [(PART_CHARS - 10, PART_CHARS + 10), (3 * PART_CHARS + 5, 3 * PART_CHARS + 25)]
    sources = [{"id": doc.public_id, "title": "Large", "kind": "document", "start": a, "end": b} for a, b in read]
    Step.objects.create(run=run, seq=1, kind="tool_result", data={"kind": "tool_result", "sources": sources})
    client = _client()

    page = client.get(f"/documents/{doc.pk}/", {"run": str(run.pk)}).content.decode()
    assert len(page) < 2 * PART_CHARS  # one part (its markup escaped), not the whole text
    assert "The 2 passages the answer read are marked." in page
    assert 'href="?from=' not in page  # the first passage read is in this part
    shown, part, at = [], page.split('<div class="document-text card">', 1)[1], 0
    while True:
        more = re.search(r'<span class="document-more" hx-get="([^"]+)" hx-trigger="revealed"', part)
        text = part[: more.start()] if more else part.split("</div>", 1)[0]
        shown.append(text)
        if more is None:
            break
        url = html_module.unescape(more.group(1))
        assert url == f"/documents/{doc.pk}/part?from={at + PART_CHARS}&run={run.pk}"
        at += PART_CHARS
        part = client.get(url).content.decode()
    assert len(shown) == -(-len(words) // PART_CHARS)
    marks = [re.findall(r'<mark class="read"(?: id="read")?>([^<]*)</mark>', t) for t in shown]
    assert marks[0] == [html_module.escape(words[PART_CHARS - 10 : PART_CHARS])]
    assert marks[1] == [html_module.escape(words[PART_CHARS : PART_CHARS + 10])]
    assert marks[3] == [html_module.escape(words[3 * PART_CHARS + 5 : 3 * PART_CHARS + 25])]
    whole = "".join(re.sub(r"</?mark[^>]*>", "", t) for t in shown)
    assert html_module.unescape(whole) == words
    # A run that read beyond the first part only: a link opens the part that holds it, the passage its anchor.
    far = _turn(conv, "Read the end", "Done")
    Step.objects.create(run=far, seq=1, kind="tool_result", data={"kind": "tool_result", "sources": sources[1:]})
    page = client.get(f"/documents/{doc.pk}/", {"run": str(far.pk)}).content.decode()
    assert "The passage the answer read is marked." in page and "<mark" not in page
    link = f"?from={3 * PART_CHARS + 5 - 1_000}&amp;run={far.pk}#read"
    assert f'<a href="{link}">Show it</a>' in page
    jump = client.get(f"/documents/{doc.pk}/{html_module.unescape(link).split('#')[0]}").content.decode()
    assert f'<mark class="read" id="read">{html_module.escape(words[3 * PART_CHARS + 5 : 3 * PART_CHARS + 25])}' in jump
    assert "The document’s beginning" in jump
    for junk in ("abc", "-5", "9" * 40):  # a start that is no character of the text: a page all the same
        assert client.get(f"/documents/{doc.pk}/", {"from": junk}).status_code == 200
        assert client.get(f"/documents/{doc.pk}/part", {"from": junk}).status_code == 200
    # Another member of the organisation sees the parts, not the run's marks; a stranger sees nothing.
    elsewhere = Organisation.objects.create(name="Elsewhere", slug="elsewhere")
    _user("stranger", elsewhere)
    assert _client("stranger").get(f"/documents/{doc.pk}/part", {"from": PART_CHARS}).status_code == 404
    _user("colleague", conv.organisation)
    query: dict[str, str | int] = {"from": PART_CHARS, "run": str(run.pk)}
    theirs = _client("colleague").get(f"/documents/{doc.pk}/part", query)
    assert theirs.status_code == 200 and "<mark" not in theirs.content.decode()


def test_a_document_is_visible_within_its_organisation_only(demo_data: None) -> None:
    conv = _conv()
    doc, run = _document_read(conv)
    elsewhere = Organisation.objects.create(name="Elsewhere", slug="elsewhere")
    _user("stranger", elsewhere)
    stranger = _client("stranger")
    assert stranger.get(f"/documents/{doc.pk}/").status_code == 404
    assert stranger.get(f"/documents/{doc.pk}/download").status_code == 404
    colleague = _user("colleague", conv.organisation)
    assert colleague
    # A colleague sees the document, not which passages another user's run read.
    html = _client("colleague").get(f"/documents/{doc.pk}/", {"run": str(run.pk)}).content.decode()
    assert "alpha beta" in html and '<mark class="read">' not in html


def test_a_download_is_an_attachment_that_cannot_run(demo_data: None, settings: Settings, tmp_path: Any) -> None:
    from django.core.files.base import ContentFile

    settings.MEDIA_ROOT = str(tmp_path)
    kb = KnowledgeBase.objects.get(organisation__slug="demo", slug="factures")
    doc = Document(knowledge_base=kb, title="page", text="hi", filename="evil.html")
    doc.file.save("evil.html", ContentFile(b"<script>alert(1)</script>"), save=True)
    response = _client().get(f"/documents/{doc.pk}/download")
    assert response.status_code == 200 and response.content == b"<script>alert(1)</script>"
    assert response["Content-Disposition"].startswith("attachment") and "evil.html" in response["Content-Disposition"]
    assert response["X-Content-Type-Options"] == "nosniff"
    assert (
        "sandbox" in response["Content-Security-Policy"] and "default-src 'none'" in response["Content-Security-Policy"]
    )
    text_only = Document.objects.create(knowledge_base=kb, title="Plain", text="just text")
    response = _client().get(f"/documents/{text_only.pk}/download")
    assert response.content == b"just text" and response["Content-Disposition"].startswith("attachment")


def test_web_sources_link_out_without_referrer(demo_data: None) -> None:
    conv = _conv()
    run = _turn(conv, "Look it up", "Found")
    Run.objects.filter(pk=run.pk).update(
        sources=[{"id": "https://example.org/a", "title": "Example", "kind": "page", "where": "example.org"}]
    )
    html = _client().get(f"/c/{conv.pk}/").content.decode()
    assert '<a href="https://example.org/a" rel="noopener noreferrer" target="_blank">Example</a>' in html


def test_a_queued_message_reads_the_answer_it_waited_for(demo_data: None) -> None:
    conv = _conv()
    first = _turn(conv, "First question", "", status="running")
    queued = intake.submit(conv.user, conv.organisation, conv, intake.Ask("Then this", "demo-large", None, ()))
    assert isinstance(queued, Message)
    # The first run ends (its answer saved after the queued message), then the queued one is sent.
    Run.objects.filter(pk=first.pk).update(status="ok")
    Message.objects.create(conversation=conv, role="assistant", content="First answer", run=first)
    from assistant.runs import queue

    start = queue.next_queued(conv.pk)
    assert start is not None
    assert [m.content for m in history_of(start.run)] == ["First question", "First answer", "Then this"]
    assert list(start.request.messages) == list(history_of(start.run))


async def test_a_message_left_queued_with_no_run_going_on_is_sent_when_the_page_opens(fast_demo: None) -> None:
    await sync_to_async(call_command)("load_demo", verbosity=0)
    conv = await sync_to_async(_conv)()
    # Its run was failed by a reaper (or the server restarted): nothing ended through execute_run.
    await sync_to_async(_turn)(conv, "First", "", status="error")
    ask = intake.Ask("Left in the queue", "demo-large", None, ("kb:factures",))
    await sync_to_async(intake.enqueue)(conv, ask)
    client = await _client_async()
    page = (await client.get(f"/c/{conv.pk}/")).content.decode()
    run = await Run.objects.aget(conversation=conv, status="running")
    assert f'id="turn-{run.pk}"' in page and "queued-message" not in page
    await execution.wait_for(run.pk)


def test_the_composer_finds_ready_documents_of_its_own_organisation_by_title(demo_data: None) -> None:
    demo = Organisation.objects.get(slug="demo")
    other = Organisation.objects.create(slug="other-org", name="Other")
    theirs = KnowledgeBase.objects.create(organisation=other, slug="theirs", name="Theirs")
    Document.objects.create(knowledge_base=theirs, title="Bimbamjob secret", text="x")
    factures = KnowledgeBase.objects.get(organisation=demo, slug="factures")
    processing = Document.objects.create(
        knowledge_base=factures, title="Bimbamjob upload", text="", status=Document.PROCESSING
    )
    html = _client().get("/c/documents", {"q": "bimbamjob"}, headers={"HX-Request": "true"}).content.decode()
    found = Document.objects.filter(
        knowledge_base__organisation=demo, status=Document.READY, title__icontains="bimbamjob"
    )
    assert found.exists()
    for d in found[:20]:
        assert f'value="doc:{d.knowledge_base.slug}/doc-{d.pk}"' in html
    assert "secret" not in html and f'doc-{processing.pk}"' not in html  # another organisation's, or not ready
    assert "No ready document" in _client().get("/c/documents", {"q": "zzzz"}).content.decode()
    assert _client().get("/c/documents").content.decode().strip() == ""
    assert Client().get("/c/documents", {"q": "bimbamjob"}).status_code == 302  # signed in only


@pytest.mark.parametrize("language", ["en", "fr"])
def test_the_composer_finds_a_document_by_the_title_its_reader_is_shown(demo_data: None, language: str) -> None:
    """The demo's table document is titled in French, with its English words (``Translated``): each reader finds it
    by the title they are shown, in their language, and not by the other language's."""
    table = Document.objects.get(knowledge_base__organisation__slug="demo", tables__isnull=False)
    value = f'value="doc:factures/doc-{table.pk}"'
    english, french = "CSV export of the billing", "export CSV du logiciel"
    shown, other = (english, french) if language == "en" else (french, english)
    client = _client()
    client.cookies["django_language"] = language

    found = unescape(client.get("/c/documents", {"q": shown.upper()}).content.decode())
    assert value in found
    title = TABLE_WORDS["en"]["title"] if language == "en" else TABLE_TITLE
    label = f"“{title}” (Invoices)" if language == "en" else f"« {title} » (Factures)"
    assert label in found  # its label, in the reader's language too
    assert value not in client.get("/c/documents", {"q": other}).content.decode()
