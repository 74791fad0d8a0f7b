"""Steps stay typed: a saved step gives back the engine's event, old steps keep loading, every text field is
marked for erasure, and only the steps module reads a step's raw JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx2
import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.core.management import call_command
from pydantic import BaseModel

from assistant.engine.causes import Cause
from assistant.engine.events import (
    AgentAction,
    AgentFinished,
    AgentStarted,
    ErrorEvent,
    FinalEvent,
    ModelCallFailed,
    ReasoningEvent,
    RoundStarted,
    Source,
    StoppedEvent,
    ToolCallEvent,
    ToolResultEvent,
    UsageEvent,
    erased,
    event_types,
    unmarked_fields,
    usage_from,
)
from assistant.engine.marks import ERASE
from assistant.engine.types import Message as EngineMessage
from assistant.engine.types import Reasoning, ToolCall
from assistant.engine.usage import RunUsage, UsageData
from assistant.orgs import keys
from assistant.orgs.models import Organisation
from assistant.runs.models import Conversation, Message, Run, Step
from assistant.runs.steps import UnreadableStep, events_of, load_event, save_event
from tests.asgi_app import asgi_transport
from tools import check_step_data

ROOT = Path(__file__).resolve().parents[2]

OLD = json.loads((Path(__file__).parent / "data" / "steps_before_typing.json").read_text())
OLD_STEPS: list[dict[str, Any]] = OLD["steps"] + OLD["other_steps"]


def _step(saved: dict[str, Any], seq: int = 1) -> Step:
    return Step(seq=seq, kind=saved["kind"], agent_id=saved["agent_id"], data=saved["data"])


# Old steps ----------------------------------------------------------------------------------------


def test_every_step_saved_before_typing_gives_back_its_engine_event() -> None:
    classes = {
        "round_started": RoundStarted,
        "usage": UsageEvent,
        "tool_call": ToolCallEvent,
        "tool_result": ToolResultEvent,
        "agent_started": AgentStarted,
        "agent_action": AgentAction,
        "agent_finished": AgentFinished,
        "final": FinalEvent,
        "stopped": StoppedEvent,
        "error": ErrorEvent,
        "model_call_failed": ModelCallFailed,
    }
    assert set(classes) == {s["kind"] for s in OLD_STEPS}  # the fixture has every kind a step is saved as
    for saved in OLD_STEPS:
        event = _step(saved).event
        assert type(event) is classes[saved["kind"]]
        assert event.agent_id == (saved["agent_id"] or None)
        # Saved again, it is the same JSON with its version, and what version 1 adds (a cause, whether an
        # agent's report is the engine's).
        again = save_event(event)
        added = {"cause", "partial_report", "estimated", "documents"} - set(saved["data"])
        # What the events gained for traces (their times, the call they answer, retries): defaults in an old step.
        traced = {"started_at": 0.0, "seconds": 0.0, "call_id": "", "result_chars": 0, "failed": False}
        traced |= {"finish_reason": "", "retried": [], "retry_after": None}
        traced |= {"cut": False}  # a final answer cut by a limit: not, in an old step
        traced |= {"tool_calls": [], "messages": []}  # a turn ended on an API client's tools: none, in an old step
        traced |= {"api_model": "", "response_model": ""}  # the model names sent and answered: none, in an old step
        # What a round had left as it started, and the rounds a task asked over its level: unsaid, in an old step.
        traced |= {"rounds_left": None, "tokens_left": None, "seconds_left": None, "rounds_asked": None}
        traced |= {"cost_source": "reported", "estimated_eur": 0.0}  # no estimated token, no estimated cost
        traced |= {"estimate_eur": None, "estimate_max_eur": None}  # an agent launched before estimates: none
        for key, default in traced.items():
            if key not in saved["data"] and key in again:
                assert again[key] == default
                added.add(key)
        if "usage" in again:  # version 1's usage counts failed and estimated calls too: none, in an old step
            usage = dict(again["usage"])
            assert (usage.pop("tokens_estimated"), usage.pop("failed_calls"), usage.pop("estimated_eur")) == (0, 0, 0)
            again_old = {**again, "usage": usage}
        else:
            again_old = again
        # Version 1's sources may say which part of a document a read returned (start, end): none, in an old step.
        again_old = {**again_old, **{k: _without_ranges(v) for k, v in again_old.items() if k == "sources"}}
        # Its actions and sources say whether they were the demo web's: not, in an old step; and whether the action
        # was stopped with its run (with the run's cause) or never started: neither, in an old step.
        if again_old.get("action"):
            action = dict(again_old["action"])
            assert action.pop("demo_web") is False
            assert (action.pop("stopped"), action.pop("started")) == (None, True)
            assert (
                action.pop("where") == "" and action.pop("detail") == ""
            )  # and which base a search looked in: in its label, in an old step
            again_old = {**again_old, "action": action}
        assert {k: v for k, v in again_old.items() if k not in added} == {"v": 1, **saved["data"]}
        assert load_event(again) == event


def test_a_usage_step_saved_before_costs_said_their_source_says_it_from_its_estimated_tokens() -> None:
    base = {"v": 1, "kind": "usage", "model": "demo-small", "prompt_tokens": 900, "completion_tokens": 10}
    estimated = load_event({**base, "cost_eur": 0.0012, "estimated": True})
    reported = load_event({**base, "cost_eur": 0.0012})
    assert isinstance(estimated, UsageEvent) and isinstance(reported, UsageEvent)
    assert (estimated.cost_source, estimated.estimated_eur) == ("estimated", 0.0012)
    assert (reported.cost_source, reported.estimated_eur) == ("reported", 0.0)
    # Saved again, it says its source itself, and reads back the same.
    assert load_event(save_event(estimated)) == estimated
    assert usage_from([estimated, reported]).estimated_eur == pytest.approx(0.0012)


def test_old_usage_and_arguments_are_typed() -> None:
    finished = [_step(s).event for s in OLD_STEPS if s["kind"] == "agent_finished"]
    assert all(isinstance(e, AgentFinished) and isinstance(e.usage, UsageData) for e in finished)
    first = finished[0]
    assert isinstance(first, AgentFinished)
    assert first.usage.by_model["demo-small"].calls == 3 and first.usage.total_tokens == 3080
    assert first.usage.by_model["demo-small"].carbon_g is None  # no carbon data: none, not a zero
    [call, bad_call] = [_step(s).event for s in OLD_STEPS if s["kind"] == "tool_call"]
    assert isinstance(call, ToolCallEvent) and call.name == "agents"
    assert isinstance(call.arguments["tasks"], list)
    assert isinstance(bad_call, ToolCallEvent) and bad_call.arguments == {"raw": "{not json"}


def test_the_cause_of_an_old_step_is_read_from_its_english_reason() -> None:
    causes = {
        (e.kind, e.agent_id): e.cause
        for e in (_step(s).event for s in OLD_STEPS)
        if isinstance(e, AgentFinished | StoppedEvent | ErrorEvent)
    }
    assert causes == {
        ("agent_finished", "agent-1"): None,
        ("agent_finished", "agent-2"): None,
        ("agent_finished", "agent-3"): Cause(code="rounds", used=5, limit=5),
        ("agent_finished", "agent-4"): Cause(code="model_error"),
        ("stopped", None): Cause(code="stopped_by_user"),
        ("error", None): Cause(code="model_error"),
    }
    partial = {e.agent_id: e.partial_report for e in finished_events()}
    assert partial == {"agent-1": False, "agent-2": False, "agent-3": True, "agent-4": True}


def finished_events() -> list[AgentFinished]:
    return [e for e in (_step(s).event for s in OLD_STEPS) if isinstance(e, AgentFinished)]


def test_a_step_emptied_by_an_old_deletion_or_lacking_a_newer_field_still_loads() -> None:
    event = load_event({}, "agent_action", "agent-1")
    assert isinstance(event, AgentAction) and event.agent_id == "agent-1" and event.action.label == ""
    event = load_event({"kind": "stopped", "message": "stopped on request"})
    assert isinstance(event, StoppedEvent) and event.text == "" and event.usage == UsageData()


def test_an_unknown_version_or_a_foreign_shape_is_refused_and_left_out() -> None:
    with pytest.raises(UnreadableStep, match="version 7"):
        load_event({"v": 7, "kind": "final"})
    with pytest.raises(UnreadableStep):
        load_event({"v": 1, "kind": "no_such_kind"})
    steps = [_step(OLD_STEPS[0], 1), Step(seq=2, kind="final", data={"v": 7}), _step(OLD_STEPS[1], 3)]
    assert [type(e) for e in events_of(steps)] == [RoundStarted, UsageEvent]


def test_a_published_step_is_read_once() -> None:
    data = save_event(RoundStarted(round=2, model="demo-small", agent_id="agent-1"))
    step = Step.published(None, 4, data)
    assert (step.kind, step.agent_id, step.seq) == ("round_started", "agent-1", 4)
    assert step.event == RoundStarted(round=2, model="demo-small", agent_id="agent-1")


# The usage of a run's steps ------------------------------------------------------------------------


def test_the_usage_of_the_usage_steps_is_the_run_usage_saved() -> None:
    usage = usage_from(_step(s).event for s in OLD["steps"])
    saved = RunUsage.of(OLD["run"]["usage"])
    # (the usage saved today counts failed and estimated calls, and the estimated part of the cost, too: none then)
    assert (
        usage.as_dict()
        == saved.as_dict()
        == {
            **OLD["run"]["usage"],
            "tokens_estimated": 0,
            "failed_calls": 0,
            "estimated_eur": 0.0,
        }
    )


def test_run_usage_adds_and_takes_away_another() -> None:
    run = RunUsage.of(OLD["run"]["usage"])
    agents = RunUsage()
    for e in (_step(s).event for s in OLD["steps"] if s["kind"] == "agent_finished"):
        assert isinstance(e, AgentFinished)
        agents.merge(RunUsage.of(e.usage))
    main = RunUsage().merge(run).merge(agents, sign=-1)
    assert main.by_model["demo-small"].calls == 0 and main.by_model["demo-large"].calls == 2
    assert main.calls + agents.calls == run.calls == 8
    assert main.cost_eur + agents.cost_eur == pytest.approx(run.cost_eur)


# Erasure ------------------------------------------------------------------------------------------


def test_every_text_or_list_field_of_every_event_is_marked() -> None:
    assert unmarked_fields() == []


def test_a_field_without_a_mark_is_found() -> None:
    class Late(BaseModel):
        kind: str = "late"
        note: str
        tags: tuple[str, ...] = ()
        count: int = 0
        sources: tuple[Source, ...] = ()

    assert unmarked_fields([Late]) == ["Late.kind", "Late.note", "Late.tags", "Late.sources"]


def test_erasure_empties_every_erase_field_and_keeps_the_rest() -> None:
    for saved in OLD_STEPS:
        event = _step(saved).event
        after = erased(event)
        assert type(after) is type(event)
        _check_erased(event, after)


def _check_erased(before: BaseModel, after: BaseModel) -> None:
    for name, info in type(before).model_fields.items():
        old, new = getattr(before, name), getattr(after, name)
        if ERASE in info.metadata:
            assert new in ("", (), {}, None), f"{type(before).__name__}.{name} kept {new!r}"
            assert old is None or new is not None
        elif isinstance(old, BaseModel):
            _check_erased(old, new)
        else:
            assert new == old, f"{type(before).__name__}.{name} changed"


def test_every_event_type_is_in_the_fixture_or_has_no_saved_step() -> None:
    # text deltas are folded into the answer, never saved
    saved_kinds = {s["kind"] for s in OLD_STEPS}
    unsaved = {t.model_fields["kind"].default for t in event_types()} - saved_kinds
    # reasoning and a delegation's estimate: kinds added since (version 1), in no old step; reasoning's round trip is
    # the next test's, the estimate's tests/engine/test_delegation_estimate.py's
    assert unsaved == {"text_delta", "reasoning", "delegation_estimate"}


def test_a_reasoning_step_gives_back_its_event_and_is_erased_with_its_conversation() -> None:
    event = ReasoningEvent(agent_id="agent-1", round=2, model="gpt-5-mini", summary="Compare the two invoices.")
    step = Step(seq=4, kind=event.kind, agent_id="agent-1", data=save_event(event))
    assert step.data == {"v": 1, "kind": "reasoning", "agent_id": "agent-1", "round": 2, "model": "gpt-5-mini",
                         "summary": "Compare the two invoices.", "summary_unavailable": False}  # fmt: skip
    assert step.event == event
    refused = ReasoningEvent(round=1, model="gpt-5", summary_unavailable=True)
    assert load_event(save_event(refused)) == refused
    assert erased(event) == event.model_copy(update={"summary": ""})


def test_a_final_step_of_a_client_turn_gives_back_its_calls_and_messages_and_is_erased() -> None:
    remind = ToolCall("call_1", "send_reminder", '{"invoice": "F-1"}')
    thought = Reasoning(format="mistral", model="magistral-small", id="thinking-0", summary=("Remind F-1.",))
    messages = (EngineMessage.user("Remind them."), EngineMessage.assistant("", (remind,), reasoning=(thought,)))
    event = FinalEvent(text="", rounds=1, tool_calls=(remind,), messages=messages)
    step = Step(seq=3, kind=event.kind, agent_id="", data=save_event(event))
    assert step.data["tool_calls"] == [{"id": "call_1", "name": "send_reminder", "arguments": '{"invoice": "F-1"}'}]
    assert step.event == event and step.event.messages[1].reasoning == (thought,)
    assert erased(event) == event.model_copy(update={"tool_calls": (), "messages": ()})


# Only the steps module reads raw step data --------------------------------------------------------


def test_no_code_reads_raw_step_data() -> None:
    assert check_step_data.check([ROOT / "assistant"]) == []


def test_the_raw_data_check_finds_what_it_forbids() -> None:
    source = """
kind = step.data["kind"]
agent = s.data.get("agent_id")
last = self.steps[-1].data
for k, v in run_step.data.items(): pass
fine = form.cleaned_data["x"]
chunk = event.data
Step(data=save_event(e))
first = run.steps.values_list("data", flat=True).first()
"""
    lines = [line for line, _ in check_step_data.findings(source)]
    assert sorted(lines) == [2, 3, 4, 5, 9]


# Runs saved before typing ----------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
async def test_the_api_answers_a_run_saved_before_typing() -> None:
    await sync_to_async(call_command)("load_demo", verbosity=0)
    org = await Organisation.objects.aget(slug="demo")
    key, secret = await sync_to_async(keys.create_key)(org, "old run")
    user = await get_user_model().objects.aget(username="demo")
    conv = await Conversation.objects.acreate(organisation=org, user=user, title="Old")
    run = await Run.objects.acreate(
        conversation=conv,
        organisation=org,
        user=user,
        model="demo-large",
        level="approfondi",
        status=OLD["run"]["status"],
        rounds=OLD["run"]["rounds"],
        usage=OLD["run"]["usage"],
        sources=OLD["run"]["sources"],
        cost_eur=OLD["run"]["usage"]["cost_eur"],
        api_key=key,
        answer="The old answer.",
    )
    await Message.objects.acreate(conversation=conv, role="user", content="Old question", run=run)
    await Step.objects.abulk_create(
        [
            Step(run=run, seq=i, kind=s["kind"], agent_id=s["agent_id"], data=s["data"])
            for i, s in enumerate(OLD["steps"], 1)
        ]
    )
    transport = asgi_transport()
    async with httpx2.AsyncClient(
        transport=transport, base_url="http://testserver", headers={"Authorization": f"Bearer {secret}"}
    ) as api:
        response = await api.get(f"/v1/runs/{run.pk}")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok" and body["answer"] == "The old answer."
    agents = [s["agent"] for s in body["steps"] if s["type"] == "run_agent"]
    assert [a["id"] for a in agents] == ["agent-1", "agent-2"]
    assert [a["status"] for a in agents] == ["ok", "ok"]
    assert agents[0]["usage"]["by_model"]["demo-small"]["calls"] == 3
    assert [s["tool"] for s in agents[0]["steps"]] == ["kb_search", "kb_read"]
    assert [r["round"] for r in body["rounds"]] == [1, 2]
    assert body["usage"]["total_tokens"] == OLD["run"]["usage"]["total_tokens"]
    assert {s["id"] for s in body["sources"]} == {s["id"] for s in OLD["run"]["sources"]}


def _without_ranges(sources: list[dict[str, object]]) -> list[dict[str, object]]:
    for s in sources:
        assert (s.get("start"), s.get("end"), s.get("demo_web")) == (None, None, False)
    return [{k: v for k, v in s.items() if k not in ("start", "end", "demo_web")} for s in sources]
