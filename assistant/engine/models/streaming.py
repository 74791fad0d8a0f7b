"""What the SDK adapters share: their base (``ServedModel``), retries, the tool-call buffer, the prompt cache key,
finish reasons, the engine's error for a provider's HTTP error status.

A call is retried only while nothing of it has reached the caller: a rate limit waits for the
provider's ``Retry-After`` (seconds or an HTTP date; else it backs off exponentially), a server error, a
timeout or a stream that broke off before its first part are retried a bounded number of times
(``RetryPolicy``: tries in all, the first one included). No wait goes past the call's deadline (the
agent's or the run's time left, ``tracked_call``): a wait that would is not made, and the error goes up at
once, saying so. An attempt that reached the
provider and broke off (not one it refused with an HTTP error) is said with an ``AttemptCut`` part, so
that it is billed. Text already streamed to
the user cannot be taken back, so a stream that breaks after that raises ``MalformedResponse``.
"""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
import json
import random
import time
import uuid
from abc import abstractmethod
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator, Mapping
from contextlib import aclosing, contextmanager
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import Any, Generic, TypeVar

from ..catalogue import ModelInfo
from ..causes import error_kind
from ..errors import (
    AuthenticationFailed,
    BadModelRequest,
    MalformedResponse,
    ModelError,
    ModelTimeout,
    ModelUnavailable,
    RateLimited,
)
from ..events import Attempt
from ..types import AttemptCut, FinishReason, Message, ModelRequest, StreamPart, ToolCall
from .base import Model

P = TypeVar("P")
"""A provider: its client, key and base URL (``providers/``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """How many times, and after how long, a failed call is tried again."""

    attempts: int = 3
    """Tries in all for a server error, a timeout or a stream broken before its first part."""
    rate_limit_attempts: int = 5
    """Tries in all when the provider answers 429."""
    base_delay: float = 1.0
    max_delay: float = 20.0
    max_retry_after: float = 60.0
    """A ``Retry-After`` longer than this is not waited for: the error goes up at once."""

    def backoff(self, failures: int) -> float:
        """Exponential backoff with jitter after ``failures`` failures (1, 2, ...)."""
        delay = min(self.max_delay, self.base_delay * 2.0 ** (failures - 1))
        return delay * (0.5 + random.random() / 2)

    def delay(self, error: ModelError, failures: int, rate_limits: int) -> float | None:
        """Seconds to wait before the next try, or None when the error must go up."""
        if isinstance(error, RateLimited):
            if rate_limits >= self.rate_limit_attempts:
                return None
            if error.retry_after is not None:
                return error.retry_after if error.retry_after <= self.max_retry_after else None
            return self.backoff(rate_limits)
        if isinstance(error, ModelUnavailable | ModelTimeout | MalformedResponse):
            return self.backoff(failures) if failures < self.attempts else None
        return None


NO_RETRY = RetryPolicy(attempts=1, rate_limit_attempts=1)


@dataclass(slots=True)
class CallState:
    """The model call being streamed, as its caller and its retries share it."""

    deadline: float
    """When it must end (``time.monotonic()``): its retries never wait past it."""
    waiting: bool = False
    """Between two tries: the last one ended (refused, or cut and said with ``AttemptCut``), the next one is not
    sent yet. A call aborted then has nothing in flight to bill."""
    sent_at: float = field(default_factory=time.time)
    """When the current try was sent (seconds since the epoch): each try is one request to the provider."""
    retried: list[Attempt] = field(default_factory=list)
    """The tries that failed and were tried again, in order."""
    api_model: str = ""
    """The model's name at its provider (``Model.api_model``), for the call's event."""


_call: contextvars.ContextVar[CallState | None] = contextvars.ContextVar("model_call", default=None)


@contextmanager
def tracked_call(state: CallState) -> Iterator[CallState]:
    """While in this block, the model call being streamed must end by ``state.deadline``, and says in ``state`` when
    it waits between tries. ``RunContext.call_model`` sets the deadline to the call's timeout or the run's time
    left, whichever comes first (an agent's timeout is within its time left)."""
    token = _call.set(state)
    try:
        yield state
    finally:
        _call.reset(token)


def seconds_left() -> float | None:
    """The seconds left before the current call's deadline, or None outside ``tracked_call``."""
    state = _call.get()
    return None if state is None else state.deadline - time.monotonic()


def _too_long(error: ModelError, delay: float, left: float) -> ModelError:
    """``error`` again, saying the wait it asked for does not fit in the time left (same type, same billing)."""
    note = f"{error} (not tried again: that means waiting {delay:.1f} s, and {max(0.0, left):.1f} s are left)"
    if isinstance(error, RateLimited):
        again: ModelError = RateLimited(note, error.retry_after, status=error.status)
    else:
        again = type(error)(note, status=error.status, unsent=error.unsent)
    return again


async def retrying(
    attempt: Callable[[], AsyncGenerator[StreamPart, None]], policy: RetryPolicy
) -> AsyncIterator[StreamPart]:
    """The parts of ``attempt()``, tried again per ``policy`` while none has been yielded."""
    failures = rate_limits = 0
    while True:
        yielded = False
        try:
            async with aclosing(attempt()) as parts:
                async for part in parts:
                    yielded = True
                    yield part
            return
        except ModelError as e:
            if yielded:
                if isinstance(e, MalformedResponse | ModelUnavailable | ModelTimeout):
                    raise MalformedResponse(f"the answer broke off after it had started ({e})") from e
                raise
            if isinstance(e, RateLimited):
                rate_limits += 1
            else:
                failures += 1
            delay = policy.delay(e, failures, rate_limits)
            if delay is None:
                raise
            left = seconds_left()
            if left is not None and delay >= left:
                raise _too_long(e, delay, left) from e
            if not e.bills_nothing:
                yield AttemptCut()  # it reached the provider: billed, though the caller saw nothing of it
            state = _call.get()
            if state is not None:
                state.retried.append(Attempt(started_at=state.sent_at, seconds=time.time() - state.sent_at,
                                             error_kind=error_kind(e)))  # fmt: skip
                state.waiting = True
            await asyncio.sleep(delay)
            if state is not None:
                state.waiting = False
                state.sent_at = time.time()


class ServedModel(Model, Generic[P]):
    """A model an SDK adapter serves through its ``provider``; ``api_model`` is its name on the server. A call is one
    attempt after another (``_attempt``) under its retry policy (``retrying``)."""

    def __init__(
        self,
        info: ModelInfo,
        provider: P,
        *,
        api_model: str | None = None,
        retry: RetryPolicy | None = None,
    ) -> None:
        super().__init__(info)
        self.provider = provider
        self.api_model = api_model or info.id
        self.retry = retry or RetryPolicy()

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamPart]:
        return retrying(lambda: self._attempt(request), self.retry)

    @abstractmethod
    def _attempt(self, request: ModelRequest) -> AsyncGenerator[StreamPart, None]:
        """One try of the call: its stream, or an engine error (``retrying`` decides whether to try again)."""


def retry_after(headers: Mapping[str, str]) -> float | None:
    """The delay a 429 or 503 asks for: ``retry-after-ms``, or ``Retry-After`` in seconds or as a date."""
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


def status_error(who: str, status: int, detail: str, headers: Mapping[str, str], key_setting: str) -> ModelError:
    """The engine's error for the HTTP error ``status`` that ``who``'s server answered (``detail``: what its body
    said); a refused key names the setting that holds it (``key_setting``)."""
    if status == 429:
        return RateLimited(f"{who} is rate limiting this key: {detail}", retry_after(headers))
    if status in (401, 403):
        return AuthenticationFailed(
            f"{who} refused the API key (HTTP {status}): {detail}. Check {key_setting}.", status=status
        )
    if status >= 500:
        return ModelUnavailable(f"the {who} server failed (HTTP {status}): {detail}", status=status)
    return BadModelRequest(f"{who} rejected the request (HTTP {status}): {detail}", status=status)


@dataclass(slots=True)
class _Slot:
    index: int
    id: str
    name: str
    arguments: str


class ToolCallBuffer:
    """Tool calls streamed in pieces: keyed by index, the id and name come once, the arguments in fragments.

    A new id at an index already used starts a new call (some servers number every call 0).
    """

    def __init__(self) -> None:
        self._slots: list[_Slot] = []
        self._by_index: dict[int, _Slot] = {}

    def add(
        self, index: int | None, call_id: str | None, name: str | None, arguments: str | Mapping[str, Any] | None
    ) -> None:
        if call_id == "null":  # the Mistral SDK's default for a missing id
            call_id = None
        key = index if index is not None else len(self._slots)
        slot = self._by_index.get(key)
        if slot is None or (call_id and slot.id and call_id != slot.id):
            slot = _Slot(key, call_id or "", "", "")
            self._slots.append(slot)
            self._by_index[key] = slot
        if call_id and not slot.id:
            slot.id = call_id
        if name:
            slot.name = name if not slot.name else slot.name
        if isinstance(arguments, Mapping):
            slot.arguments += json.dumps(arguments, ensure_ascii=False)
        elif arguments:
            slot.arguments += arguments

    def calls(self) -> list[ToolCall]:
        """The complete calls, in order. The arguments are the raw text: the engine parses and reports them."""
        calls: list[ToolCall] = []
        for slot in self._slots:
            if not slot.name:
                raise MalformedResponse("the model streamed a tool call without a name")
            call_id = slot.id if slot.id and slot.id != "null" else uuid.uuid4().hex[:9]
            calls.append(ToolCall(id=call_id, name=slot.name, arguments=slot.arguments or "{}"))
        return calls


def prompt_cache_key(messages: tuple[Message, ...]) -> str:
    """A key naming the prefix every request of one conversation or one agent shares.

    Providers route requests with the same key to the same cache: the system prompt and the first
    message do not change from one round to the next, whatever is appended after them.
    """
    head = [(m.role, m.content) for m in messages[:2]]
    return hashlib.sha256(json.dumps(head, ensure_ascii=False).encode()).hexdigest()[:32]


def finish_reason(raw: str | None, has_tool_calls: bool) -> FinishReason:
    """The engine's finish reason for a provider's (a forced call may finish with "stop")."""
    if raw == "length":
        return "length"
    if has_tool_calls:
        return "tool_calls"
    return "stop"
