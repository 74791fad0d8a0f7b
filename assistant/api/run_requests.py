"""A chat completion request as a run: checked by the one request check (``runs.intake``) and created in a
conversation of its own, the client's earlier messages saved before the question, or continuing the run whose
client tools its tool results answer."""

from __future__ import annotations

from django.utils import translation

from assistant.engine.errors import RequestRefused
from assistant.engine.types import Message as EngineMessage
from assistant.engine.types import ToolCall
from assistant.orgs import keys
from assistant.orgs.models import ApiKey
from assistant.orgs.services import policy_for
from assistant.runs import client_turns, intake
from assistant.runs.start import RunStart

from .errors import refusal_error
from .request_schemas import ChatCompletionRequest, InputMessage


def create_run(key: ApiKey, body: ChatCompletionRequest) -> RunStart:
    """The run of a request, checked by the one request check (``intake``) before anything is kept: its start."""
    org = key.organisation
    policy = policy_for(org, key)
    # The question: the last user message (a request with the results of the client's tools ends with them).
    asked = max(i for i, m in enumerate(body.messages) if m.role == "user" and m.text.strip())
    question = body.messages[asked].text
    ask = intake.Ask(
        text=question,
        model=body.model,
        level=body.reasoning_level,
        resources=tuple(body.tools_enabled),
        category=body.category,
        language=translation.get_language() or "",  # Accept-Language (LocaleMiddleware), else the site's
        sampling=body.sampling(),
        client_tools=body.client_tools(),
        max_delegation_eur=body.max_delegation_eur,
    )
    # The text of the messages before the question, kept in the run's conversation (tool results are not text of it).
    earlier = [_earlier(m) for m in body.messages[:asked] if m.role != "tool" and m.text.strip()]
    try:
        # A conversation of its own, saved with the client's earlier messages and the run in intake's transaction.
        return intake.create_run(
            keys.api_user(org),
            org,
            None,
            ask,
            api_key=key,
            policy=policy,
            earlier=earlier,
            prompt=_prompt(org.pk, body),
        )
    except RequestRefused as e:  # nothing was kept: the transaction is rolled back
        raise refusal_error(e.refusal, question=f"messages[{asked}].content") from e


def _earlier(m: InputMessage) -> tuple[str, str]:
    """A message before the question, as the run's conversation keeps it and the main model reads it: the client's
    system prompt as an earlier message (the model has its own)."""
    if m.role in ("system", "developer"):
        return "user", f"Instructions for this conversation:\n{m.text}"
    return ("assistant" if m.role == "assistant" else "user"), m.text


def _prompt(organisation_id: int, body: ChatCompletionRequest) -> list[EngineMessage] | None:
    """The main model's messages for a request that holds tool calls (else None: the conversation's text says them).

    A follow-up carrying the results of the client's tools that a run of the organisation ended on (recognised by our
    ids for them, ``client_turns``) continues that run's own messages, the results added; any other is taken as
    sent."""
    messages = body.messages
    calling = [i for i, m in enumerate(messages) if m.role == "assistant" and m.tool_calls]
    if not calling:
        return None
    last = calling[-1]
    calls = messages[last].tool_calls or []
    continued = client_turns.continued(organisation_id, [c.id for c in calls])
    if continued is None:
        return _as_sent(messages)
    answers = len(calls)  # each call is answered right after it (``request_schemas._answered``)
    results = {m.tool_call_id or "": m.text for m in messages[last + 1 : last + 1 + answers]}
    return [*continued.with_results(results), *_as_sent(messages[last + 1 + answers :])]


def _as_sent(messages: list[InputMessage]) -> list[EngineMessage]:
    """The client's messages as the main model reads them, tool calls and results as the client sent them."""
    out: list[EngineMessage] = []
    names: dict[str, str] = {}
    for m in messages:
        if m.role == "tool":
            call = ToolCall(m.tool_call_id or "", names.get(m.tool_call_id or "", ""))
            out.append(EngineMessage.tool(call, m.text))
        elif m.tool_calls:
            calls = tuple(ToolCall(c.id, c.function.name, c.function.arguments or "{}") for c in m.tool_calls)
            names.update((c.id, c.name) for c in calls)
            out.append(EngineMessage.assistant(m.text, calls))
        elif m.text.strip():
            role, content = _earlier(m)
            out.append(EngineMessage(role="user" if role == "user" else "assistant", content=content))
    return out
