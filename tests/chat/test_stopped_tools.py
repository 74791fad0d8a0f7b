"""A tool call stopped with its run is worded in the reader's language from its cause, as data: stopped while it
ran, or released from its turn before it started (a data_query waiting for a turn)."""

from __future__ import annotations

from django.utils import translation

from assistant.chat.templatetags.chat import action_text
from assistant.engine.causes import Cause, StopCode
from assistant.engine.events import Action


def stopped(started: bool, because: StopCode = "stopped_by_user") -> Action:
    cause = Cause(code="run_stopped", because=Cause(code=because))
    return Action(
        tool="data_query", kind="other", label="data_query SELECT 1", ok=False, stopped=cause, started=started
    )


def test_a_stopped_call_says_why_in_english_and_french() -> None:
    with translation.override("en"):
        assert action_text(stopped(True)) == "data_query SELECT 1 — stopped because its run stopped: stopped on request"
        assert action_text(stopped(False)) == "data_query SELECT 1 — never started: stopped on request"
        assert "monthly budget" in action_text(stopped(False, "category_budget"))
    with translation.override("fr"):
        assert action_text(stopped(False)) == "data_query SELECT 1 — jamais lancé : arrêté à la demande"
        assert action_text(stopped(True)).startswith("data_query SELECT 1 — ")
        assert "stopped" not in action_text(stopped(True))
