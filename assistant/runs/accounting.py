"""Where a run's spending is admitted and charged: the budgets app plugs in here, at its start.

The ``runs`` app sits below ``budgets`` (whose usage report reads runs), so it does not import it: the
budgets app registers its ``Accounting`` in its ``AppConfig.ready`` (``budgets.apps``). A run is never
started without one: with none registered (``assistant.budgets`` not installed) intake fails loudly
rather than letting runs spend unchecked.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from django.core.exceptions import ImproperlyConfigured

from assistant.engine.usage import UsageLedger
from assistant.orgs.models import ApiKey, Organisation


@dataclass(frozen=True, slots=True)
class Admission:
    """A request admitted by ``Accounting.admit``: its category's slug (empty when the organisation has none), and
    what the accounting read to admit it (``held``, its own), so that the reservation and the run's ledger that
    follow do not read it again."""

    category: str
    held: Any = None
    spend: Any = None
    """The month of the spend limit the run counts against (its key's, else its member's), when one applies."""


class Accounting(Protocol):
    def admit(
        self,
        org: Organisation,
        category: str,
        text: str,
        model: str,
        *,
        user_id: int | None = None,
        api_key: ApiKey | None = None,
    ) -> Admission:
        """The request's category if it may start; raises ``RequestRefused`` when that category, or the spend limit of
        ``api_key`` (else of the member ``user_id``), cannot take its first call."""
        ...

    def reserve(self, organisation_id: int, admission: Admission, run_id: uuid.UUID, tokens: int) -> Admission:
        """Hold the run's first call (``tokens``) on its category before the run starts, in intake's transaction;
        raises ``RequestRefused`` when it does not fit. The run's ledger hands that hold to its first model call.
        Returns the admission with what the reservation read, for the run's ledger (``ledger``)."""
        ...

    def ledger(
        self, organisation_id: int, category: str, run_id: uuid.UUID | None = None, admission: Admission | None = None
    ) -> UsageLedger | None:
        """The ledger a run of this category charges each model call to (None: a run with no category); with the
        run's ``admission``, read from it rather than from the database."""
        ...

    def release(self, run_id: uuid.UUID) -> int:
        """Give back whatever the run still holds (it ended, or its process died: its calls will never settle), on
        its category and its spend limit; returns the tokens released."""
        ...


@runtime_checkable
class Deferred(Protocol):
    """A ledger that writes a call's settlement later (with the next reservation): the run's end takes what is left."""

    def take_unsettled(self) -> Callable[[], None] | None:
        """What is left to settle, to be called in the database's thread; None when nothing is."""
        ...


def take_unsettled(ledger: UsageLedger | None) -> Callable[[], None] | None:
    """What ``ledger`` has left to settle, when it defers its settlements (``Deferred``)."""
    return ledger.take_unsettled() if isinstance(ledger, Deferred) else None


# Set once, by the budgets app in its ``AppConfig.ready`` (above this one: not imported here); no run's inputs. A run's
# ledger, built from it at intake (or by a worker, with the same function), travels in its ``start.RunStart``.
_registered: Accounting | None = None


def register(accounting: Accounting | None) -> Accounting | None:
    """Charge runs to ``accounting`` from now on (None: to none, and no run starts); returns the one it replaces."""
    global _registered
    previous, _registered = _registered, accounting
    return previous


def accounting() -> Accounting:
    if _registered is None:
        raise ImproperlyConfigured("No accounting is registered for runs: is assistant.budgets in INSTALLED_APPS?")
    return _registered
