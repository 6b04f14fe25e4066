"""No import cycles among the modules of the `rlgpt` package (read statically from the source, so deferred
imports inside functions count too: a cycle hidden in a function is still a cycle), and no module below the
run layer imports it."""

from __future__ import annotations

import ast
from pathlib import Path

import rlgpt

# Where each subpackage's source lives (pyproject's package-dir): rlgpt.envs is envs/, etc.
ROOT = Path(rlgpt.__file__).resolve().parents[2]
PACKAGE_DIRS = {"rlgpt": ROOT / "src" / "rlgpt", "rlgpt.envs": ROOT / "envs", "rlgpt.llm": ROOT / "llm",
                "rlgpt.kernels": ROOT / "kernels"}
TOP = "rlgpt.run"
"""`rlgpt run`'s machinery sits on top of everything else: it drives rl, macro, agents, llm and envs, and the
names of the files they all write (`rlgpt.layout`, `rlgpt.rundir`) lie below them all."""
TOP_CALLERS = {"rlgpt.cli"}
"""The modules outside `TOP` that may import it: the command line."""

def modules() -> dict[str, Path]:
    """Every module of the package: dotted name -> file."""
    found: dict[str, Path] = {}
    for package, directory in PACKAGE_DIRS.items():
        for path in directory.rglob("*.py"):
            parts = path.relative_to(directory).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            name = ".".join((package, *parts))
            if not any(name.startswith(f"{other}.") or name == other for other in PACKAGE_DIRS
                       if other != package and other.startswith(f"{package}.")):
                found[name] = path
    return found


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The package's modules ``name`` imports (``from a import b`` counts ``a.b`` when that is a module)."""
    is_package = path.name == "__init__.py"
    here = name if is_package else name.rpartition(".")[0]
    out: set[str] = set()
    tree = ast.parse(path.read_text(), str(path))
    # Imports under `if TYPE_CHECKING:` never run: a type named for readers is not an edge of the design.
    typing_only = {id(inner) for node in ast.walk(tree) if isinstance(node, ast.If)
                   and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"
                   for stmt in node.body for inner in ast.walk(stmt)}
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = here
            for _ in range(node.level - 1):
                base = base.rpartition(".")[0]
            module = (f"{base}.{node.module}" if node.module else base) if node.level else node.module
            # `from a import b` imports module a.b when there is one, else a name of a.
            targets = [f"{module}.{alias.name}" if f"{module}.{alias.name}" in known else module
                       for alias in node.names]
        else:
            continue
        for target in targets:
            # The deepest module of the package the name lies in (`rlgpt.rl.train.train` -> `rlgpt.rl.train`).
            while target and target not in known:
                target = target.rpartition(".")[0]
            # A module's own packages are imported before it anyway (not an edge of the design).
            if target and not (name == target or name.startswith(f"{target}.")):
                out.add(target)
    return out


def import_graph() -> dict[str, set[str]]:
    found = modules()
    return {name: imports_of(name, path, set(found)) for name, path in found.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
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

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def within(name: str, package: str) -> bool:
    return name == package or name.startswith(f"{package}.")


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Imports of `TOP` from a module below it (neither in it nor one of `TOP_CALLERS`)."""
    return sorted(f"{name} -> {target}" for name, targets in graph.items() for target in targets
                  if within(target, TOP) and not within(name, TOP) and name not in TOP_CALLERS)


def test_the_graph_sees_the_package_and_its_imports():
    graph = import_graph()
    assert {"rlgpt.rl.train", "rlgpt.envs.engine.rules", "rlgpt.llm.client", "rlgpt.config"} <= set(graph)
    assert "rlgpt.rl.sf_config" in graph["rlgpt.rl.train"]  # absolute
    assert "rlgpt.envs.crafter" in graph["rlgpt.envs.engine.rules"]  # relative, two levels up
    assert "rlgpt.macro.api" not in graph["rlgpt.macro.control"]  # its import is under TYPE_CHECKING
    # A cycle is found where there is one.
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    # An import up into the run layer is found where there is one.
    assert "rlgpt.layout" in graph["rlgpt.rl.train"] and "rlgpt.run.runner" in graph["rlgpt.cli"]
    assert upward_imports({"rlgpt.rl.x": {"rlgpt.run.layout"}, "rlgpt.cli": {"rlgpt.run"},
                           "rlgpt.run.a": {"rlgpt.run.b"}}) == ["rlgpt.rl.x -> rlgpt.run.layout"]


def test_no_import_cycles():
    found = cycles(import_graph())
    assert not found, "import cycles: " + "; ".join(" <-> ".join(c) for c in found)


def test_nothing_below_the_run_layer_imports_it():
    found = upward_imports(import_graph())
    assert not found, "imports up into rlgpt.run: " + "; ".join(found)
