"""workers/ imports one way: no module imports one that (directly or not) imports it back.

Read from the source, lazy imports inside functions included, since a deferred import is how
a cycle hides (the app imported the reconciler for its bootstep, the reconciler the app to send).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
APP = "workers.worker.app"


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _graph() -> dict[str, set[str]]:
    """Each workers/ module -> the workers/ modules it imports anywhere in its body."""
    modules = {_module_name(p): p for p in (ROOT / "workers").rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets.add(node.module)
                # `from workers.worker import runtime` imports the submodule runtime.
                targets.update(f"{node.module}.{alias.name}" for alias in node.names)
        graph[name] = {t for t in targets if t in modules and t != name}
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle, as the modules along it, or None."""
    done: set[str] = set()
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        if node in path:
            return [*path[path.index(node) :], node]
        if node in done:
            return None
        path.append(node)
        for target in sorted(graph[node]):
            found = visit(target)
            if found:
                return found
        path.pop()
        done.add(node)
        return None

    for start in sorted(graph):
        found = visit(start)
        if found:
            return found
    return None


def test_workers_modules_import_one_way() -> None:
    graph = _graph()
    assert APP in graph and "workers.worker.reconcile" in graph[APP]
    assert _cycle(graph) is None


def test_only_the_task_modules_and_the_cli_import_the_app() -> None:
    importers = sorted(name for name, targets in _graph().items() if APP in targets)
    assert all(n == "workers.worker.tasks" or n.startswith("workers.cli.") for n in importers)
    assert "workers.worker.tasks" in importers


def test_the_cycle_finder_finds_one() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None
