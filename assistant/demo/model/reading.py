"""What a request offers the demo (its tools, their enums) and what the tools it called returned."""

from __future__ import annotations

import json
import re
from typing import Any

from assistant.engine.notes import without_note
from assistant.engine.types import Message, ModelRequest, ToolSpec


def spec(request: ModelRequest, name: str) -> ToolSpec | None:
    return next((t for t in request.tools if t.name == name), None)


def enum(tool: ToolSpec, *path: str) -> list[str]:
    node: Any = tool.parameters
    for key in path:
        node = node.get(key, {}) if isinstance(node, dict) else {}
    values = node.get("enum", []) if isinstance(node, dict) else []
    return [str(v) for v in values]


def tool_results(messages: tuple[Message, ...], name: str) -> list[dict[str, Any]]:
    found = []
    for m in messages:
        if m.role == "tool" and m.name == name:
            try:
                value = json.loads(without_note(m.content))
            except ValueError:
                continue
            if isinstance(value, dict):
                found.append(value)
    return found


def connector_tools(request: ModelRequest) -> list[tuple[str, str]]:
    """The connector tools offered (``mcp_<name>__<tool>``) that take one string: (tool, its parameter)."""
    found = []
    for tool in request.tools:
        if not tool.name.startswith("mcp_"):
            continue
        props = tool.parameters.get("properties", {}) if isinstance(tool.parameters, dict) else {}
        strings = [k for k, v in props.items() if isinstance(v, dict) and v.get("type") == "string"]
        if len(strings) == 1:
            found.append((tool.name, strings[0]))
    return found


def connector_data(messages: tuple[Message, ...]) -> list[tuple[str, str]]:
    """What connectors returned: (tool, each non-empty line inside its <connector_data>)."""
    found = []
    for m in messages:
        # A refusal or an error is a JSON object; a result is the connector's text in its wrapper.
        if m.role == "tool" and m.name and m.name.startswith("mcp_") and not m.content.startswith("{"):
            _, _, after = m.content.partition("<connector_data")
            inside = after.partition(">")[2].rpartition("</connector_data>")[0]
            found += [(m.name, line.strip()) for line in inside.splitlines() if line.strip()]
    return found


def connector_source(tool: str) -> str:
    """``mcp_crm__search_customers`` -> ``mcp:crm/search_customers``, the source id of what it read."""
    name, _, rest = tool.removeprefix("mcp_").partition("__")
    return f"mcp:{name}/{rest}"


_NUMERIC = frozenset({"DOUBLE", "BIGINT", "INTEGER", "DECIMAL", "FLOAT", "HUGEINT", "SMALLINT"})


def demo_sql(request: ModelRequest, rows: str = "rows") -> str | None:
    """The demo's query over the first table the ``data_query`` description lists, as ``name(column TYPE, ...)``:
    the first numeric column summed by the first text column (or the rows counted, as the column ``rows``)."""
    tool = spec(request, "data_query")
    if tool is None:
        return None
    listed = tool.description.split("Tables, with their columns: ", 1)[-1]
    match = re.match(r"(\w+)\(([^()]*)\)", listed)
    if match is None:
        return None
    table = match.group(1)
    columns = [c.strip().rsplit(" ", 1) for c in match.group(2).split(",") if " " in c.strip()]
    text = next((name for name, kind in columns if kind == "VARCHAR"), None)
    number = next((name for name, kind in columns if kind in _NUMERIC), None)
    if text is None:
        return f"SELECT COUNT(*) AS {rows} FROM {table}"
    if number is None:
        return f"SELECT {text}, COUNT(*) AS {rows} FROM {table} GROUP BY {text} ORDER BY {rows} DESC"
    return f"SELECT {text}, SUM({number}) AS total, COUNT(*) AS {rows} FROM {table} GROUP BY {text} ORDER BY total DESC"


SLOW_SCRIPT = "import time\ntime.sleep(600)\nprint('done')"


def slow_call(request: ModelRequest, kind: str) -> tuple[str, dict[str, Any]] | None:
    """A call of a tool that takes long (``#demo-slow``): a query over a cross join of the first table listed, a
    script that sleeps, the first connector tool offered; None when that tool is not offered."""
    if kind == "query":
        tool = spec(request, "data_query")
        listed = tool.description.split("Tables, with their columns: ", 1)[-1] if tool else ""
        match = re.match(r"(\w+)\(", listed)
        if match is None:
            return None
        cross = "range(100000) a, range(100000) b WHERE a.range + b.range = 7"
        return "data_query", {"sql": f"SELECT count(*) AS n FROM {match.group(1)}, {cross}"}
    if kind == "code":
        return ("run_code", {"code": SLOW_SCRIPT}) if spec(request, "run_code") is not None else None
    connectors = connector_tools(request)
    return (connectors[0][0], {connectors[0][1]: "slow"}) if connectors else None


def queries(messages: tuple[Message, ...]) -> list[tuple[int, str]]:
    """What the demo's queries returned: (row count, the table), one per query that gave a table."""
    return [(int(q["row_count"]), str(q["table"])) for q in tool_results(messages, "data_query") if "table" in q]


def called(messages: tuple[Message, ...], name: str) -> bool:
    """Whether a tool of that name has answered already."""
    return any(m.role == "tool" and m.name == name for m in messages)
