"""The floor plan is checked, not hoped for: the import-linter contracts in
pyproject.toml hold, no application module imports itself in a circle (not even
through imports made only for the type checker), no module reaches for another
module's private names, and no module grows past the size a reader can hold."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import grimp

BASE_DIR = Path(__file__).resolve().parent.parent
PACKAGES = ("cairn", "memory", "agents", "reviews")
MODULE_MAX_LINES = 600


def test_import_contracts_hold():
    lint_imports = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run(
        [str(lint_imports), "--no-cache"], cwd=BASE_DIR, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in edges:
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_circles():
    graph = grimp.build_graph(*PACKAGES, exclude_type_checking_imports=True)
    modules = {m for m in graph.modules if ".migrations" not in m}
    edges = {m: set(graph.find_modules_directly_imported_by(m)) & modules for m in modules}
    assert _cycles(edges) == []


def test_no_import_circles_even_through_type_checking_imports():
    # An import made only under TYPE_CHECKING still ties the two modules together:
    # the type it names belongs below both of them.
    graph = grimp.build_graph(*PACKAGES, exclude_type_checking_imports=False)
    modules = {m for m in graph.modules if ".migrations" not in m}
    edges = {m: set(graph.find_modules_directly_imported_by(m)) & modules for m in modules}
    assert _cycles(edges) == []


# Where application code lives (tests may reach into what they test).
PRIVATE_SCAN = ("memory", "agents", "reviews", "cairn", "clients")


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_imports(source: str, module: str) -> list[str]:
    """``from x import _name`` statements in ``source``, written ``module:line name``.

    A private module name in the path (Django's ``commands/_helpers.py``) is allowed;
    the name imported out of it is what must be public."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            found += [
                f"{module}:{node.lineno} {alias.name}"
                for alias in node.names
                if _is_private(alias.name)
            ]
    return found


def test_no_private_name_is_imported_across_modules():
    found = []
    for package in PRIVATE_SCAN:
        for path in (BASE_DIR / package).rglob("*.py"):
            if "migrations" in path.parts or ".venv" in path.parts:
                continue
            found += private_imports(path.read_text(), str(path.relative_to(BASE_DIR)))
    assert found == []


def test_the_private_import_finder_finds_one():
    source = "from a import b, _c\nfrom a._d import e\nfrom a import __version__\n"
    assert private_imports(source, "m") == ["m:1 _c"]


def test_the_cycle_finder_finds_a_circle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_application_module_is_over_600_lines():
    too_long = {}
    for package in PACKAGES:
        for path in (BASE_DIR / package).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            lines = len(path.read_text().splitlines())
            if lines > MODULE_MAX_LINES:
                too_long[str(path.relative_to(BASE_DIR))] = lines
    assert too_long == {}
