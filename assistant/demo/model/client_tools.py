"""An API client's tools (any tool not the server's): the demo main model calls one when the client's ``tool_choice``
asks for it on its first call (that tool by name, or ``required`` when only the client's tools are offered), its
required arguments filled from the question where the schema asks for text, blanks elsewhere. Its answer after the
client's result is the demo's usual one."""

from __future__ import annotations

from typing import Any

from assistant.engine.tools import is_server_tool
from assistant.engine.types import ModelResponse, NamedTool, ToolSpec

BLANKS: dict[str, Any] = {"integer": 0, "number": 0, "boolean": False, "array": [], "object": {}}


def call_forced(step: Any, question: str) -> ModelResponse | None:
    """The call of the client's tool that ``tool_choice`` forces, or None."""
    request = step.request
    if step.messages[-1].role != "user":
        return None
    client = [t for t in request.tools if not is_server_tool(t.name)]
    choice = request.tool_choice
    if isinstance(choice, NamedTool):
        spec = next((t for t in client if t.name == choice.name), None)
    elif choice == "required" and client and len(client) == len(request.tools):
        spec = client[0]
    else:
        spec = None
    if spec is None:
        return None
    return ModelResponse(tool_calls=[step.call(spec.name, arguments(spec, question), 0)])


def arguments(spec: ToolSpec, question: str) -> dict[str, Any]:
    """The required arguments of ``spec``: the question for text, a blank of the type for anything else."""
    properties = spec.parameters.get("properties") or {}
    out: dict[str, Any] = {}
    for name in spec.parameters.get("required") or ():
        kind = (properties.get(name) or {}).get("type")
        out[name] = question[:200] if kind == "string" else BLANKS.get(str(kind))
    return out
