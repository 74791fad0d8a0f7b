"""``run_code`` over a base's tables: the demo writes a small script that totals each table's amounts by its
first text column (totals per client of the invoices), and answers with what the script printed.

``run_code`` is offered only where the sandbox can run (``engine/sandbox.py``: bubblewrap, seccomp, user
namespaces); its description names the knowledge bases whose documents the script finds as text files
``<kb>/<id>.txt``, listed in ``index.json``. A table document's text is its rows as ``a | b | c`` lines under
a header line (after a line that names the table, in a base's documents). The script reads only the
documents that hold a table ``data_query`` lists (``tables`` in ``index.json``, or a title that names it), or every
document when none does,
and prints one JSON line per table it totalled. The answer quotes each table's title in the language it is written
in (``titles`` in ``index.json``, else as written) and its numbers in that language's format (``numbers``).
"""

from __future__ import annotations

import json
import re
from typing import Any

import assistant.demo.model.numbers as numbers
import assistant.demo.model.reading as reading
from assistant.engine.types import ModelResponse, ToolSpec

from .texts import Language, say

_BASES = re.compile(r"documents of your knowledge bases \(([^)]*)\)")

_SCRIPT = """{comment}
import json

TABLES = {tables!r}  # the tables data_query lists: the index names the documents that hold them


def name(title):
    return "".join(c if c.isalnum() else "_" for c in title.lower()).strip("_")


def number(value):
    try:
        return float(value.replace(" ", "").replace(",", "."))
    except ValueError:
        return None


with open("index.json", encoding="utf-8") as f:
    index = json.load(f)
chosen = [e for e in index if set(e.get("tables", [])) & set(TABLES) or name(e["title"]) in TABLES] or index
for entry in chosen:
    with open(entry["path"], encoding="utf-8") as f:
        blocks = f.read().split("\\n\\n")  # a spreadsheet's sheets come one after the other
    for block in blocks:
        lines = [line for line in block.splitlines() if " | " in line]
        if len(lines) < 2:
            continue
        header = [c.strip() for c in lines[0].split(" | ")]
        rows = [[c.strip() for c in line.split(" | ")] for line in lines[1:]]
        rows = [r for r in rows if len(r) == len(header)]
        numeric = [i for i in range(len(header)) if rows and all(number(r[i]) is not None for r in rows)]
        text = [i for i in range(len(header)) if i not in numeric]
        if not numeric or not text:
            continue
        group, summed = text[0], numeric[0]
        totals = {{}}
        for r in rows:
            total, count = totals.get(r[group], (0.0, 0))
            totals[r[group]] = (total + number(r[summed]), count + 1)
        ranked = sorted(totals.items(), key=lambda item: -item[1][0])
        print(json.dumps({{
            "id": entry["id"], "title": entry["title"], "titles": entry.get("titles", {{}}),
            "group": header[group], "summed": header[summed],
            "rows": len(rows), "totals": [[k, round(t, 2), n] for k, (t, n) in ranked],
        }}, ensure_ascii=False))
"""


def bases(tool: ToolSpec) -> list[str]:
    """The knowledge bases whose documents a ``run_code`` script finds (none: nothing to compute over)."""
    found = _BASES.search(tool.description)
    return [b.strip() for b in found.group(1).split(",") if b.strip()] if found else []


def tables(request_tools: tuple[ToolSpec, ...]) -> list[str]:
    """The table names ``data_query`` lists, when it is offered."""
    tool = next((t for t in request_tools if t.name == "data_query"), None)
    if tool is None:
        return []
    listed = tool.description.split("Tables, with their columns: ", 1)[-1]
    return re.findall(r"(?:^|; )(\w+)\(", listed)


def script(language: Language, table_names: list[str]) -> str:
    """The demo's script: its first line, a comment, is what the page shows of it."""
    return _SCRIPT.format(comment=say("code_comment", language), tables=sorted(set(table_names)))


def printed(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The tables the script totalled, from what it printed."""
    found = []
    for line in str(result.get("stdout", "")).splitlines():
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict) and "totals" in value:
            found.append(value)
    return found


def amount(value: float, language: Language) -> str:
    """``39,350.00`` in English, ``39 350,00`` (a no-break space) in French."""
    return numbers.number(value, language, 2)


def title_in(table: dict[str, Any], language: Language) -> str:
    """The title of the script's table in ``language`` when its document has one there (``titles``), else as written."""
    titles = table.get("titles")
    title = titles.get(language) if isinstance(titles, dict) else None
    return str(title or table["title"])


def answer(language: Language, kbs: list[str], result: dict[str, Any]) -> list[str]:
    """The answer's paragraphs for what the script gave."""
    if "error" in result:
        return [say("code_failed", language, error=result["error"])]
    found = printed(result)
    if not found:
        if result.get("exit_code") not in (0, None) or result.get("limit"):
            stderr = str(result.get("stderr", "")).strip().splitlines()
            error = str(result.get("limit") or (stderr[-1] if stderr else f"exit {result.get('exit_code')}"))
            return [say("code_failed", language, error=error)]
        return [say("code_no_table", language)]
    parts = []
    for table in found:
        parts.append(
            say(
                "code_totals",
                language,
                title=title_in(table, language),
                id=table["id"],
                summed=table["summed"],
                group=table["group"],
                rows=numbers.number(table["rows"], language),
            )
        )
        lines = [say("code_header", language, group=table["group"]), "|---|---:|---:|"]
        lines += [f"| {k} | {amount(t, language)} | {numbers.number(n, language)} |" for k, t, n in table["totals"]]
        parts.append("\n".join(lines))
    return parts


def start(step: Any) -> ModelResponse | None:
    """The round that runs the script, when ``run_code`` is offered over at least one knowledge base."""
    tool = reading.spec(step.request, "run_code")
    kbs = bases(tool) if tool is not None else []
    if not kbs:
        return None
    code = script(step.language, tables(step.request.tools))
    return ModelResponse(text=step.say("code_computing"), tool_calls=[step.call("run_code", {"code": code}, 0)])
