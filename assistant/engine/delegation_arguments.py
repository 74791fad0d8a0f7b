"""The ``agents`` tool's arguments: a pydantic model built per run (``agents_arguments``: the models, resources and
profiles it may name, the round budget of its level, which no task may exceed: a larger ``max_rounds`` is clamped to
it), from which the tool's JSON schema is derived (``parameters``) and by which each task is validated
(``validated_tasks``: a task's arguments, or why they are refused, in the words the main model reads)."""

from __future__ import annotations

import functools
from typing import Any, ClassVar, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    ValidatorFunctionWrapHandler,
    create_model,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

REFUSED = "task_refused"  # the type of a validation error whose message is said as it is, without its place

MAX_TASKS_PER_CALL = 4
MAX_DOCUMENTS_PER_TASK = 20

REQUIRED = ("instruction", "model", "resources")  # in the schema; checked with our own sentences when missing


def _task_schema(schema: dict[str, Any], cls: type) -> None:
    """A task's schema as the main model reads it: the fields it must give required, those of no use to this run
    (``hidden``: profiles when the organisation has none, documents without knowledge bases) left out."""
    properties = schema.get("properties", {})
    for name in getattr(cls, "hidden", ()):
        properties.pop(name, None)
    for name in REQUIRED:
        properties.get(name, {}).pop("default", None)
    schema["required"] = list(REQUIRED)


class TaskArguments(BaseModel):
    """One task of an ``agents`` call, as the main model writes it (``agents_arguments`` narrows it for a run)."""

    model_config = ConfigDict(extra="ignore", json_schema_extra=_task_schema)
    hidden: ClassVar[frozenset[str]] = frozenset()

    instruction: str = Field("", description="What the agent must find, written for it.", validate_default=True)
    model: str = ""
    resources: list[str] = Field(
        default_factory=list, description="The resources this agent may read (a subset of yours)."
    )
    max_rounds: int = Field(5, ge=1)
    profile: str = ""
    documents: list[str] = Field(default_factory=list, max_length=MAX_DOCUMENTS_PER_TASK)

    _rounds_asked: int | None = PrivateAttr(None)
    """The ``max_rounds`` the main model asked, when more than the level allows (it got the level's budget)."""

    @model_validator(mode="wrap")
    @classmethod
    def _asked(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        task = handler(data)
        raw = data.get("max_rounds") if isinstance(data, dict) else None
        if isinstance(raw, str) and raw.strip().isdigit():
            raw = int(raw)
        if isinstance(raw, int | float) and not isinstance(raw, bool) and int(raw) > task.max_rounds:
            task._rounds_asked = int(raw)
        return task

    @property
    def rounds_asked(self) -> int | None:
        return self._rounds_asked

    @field_validator("instruction", mode="after")
    @classmethod
    def _instruction(cls, value: str) -> str:
        if not value.strip():
            raise PydanticCustomError(REFUSED, "The task has no instruction.")
        return value.strip()

    @field_validator("resources", mode="before")
    @classmethod
    def _resources(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [value]
        return [] if value is None else value

    @field_validator("documents", mode="before")
    @classmethod
    def _documents(cls, value: Any) -> Any:
        if value is None:
            return []
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(i, str) and i.strip() for i in value):
            raise PydanticCustomError(REFUSED, "documents must be a list of document ids (as kb_search returns them).")
        return list(dict.fromkeys(i.strip() for i in value))


class AgentsArguments(BaseModel):
    """The arguments of an ``agents`` call."""

    tasks: list[TaskArguments] = Field(min_length=1)


@functools.lru_cache(maxsize=256)
def agents_arguments(
    models: tuple[str, ...],
    resources: tuple[str, ...],
    profiles: tuple[str, ...],
    rounds: int,
    documents: bool,
) -> type[AgentsArguments]:
    """The ``agents`` tool's arguments for one run: the models it may name (``models``), its ``resources``, its
    agent ``profiles``, the round budget of its level (``rounds``: each agent's by default, and the most a task may
    ask: an admin's level binds, whatever the main model asks), ``documents`` when it has knowledge bases to choose
    them in. The JSON schema the main model reads is this model's; a task over the budget is given the budget (its
    ``rounds_asked`` says what it asked)."""
    fields: dict[str, Any] = {
        "model": (str, Field("", json_schema_extra={"enum": list(models)})),
        "resources": (
            list[str],
            Field(
                default_factory=list,
                description="The resources this agent may read (a subset of yours).",
                json_schema_extra={"items": {"type": "string", "enum": list(resources)}},
            ),
        ),
        "max_rounds": (
            int,
            Field(
                rounds,
                ge=1,
                le=rounds,
                description=f"Tool rounds for this agent: at most {rounds}, the level's budget (the default).",
            ),
        ),
    }
    if profiles:
        fields["profile"] = (str, Field("", json_schema_extra={"enum": list(profiles)}))
    task = create_model(
        "AgentTaskArguments",
        __base__=TaskArguments,
        __validators__={"_ceiling": field_validator("max_rounds", mode="before")(_clamp(rounds))},
        **fields,
    )
    task.hidden = frozenset(({"profile"} if not profiles else set()) | ({"documents"} if not documents else set()))
    return create_model(
        "AgentsArguments",
        __base__=AgentsArguments,
        tasks=(list[task], Field(min_length=1, json_schema_extra={"maxItems": MAX_TASKS_PER_CALL})),  # type: ignore[valid-type]  # task: a class made by create_model at runtime, a variable to mypy
    )


def _clamp(rounds: int) -> Any:
    def clamp(cls: type[BaseModel], value: Any) -> Any:
        if value is None:
            return rounds
        if isinstance(value, str) and value.strip().isdigit():
            value = int(value)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return max(1, min(int(value), rounds))
        return value

    return classmethod(clamp)


@functools.lru_cache(maxsize=256)
def parameters(arguments: type[BaseModel]) -> dict[str, Any]:
    """A model's JSON schema as a tool's parameters: its definitions inlined, its titles left out (once per model:
    ``agents_arguments`` keeps its models; the schema is not changed by its readers)."""
    schema = arguments.model_json_schema()
    defs = schema.pop("$defs", {})

    def inline(node: Any) -> Any:
        if isinstance(node, dict):
            if "$ref" in node:
                return inline(defs[node["$ref"].rsplit("/", 1)[1]])
            return {k: inline(v) for k, v in node.items() if k != "title"}
        if isinstance(node, list):
            return [inline(v) for v in node]
        return node

    inlined: dict[str, Any] = inline(schema)  # the schema is a dict, so is its copy
    return inlined


def validated_tasks(arguments: type[AgentsArguments], raw: list[Any]) -> list[TaskArguments | str]:
    """Each task's arguments validated by the run's model, or why they are refused (said to the main model)."""
    try:
        call = arguments.model_validate({"tasks": raw})
    except ValidationError:
        pass
    else:
        return list(call.tasks)
    task_model = get_args(arguments.model_fields["tasks"].annotation)[0]  # list[the run's task model]
    out: list[TaskArguments | str] = []
    for item in raw:
        if not isinstance(item, dict):
            out.append("Each task must be an object with instruction, model and resources.")
            continue
        try:
            out.append(task_model.model_validate(item))
        except ValidationError as e:
            out.append(refusal_text(e))
    return out


def refusal_text(e: ValidationError) -> str:
    """Why a task's arguments are refused: our own sentences as they are, pydantic's with the field they concern."""
    said = []
    for error in e.errors()[:3]:
        if error["type"] == REFUSED:
            said.append(error["msg"])
        else:
            said.append(f"{'.'.join(map(str, error['loc'])) or 'task'}: {error['msg']}")
    return "; ".join(said)
