"""A run that ended on an API client's tools, and the client's follow-up that continues it.

The main model called tools of the client (``engine.types.ClientTools``): the run's turn ended on them, its ``final``
step keeping the calls (with the model's ids) and the main model's messages as its next call would continue them. The
client gets our ids for those calls (``client_call_id``: the run's and the call's place, so a follow-up finds its run
in one read), runs them, and sends the results back in a new request: ``continued`` recognises it by those ids, within
the key's organisation only, and the new run starts from the messages of the run it continues, the client's results
added in the calls' order under the model's ids, so that nothing the model found is lost and the prompt's prefix is
the one the provider has cached.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from assistant.engine.events import FinalEvent
from assistant.engine.types import Message, ToolCall

from .models import Run
from .steps import events_of

CLIENT_CALL_ID = re.compile(r"^call_(?P<run>[0-9a-f]{32})(?P<index>[0-9a-f]{2})$")


def client_call_id(run_id: uuid.UUID, index: int) -> str:
    """The id the client gets for the ``index``-th client call a run ended on: 39 characters, OpenAI's ``call_``
    (a round of more than 256 client calls, which no model asks, gives ids that no follow-up is recognised by)."""
    return f"call_{run_id.hex}{index:02x}"


@dataclass(frozen=True, slots=True)
class Continued:
    """The run a follow-up continues, as it ended: its client calls (the model's ids) and the main model's messages."""

    run: Run
    calls: tuple[ToolCall, ...]
    messages: tuple[Message, ...]

    def with_results(self, results: Mapping[str, str]) -> tuple[Message, ...]:
        """Its messages and the client's ``results`` (content by our call id), in the calls' order, each under the
        model's id for the call."""
        answers = tuple(
            Message.tool(call, results[client_call_id(self.run.pk, i)]) for i, call in enumerate(self.calls)
        )
        return (*self.messages, *answers)


def continued(organisation_id: int, ids: Sequence[str]) -> Continued | None:
    """The run of the key's organisation, started through the API, that ended on the client calls ``ids`` (all of
    them, ours): None when they are not (another organisation's run is not found)."""
    found = {CLIENT_CALL_ID.match(i) for i in ids}
    runs = {m["run"] for m in found if m is not None}
    if not ids or None in found or len(runs) != 1:
        return None
    run = Run.objects.filter(
        pk=uuid.UUID(runs.pop()), organisation_id=organisation_id, api_key__isnull=False, status=Run.Status.OK
    ).first()
    if run is None:
        return None
    step = run.steps.filter(kind="final", agent_id="").order_by("-seq").first()
    final = next(iter(events_of([step])), None) if step is not None else None
    if not isinstance(final, FinalEvent) or not final.tool_calls:
        return None
    if sorted(ids) != sorted(client_call_id(run.pk, i) for i in range(len(final.tool_calls))):
        return None
    return Continued(run, final.tool_calls, final.messages)
