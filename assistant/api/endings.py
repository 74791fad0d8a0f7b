"""How a run ended, as the API says it: its ``reason`` and ``reason_code``, OpenAI's ``finish_reason``, the client's
tools it ended on (with our ids for them)."""

from __future__ import annotations

from assistant.engine.events import ErrorEvent, StoppedEvent
from assistant.runs import client_turns
from assistant.runs.models import Run

from .response_schemas import FinishReason, FunctionCallOut, ToolCallOut
from .trace import TraceBuilder

# The stops that a limit made (a budget, a cost cap, a spend limit): the answer was cut, OpenAI's ``finish_reason``
# ``length``.
LIMIT_STOPS = frozenset({"category_budget", "cost_cap", "spend_limit"})


def reason_of(run: Run, ended: ErrorEvent | StoppedEvent | None) -> tuple[str, str]:
    """Why the run stopped or failed, in English, and its ``reason_code``: the cause's code (``engine.causes``: the
    one vocabulary of the run's and its agents' causes), empty when it ended ok. ``ended``: the run's ``error`` or
    ``stopped`` step's event (``TraceBuilder.ended``)."""
    if run.status == "error":
        cause = ended.cause if isinstance(ended, ErrorEvent) else None
        return run.error, cause.code if cause is not None else "unexpected"
    if run.status != "stopped":
        return "", ""
    if not isinstance(ended, StoppedEvent):
        return "", "stopped_by_user"
    return ended.message, ended.cause.code if ended.cause is not None else "stopped_by_user"


def finish_reason(run: Run, builder: TraceBuilder) -> FinishReason:
    """OpenAI's ``finish_reason``: ``tool_calls`` when the turn ended on the client's tools, ``length`` when a limit
    cut the answer (the output cap, ``max_tokens``, a budget, a cost cap), else ``stop``."""
    if run.status == "ok" and builder.tool_calls:
        return "tool_calls"
    ended = builder.ended
    if run.status == "stopped" and isinstance(ended, StoppedEvent) and ended.cause is not None:
        return "length" if ended.cause.code in LIMIT_STOPS else "stop"
    return "length" if run.status == "ok" and builder.cut else "stop"


def client_tool_calls(run: Run, builder: TraceBuilder) -> list[ToolCallOut] | None:
    """The client's tools the run ended on, with our ids for them; None when it ended otherwise."""
    if run.status != "ok" or not builder.tool_calls:
        return None
    return [
        ToolCallOut(
            id=client_turns.client_call_id(run.pk, i), function=FunctionCallOut(name=c.name, arguments=c.arguments)
        )
        for i, c in enumerate(builder.tool_calls)
    ]
