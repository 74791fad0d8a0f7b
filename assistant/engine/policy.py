"""What an organisation allows: models, reasoning levels, agent budgets. Checked before any call."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, TypeAlias

from .catalogue import Catalogue
from .errors import RequestRefused
from .refusals import Refusal, RefusalCode
from .scope import DOC_PREFIX, KB_PREFIX, MCP_PREFIX, Scope, parse_document
from .types import ClientTools, Effort, Message, Sampling

Level: TypeAlias = Literal["rapide", "standard", "approfondi", "maximal"]
LEVELS: tuple[Level, ...] = ("rapide", "standard", "approfondi", "maximal")


@dataclass(frozen=True, slots=True, kw_only=True)
class LevelSettings:
    """One reasoning level: the provider effort, the main loop's round limit, the agents' round budget.

    Both are ceilings: the main loop answers without tools past its limit, and no agent of a run at this level gets
    more rounds than ``agent_rounds``, whatever its task asks. ``agent_rounds == 0`` means no delegation at this level.
    """

    effort: Effort | None
    main_rounds: int
    agent_rounds: int


DEFAULT_LEVELS: Mapping[Level, LevelSettings] = {
    "rapide": LevelSettings(effort="low", main_rounds=2, agent_rounds=0),
    "standard": LevelSettings(effort="medium", main_rounds=4, agent_rounds=0),
    "approfondi": LevelSettings(effort="high", main_rounds=6, agent_rounds=5),
    "maximal": LevelSettings(effort="high", main_rounds=10, agent_rounds=10),
}


ResourceKind: TypeAlias = Literal["kb", "web", "code", "mcp"]
RESOURCE_KINDS: tuple[ResourceKind, ...] = ("kb", "web", "code", "mcp")


def resource_kind(resource: str) -> ResourceKind | None:
    """``kb`` for ``kb:<slug>`` and ``doc:<slug>/<id>`` (chosen documents of a base), ``web``, ``code``, ``mcp`` for
    ``mcp:<name>``; None for anything else (``agents`` included)."""
    if resource.startswith((KB_PREFIX, DOC_PREFIX)):
        return "kb"
    if resource.startswith(MCP_PREFIX):
        return "mcp"
    if resource == "web":
        return "web"
    if resource == "code":
        return "code"
    return None


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentProfile:
    """A named agent profile an organisation defines and a delegation can name.

    ``tools`` are the kinds of resources an agent of this profile may receive.
    """

    name: str
    instructions: str
    default_model: str | None = None
    tools: frozenset[ResourceKind] = frozenset(RESOURCE_KINDS)


@dataclass(frozen=True, slots=True, kw_only=True)
class Policy:
    """An organisation's rules for one request. ``allowed_models=None`` keeps the whole catalogue."""

    allowed_models: frozenset[str] | None = None
    levels: Mapping[Level, LevelSettings] = field(default_factory=lambda: dict(DEFAULT_LEVELS))
    max_parallel_agents: int = 4
    default_main_rounds: int = 6
    default_agent_rounds: int = 5
    agent_max_tokens: int = 60_000
    agent_call_timeout: float = 60.0
    main_call_timeout: float = 180.0
    request_seconds: float = 300.0
    conclude_reserve_seconds: float = 30.0
    cheaper_factor: float = 2.0
    profiles: Mapping[str, AgentProfile] = field(default_factory=dict)

    def allows(self, model: str) -> bool:
        return self.allowed_models is None or model in self.allowed_models

    def allowed_ids(self, catalogue: Catalogue) -> list[str]:
        return [m for m in catalogue if self.allows(m)]


@dataclass(frozen=True, slots=True, kw_only=True)
class RunRequest:
    """One request: the conversation so far (ending with the user's message, or with an API client's results of its
    tools, ``client_tools``), model, level, resources."""

    messages: tuple[Message, ...]
    model: str
    level: Level | None = None
    resources: tuple[str, ...] = ()
    sampling: Sampling | None = None
    """An API client's output cap, sampling and format, for the main model's calls."""
    client_tools: ClientTools | None = None
    """An API client's function tools, for the main model only."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    """A request checked against the policy: what the run may do."""

    model: str
    effort: Effort | None
    level_effort: Effort | None
    main_rounds: int
    scope: Scope
    agents: bool
    agent_rounds: int


RESOURCE_NAMES = ("web", "code", "agents")


def plan_request(request: RunRequest, catalogue: Catalogue, policy: Policy) -> Plan:
    """Check a request against the policy; raise ``RequestRefused`` with a plain message otherwise.

    Knowledge-base and connector existence and read rights are checked by the caller's knowledge
    backend and connector source (``loop.run_chat`` asks them before any model call).
    """
    if request.model not in catalogue or not policy.allows(request.model):
        code: RefusalCode = "model_not_found" if request.model not in catalogue else "model_not_allowed"
        allowed = tuple(policy.allowed_ids(catalogue))
        raise RequestRefused(Refusal(code=code, model=request.model, allowed=allowed))
    last = request.messages[-1] if request.messages else None
    # A turn ends with the user's message, or with the results of an API client's tools that the main model called.
    if last is None or not (last.role == "tool" or (last.role == "user" and last.content.strip())):
        raise RequestRefused(Refusal(code="empty_message"))
    if request.level is not None and request.level not in policy.levels:
        raise RequestRefused(Refusal(code="unknown_level", level=request.level))
    for r in request.resources:
        if not (
            r in RESOURCE_NAMES
            or any(r.startswith(prefix) and len(r) > len(prefix) for prefix in (KB_PREFIX, MCP_PREFIX))
            or parse_document(r) is not None
        ):
            raise RequestRefused(Refusal(code="unknown_resource", resource=r))
    scope = Scope.from_resources(r for r in request.resources if r != "agents")
    wants_agents = "agents" in request.resources
    if wants_agents and scope.is_empty:
        raise RequestRefused(Refusal(code="agents_need_resource"))
    if request.level is None:
        effort: Effort | None = None
        main_rounds, agent_rounds = policy.default_main_rounds, policy.default_agent_rounds
    else:
        settings = policy.levels[request.level]
        effort, main_rounds, agent_rounds = settings.effort, settings.main_rounds, settings.agent_rounds
    agents = wants_agents and agent_rounds > 0
    if agents and not catalogue.cheaper_than(request.model, policy.allowed_ids(catalogue), policy.cheaper_factor):
        agents = False  # no allowed model is cheap enough for delegation to pay
    return Plan(
        model=request.model,
        effort=catalogue[request.model].effort_for(effort),
        level_effort=effort,
        main_rounds=main_rounds,
        scope=scope,
        agents=agents,
        agent_rounds=agent_rounds,
    )
