"""A reasoning model's summaries in the chat: the main model's, folded under "Thinking" («Réflexion») in the
timeline, round by round before that round's text or calls; an agent's, in its panel, in their round; and what the
page says when the provider refused a summary. The demo's reasoning model gives one, offline."""

from __future__ import annotations

import asyncio
import re
from html import unescape

import pytest
from django.contrib.auth import get_user_model
from django.template.loader import render_to_string
from django.utils import translation

from assistant.chat.live import LiveRun
from assistant.chat.presenters import agent_of, run_view
from assistant.chat.timeline import TextPiece, WorkBlock
from assistant.demo.model import DemoModel, say
from assistant.demo.model.info import DEMO_MODELS
from assistant.engine.events import (
    Action,
    AgentAction,
    AgentStarted,
    Event,
    ReasoningEvent,
    RoundStarted,
    ToolResultEvent,
)
from assistant.engine.types import Message, ModelRequest, ReasoningPart, ToolCallPart, ToolSpec
from assistant.orgs.models import Organisation
from assistant.runs.follow import Follower
from assistant.runs.models import Conversation, Run, Step
from assistant.runs.models import Message as ChatMessage
from assistant.runs.steps import save_event

FIRST = "Let me search the invoices."
ANSWER = " Bimbamjob paid late [doc-1]."
SEARCH = Action(tool="kb_search", kind="search", label="Bimbamjob", count=2, where="factures")


def _run(answer: str) -> Run:
    owner = get_user_model().objects.get(username="demo")
    org = Organisation.objects.get(slug="demo")
    conversation = Conversation.objects.create(organisation=org, user=owner, title="Bimbamjob?")
    run = Run.objects.create(
        conversation=conversation, organisation=org, user=owner, model="demo-large", status="ok", answer=answer
    )
    ChatMessage.objects.create(conversation=conversation, role="user", content="Bimbamjob?", run=run)
    return run


def _save(run: Run, events: list[tuple[Event, int]]) -> None:
    Step.objects.bulk_create(
        Step(run=run, seq=n, kind=e.kind, agent_id=e.agent_id or "", data=save_event(e), text_offset=offset)
        for n, (e, offset) in enumerate(events, start=1)
    )


def _text(html: str) -> str:
    return re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", " ", html))).strip()


@pytest.mark.django_db
@pytest.mark.parametrize(("language", "label", "refused"), [
    ("en", "Thinking", "Thinking (summary unavailable)"),
    ("fr", "Réflexion", "Réflexion (résumé indisponible)"),
])  # fmt: skip
def test_the_main_models_summaries_are_folded_in_the_timeline_round_by_round(
    demo_data: None, language: str, label: str, refused: str
) -> None:
    run = _run(FIRST + ANSWER)
    _save(
        run,
        [
            (RoundStarted(round=1, model="demo-large"), 0),
            (ReasoningEvent(round=1, model="demo-large", summary="The invoices first: **search** them."), 0),
            (ToolResultEvent(call_id="c1", name="kb_search", ok=True, action=SEARCH), len(FIRST)),
            (RoundStarted(round=2, model="demo-large"), len(FIRST)),
            (ReasoningEvent(round=2, model="demo-large", summary_unavailable=True), len(FIRST)),
        ],
    )
    with translation.override(language):
        view = run_view(run)
        html = render_to_string("chat/_timeline.html", {"view": view})
    # Round 1's summary before its text, round 2's (refused) after the search and before the answer.
    assert [type(item) for item in view["timeline"]] == [WorkBlock, TextPiece, WorkBlock]
    first, text, second = view["timeline"]
    assert [what for what, _ in first.entries] == ["thinking"] and first.offset == 0
    assert [what for what, _ in second.entries] == ["action", "thinking"]
    assert isinstance(text, TextPiece) and text.end == len(FIRST)
    folded = re.search(r'<details class="thinking" id="run-[0-9a-f-]+-thinking-2"><summary>([^<]+)</summary>', html)
    assert folded is not None and folded.group(1) == label
    assert "<strong>search</strong>" in html  # the summary is Markdown, rendered as the answer is
    assert html.index("thinking-2") < html.index(FIRST) < html.index(refused) < html.index("Bimbamjob paid late")
    assert f'<p class="thinking unavailable">{refused}</p>' in html


@pytest.mark.django_db
def test_an_agents_summaries_are_in_its_panel_in_their_round(demo_data: None) -> None:
    run = _run(FIRST)
    started = AgentStarted(
        agent_id="agent-1", instruction="Find the invoices.", model="demo-large", model_label="Demo Large",
        resources=("kb:factures",), max_rounds=3,
    )  # fmt: skip
    _save(
        run,
        [
            (started, 0),
            (RoundStarted(agent_id="agent-1", round=1, model="demo-large"), 0),
            (ReasoningEvent(agent_id="agent-1", round=1, model="demo-large", summary="Search the invoices."), 0),
            (AgentAction(agent_id="agent-1", action=SEARCH), 0),
            (RoundStarted(agent_id="agent-1", round=2, model="demo-large"), 0),
            (ReasoningEvent(agent_id="agent-1", round=2, model="demo-large", summary="Read the two hits."), 0),
        ],
    )
    view = run_view(run)
    agent = agent_of(view, "agent-1")
    assert agent is not None
    assert [[t.summary for t in r.thinking] for r in agent.rounds_log] == [
        ["Search the invoices."],
        ["Read the two hits."],
    ]
    # The main timeline shows none of them.
    assert not any(what == "thinking" for b in view["timeline"] if isinstance(b, WorkBlock) for what, _ in b.entries)
    panel = _text(render_to_string("chat/_agent_panel_body.html", {"view": view, "agent": agent}))
    assert "Round 1 Thinking Search the invoices." in panel and "Round 2 Thinking Read the two hits." in panel


@pytest.mark.django_db
def test_a_pushed_summary_redraws_the_timeline_an_agents_its_panel(demo_data: None) -> None:
    run = _run("")
    live = LiveRun(run=run, question=ChatMessage.objects.get(run=run), steps=[], follower=Follower(run.pk))
    for n, event in enumerate(
        [ReasoningEvent(round=1, model="demo-large", summary="Search first."),
         ReasoningEvent(agent_id="agent-1", round=1, model="demo-small", summary="Read.")],
        start=1,
    ):  # fmt: skip
        live.apply(
            {"type": "run.event", "run": run.pk.hex, "seq": n, "event": save_event(event), "t": 0.0, "text_offset": 0}
        )
    assert live.dirty == {"work", "agent:agent-1"}


def test_the_demos_reasoning_model_says_why_it_searches_then_why_it_answers() -> None:
    large, small = (next(m for m in DEMO_MODELS if m.id == name) for name in ("demo-large", "demo-small"))
    search = ToolSpec("kb_search", "Search.", {"type": "object", "properties": {"query": {"type": "string"}}})

    async def parts(model: DemoModel, request: ModelRequest) -> list[object]:
        return [p async for p in model.stream(request)]

    asked = ModelRequest(
        messages=(
            Message.system("You answer."),
            Message.user("Que disent les factures de Bimbamjob sur les retards ?"),
        ),
        tools=(search,),
        reasoning_effort="high",
    )
    got = asyncio.run(parts(DemoModel(large), asked))
    first = got[0]
    assert isinstance(first, ReasoningPart) and first.reasoning.format == "demo"
    # Why it does what it does next, in the question's language: it searches (it calls a tool) or it answers.
    searches = any(isinstance(p, ToolCallPart) for p in got)
    assert first.reasoning.text == say("thinking_tools" if searches else "thinking_answer", "fr")
    assert not any(isinstance(p, ReasoningPart) for p in got[1:])  # once, before the round's text and calls
    # A model that does not reason, or a request with no effort, says nothing of it.
    for model, request in (
        (DemoModel(small), asked),
        (DemoModel(large), ModelRequest(messages=asked.messages, tools=(search,))),
    ):
        assert not any(isinstance(p, ReasoningPart) for p in asyncio.run(parts(model, request)))
