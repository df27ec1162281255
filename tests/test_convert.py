"""`retrieval-node convert`: a float32 store becomes float16 with every point kept (ids, payloads: registrations,
patterns, audit entries), the same packages, and a run stopped at any step finished by the next one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from retrieval_node.agent import RetrievalAgent
from retrieval_node.backends import convert as conv
from retrieval_node.backends.vectors import recorded_datatype, scroll_pages
from retrieval_node.cli import app
from retrieval_node.errors import BackendError
from retrieval_node.evaluation import EVAL_TRUST, bundled_deals
from retrieval_node.ingest import Ingestor, add_patterns, read_patterns
from retrieval_node.store import Store
from tests.conftest import SAMPLE_DATA

runner = CliRunner()
SHARDS = {"vectors": "dense", "mem0_edge": "dense"}


def _float32_store(home: Path, embedder, node_config) -> dict[tuple[str, str], list]:
    """A float32 store with the bundled deals, the patterns and one audited call per deal x profile; returns what
    each call packed."""
    config32 = node_config.model_copy(update={"retrieval": node_config.retrieval.model_copy(update={"vector_datatype": "float32"})})
    st = Store.open(home, config=config32, embedder=embedder)
    try:
        assert Ingestor(st).ingest(sorted(SAMPLE_DATA.glob("*/chunks.jsonl"))).rejected == []
        add_patterns(st, read_patterns(SAMPLE_DATA / "patterns.jsonl")[0])
        return _packages(st)
    finally:
        st.close()


def _packages(st: Store) -> dict[tuple[str, str], list]:
    out = {}
    agent = RetrievalAgent(st, trust=EVAL_TRUST)
    try:
        for deal in bundled_deals():
            for name in ("investigator", "condo"):
                pkg, summary = agent.retrieve_sync(agent.intent_for(name, deal_id=deal.deal_id))
                out[(deal.deal_id, name)] = [[c.chunk_id for c in pkg.ordered_chunks], pkg.total_tokens, pkg.risk_summary, summary.material_risks]
    finally:
        agent.close()
    return out


def _points(home: Path) -> dict[str, list[tuple[str, str]]]:
    """Every point of both shards: (id, payload as JSON), in id order."""
    from retrieval_node.backends.vectors import open_edge_shard

    out = {}
    for name, vector in SHARDS.items():
        shard = open_edge_shard(home / name, vector=vector, dimension=384, indexes={}, tenant="")
        try:
            out[name] = [(str(r.id), json.dumps(r.payload, sort_keys=True)) for page in scroll_pages(shard) for r in page]
        finally:
            shard.close()
    return out


def _audits(st: Store) -> list[str]:
    return sorted(e["memory_id"] for d in bundled_deals() for e in st.registry.audit_entries(d.deal_id))


@pytest.fixture(scope="module")
def made(tmp_path_factory, embedder, node_config):
    """A float32 store made once; each test works on its own copy of it."""
    import shutil

    home = tmp_path_factory.mktemp("f32") / "store"
    packed = _float32_store(home, embedder, node_config)
    points = _points(home)

    def copy(to: Path) -> Path:
        shutil.copytree(home, to)
        return to

    return copy, packed, points


def test_a_float32_store_converts_with_every_point_kept_and_the_same_packages(made, tmp_path, embedder, node_config):
    copy, packed, points = made
    home = copy(tmp_path / "store")
    res = runner.invoke(app, ["convert", "--store", str(home), "--json"])
    assert res.exit_code == 0, res.output
    done = json.loads(res.output)["converted"]
    assert {n: (r["converted"], r["from"], r["to"]) for n, r in done.items()} == {n: (True, "float32", "float16") for n in SHARDS}
    assert done["vectors"]["points"] == len(points["vectors"]) and done["mem0_edge"]["points"] == len(points["mem0_edge"])
    for name, vector in SHARDS.items():
        assert recorded_datatype(home / name, vector) == "float16"  # half the bytes a vector: test_vector_backends
    assert _points(home) == points  # every id and payload: registrations, patterns, audit entries
    assert not list(home.glob("*-old")) and not list(home.glob("*-new"))

    st = Store.open(home, config=node_config, embedder=embedder)
    try:
        audits_before = _audits(st)
        assert len(audits_before) == len(packed)  # the calls made on the float32 store are still in its audit trail
        assert _packages(st) == packed
    finally:
        st.close()
    again = runner.invoke(app, ["convert", "--store", str(home)])
    assert again.exit_code == 0 and again.output.count("already float16") == 2, again.output


def test_a_conversion_stopped_between_its_renames_is_finished_by_the_next_run(made, tmp_path, embedder, node_config, monkeypatch):
    copy, packed, points = made
    home = copy(tmp_path / "store")
    real = Path.rename
    calls = []

    def rename_then_fail(self, target):  # a fake, only to inject the fault: the second rename of a shard fails
        calls.append((self, target))
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        return real(self, target)

    monkeypatch.setattr(Path, "rename", rename_then_fail)
    with pytest.raises(BackendError, match="No space left"):
        Store.convert_vectors(home, "float16")
    monkeypatch.setattr(Path, "rename", real)
    assert not (home / "vectors").exists() and (home / "vectors.float32-old").is_dir() and (home / "vectors.float16-new").is_dir()
    with pytest.raises(BackendError, match=r"retrieval-node convert` was interrupted"):
        Store.open(home, config=node_config, embedder=embedder)
    assert not (home / "vectors").exists()  # no empty shard made in its place

    res = runner.invoke(app, ["convert", "--store", str(home), "--json"])
    assert res.exit_code == 0, res.output
    assert _points(home) == points
    assert not list(home.glob("*-old")) and not list(home.glob("*-new"))
    st = Store.open(home, config=node_config, embedder=embedder)
    try:
        assert _packages(st) == packed
    finally:
        st.close()


def test_a_copy_that_fails_its_check_replaces_nothing_and_is_made_again(made, tmp_path, monkeypatch):
    copy, _packed, points = made
    home = copy(tmp_path / "store")

    def differs(*a, **k):  # a fake, only to inject the fault: the copy check finds a difference
        raise BackendError("copy check: point 1 has another payload in the copy")

    monkeypatch.setattr(conv, "_check", differs)
    with pytest.raises(BackendError, match="copy check"):
        Store.convert_vectors(home, "float16")
    assert recorded_datatype(home / "vectors", "dense") == "float32"  # the original untouched
    assert (home / "vectors.float16-new").is_dir() and not (home / "vectors.float16-new" / conv.CONVERTED).exists()
    monkeypatch.undo()
    assert Store.convert_vectors(home, "float16")["vectors"]["converted"] is True
    assert _points(home) == points and not list(home.glob("*-new"))


def test_convert_says_when_a_store_has_nothing_embedded(tmp_path):
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "store.json").write_text("{}")  # a store whose vectors live on a Qdrant server: no shard directory
    res = runner.invoke(app, ["convert", "--store", str(tmp_path / "s")])
    assert res.exit_code == 0 and "nothing to convert" in res.output
    assert json.loads(runner.invoke(app, ["convert", "--store", str(tmp_path / "s"), "--json"]).output) == {"converted": {}}


def test_convert_refuses_what_it_cannot_do(tmp_path):
    res = runner.invoke(app, ["convert", "--store", str(tmp_path / "nothing")])
    assert res.exit_code == 2 and "no store at" in res.output
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "store.json").write_text("{}")
    res = runner.invoke(app, ["convert", "--store", str(tmp_path / "s"), "--vector-datatype", "int8"])
    assert res.exit_code == 2 and "--vector-datatype" in res.output and "int8" in res.output


def test_the_copy_check_finds_a_changed_payload_a_moved_vector_and_a_missing_point(tmp_path):
    import numpy as np
    import qdrant_edge as qe

    from retrieval_node.backends.vectors import open_edge_shard

    rng = np.random.default_rng(7)
    vecs = rng.normal(size=(5, 8))
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)

    def shard(name, *, payload_of=lambda i: {"n": i}, nudge=0.0, n=5):
        s = open_edge_shard(tmp_path / name, vector="dense", dimension=8, indexes={}, tenant="", datatype="float16")
        s.update(qe.UpdateOperation.upsert_points([qe.Point(id=i + 1, vector={"dense": (vecs[i] + (nudge if i == 3 else 0)).tolist()},
                                                            payload=payload_of(i)) for i in range(n)]))
        return s

    src = shard("src")
    conv._check(src, shard("same"), vector="dense", tolerance=2e-3, expected=5)  # a faithful copy passes
    with pytest.raises(BackendError, match="point 3 has another payload"):
        conv._check(src, shard("payload", payload_of=lambda i: {"n": i, "x": 1} if i == 2 else {"n": i}), vector="dense", tolerance=2e-3, expected=5)
    with pytest.raises(BackendError, match="point 4's vector differs"):
        conv._check(src, shard("vector", nudge=0.05), vector="dense", tolerance=2e-3, expected=5)
    with pytest.raises(BackendError, match="the copy 4"):
        conv._check(src, shard("short", n=4), vector="dense", tolerance=2e-3, expected=5)


def test_the_command_line_offers_the_datatypes_the_backends_have(tmp_path):
    from retrieval_node.backends.vectors import VECTOR_DATATYPES

    res = runner.invoke(app, ["convert", "--store", str(tmp_path), "--vector-datatype", "int8"])
    assert f"valid values: {', '.join(VECTOR_DATATYPES)}" in res.output
