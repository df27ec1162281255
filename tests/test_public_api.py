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
