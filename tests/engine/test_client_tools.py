"""An API client's tools in the main loop: offered beside the server's, never run here, the turn ending on them with
the messages its follow-up continues; the client's ``tool_choice`` binds the first call only."""

from __future__ import annotations

import ast
from pathlib import Path

from assistant.engine.events import FinalEvent, ToolCallEvent, ToolResultEvent
from assistant.engine.loop import run_chat
from assistant.engine.policy import RunRequest
from assistant.engine.tools import SERVER_TOOLS, is_server_tool
from assistant.engine.types import ClientTools, Message, ModelResponse, NamedTool, Reasoning, ToolSpec
from tests.engine.engine_support import MAIN, call, harness, reply, scripted, tool_messages

REMINDER = ToolSpec(
    name="send_reminder",
    description="Send a payment reminder.",
    parameters={"type": "object", "properties": {"invoice": {"type": "string"}}},
)
QUESTION = Message.user("Relance Zorglub pour ses factures impayées.")


def request(*messages: Message, tools: ClientTools, resources: tuple[str, ...] = ("kb:factures",)) -> RunRequest:
    return RunRequest(messages=messages, model=MAIN.id, level="standard", resources=resources, client_tools=tools)


async def test_the_server_runs_its_calls_of_the_round_and_the_turn_ends_on_the_clients() -> None:
    search, remind = call("kb_search", query="Zorglub", kb="factures"), call("send_reminder", invoice="FAC-1")
    h = harness({MAIN.id: scripted(reply(search, remind, text="Je relance."))})
    tools = ClientTools(specs=(REMINDER,), choice="required", parallel=False)
    outcome = await run_chat(request(QUESTION, tools=tools), h.ctx)

    assert outcome.status == "ok" and outcome.text == "Je relance." and outcome.rounds == 1
    [sent] = h.main.requests
    assert [t.name for t in sent.tools] == ["kb_search", "kb_read", "send_reminder"]
    assert sent.tool_choice == "required" and sent.parallel_tool_calls is False
    assert [e.name for e in h.of(ToolCallEvent)] == ["kb_search"]  # the client's call is not run here
    assert [e.name for e in h.of(ToolResultEvent)] == ["kb_search"]
    [final] = h.of(FinalEvent)
    assert final.tool_calls == (remind,)
    assert final.messages[:2] == (QUESTION, Message.assistant("Je relance.", (search, remind)))
    [found] = final.messages[2:]
    assert found.role == "tool" and found.tool_call_id == search.id and "fac-1" in found.content


async def test_a_follow_up_continues_the_messages_and_its_choice_binds_its_first_call_only() -> None:
    remind = call("send_reminder", invoice="FAC-1")
    thought = Reasoning(format="openai", id="rs_1", encrypted="opaque", summary=("Relancer FAC-1.",))
    first = harness({MAIN.id: scripted(ModelResponse(tool_calls=[remind], reasoning=[thought]))})
    tools = ClientTools(specs=(REMINDER,), choice=NamedTool("send_reminder"))
    await run_chat(request(QUESTION, tools=tools), first.ctx)
    [ended] = first.of(FinalEvent)
    assert ended.messages[-1].reasoning == (thought,)  # the model's reasoning goes on with its loop
    assert first.main.requests[0].tool_choice == NamedTool("send_reminder")

    search = call("kb_search", query="Zorglub", kb="factures")
    h = harness({MAIN.id: scripted(reply(search), reply(text="Relance envoyée ; FAC-1 reste due."))})
    result = Message.tool(remind, '{"sent": true}')
    outcome = await run_chat(request(*ended.messages, result, tools=tools), h.ctx)

    assert outcome.status == "ok" and outcome.text == "Relance envoyée ; FAC-1 reste due."
    opening, after = h.main.requests
    assert opening.messages[0] == first.main.requests[0].messages[0]  # the same system prompt: the same prefix
    assert opening.messages[1:] == (*ended.messages, result)
    assert [opening.tool_choice, after.tool_choice] == [NamedTool("send_reminder"), "auto"]
    assert tool_messages(after, "kb_search")
    [final] = h.of(FinalEvent)
    assert final.tool_calls == () and final.messages == ()


async def test_client_tools_alone_make_rounds_of_their_own() -> None:
    remind = call("send_reminder", invoice="FAC-1")
    h = harness({MAIN.id: scripted(reply(remind))})
    outcome = await run_chat(request(QUESTION, tools=ClientTools(specs=(REMINDER,)), resources=()), h.ctx)
    [sent] = h.main.requests
    assert [t.name for t in sent.tools] == ["send_reminder"] and sent.tool_choice == "auto"
    assert sent.parallel_tool_calls is True and outcome.status == "ok"
    assert h.of(FinalEvent)[0].tool_calls == (remind,)


def test_every_server_tool_name_is_reserved() -> None:
    """The names in the engine's tool specs (a literal, or the agents' and result tools' constants) are all in
    ``SERVER_TOOLS``, and a connector's tools are reserved by their prefix."""
    engine = Path(__file__).parents[2] / "assistant" / "engine"
    constants = {"AGENTS_TOOL": "agents", "RESULT_TOOL": "submit_result"}
    named: set[str] = set()
    for path in engine.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "ToolSpec":
                for keyword in node.keywords:
                    if keyword.arg == "name" and isinstance(keyword.value, ast.Constant):
                        named.add(str(keyword.value.value))
                    elif keyword.arg == "name" and isinstance(keyword.value, ast.Name):
                        named.add(constants.get(keyword.value.id, keyword.value.id))
    assert named <= SERVER_TOOLS and {"kb_search", "run_code", "web_fetch", "data_query"} <= named
    from assistant.engine.connectors import tool_name

    assert is_server_tool(tool_name("crm", "lookup")) and not is_server_tool("send_reminder")
