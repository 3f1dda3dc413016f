"""herder's modules import one another without a circle: of two modules, at most one reaches the
other through imports, however indirectly.

In a circle the order of imports decides whether a name is defined yet, and no module of it can be
read, tested or moved without the others: they are one room. The imports are read from the source
of every distribution (a function's and a ``TYPE_CHECKING`` block's too, as the import contracts of
``.importlinter`` read them); nothing is imported.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [ROOT / "core" / "src", *ROOT.glob("plugins/*/src"), *ROOT.glob("integrations/*/src")]

Edges = dict[str, dict[str, int]]
"""For each module, the modules it imports, each with the line of its first import."""


def modules() -> dict[str, Path]:
    """Every module of the distributions by its dotted name (a package by its ``__init__``'s)."""
    found = {}
    for source in SOURCES:
        for path in source.rglob("*.py"):
            parts = path.relative_to(source).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imported(name: str, path: Path, known: set[str]) -> Iterator[tuple[str, int]]:
    """The known modules that module ``name`` imports, with the line of each import."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the package, up level - 1
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            # ``from package import module`` imports the module; ``from module import name``, the module.
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:  # ``import a.b.c`` of a name in a.b: the module a.b
                target = target.rpartition(".")[0]
            if target and target != name:
                yield target, node.lineno


def graph() -> Edges:
    found = modules()
    edges: Edges = {name: {} for name in found}
    for name, path in found.items():
        for target, line in imported(name, path, set(found)):
            edges[name].setdefault(target, line)
    return edges


def circles(edges: Edges) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for target in edges[module]:
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in on_stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(edges):
        if module not in index:
            visit(module)
    return found


def describe(circle: list[str], edges: Edges) -> str:
    """A circle as its imports: ``a -> b (line 3)``, one a line."""
    members = set(circle)
    return "\n".join(f"  {module} -> {target} (line {line})" for module in circle
                     for target, line in sorted(edges[module].items()) if target in members)


def test_no_module_imports_itself_through_others() -> None:
    edges = graph()
    found = circles(edges)
    assert not found, "import circles:\n" + "\n\n".join(describe(circle, edges) for circle in found)


def test_a_circle_is_found_and_named() -> None:
    """The check itself: a circle of three modules is one component, told by its imports."""
    edges: Edges = {"a": {"b": 1}, "b": {"c": 2}, "c": {"a": 3, "d": 4}, "d": {}}
    assert circles(edges) == [["a", "b", "c"]]
    assert describe(["a", "b", "c"], edges) == "  a -> b (line 1)\n  b -> c (line 2)\n  c -> a (line 3)"


def test_the_graph_sees_an_import_made_when_a_function_runs() -> None:
    """``herder alloc exec`` loads its WebSocket session only when it runs: that import counts as any other."""
    assert "herder.cli.interactive" in graph()["herder.cli.remote"]
