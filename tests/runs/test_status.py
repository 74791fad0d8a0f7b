"""A run's status is one vocabulary: the model's choices are the engine's ends and ``running``, as the API names them."""

from __future__ import annotations

from typing import get_args

from assistant.api.response_schemas import EndedStatusOut, RunStatusOut
from assistant.engine.events import RunStatus
from assistant.runs.models import Run


def test_a_run_s_statuses_are_the_engine_s_ends_and_running_as_the_api_names_them() -> None:
    assert set(Run.Status.values) == {"running", *get_args(RunStatus)} == set(get_args(RunStatusOut))
    assert set(get_args(EndedStatusOut)) == set(get_args(RunStatus))
    assert Run().status == Run.Status.RUNNING and Run.Status.RUNNING.value == "running"
