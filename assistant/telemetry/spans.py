"""A run's spans, built live from its events: the one place the span tree is made.

``RunTrace`` listens to the events the engine emits and the recorder saves (``runs.recorder.Recorder`` hands it
each one, text deltas included, then closes it with the run). The tree, in the OpenTelemetry GenAI conventions
(names may change while they are in development; the cost attributes follow semantic-conventions-genai PR #443 as
of its review of 2026-08-18, still open)::

    invoke_agent assistant                      the run (under the caller's span, when its context came with it)
    ├── chat {model}                            each request sent to the main model's provider (each retry its own)
    ├── execute_tool {tool}                     each tool call of the main model
    └── execute_tool agents                     a delegation
        └── invoke_agent {profile or "agent"}   each agent it launched
            ├── chat {model}                    the agent's requests
            └── execute_tool {tool}             the agent's tool calls

Token counts and the cost of each call are on its ``chat`` span only (``gen_ai.usage.*``), so that a backend
summing them counts each call once; a run's and an agent's totals are under ``assistant.*``. Message content is
recorded only as ``content.ContentMode`` allows.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from opentelemetry import trace as trace_api
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from assistant.engine.catalogue import ModelInfo
from assistant.engine.events import (
    AgentAction,
    AgentFinished,
    AgentStarted,
    ErrorEvent,
    Event,
    FinalEvent,
    ModelCallFailed,
    StoppedEvent,
    TextDeltaEvent,
    ToolCallEvent,
    ToolResultEvent,
    UsageEvent,
)
from assistant.engine.usage import RunUsage

from .content import messages
from .setup import Telemetry

log = logging.getLogger(__name__)

# Where a provider of the catalogue is named otherwise by the conventions' ``gen_ai.provider.name``.
PROVIDER_NAMES = {"mistral": "mistral_ai", "openai": "openai"}
CURRENCY = "EUR"
DETAILS_EVENT = "gen_ai.client.inference.operation.details"


@dataclass(frozen=True, slots=True, kw_only=True)
class RunFacts:
    """What a run's span says of it beyond its events."""

    run_id: str
    conversation_id: str
    organisation: str
    """The organisation's slug."""
    category: str
    level: str
    model: str
    question: str = ""
    """The run's own message (recorded only when content is captured)."""


def _ns(seconds: float) -> int:
    return int(seconds * 1e9)


class RunTrace:
    """The spans and metrics of one run, from its events. Never raises into the run: a failure here is logged."""

    def __init__(
        self,
        telemetry: Telemetry,
        facts: RunFacts,
        catalogue: Mapping[str, ModelInfo],
        stop_time: Callable[[], float | None] = lambda: None,
    ) -> None:
        """``catalogue``: the run's, which names each model's provider; ``stop_time``: when the run's Stop came
        (``time.monotonic()``), None while it has not, read as the run ends. The run's span starts now, under the
        current context (the caller's span, when one came with the run)."""
        self.telemetry = telemetry
        self.tracer = telemetry.tracer
        self.metrics = telemetry.instruments
        self.content = telemetry.content
        self.facts = facts
        self.catalogue = catalogue
        self.stop_time = stop_time
        self.usage = RunUsage()
        """The run's usage as its usage events add up (``events.usage_from``): its cost is the run's, to the last bit."""
        self.status, self.reason_code = "error", "unexpected"  # until an ending event says otherwise
        self.answer: list[str] = []
        self._agents: dict[str, Span] = {}
        self._tools: dict[str, Span] = {}
        self._failing: dict[str | None, UsageEvent] = {}  # a billed call that failed: its ModelCallFailed follows
        self._instructions: dict[str, str] = {}  # the agents' (content events only)
        self.span = self.tracer.start_span(
            "invoke_agent assistant",
            kind=SpanKind.INTERNAL,
            attributes={
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": "assistant",
                "gen_ai.agent.id": facts.run_id,
                "gen_ai.conversation.id": facts.conversation_id,
                "gen_ai.request.model": facts.model,
                "gen_ai.provider.name": self._provider(facts.model),
                "assistant.organisation": facts.organisation,
                "assistant.category": facts.category,
                "assistant.level": facts.level,
            },
        )
        self._context = trace_api.set_span_in_context(self.span)
        if self.content.on_spans and facts.question:
            self.span.set_attribute("gen_ai.input.messages", messages("user", facts.question))

    @property
    def context(self) -> Context:
        """The run span's context (what a log line or a child made elsewhere would be under)."""
        return self._context

    def on_event(self, event: Event) -> None:
        try:
            self._on(event)
        except Exception:
            log.exception("telemetry: could not record a %s event", event.kind)

    def _on(self, event: Event) -> None:
        if isinstance(event, TextDeltaEvent):
            if event.agent_id is None and self.content.captures:
                self.answer.append(event.text)
        elif isinstance(event, UsageEvent):
            event.add_to(self.usage)
            if event.failed:
                self._failing[event.agent_id] = event
            else:
                self._chat(event, event)
        elif isinstance(event, ModelCallFailed):
            usage = self._failing.pop(event.agent_id, None) if event.billed else None
            self._chat(event, usage, event.error_kind)
        elif isinstance(event, ToolCallEvent):
            self._tool_started(event)
        elif isinstance(event, ToolResultEvent):
            self._tool_ended(event)
        elif isinstance(event, AgentStarted):
            self._agent_started(event)
        elif isinstance(event, AgentAction):
            self._agent_tool(event)
        elif isinstance(event, AgentFinished):
            self._agent_ended(event)
        elif isinstance(event, FinalEvent):
            self.status, self.reason_code = "ok", ""
        elif isinstance(event, StoppedEvent):
            self.status, self.reason_code = "stopped", event.cause.code if event.cause else "stopped_by_user"
        elif isinstance(event, ErrorEvent):
            self.status, self.reason_code = "error", event.cause.code if event.cause else "unexpected"

    def _provider(self, model: str) -> str:
        info = self.catalogue.get(model)
        return "" if info is None else PROVIDER_NAMES.get(info.provider, info.provider)

    def _parent(self, agent_id: str | None) -> Context:
        span = self._agents.get(agent_id) if agent_id else None
        return self._context if span is None else trace_api.set_span_in_context(span)

    # chat -------------------------------------------------------------------------------------------------------

    def _chat(self, call: UsageEvent | ModelCallFailed, usage: UsageEvent | None, error: str | None = None) -> None:
        """The spans of one model call: its tries the adapter made again, then its last (with its usage)."""
        parent = self._parent(call.agent_id)
        model = call.api_model or call.model  # the name the provider was sent
        common = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": self._provider(call.model),
            "gen_ai.request.model": model,
        }
        for attempt in call.retried:  # each a request of its own
            self._chat_span(parent, model, common, attempt.started_at, attempt.seconds, None, attempt.error_kind)
        self._chat_span(parent, model, common, call.started_at, call.seconds, usage, error)

    def _chat_span(
        self,
        parent: Context,
        model: str,
        common: dict[str, Any],
        started_at: float,
        seconds: float,
        usage: UsageEvent | None,
        error: str | None,
    ) -> None:
        attributes = dict(common)
        if usage is not None:
            attributes |= {
                "gen_ai.usage.input_tokens": usage.prompt_tokens,  # the cached ones included, as providers count them
                "gen_ai.usage.output_tokens": usage.completion_tokens,
                "gen_ai.usage.cache_read.input_tokens": usage.cached_prompt_tokens,
                "gen_ai.usage.reasoning.output_tokens": usage.reasoning_tokens,
                "gen_ai.usage.cost.amount": usage.cost_eur,
                "gen_ai.usage.cost.currency": CURRENCY,
                "gen_ai.usage.cost.source": "local",  # priced from our catalogue
                "assistant.cost_source": "estimated" if usage.estimated else "reported",
            }
            if usage.finish_reason:
                attributes["gen_ai.response.finish_reasons"] = (usage.finish_reason,)
            if usage.response_model:
                attributes["gen_ai.response.model"] = usage.response_model
        if error is not None:
            attributes["error.type"] = error
        start = started_at or time.time()
        span = self.tracer.start_span(
            f"chat {model}", context=parent, kind=SpanKind.CLIENT, attributes=attributes, start_time=_ns(start)
        )
        if error is not None:
            span.set_status(Status(StatusCode.ERROR))
        span.end(end_time=_ns(start + seconds))
        metric = dict(common) | ({"error.type": error} if error is not None else {})
        self.metrics.operation_duration.record(seconds, metric)
        if usage is not None:
            self.metrics.token_usage.record(usage.prompt_tokens, common | {"gen_ai.token.type": "input"})
            self.metrics.token_usage.record(usage.completion_tokens, common | {"gen_ai.token.type": "output"})

    # tools ------------------------------------------------------------------------------------------------------

    def _tool_attributes(self, name: str, call_id: str) -> dict[str, Any]:
        return {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": call_id,
            "gen_ai.tool.type": "function",
        }

    def _tool_started(self, event: ToolCallEvent) -> None:
        attributes = self._tool_attributes(event.name, event.call_id)
        if self.content.on_spans:
            attributes["gen_ai.tool.call.arguments"] = json.dumps(event.arguments, ensure_ascii=False)
        span = self.tracer.start_span(
            f"execute_tool {event.name}", context=self._parent(event.agent_id), kind=SpanKind.INTERNAL,
            attributes=attributes,
        )  # fmt: skip
        self._tools[event.call_id] = span

    def _tool_ended(self, event: ToolResultEvent) -> None:
        span = self._tools.pop(event.call_id, None)
        if span is None:
            return
        span.set_attribute("assistant.tool.result_chars", event.result_chars)
        if not event.ok:
            span.set_attribute("error.type", "tool_error")
            span.set_status(Status(StatusCode.ERROR))
        span.end()

    def _agent_tool(self, event: AgentAction) -> None:
        if not event.call_id or not event.started_at:
            return  # a step of the agent's result: no tool ran
        attributes = self._tool_attributes(event.action.tool, event.call_id)
        attributes["assistant.tool.result_chars"] = event.result_chars
        if not event.action.ok:
            attributes["error.type"] = "tool_error"
        span = self.tracer.start_span(
            f"execute_tool {event.action.tool}", context=self._parent(event.agent_id), kind=SpanKind.INTERNAL,
            attributes=attributes, start_time=_ns(event.started_at),
        )  # fmt: skip
        if not event.action.ok:
            span.set_status(Status(StatusCode.ERROR))
        span.end(end_time=_ns(event.started_at + event.seconds))

    # agents -----------------------------------------------------------------------------------------------------

    def _agent_started(self, event: AgentStarted) -> None:
        name = event.profile or "agent"
        parent = self._tools.get(event.call_id)
        span = self.tracer.start_span(
            f"invoke_agent {name}",
            context=self._context if parent is None else trace_api.set_span_in_context(parent),
            kind=SpanKind.INTERNAL,
            attributes={
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": name,
                "gen_ai.agent.id": event.agent_id,
                "gen_ai.request.model": event.model,
                "gen_ai.provider.name": self._provider(event.model),
                "gen_ai.conversation.id": self.facts.conversation_id,
            },
        )
        if self.content.on_spans:
            span.set_attribute("gen_ai.input.messages", messages("user", event.instruction))
        if self.content.as_events:
            self._instructions[event.agent_id] = event.instruction
        self._agents[event.agent_id] = span

    def _agent_ended(self, event: AgentFinished) -> None:
        span = self._agents.pop(event.agent_id, None)
        reason = event.cause.code if event.cause is not None else ""
        status = {"assistant.agent.status": event.status, "assistant.agent.reason_code": reason}
        if span is not None:
            span.set_attributes(
                status
                | {
                    "assistant.agent.rounds": event.rounds,
                    "assistant.agent.forced_landing": event.forced_landing,
                    "assistant.agent.cost_eur": event.cost_eur,
                }
            )
            if self.content.on_spans:
                span.set_attribute("gen_ai.output.messages", messages("assistant", event.report, event.status))
            if self.content.as_events:
                self._details(span, self._instructions.pop(event.agent_id, ""), event.report, event.status)
            if event.status == "error":
                span.set_attribute("error.type", reason or "error")
                span.set_status(Status(StatusCode.ERROR))
            span.end()
        self.metrics.agents.add(1, status)
        if event.forced_landing:
            self.metrics.forced_landings.add(1, {"assistant.agent.reason_code": reason})

    # content events ---------------------------------------------------------------------------------------------

    def _details(self, span: Span, question: str, answer: str, finish_reason: str) -> None:
        """The conventions' content event of an ``invoke_agent`` span: what it was asked and what it answered."""
        logger = self.telemetry.logger
        if logger is None:
            return
        attributes = {"gen_ai.operation.name": "invoke_agent"}
        if question:
            attributes["gen_ai.input.messages"] = messages("user", question)
        if answer:
            attributes["gen_ai.output.messages"] = messages("assistant", answer, finish_reason)
        logger.emit(event_name=DETAILS_EVENT, context=trace_api.set_span_in_context(span), attributes=attributes)

    # the end ----------------------------------------------------------------------------------------------------

    def close(self) -> None:
        """End the run's span (and whatever an abrupt end left open) and count the run."""
        try:
            self._close()
        except Exception:
            log.exception("telemetry: could not end a run's span")

    def _close(self) -> None:
        for span in [*self._tools.values(), *self._agents.values()]:
            span.set_status(Status(StatusCode.ERROR))
            span.end()
        self._tools.clear()
        self._agents.clear()
        for usage in self._failing.values():  # a failed call whose failure never came (the run ended meanwhile)
            self._chat(usage, usage)
        self._failing.clear()
        status = {"assistant.run.status": self.status, "assistant.run.reason_code": self.reason_code}
        self.span.set_attributes(status | {"assistant.run.cost_eur": self.usage.cost_eur})
        if self.content.on_spans and self.answer:
            self.span.set_attribute("gen_ai.output.messages", messages("assistant", "".join(self.answer), self.status))
        if self.content.as_events:
            self._details(self.span, self.facts.question, "".join(self.answer), self.status)
        if self.status == "error":
            self.span.set_attribute("error.type", self.reason_code or "error")
            self.span.set_status(Status(StatusCode.ERROR))
        self.span.end()
        self.metrics.runs.add(1, status)
        stopped_at = self.stop_time()
        if stopped_at is not None:
            self.metrics.stops.add(1, status)
            self.metrics.stop_duration.record(max(0.0, time.monotonic() - stopped_at), status)
