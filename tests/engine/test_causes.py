"""One vocabulary of causes: a Stop's cause is a ``Cause`` (the codes the API's ``reason_code`` gives), its English
written once (``Cause.english``), the new codes round-tripping through a step's JSON."""

from __future__ import annotations

import typing

import pytest

from assistant.engine.cancel import CancelToken
from assistant.engine.causes import STOP_CODES, Cause, StopCode
from assistant.engine.events import EVENT_ADAPTER, StoppedEvent


def test_a_token_takes_only_a_cause_a_run_is_stopped_with() -> None:
    token = CancelToken()
    with pytest.raises(ValueError):
        token.cancel(Cause(code="model_error"))
    assert not token.cancelled
    token.cancel(Cause(code="spend_limit", used=5.0, limit=5.0))
    token.cancel(Cause(code="stopped_by_user"))  # set once: the first cause stands
    assert token.cause == Cause(code="spend_limit", used=5.0, limit=5.0)
    assert token.stop_cause.english() == "stopped: the spend limit is reached (5.0000 of 5.0000 EUR)"
    assert set(typing.get_args(StopCode)) == STOP_CODES


def test_the_causes_the_next_issues_need_say_what_they_carry() -> None:
    assert Cause(code="stopped_by_user").english() == "stopped on request"
    assert Cause(code="stopped_by_user", agent_id="agent-2").english() == "this agent was stopped on request"
    assert Cause(code="delegation_cap", used=0.52, limit=0.1).english() == (
        "not launched: the delegation could cost up to 0.5200 EUR, over its cap of 0.1000 EUR"
    )
    declined = Cause(code="delegation_cap", used=0.52, limit=0.1, kind="declined")
    assert declined.english().endswith("; the user chose to answer without it")
    tool = Cause(code="run_stopped", because=Cause(code="category_budget"))
    assert tool.english() == "stopped because its run stopped (stopped: the category's monthly budget is reached)"
    assert not tool.is_stop and tool.because is not None and tool.because.is_stop


def test_a_cause_with_its_scope_or_its_run_cause_round_trips_through_a_step() -> None:
    event = StoppedEvent(
        message="x",
        cause=Cause(code="run_stopped", because=Cause(code="stopped_by_user", agent_id="agent-1")),
        text="",
        rounds=1,
    )
    again = EVENT_ADAPTER.validate_python(EVENT_ADAPTER.dump_python(event, mode="json"))
    assert again == event
