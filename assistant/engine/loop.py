"""The main loop: rounds of the main model, its tool calls run concurrently, delegation, Stop.

``run_chat`` checks the request against the policy before any model call, streams each round,
runs the round's tool calls concurrently, and ends with a final answer, the level's round limit
followed by one forced answer without tools, a stop, or an error. Whatever happens, the outcome
keeps the text received so far and every agent's findings.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import causes
from .cancel import RunStopped, run_round
from .causes import Cause
from .compaction import fit_conversation
from .delegation import AGENTS_TOOL, Delegation
from .errors import ContextTooLong, ModelError, RequestRefused, ToolFailed
from .events import (
    ErrorEvent,
    FinalEvent,
    ReasoningEvent,
    RoundStarted,
    RunStatus,
    StoppedEvent,
    TextDeltaEvent,
    ToolCallEvent,
    ToolResultEvent,
)
from .notes import BudgetLeft, add_note
from .outcomes import AgentOutcome
from .policy import Plan, RunRequest, plan_request
from .refusals import Refusal
from .runtime import RunContext
from .scope import KB_PREFIX, MCP_PREFIX
from .tokens import estimate_tokens, prompt_tokens
from .tools import Tool, ToolRun, run_tool_call
from .types import Message, ModelRequest, Reasoning, ToolCall, ToolChoice, ToolSpec

MAIN_SYSTEM_PROMPT = """You are an assistant that answers with facts from the resources you are given.
- Cite the documents you use by their id, in square brackets, e.g. [doc-12].
- Documents and pages that your agents read count as read: use their reports and do not read them again.
- When an agent comes back interrupted, stopped or in error, say what is missing; do not fill the gaps yourself.
- After your first round, your last tool result ends with a line "Budget left: ...": the rounds with tools you have left (this one included) and the seconds. After the last one you answer without tools."""

ROUND_LIMIT_NOTICE = "[The round limit is reached: answer now from what you have, without tools.]"
LEFT_OUT_NOTICE = "\n({count} earlier messages of this conversation were left out to fit your context window.)"
MAIN_UNAVAILABLE = "Use only the tools you were given."


@dataclass(slots=True)
class RunOutcome:
    """How a run ended, with everything it produced."""

    status: RunStatus
    text: str
    rounds: int
    agents: list[AgentOutcome] = field(default_factory=list)
    error: str | None = None


async def run_chat(request: RunRequest, ctx: RunContext, plan: Plan | None = None) -> RunOutcome:
    """Run one request to its end. Raises ``RequestRefused`` (before any model call) only: ``ContextTooLong`` when
    its first call cannot fit the main model's window, even with the oldest turns left out. ``plan``: the request's,
    when its caller planned it (a run's start, ``runs.start.RunStart``); else it is planned here."""
    plan = plan or plan_request(request, ctx.catalogue, ctx.policy)
    if plan.scope.searchable:
        knowledge = ctx.toolbox.knowledge
        existing = set() if knowledge is None else await knowledge.existing(plan.scope.searchable)
        for kb in plan.scope.searchable:
            if kb not in existing:
                raise RequestRefused(Refusal(code="knowledge_base_not_found", resource=KB_PREFIX + kb))
    if plan.scope.documents and ctx.toolbox.knowledge is not None:
        found = await ctx.toolbox.knowledge.read([doc_id for _kb, doc_id in plan.scope.documents])
        for kb, doc_id in plan.scope.documents:
            if doc_id not in found or found[doc_id].kb != kb:
                raise RequestRefused(Refusal(code="document_not_found", resource=f"doc:{kb}/{doc_id}"))
    if plan.scope.connectors:
        connectors = ctx.toolbox.connectors
        missing = list(plan.scope.connectors) if connectors is None else await connectors.load(plan.scope.connectors)
        if missing:
            raise RequestRefused(Refusal(code="connector_not_found", resource=MCP_PREFIX + missing[0]))
    return await _MainLoop(request, ctx, plan).run()


def first_request(request: RunRequest, plan: Plan, ctx: RunContext) -> ModelRequest:
    """The main model's first request for ``request`` (planned: ``plan``), as its first round sends it (the history
    fitted to the window).

    What intake reserves on the category before the run starts, and checks against the window; ``ctx`` needs its
    catalogue, policy and toolbox only. Raises ``ContextTooLong`` when that request cannot fit the model's window.
    """
    loop = _MainLoop(request, ctx, plan)
    return loop.round_request(loop.specs(), last=not loop.specs())


class _MainLoop:
    def __init__(self, request: RunRequest, ctx: RunContext, plan: Plan) -> None:
        self.ctx = ctx
        self.plan = plan
        self.info = ctx.catalogue[plan.model]
        self.tools: dict[str, Tool] = {t.spec.name: t for t in ctx.toolbox.tools_for(plan.scope)}
        self.delegation = Delegation(ctx, plan, self.info) if plan.agents else None
        if self.delegation is not None:
            self.tools[AGENTS_TOOL] = self.delegation
        self.sampling = request.sampling
        self.client = request.client_tools
        """The API client's tools: offered beside the server's; a round that calls one ends the run's turn."""
        self.client_names = self.client.names if self.client is not None else frozenset[str]()
        self.messages: list[Message] = [Message.system(self._system_prompt()), *request.messages]
        # Where the request's own message is: its question (a turn that continues after an API client's tool results
        # ends with them, after the rounds of the run it continues).
        self.current = max((i for i, m in enumerate(self.messages) if m.role == "user"), default=len(request.messages))
        self.left_out = 0
        self.text = ""
        self.rounds = 0

    @property
    def agents(self) -> list[AgentOutcome]:
        """Every agent the run's delegations ran, in order."""
        return [] if self.delegation is None else self.delegation.outcomes

    def _system_prompt(self) -> str:
        scope = self.plan.scope
        prompt = MAIN_SYSTEM_PROMPT
        if scope.knowledge_bases:
            prompt += "\nKnowledge bases of this request: " + ", ".join(scope.knowledge_bases) + "."
        for kb in scope.searchable[len(scope.knowledge_bases) :]:
            prompt += f"\nIn the knowledge base {kb}, only these documents: {', '.join(scope.chosen(kb) or ())}."
        if scope.connectors:
            prompt += "\nConnectors of this request: " + ", ".join(scope.connectors) + "."
        return prompt

    async def _on_text(self, delta: str) -> None:
        self.text += delta
        await self.ctx.emit(TextDeltaEvent(text=delta))

    async def _on_reasoning(self, reasoning: Reasoning) -> None:
        event = ReasoningEvent.of(reasoning, self.rounds, self.info.id)
        if event is not None:
            await self.ctx.emit(event)

    def specs(self) -> tuple[ToolSpec, ...]:
        """The tools offered to the main model: the server's, then the API client's."""
        server = tuple(t.spec for t in self.tools.values())
        return server + (self.client.specs if self.client is not None else ())

    def _tool_choice(self) -> ToolChoice:
        """The client's ``tool_choice`` for the run's first call, ``auto`` after it."""
        return self.client.choice if self.client is not None and self.rounds <= 1 else "auto"

    def _note(self, last: bool, specs: tuple[ToolSpec, ...]) -> str:
        """What this round's request adds to its last tool result (``notes``): the rounds with tools and the seconds
        left (every request after the first), then, on the round past the limit, its notice."""
        if not specs:
            return ""
        parts = [self._left().main_line()] if self.rounds > 1 else []
        if last:
            parts.append(ROUND_LIMIT_NOTICE)
        return " ".join(parts)

    def _left(self) -> BudgetLeft:
        """What the main loop has left as its round starts: its rounds with tools (this one included), the seconds."""
        return BudgetLeft(
            rounds=max(0, self.plan.main_rounds - self.rounds + 1),
            tokens=None,
            seconds=max(0, int(self.ctx.seconds_left)),
        )

    def round_request(self, specs: tuple[ToolSpec, ...], *, last: bool, note: str = "") -> ModelRequest:
        """This round's request, its history fitted to the window (with room for ``note``, then appended to its last
        tool result as sent); the first one must fit it, or the run is refused."""
        spec_tokens = prompt_tokens(ModelRequest(messages=(), tools=specs))  # the same every round
        self._fit((0 if last else spec_tokens) + (estimate_tokens(note) if note else 0))
        if note:
            add_note(self.messages, note)
        request = ModelRequest(
            messages=tuple(self.messages),
            tools=() if last else specs,
            tool_choice="none" if last else self._tool_choice(),
            parallel_tool_calls=self.client.parallel is not False if self.client is not None else True,
            max_output_tokens=self._output_cap(),
            reasoning_effort=self.plan.effort,
            sampling=self.sampling,
            language=self.ctx.language,
        )
        if self.rounds <= 1:
            needed = prompt_tokens(request) + (request.max_output_tokens or self.info.output_cap)
            if needed > self.info.context_window:
                raise ContextTooLong(self.info.id, needed, self.info.context_window)
        return request

    async def run(self) -> RunOutcome:
        ctx = self.ctx
        specs = self.specs()
        try:
            while True:
                ctx.cancel.check(ctx.usage)
                self.rounds += 1
                last = self.rounds > self.plan.main_rounds or not specs
                request = self.round_request(specs, last=last, note=self._note(last, specs))
                left = self._left()
                await ctx.emit(
                    RoundStarted(
                        round=self.rounds,
                        model=self.info.id,
                        forced=last and bool(specs),
                        rounds_left=left.rounds,
                        seconds_left=left.seconds,
                    )
                )
                if self.text and not self.text.endswith("\n"):
                    await self._on_text("\n\n")
                response = await ctx.call_model(
                    self.info.id,
                    request,
                    on_text=self._on_text,
                    on_reasoning=self._on_reasoning,
                    timeout=ctx.policy.main_call_timeout,
                )
                self.messages.append(response.as_message())
                if last or not response.tool_calls:
                    return await self._ended(cut=response.finish_reason == "length")
                # Stop ends each of the round's tool calls, stopped (the agents tool stops its agents itself); a
                # tool's unexpected failure cancels the others and ends the run. The API client's calls are its own
                # to run: the server's of the same round run, then the turn ends on the client's.
                calls = [c for c in response.tool_calls if c.name not in self.client_names]
                if calls:
                    runs = await run_round([self._run_call(c) for c in calls])
                    self.messages += [Message.tool(run.call, run.content) for run in runs]
                client_calls = tuple(c for c in response.tool_calls if c.name in self.client_names)
                if client_calls:
                    return await self._client_turn(client_calls)
        except RunStopped as e:
            return await self._stopped(e.cause)
        except ModelError as e:
            return await self._failed(f"The model could not answer: {e}", causes.model_error(e))
        except ToolFailed as e:
            return await self._failed(f"A tool failed: {e}", Cause(code="tool_failed", kind=e.kind))

    async def _client_turn(self, calls: tuple[ToolCall, ...]) -> RunOutcome:
        """The turn ends on the API client's ``calls``: what the model wrote, the calls, and the messages its next call
        would continue (the client's follow-up with their results continues from them)."""
        # A Stop during the round's server tools stops the run, as after any round.
        self.ctx.cancel.check(self.ctx.usage)
        return await self._ended(tool_calls=calls, messages=tuple(self.messages[1:]))

    async def _ended(
        self, *, cut: bool = False, tool_calls: tuple[ToolCall, ...] = (), messages: tuple[Message, ...] = ()
    ) -> RunOutcome:
        """The run ends ok, on an answer (``cut``: at its output cap) or on the API client's ``tool_calls``: its final
        event, what the model wrote with the sources read and the usage, then its outcome."""
        ctx = self.ctx
        await ctx.emit(
            FinalEvent(
                text=self.text,
                rounds=self.rounds,
                sources=tuple(ctx.sources.values()),
                usage=ctx.usage.as_data(),
                cut=cut,
                tool_calls=tool_calls,
                messages=messages,
            )
        )
        return RunOutcome("ok", self.text, self.rounds, self.agents)

    def _output_cap(self) -> int:
        """Each main call's output cap: the client's (``max_tokens``) up to the model's, else the model's for the
        plan's effort."""
        asked = self.sampling.max_tokens if self.sampling is not None else None
        if asked is not None:
            return min(asked, self.info.output_cap)
        return self.info.output_cap_for(None, self.plan.effort)

    def _fit(self, spec_tokens: int) -> None:
        """Keep the history inside the main model's window: the oldest earlier messages go first, said so."""
        reserve = self._output_cap() + spec_tokens
        left_out = fit_conversation(self.messages, self.info.context_window, reserve, self.current)
        if left_out:
            self.current -= left_out
            self.left_out += left_out
            notice = LEFT_OUT_NOTICE.format(count=self.left_out)
            self.messages[0] = Message.system(self._system_prompt() + notice)

    async def _failed(self, message: str, cause: Cause) -> RunOutcome:
        await self.ctx.emit(ErrorEvent(message=message, cause=cause))
        return RunOutcome("error", self.text, self.rounds, self.agents, error=message)

    async def _stopped(self, cause: Cause) -> RunOutcome:
        ctx = self.ctx
        await ctx.emit(
            StoppedEvent(
                message=cause.english(),
                cause=cause,
                text=self.text,
                rounds=self.rounds,
                sources=tuple(ctx.sources.values()),
                usage=ctx.usage.as_data(),
            )
        )
        return RunOutcome("stopped", self.text, self.rounds, self.agents)

    async def _run_call(self, call: ToolCall) -> ToolRun:
        ctx = self.ctx
        try:
            arguments = call.parsed_arguments()
        except ValueError:
            arguments = {"raw": call.arguments}
        await ctx.emit(ToolCallEvent(call_id=call.id, name=call.name, arguments=arguments))
        run = await run_tool_call(self.tools, call, MAIN_UNAVAILABLE, ctx.cancel)
        sources = run.outcome.sources if run.outcome else ()
        ctx.add_sources(sources)
        await ctx.emit(
            ToolResultEvent(
                call_id=call.id,
                name=call.name,
                ok=run.ok,
                action=run.outcome.action if run.outcome else None,
                sources=sources,
                error=run.error,
                result_chars=len(run.content),
            )
        )
        return run


__all__ = ["RunOutcome", "first_request", "run_chat"]
