"""The layout is enforced: no import cycle in the package, the trial process's entry point
loads neither Optuna, rich nor matplotlib, and no module or function grows past what reads as
one thing (the layer contracts themselves are import-linter's, run by `lint-imports` in CI)."""

from __future__ import annotations

import ast
import subprocess
import sys

import grimp
from helpers import REPO_ROOT


def _cycles(adjacency: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in adjacency[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(adjacency):
        if module not in index:
            visit(module)
    return found


def test_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_in_the_package() -> None:
    graph = grimp.build_graph("autotune")
    modules = set(graph.modules)
    adjacency = {m: set(graph.find_modules_directly_imported_by(m)) & modules for m in modules}
    assert _cycles(adjacency) == []


def test_trial_entry_point_loads_no_optuna_rich_or_matplotlib() -> None:
    code = ("import sys, autotune.trial.worker; "
            "print(sorted(m for m in ('optuna', 'rich', 'matplotlib') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True,
                         text=True, check=True).stdout
    assert out.strip() == "[]"


MODULE_LINES = 300
FUNCTION_LINES = 80


def test_no_module_or_function_is_two_things() -> None:
    """A module past 300 lines is probably two things, a function past 80 several steps
    (issue 23's house rules)."""
    long_modules, long_functions = [], []
    for path in sorted((REPO_ROOT / "autotune").rglob("*.py")):
        text = path.read_text()
        name = str(path.relative_to(REPO_ROOT))
        if len(text.splitlines()) > MODULE_LINES:
            long_modules.append(f"{name}: {len(text.splitlines())} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                    and node.end_lineno is not None \
                    and node.end_lineno - node.lineno + 1 > FUNCTION_LINES:
                long_functions.append(f"{name}:{node.lineno} {node.name}: "
                                      f"{node.end_lineno - node.lineno + 1} lines")
    assert long_modules == [] and long_functions == []
