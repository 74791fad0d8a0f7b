"""Fail on any import cycle between the modules of ``assistant``, imports inside functions included.

``lint-imports`` checks the apps' layers and that siblings form no cycle; this checks every module
against every other one, whatever their packages. The graph is grimp's (which import-linter uses):
it reads every ``import`` statement, at the top of a module, inside a function or under
``TYPE_CHECKING`` alike. Run from the repository's root: ``python tools/check_cycles.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import grimp

PACKAGE = "assistant"


def cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The strongly connected components of more than one module, or of one importing itself (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def visit(root: str) -> None:
        nonlocal counter
        # Iterative, so that a deep import chain does not reach Python's recursion limit.
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            module, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
                elif child in on_stack:
                    low[module] = min(low[module], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[module])
            if low[module] == index[module]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == module:
                        break
                if len(component) > 1 or module in graph.find_modules_directly_imported_by(module):
                    found.append(sorted(component))

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return found


def describe(graph: grimp.ImportGraph, component: list[str]) -> list[str]:
    """Each import inside the cycle, with where it is written."""
    members = set(component)
    lines = []
    for importer in component:
        for imported in sorted(graph.find_modules_directly_imported_by(importer) & members):
            for detail in graph.get_import_details(importer=importer, imported=imported):
                lines.append(f"  {importer} -> {imported} (l.{detail['line_number']}: {detail['line_contents']})")
    return lines


def main() -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    graph = grimp.build_graph(PACKAGE, cache_dir=None)
    found = cycles(graph)
    for component in found:
        print(f"Import cycle between {len(component)} modules:")
        print("\n".join(describe(graph, component)))
    if found:
        print(f"{len(found)} import cycle(s) in {PACKAGE}: break each one (see docs/ARCHITECTURE.md, 'Layers').")
        return 1
    print(f"No import cycle between the {len(graph.modules)} modules of {PACKAGE}.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
