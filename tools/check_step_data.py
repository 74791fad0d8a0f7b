"""Fail when code outside the steps' (de)serialisation module reads a step's raw ``data``.

A step is read through its event (``Step.event``, ``steps.events_of``); only ``STEPS_MODULE`` turns
the saved JSON into events and back. Flagged, in ``assistant/``: indexing a ``.data`` (``x.data["kind"]``),
calling a dict method on it (``x.data.get(...)``, ``.items()``...), any read of ``.data`` on a name
that says it is a step (``step.data``, ``s.data``, ``steps[0].data``), and a query reading the column
(``.values_list("data")``, ``.values("data")``). Writing ``data=`` when a step is
built, and ``.data`` of other things (an SSE event's), are left alone.

Usage: ``python tools/check_step_data.py [paths...]`` (default ``assistant``); exit status 1 on a finding.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterator
from pathlib import Path

STEPS_MODULES = {"assistant/runs/steps.py"}
DICT_METHODS = {"get", "items", "keys", "values", "pop", "setdefault", "update", "copy"}
STEP_NAME = re.compile(r"^(s|steps?|.*_steps?|steps?_.*)$")


def _receiver_name(node: ast.expr) -> str:
    """The name a ``.data`` is read on: ``step`` in ``step.data``, ``steps`` in ``self.steps[-1].data``."""
    while isinstance(node, ast.Subscript | ast.Call):
        node = node.value if isinstance(node, ast.Subscript) else node.func
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def findings(source: str, filename: str = "<source>") -> Iterator[tuple[int, str]]:
    """Each (line, what) where ``source`` reads a step's raw data."""
    tree = ast.parse(source, filename)
    parents: dict[ast.AST, ast.AST] = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parents[child] = node
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("values_list", "values")
            and any(isinstance(a, ast.Constant) and a.value == "data" for a in node.args)
        ):
            yield node.lineno, f'{ast.unparse(node.func)}("data"): reads raw step data'
        if not (isinstance(node, ast.Attribute) and node.attr == "data" and isinstance(node.ctx, ast.Load)):
            continue
        parent = parents.get(node)
        text = ast.unparse(node)
        if isinstance(parent, ast.Subscript) and parent.value is node:
            yield node.lineno, f"{ast.unparse(parent)}: indexes raw step data"
        elif isinstance(parent, ast.Attribute) and parent.attr in DICT_METHODS:
            yield node.lineno, f"{text}.{parent.attr}(): reads raw step data"
        elif STEP_NAME.match(_receiver_name(node.value)):
            yield node.lineno, f"{text}: reads a step's raw data"


def check(paths: list[Path]) -> list[str]:
    problems = []
    for root in paths:
        files = [root] if root.is_file() else sorted(root.rglob("*.py"))
        for path in files:
            if path.as_posix() in STEPS_MODULES or any(path.as_posix().endswith(m) for m in STEPS_MODULES):
                continue
            for line, what in findings(path.read_text(encoding="utf-8"), str(path)):
                problems.append(f"{path}:{line}: {what}; read the step's event instead (Step.event, steps.events_of)")
    return problems


def main(argv: list[str]) -> int:
    problems = check([Path(p) for p in argv] or [Path("assistant")])
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
