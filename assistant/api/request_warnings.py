"""What of a chat completion request the run will not do (``RequestWarning``): said in the response, never dropped
silently."""

from __future__ import annotations

from assistant.catalogue import snapshot
from assistant.engine.policy import Policy

from .request_schemas import ChatCompletionRequest
from .response_schemas import (
    RequestWarning,
)


def warnings_for(body: ChatCompletionRequest, policy: Policy) -> list[RequestWarning]:
    """What of the request the run will not do: said in the response, never dropped silently; ``policy``: the
    key's, as the request was checked with."""
    return _agents_warnings(body, policy) + _sampling_warnings(body) + _strict_warnings(body)


def _strict_warnings(body: ChatCompletionRequest) -> list[RequestWarning]:
    """A client tool's ``strict``: not sent (the arguments are the model's, as it wrote them)."""
    return [
        RequestWarning(
            code="parameter_not_sent",
            message=f"`strict` of the tool {t.function.name} is not sent to the model: check its arguments.",
            param=f"tools[{i}].function.strict",
        )
        for i, t in enumerate(body.tools or ())
        if t.function.strict
    ]


def _sampling_warnings(body: ChatCompletionRequest) -> list[RequestWarning]:
    """The sampling parameters the main model does not take (``Model.dropped``): not sent to it."""
    sampling = body.sampling()
    if sampling is None:
        return []
    return [
        RequestWarning(
            code="parameter_not_sent",
            message=f"{body.model} does not take `{name}`: it was not sent to the model.",
            param=name,
        )
        for name in snapshot.resolve(body.model).dropped(sampling)
    ]


def _agents_warnings(body: ChatCompletionRequest, policy: Policy) -> list[RequestWarning]:
    if "agents" not in body.tools_enabled:
        return []
    catalogue = snapshot.catalogue()
    level = body.reasoning_level
    rounds = policy.levels[level].agent_rounds if level is not None else policy.default_agent_rounds
    named = (level or "approfondi").capitalize()  # the levels' names are the product's words
    if rounds == 0:
        used = f"at {named}" if level is not None else f"without a level (the {named} settings apply)"
        return [
            RequestWarning(
                code="agents_off_at_level",
                message=f"Agents are off {used}: its agent round budget is 0. The main model answers alone.",
                param="tools_enabled",
            )
        ]
    if not catalogue.cheaper_than(body.model, policy.allowed_ids(catalogue), policy.cheaper_factor):
        return [
            RequestWarning(
                code="agents_without_cheaper_model",
                message=f"Agents are off: no model this key may use is at least {policy.cheaper_factor:g} times "
                f"cheaper than {body.model}. The main model answers alone.",
                param="tools_enabled",
            )
        ]
    return []
