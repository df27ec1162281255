import retrieval_node


def test_public_names_are_exported_once_and_resolve():
    assert len(retrieval_node.__all__) == len(set(retrieval_node.__all__))
    assert retrieval_node.__all__ == sorted(retrieval_node.__all__)
    for name in retrieval_node.__all__:
        assert getattr(retrieval_node, name) is not None


def test_core_does_not_import_adapters():
    import pathlib

    root = pathlib.Path(retrieval_node.__file__).parent
    offenders = [p.name for p in root.rglob("*.py") if "import adapters" in p.read_text() or "from adapters" in p.read_text()]
    assert offenders == []


def _readme_imports() -> list[tuple[str, str]]:
    """(module, name) of every ``from retrieval_node... import name`` in the README's python blocks."""
    import ast
    import pathlib
    import re

    readme = (pathlib.Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    found = []
    for code in re.findall(r"^```python\n(.*?)^```$", readme, flags=re.MULTILINE | re.DOTALL):
        for node in ast.walk(ast.parse(code)):
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "retrieval_node":
                found += [(node.module, alias.name) for alias in node.names]
    return found


def test_readme_imports_are_exported():
    import importlib

    found = _readme_imports()
    assert ("retrieval_node", "TrustContext") in found
    for module, name in found:
        if module == "retrieval_node":
            assert name in retrieval_node.__all__, f"README imports {name} from retrieval_node; export it in __all__"
        assert getattr(importlib.import_module(module), name) is not None


def test_every_lazy_export_is_in_all_and_the_reverse():
    assert set(retrieval_node._EXPORTS) == set(retrieval_node.__all__) - {"__version__"}
    assert set(dir(retrieval_node)) >= set(retrieval_node.__all__)


def test_import_is_light():
    """``import retrieval_node`` (and so the command line's argument checks) loads no model or database client."""
    import pathlib
    import subprocess
    import sys

    heavy = ("torch", "sentence_transformers", "mem0", "qdrant_client", "qdrant_edge", "langgraph", "langchain_core", "pydantic")
    code = f"import sys, retrieval_node, retrieval_node.cli; print([m for m in {heavy!r} if m in sys.modules])"
    repo = pathlib.Path(__file__).resolve().parent.parent
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=repo).stdout
    assert out.strip() == "[]"


def test_version_has_one_source():
    import pathlib
    import tomllib

    pyproject = tomllib.loads((pathlib.Path(__file__).resolve().parent.parent / "pyproject.toml").read_text())
    assert pyproject["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "retrieval_node.__version__"}
    assert "version" in pyproject["project"]["dynamic"]
