"""``run_code``, the tool: a Python script over a read-only export of the scope's knowledge bases.

The knowledge bases of the caller's scope, and only those, are exported as text files into a fresh
temporary directory that is the script's working directory (``Sandbox.workdir``), sealed, and removed
afterwards; the script runs in a ``Sandbox`` (``sandbox.py``) and its reads become the step's sources.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from .errors import ToolError
from .events import Action, Source
from .sandbox import Sandbox
from .scope import Scope
from .tools import Document, Tool, ToolFactory, ToolOutcome
from .turns import Turn
from .types import ToolSpec

MAX_SHOWN = 20_000
"""The characters of a script its step shows (the page unfolds it); the rest is cut."""


class KnowledgeExport(Protocol):
    """The documents of a knowledge base, for ``run_code``'s read-only export."""

    async def documents(self, kb: str) -> list[Document]: ...


_SAFE = re.compile(r"[^\w.-]+")


def _safe_name(name: str) -> str:
    cleaned = _SAFE.sub("_", name).strip("._") or "_"
    return cleaned[:120]


@dataclass(slots=True)
class _Export:
    files: dict[str, Document] = field(default_factory=dict)
    truncated: bool = False


class RunCode(Tool):
    """``run_code(code)``: Python over a read-only copy of the scope's knowledge bases; no network, no writes."""

    def __init__(self, sandbox: Sandbox, scope: Scope, knowledge: KnowledgeExport | None) -> None:
        self.sandbox = sandbox
        self.scope = scope
        self.knowledge = knowledge

    @property
    def turn(self) -> Turn:
        return Turn("run_code", self.sandbox.limits.concurrent)

    @property
    def spec(self) -> ToolSpec:
        kbs = ", ".join(self.scope.knowledge_bases)
        files = (
            f"The working directory holds the documents of your knowledge bases ({kbs}) as read-only text files "
            "<kb>/<document id>.txt, listed in index.json (id, kb, title, path; titles: its title in other "
            "languages, by language code, when it has some; tables: the data_query tables it holds, when it holds "
            "some). "
            if kbs
            else "No knowledge base is available to the script. "
        )
        limits = self.sandbox.limits
        return ToolSpec(
            name="run_code",
            description=(
                "Run a Python 3 script (standard library only) and get what it prints. "
                + files
                + "The script has no network and cannot write, delete or create any file; "
                f"limits: {limits.cpu_seconds} s of CPU, {limits.wall_seconds:g} s in all, {limits.memory_mb} MB of memory. "
                "Use it to count, filter, compute or cross-check what the documents say; print the results."
            ),
            parameters={
                "type": "object",
                "properties": {
                    "code": {"type": "string", "description": "A complete Python 3 script; print() the results."}
                },
                "required": ["code"],
            },
        )

    async def _export(self, root: Path) -> _Export:
        export = _Export()
        budget = self.sandbox.limits.max_export_mb * 1024 * 1024
        index: list[dict[str, object]] = []
        for kb in self.scope.knowledge_bases:
            docs = await self.knowledge.documents(kb) if self.knowledge is not None else []
            kb_dir = root / _safe_name(kb)
            kb_dir.mkdir(exist_ok=True)
            for doc in docs:
                if doc.kb != kb:  # a backend bug must not widen the scope
                    continue
                data = doc.text.encode("utf-8")
                if len(data) > budget:
                    export.truncated = True
                    break
                budget -= len(data)
                rel = f"{kb_dir.name}/{_safe_name(doc.id)}.txt"
                (root / rel).write_bytes(data)
                export.files[rel] = doc
                entry: dict[str, object] = {"id": doc.id, "kb": kb, "title": doc.title, "path": rel}
                if doc.titles:
                    entry["titles"] = dict(doc.titles)
                if doc.tables:
                    entry["tables"] = list(doc.tables)
                index.append(entry)
        (root / "index.json").write_text(json.dumps(index, ensure_ascii=False, indent=1), encoding="utf-8")
        return export

    async def run(self, args: dict[str, Any]) -> ToolOutcome:
        code = args.get("code")
        if not isinstance(code, str) or not code.strip():
            raise ToolError("run_code needs 'code', a Python 3 script as a string.")
        with self.sandbox.workdir() as root:
            export = await self._export(root)
            self.sandbox.seal(root)
            result = await self.sandbox.run(code, root)
        first_line = code.strip().splitlines()[0][:80]
        if result.refusals:
            output = _tail(result.stdout, 2_000)
            raise ToolError(result.refusals[0] + (f" Output before the refusal: {output}" if output else ""))
        limit = self.sandbox.limits
        notes = {
            "cpu": f"Stopped: the CPU-time limit ({limit.cpu_seconds} s) was reached.",
            "wall": f"Stopped: the time limit ({limit.wall_seconds:g} s) was reached.",
            "memory": f"The memory limit ({limit.memory_mb} MB) was reached.",
            "output": "Stopped: the script printed too much; print a summary instead.",
        }
        payload: dict[str, object] = {
            "exit_code": result.exit_code,
            "stdout": _head(result.stdout, limit.max_output_chars),
        }
        if result.stderr.strip():
            payload["stderr"] = _tail(result.stderr, 4_000)
        if result.limit:
            payload["limit"] = notes[result.limit]
        if export.truncated:
            payload["note"] = f"The export stopped at {limit.max_export_mb} MB: some documents are missing."
        sources = tuple(
            Source(id=doc.id, title=doc.title, where=doc.kb)
            for rel, doc in export.files.items()
            if rel in set(result.read)
        )
        ok = result.exit_code == 0 and result.limit is None
        action = Action(
            tool="run_code", kind="code", label=first_line, count=len(sources) or None, ok=ok, detail=code[:MAX_SHOWN]
        )
        return ToolOutcome(json.dumps(payload, ensure_ascii=False), action, sources)


def _head(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "… (output cut)"


def _tail(text: str, limit: int) -> str:
    return text if len(text) <= limit else "…" + text[-limit:]


def code_tools(sandbox: Sandbox | None, knowledge: KnowledgeExport | None) -> ToolFactory:
    """A factory giving ``run_code`` to scopes with ``code`` (none when no sandbox can run here)."""

    def build(scope: Scope) -> list[Tool]:
        if not scope.code or sandbox is None:
            return []
        return [RunCode(sandbox, scope, knowledge)]

    return build


__all__ = ["KnowledgeExport", "RunCode", "code_tools"]
