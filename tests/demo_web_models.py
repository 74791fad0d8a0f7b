"""The scripted models of the demo-web browser test (``tests/e2e/test_demo_web.py``), importable so that a test
without a browser runs the same run (``tests/chat/test_demo_web_page.py``): the main model searches the demo web,
hands the first result to an agent, then answers; the agent reads the page and submits its title.

They read a tool result as a model does: its JSON, then the note the engine appends to the last tool result of a
request after the first (``Budget left: …``, ``engine/notes.py``), which ``without_note`` leaves out.
"""

from __future__ import annotations

import json
import re
from typing import Any

from assistant.engine.models.function import CallInfo
from assistant.engine.notes import without_note
from assistant.engine.types import ModelRequest, ModelResponse, ToolCall


def payloads(request: ModelRequest, name: str) -> list[Any]:
    """What the tool ``name`` returned in this request, each result's JSON without the engine's note."""
    return [json.loads(without_note(m.content)) for m in request.messages if m.role == "tool" and m.name == name]


def call(name: str, **arguments: Any) -> ToolCall:
    return ToolCall(id=f"{name}-{abs(hash(json.dumps(arguments))) % 10**8}", name=name, arguments=json.dumps(arguments))


def main(request: ModelRequest, info: CallInfo) -> ModelResponse:
    question = next(m.content for m in request.messages if m.role == "user")
    french = "web" in question and "dit" in question
    searches = payloads(request, "web_search")
    if not searches:
        query = "Bimbamjob levée de fonds" if french else "Bimbamjob fundraising"
        return ModelResponse(tool_calls=[call("web_search", query=query)])
    if not payloads(request, "agents"):
        url = searches[0]["results"][0]["url"]
        instruction = f"Lis la page {url} et résume-la." if french else f"Read the page {url} and sum it up."
        task = {"instruction": instruction, "model": "demo-small", "resources": ["web"]}
        return ModelResponse(tool_calls=[call("agents", tasks=[task])])
    if french:
        return ModelResponse(text="Selon le web de démo, Bimbamjob reporte sa levée de fonds.")
    return ModelResponse(text="According to the demo web, Bimbamjob postponed its fundraising.")


def agent(request: ModelRequest, info: CallInfo) -> ModelResponse:
    fetched = payloads(request, "web_fetch")
    if not fetched:
        found = re.search(r"https://\S+", request.messages[1].content)
        assert found is not None
        return ModelResponse(tool_calls=[call("web_fetch", url=found.group(0))])
    page = fetched[0]
    report = {"findings": page["title"] + ".", "sources": [page["url"]]}
    return ModelResponse(tool_calls=[call("submit_result", **report)])


MODELS = {"demo-large": main, "demo-small": agent}
"""The functions in place of the demo models, by model id."""
