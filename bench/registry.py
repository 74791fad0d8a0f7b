"""The benchmark registry: functions that each return result rows, and the rows themselves.

Adding a benchmark is adding one module to ``bench/benchmarks/`` with a function like::

    @benchmark("Websocket latency", order=40)
    def websocket_latency() -> list[Result]:
        \"\"\"How it was measured, in a short paragraph (it goes into docs/BENCHMARKS.md).\"\"\"
        ...
        return [Result(name="Round trip (median)", figure=ms, unit="ms", target=below(50))]

The function may be ``async``: it then runs in a fresh event loop of its own.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import operator
import pkgutil
import time
import traceback
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

_COMPARE: dict[str, Callable[[float, float], bool]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
_SYMBOL = {"<": "<", "<=": "≤", ">": ">", ">=": "≥"}


@dataclass(frozen=True, slots=True)
class Target:
    """A threshold a figure must meet, e.g. ``below(1.0)`` ms or ``at_least(0.9)``."""

    op: str
    value: float

    def met_by(self, figure: float) -> bool:
        return _COMPARE[self.op](figure, self.value)

    def describe(self, unit: str) -> str:
        return f"{_SYMBOL[self.op]} {self.value:,g}{_unit(unit)}"


def below(value: float) -> Target:
    return Target("<", value)


def at_most(value: float) -> Target:
    return Target("<=", value)


def at_least(value: float) -> Target:
    return Target(">=", value)


@dataclass(frozen=True, slots=True, kw_only=True)
class Result:
    """One row of the report: a measured figure, its unit, its target (if any) and notes."""

    name: str
    figure: float
    unit: str = ""
    target: Target | None = None
    notes: str = ""
    digits: int = 2
    summary: bool = True
    """Whether the row is also in the report's summary table (a profile's shares are only in their section)."""

    @property
    def passed(self) -> bool | None:
        """True or False against the target; None for a figure reported for information."""
        return None if self.target is None else self.target.met_by(self.figure)

    @property
    def figure_text(self) -> str:
        return f"{_number(self.figure, self.digits)}{_unit(self.unit)}"

    @property
    def target_text(self) -> str:
        return "—" if self.target is None else self.target.describe(self.unit)

    @property
    def verdict(self) -> str:
        return {None: "—", True: "pass", False: "**FAIL**"}[self.passed]


BenchmarkFunction = Callable[[], Sequence[Result] | Awaitable[Sequence[Result]]]


@dataclass(frozen=True, slots=True)
class Benchmark:
    """A registered benchmark: its title, how it is measured (the function's docstring), the function."""

    key: str
    title: str
    method: str
    function: BenchmarkFunction
    order: int = 100

    def run(self) -> Outcome:
        started = time.perf_counter()
        try:
            value = self.function()
            if inspect.isawaitable(value):
                value = asyncio.run(_awaited(value))
            rows = list(value)
            error = None
        except Exception:
            rows, error = [], traceback.format_exc()
        return Outcome(self, rows, time.perf_counter() - started, error)


async def _awaited(value: Awaitable[Sequence[Result]]) -> Sequence[Result]:
    return await value


@dataclass(slots=True)
class Outcome:
    """What running one benchmark gave: its rows, how long it took, or the error that stopped it."""

    benchmark: Benchmark
    rows: list[Result] = field(default_factory=list)
    seconds: float = 0.0
    error: str | None = None

    @property
    def failed(self) -> bool:
        return self.error is not None or any(r.passed is False for r in self.rows)


REGISTRY: dict[str, Benchmark] = {}


def benchmark(title: str, *, order: int = 100) -> Callable[[BenchmarkFunction], BenchmarkFunction]:
    """Register a benchmark function; its docstring is the paragraph saying how it is measured."""

    def register(function: BenchmarkFunction) -> BenchmarkFunction:
        key = function.__name__
        if key in REGISTRY:
            raise ValueError(f"two benchmarks are named {key!r}")
        method = inspect.cleandoc(function.__doc__ or "")
        REGISTRY[key] = Benchmark(key=key, title=title, method=method, function=function, order=order)
        return function

    return register


def discover() -> list[Benchmark]:
    """Import every module of ``bench.benchmarks`` and return the registered benchmarks in order."""
    from . import benchmarks

    for module in pkgutil.iter_modules(benchmarks.__path__):
        if not module.name.startswith("_"):
            importlib.import_module(f"{benchmarks.__name__}.{module.name}")
    return sorted(REGISTRY.values(), key=lambda b: (b.order, b.key))


def _number(value: float, digits: int) -> str:
    return f"{value:,.{digits}f}"


def _unit(unit: str) -> str:
    if not unit:
        return ""
    return unit if unit in ("%", "×") else f" {unit}"
