"""Engine errors. The tree:

EngineError
├── RequestRefused        the request breaks the policy; refused before any model call
│   └── ContextTooLong    its first call cannot fit the model's context window
├── ModelError            a model call failed (providers map SDK errors into these)
│   ├── ModelTimeout      the call took longer than its hard timeout
│   ├── ModelUnavailable  the provider could not be reached or answered with an error
│   │   └── RateLimited   the provider refused the call for too many requests
│   ├── AuthenticationFailed  the provider refused the key (or there is none)
│   ├── BadModelRequest   the provider rejected the request as invalid
│   └── MalformedResponse the response broke off or could not be read
├── ToolError             a tool refused or failed in a way the model should read and correct
│   └── OutOfScope        a resource outside the caller's scope, or one that does not exist
├── ToolFailed            a tool failed in a way no ToolError foresees: the run (or the agent) fails with it
├── BudgetExceeded        an agent's calls, tokens or seconds are used up
│   ├── CostCapReached    a run's cost cap (a scheduled task's, per execution) is reached
│   └── SpendLimitReached a member's or an API key's monthly spend limit (a hard cap) cannot take the next call
└── RunStopped            Stop, as an exception, with its cause (``cancel.RunStopped``)

Anything else that escapes the engine (the ledger's database, the recorder's channel layer) is no tool's failure:
the run's executor fails the run with the cause ``infrastructure``, or ``unexpected``.
"""

from __future__ import annotations

from .refusals import Refusal


class EngineError(Exception):
    """Base of every error the engine raises on purpose."""


class RequestRefused(EngineError):
    """The request is refused before it starts: ``refusal`` says why as data (a code and its parameters),
    the message in English."""

    def __init__(self, refusal: Refusal) -> None:
        super().__init__(refusal.english())
        self.refusal = refusal

    code = "request_refused"


class ContextTooLong(RequestRefused):
    """A request's first call cannot fit its model's context window, even after compaction.

    ``tokens`` is the call's estimated size (its history, tool specs and output cap), ``window`` the model's.
    """

    code = "context_length_exceeded"

    def __init__(self, model: str, tokens: int, window: int) -> None:
        super().__init__(Refusal(code="context_too_long", model=model, used=tokens, limit=window))
        self.model = model
        self.tokens = tokens
        self.window = window


class ModelError(EngineError):
    """A model call failed.

    ``status`` is the HTTP status the provider answered with (4xx, 5xx) before anything streamed, and
    ``unsent`` says the request never reached it (the connection could not be opened): in both cases
    the provider served nothing and nothing is billed (``bills_nothing``). Any other failure (a stream
    that broke off, a timeout) happened after the request was sent, and is billed.
    """

    def __init__(self, message: str = "", *, status: int | None = None, unsent: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.unsent = unsent

    @property
    def bills_nothing(self) -> bool:
        return self.status is not None or self.unsent


class ModelTimeout(ModelError):
    """A model call exceeded its hard timeout."""


class ModelUnavailable(ModelError):
    """The provider could not be reached or answered with an error."""


class RateLimited(ModelUnavailable):
    """The provider refused the call for too many requests; ``retry_after`` is its delay, if given."""

    def __init__(self, message: str, retry_after: float | None = None, *, status: int | None = 429) -> None:
        super().__init__(message, status=status)
        self.retry_after = retry_after


class AuthenticationFailed(ModelError):
    """The provider refused the API key, or none is configured; retrying cannot help."""


class BadModelRequest(ModelError):
    """The provider rejected the request as invalid (unknown model, bad parameter, too long)."""


class MalformedResponse(ModelError):
    """The response broke off in the middle or could not be read as the provider's protocol."""


class ToolError(EngineError):
    """A tool error sent back to the model as the tool's result (not a failure of the run)."""


class OutOfScope(ToolError):
    """A resource outside the caller's scope, or one that does not exist."""


class ToolFailed(EngineError):
    """A tool failed in a way no ``ToolError`` foresees (``tool``: its name, ``kind``: its error's type); the run, or
    the agent that called it, fails with the cause ``tool_failed``."""

    def __init__(self, tool: str, error: Exception) -> None:
        super().__init__(f"{type(error).__name__}: {error}")
        self.tool = tool
        self.kind = type(error).__name__


class BudgetExceeded(EngineError):
    """An agent's budget of calls, tokens or seconds is used up."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class CostCapReached(BudgetExceeded):
    """A run's cost cap is reached; the run stops as Stop does, with the cause ``cost_cap``."""


class SpendLimitReached(BudgetExceeded):
    """A spend limit's hard cap cannot take the next call; the run stops as Stop does, with the cause ``spend_limit``
    (``used_eur``: spent this month, ``limit_eur``: the limit)."""

    def __init__(self, reason: str, used_eur: float, limit_eur: float) -> None:
        super().__init__(reason)
        self.used_eur = used_eur
        self.limit_eur = limit_eur
