"""Imports go down the layers of docs/architecture.md, and no rig modules import each other in a cycle.

Read from the source with ast (nothing is imported). Imports inside functions count too: a lazy import hides a
cycle or an upward dependency from the interpreter, not from a reader. Imports under `if TYPE_CHECKING:` do not.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# What a run is made of, bottom to top: a run folder's records and readers, rendering, executing a run, analyses over
# several runs, the sweep. Each layer imports only the layers below it.
RUN_LAYERS = [
    "rig.runfolder",
    "rig.render",
    "rig.execution",
    "rig.analyses",
    "rig.sweep",
    "rig.integrations",
    "rig.cli",
]

# (importer prefix, imported prefix): modules under the first never import modules under the second.
FORBIDDEN = [
    *[
        (low, high)
        for low in ("rig.benchmarks", "rig.engines", "rig.maps", "rig.telemetry", "rig.runformat")
        for high in RUN_LAYERS
    ],
    ("rig.engines", "rig.benchmarks"),
    ("rig.maps", "rig.engines"),
    ("rig.maps", "rig.benchmarks"),
    ("rig.telemetry", "rig.benchmarks"),
    *[(low, high) for i, low in enumerate(RUN_LAYERS) for high in RUN_LAYERS[i + 1 :]],
]


def module_names(root: Path) -> dict[str, Path]:
    out = {}
    for path in (root / "rig").rglob("*.py"):
        parts = path.relative_to(root).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _is_type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The rig modules `name` imports anywhere in its body (`from pkg import mod` counts as pkg.mod)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if _is_type_checking(node):
            return
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            found.update(f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return {m for m in found if m in modules and m != name}


def import_graph(root: Path) -> dict[str, set[str]]:
    modules = module_names(root)
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    def under(module: str, prefix: str) -> bool:
        return module == prefix or module.startswith(prefix + ".")

    return sorted(
        f"{m} imports {d}"
        for m, deps in graph.items()
        for d in deps
        for low, high in FORBIDDEN
        if under(m, low) and under(d, high)
    )


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    m = stack.pop()
                    on_stack.discard(m)
                    component.append(m)
                    if m == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_upward_imports() -> None:
    assert upward_imports(import_graph(ROOT)) == []


def test_no_import_cycles() -> None:
    assert cycles(import_graph(ROOT)) == []


@pytest.fixture
def bad_tree(tmp_path: Path) -> Path:
    """A tiny rig tree with a lazy cycle (pack <-> query) and a benchmark reaching up into the run folder."""
    files = {
        "rig/__init__.py": "",
        "rig/maps/__init__.py": "",
        "rig/maps/pack.py": "def load():\n    from rig.maps.query import MapPack\n",
        "rig/maps/query.py": "from rig.maps import pack\n",
        "rig/runfolder/__init__.py": "",
        "rig/runfolder/store.py": "import typing\nif typing.TYPE_CHECKING:\n    from rig.benchmarks import plot\n",
        "rig/benchmarks/__init__.py": "",
        "rig/benchmarks/plot.py": "def main():\n    from ..runfolder.store import Store\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return tmp_path


def test_the_checks_find_a_lazy_cycle_and_a_relative_upward_import(bad_tree: Path) -> None:
    graph = import_graph(bad_tree)
    assert cycles(graph) == [["rig.maps.pack", "rig.maps.query"]]
    assert upward_imports(graph) == ["rig.benchmarks.plot imports rig.runfolder.store"]
    assert "rig.benchmarks.plot" not in graph["rig.runfolder.store"]  # TYPE_CHECKING imports are not dependencies


def private_imports(root: Path) -> list[str]:
    """`from rig.x import _name` in a module other than rig.x: a private helper used across modules, which should
    have a public name in the module that owns it (or move to the one that uses it)."""
    found = []
    for path in sorted((root / "rig").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("rig")):
                found += [
                    f"{path.relative_to(root).as_posix()}:{node.lineno} imports {a.name} from {node.module}"
                    for a in node.names
                    if a.name.startswith("_") and not a.name.startswith("__")
                ]
    return found


def test_no_module_imports_another_modules_private_names() -> None:
    assert private_imports(ROOT) == []


def test_the_check_finds_a_private_import(bad_tree: Path) -> None:
    (bad_tree / "rig/maps/route.py").write_text("from rig.maps.query import _helper, MapPack\n")
    assert private_imports(bad_tree) == ["rig/maps/route.py:1 imports _helper from rig.maps.query"]
