"""Why an agent, a tool or a run ended as it did: a cause code with its numbers, not a sentence.

The one vocabulary of causes, from the engine to the API: an agent's end (``AgentFinished.cause``), a run's
(``StoppedEvent.cause``, ``ErrorEvent.cause``), a Stop (``CancelToken.cause``, ``RunStopped.cause``) and the
API's ``reason_code`` are a ``Cause``'s ``code``; with it, for a budget what was used of what limit, for a model
error its kind, for an agent stopped alone its id (``agent_id``), for a tool stopped with its run the run's cause
(``because``). ``Cause.english()`` is the English sentence the API gives as ``reason`` (and the main model
reads), written here only; the pages word the code in the reader's language (``runs.wording``), never this
sentence.
"""

from __future__ import annotations

from typing import Annotated, Literal, TypeAlias, get_args

from pydantic import BaseModel, ConfigDict

from .errors import (
    AuthenticationFailed,
    BadModelRequest,
    BudgetExceeded,
    CostCapReached,
    MalformedResponse,
    ModelError,
    ModelTimeout,
    RateLimited,
    SpendLimitReached,
)
from .marks import KEEP

CauseCode: TypeAlias = Literal[
    # An agent's budget (its status ``interrupted``), with ``used`` and ``limit``:
    "rounds",  # its round budget (forced landing at its last round, or no round left)
    "tokens",  # its token budget
    "seconds",  # its time budget (``used`` may be absent: a call that timed out)
    "output_cut",  # its output was cut at the model's output cap
    # Stopped (status ``stopped``), an agent or a run (the causes a ``CancelToken`` takes: ``STOP_CODES``):
    "stopped_by_user",  # Stop (the page's button, the API's cancel, a conversation's deletion); with ``agent_id``:
    # that agent alone, stopped by the user while its run goes on
    "category_budget",  # the task category's monthly budget is reached
    "cost_cap",  # a scheduled task's cost cap is reached, with ``used`` and ``limit`` in EUR
    "spend_limit",  # a spend limit (an organisation's, a key's, a user's) is reached, with ``used`` and ``limit`` in EUR
    "delegation_cap",  # the run's cap on delegations (agents started) is reached, with ``used`` and ``limit``
    "server_shutdown",  # the worker executing the run was shut down (SIGTERM): it stopped its runs as Stop does
    # A tool call stopped because its run (or its agent) stopped: ``because`` is that stop's cause.
    "run_stopped",
    # Errors (status ``error``):
    "model_error",  # a model call failed; ``kind`` says how (MODEL_ERROR_KINDS)
    "invalid_result",  # an agent's result was invalid twice
    "no_result",  # an agent returned no result after its forced landing, even relaunched
    "tool_failed",  # a tool failed unexpectedly; ``kind`` is the error's type
    "run_ended",  # an agent whose run ended before it returned (its process died)
    "process_died",  # a run whose process stopped unexpectedly (the reaper)
    "not_taken",  # a run no worker took in time
    "not_queued",  # a run that could not be handed to a worker
    "server_stopped",  # a run left running by a server that stopped (failed at the next start)
    "refused",  # a run refused when it was about to execute; ``kind`` is the refusal's code
    "infrastructure",  # a service the run needs failed (the ledger, the channel layer, the database); ``kind``
    # is the error's type
    "unexpected",  # the assistant failed unexpectedly
]

StopCode: TypeAlias = Literal[
    "stopped_by_user", "category_budget", "cost_cap", "spend_limit", "delegation_cap", "server_shutdown"
]
"""The causes a run (or an agent) is stopped with: what a ``CancelToken`` and ``RunStopped`` carry."""
STOP_CODES: frozenset[str] = frozenset(get_args(StopCode))

ModelErrorKind: TypeAlias = Literal[
    "rate_limited", "server_error", "bad_request", "authentication", "unreachable", "timeout", "broken_stream"
]
"""How a model call failed (a ``ModelCallFailed`` step's ``error_kind``, a ``model_error`` cause's ``kind``)."""


class Cause(BaseModel):
    """Why: a code, and the numbers or the kind that go with it."""

    model_config = ConfigDict(frozen=True)

    code: Annotated[CauseCode, KEEP]
    used: float | None = None
    limit: float | None = None
    kind: Annotated[str | None, KEEP] = None
    agent_id: Annotated[str | None, KEEP] = None
    """The agent this cause concerns alone (an agent stopped by the user while its run goes on); None: the run."""
    because: Cause | None = None
    """``run_stopped``: the cause of the stop that stopped the tool (its run's, or its agent's)."""

    @property
    def is_stop(self) -> bool:
        """A cause a run or an agent is stopped with (``STOP_CODES``)."""
        return self.code in STOP_CODES

    def english(self) -> str:
        """The cause in English, as the API's ``reason`` and the main model read it."""
        used, limit = self.used, self.limit
        match self.code:
            case "rounds":
                return f"round budget reached ({_n(used)}/{_n(limit)} rounds)"
            case "tokens":
                return f"token budget reached ({_n(used)}/{_n(limit)} tokens)"
            case "seconds":
                if used is None:
                    return f"time budget reached ({_n(limit)} s)"
                return f"time budget reached ({used:.0f}/{_n(limit)} s)"
            case "output_cut":
                return "output cut at the token cap"
            case "stopped_by_user":
                return "stopped on request" if self.agent_id is None else "this agent was stopped on request"
            case "category_budget":
                return "stopped: the category's monthly budget is reached"
            case "spend_limit":
                if used is None or limit is None:
                    return "stopped: the spend limit is reached"
                return f"stopped: the spend limit is reached ({used:.4f} of {limit:.4f} EUR)"
            case "delegation_cap":
                if limit is None:
                    return "stopped: the delegation cap is reached"
                return f"stopped: the delegation cap is reached ({_n(used)}/{_n(limit)} delegations)"
            case "server_shutdown":
                return "stopped: the server executing it was shut down"
            case "run_stopped":
                if self.because is None:
                    return "stopped because its run stopped"
                return f"stopped because its run stopped ({self.because.english()})"
            case "cost_cap":
                if used is None or limit is None:
                    return "stopped: the task's cost cap is reached"
                return f"stopped: the task's cost cap is reached ({used:.4f} of {limit:.4f} EUR)"
            case "model_error":
                return f"the model call failed ({self.kind or 'other'})"
            case "invalid_result":
                return "its result was invalid twice"
            case "no_result":
                return "it returned no result after the forced landing, even when relaunched"
            case "tool_failed":
                return f"a tool failed ({self.kind})" if self.kind else "a tool failed"
            case "run_ended":
                return "the run ended before this agent returned"
            case "process_died":
                return (
                    "The process writing this answer stopped unexpectedly (it was killed, or its machine was lost). "
                    "Ask again for a complete answer."
                )
            case "not_taken":
                return "No worker took this request in time. Ask again in a moment."
            case "not_queued":
                return "The request could not be handed to a worker (the queue is unreachable). Ask again in a moment."
            case "server_stopped":
                return "The server stopped while this answer was being written; what it had written so far is kept."
            case "refused":
                return f"The request was refused ({self.kind})." if self.kind else "The request was refused."
            case "infrastructure":
                return (
                    f"A service the assistant needs failed ({self.kind}); what it had written so far is kept."
                    if self.kind
                    else "A service the assistant needs failed; what it had written so far is kept."
                )
            case "unexpected":
                return "The assistant failed unexpectedly; what it had written so far is kept."


def error_kind(error: ModelError) -> ModelErrorKind:
    """The kind of a model call's failure."""
    if isinstance(error, RateLimited):
        return "rate_limited"
    if isinstance(error, AuthenticationFailed):
        return "authentication"
    if isinstance(error, BadModelRequest):
        return "bad_request"
    if isinstance(error, ModelTimeout):
        return "timeout"
    if isinstance(error, MalformedResponse):
        return "broken_stream"
    if error.unsent:
        return "unreachable"
    return "server_error" if error.status is not None else "broken_stream"


def model_error(e: ModelError) -> Cause:
    """The cause of a failed model call, by the kind of its error."""
    return Cause(code="model_error", kind=error_kind(e))


def stop_cause(e: BudgetExceeded) -> Cause:
    """The cause a run stops with when its ledger refuses a call: a task's cost cap, a spend limit (with what was
    spent of it, in EUR), else its category's budget."""
    if isinstance(e, CostCapReached):
        return Cause(code="cost_cap")
    if isinstance(e, SpendLimitReached):
        return Cause(code="spend_limit", used=round(e.used_eur, 4), limit=round(e.limit_eur, 4))
    return Cause(code="category_budget")


def _n(value: float | None) -> str:
    return "?" if value is None else f"{value:,.0f}"
