"""The package's layout rules (ARCHITECTURE.md): imports point one way, stages have one entry point each."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "retrieval_node"


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    """Package modules imported anywhere in the file, function bodies included (a lazy import still ties two
    modules together); only ``if TYPE_CHECKING:`` blocks are left out."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    me = _module_name(path).split(".")
    package = me if path.name == "__init__.py" else me[:-1]
    typing_only = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
                   for n in ast.walk(node)}
    out: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package[: len(package) - (node.level - 1)]
            target = ".".join(base + ([node.module] if node.module else []))
            out.add(target)
            if not node.module:
                out.update(f"{target}.{a.name}" for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("retrieval_node"):
            out.add(node.module)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("retrieval_node"))
    return out


def _graph() -> dict[str, set[str]]:
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    return {name: {m for m in _imports(path) if m in modules and m != name} for name, path in modules.items()}


def test_no_import_cycle_in_the_package() -> None:
    graph = {k: v for k, v in _graph().items() if not k.endswith("__init__") and k != "retrieval_node"}
    for deps in graph.values():
        deps.discard("retrieval_node")
    state: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def dfs(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == 1:
                cycles.append(stack[stack.index(dep):] + [dep])
            elif dep not in state:
                dfs(dep)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            dfs(node)
    assert cycles == [], "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


def test_the_leaf_modules_import_nothing_upward() -> None:
    graph = _graph()
    assert graph["retrieval_node.values"] == set()
    assert graph["retrieval_node.errors"] == set()
    assert graph["retrieval_node.models"] <= {"retrieval_node.values"}


def test_the_agent_only_orchestrates() -> None:
    """The retrieval path is the pipeline module; the agent delegates to it."""
    tree = ast.parse((PACKAGE / "agent.py").read_text(encoding="utf-8"))
    agent = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "RetrievalAgent")
    run = next(n for n in agent.body if isinstance(n, ast.FunctionDef) and n.name == "_run")
    assert run.end_lineno - run.lineno < 5
    pipeline = ast.parse((PACKAGE / "pipeline.py").read_text(encoding="utf-8"))
    cls = next(n for n in pipeline.body if isinstance(n, ast.ClassDef) and n.name == "Pipeline")
    run = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "run")
    assert run.end_lineno - run.lineno < 8  # the collector's pause around the path
    path = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "_run")
    assert path.end_lineno - path.lineno < 100


def test_backends_and_stages_never_import_the_agent_or_the_node() -> None:
    graph = _graph()
    top = {"retrieval_node.agent", "retrieval_node.node", "retrieval_node.cli", "retrieval_node.workers", "retrieval_node.demo",
           "retrieval_node.evaluation", "retrieval_node.labelled_eval", "retrieval_node.cli_eval", "retrieval_node.cli_ask", "retrieval_node.langchain_retriever"}
    for name, deps in graph.items():
        if name in top or name == "retrieval_node":
            continue
        assert not deps & top, f"{name} imports {sorted(deps & top)}"
