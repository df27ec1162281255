"""Mem0's vector store: the qdrant-edge store (embedded default) and Mem0's own Qdrant class (qdrant-client
in-process here; the same class talks to a server) behave the same under Mem0's real ``Memory``."""

from __future__ import annotations

import numpy as np
import pytest

from retrieval_node.backends.mem0_edge import EdgeMemoryStore, attach, build_filter
from retrieval_node.backends.mem0_registry import Mem0Registry, SharedEmbeddings, build_memory
from retrieval_node.config import load_config
from retrieval_node.errors import BackendError, ConfigError
from retrieval_node.store import Store


@pytest.fixture(params=["edge", "qdrant-client"])
def registry(request, tmp_path, embedder):
    from qdrant_client import QdrantClient

    shared = SharedEmbeddings(embedder)
    memory = build_memory(client=QdrantClient(location=":memory:"), collection="t_mem0", dimension=384, embeddings=shared,
                          history_db_path=str(tmp_path / "history.db"))
    edge = None
    if request.param == "edge":
        edge = EdgeMemoryStore.open(tmp_path / "mem0_edge", dimension=384)
        attach(memory, edge)
    reg = Mem0Registry(memory, shared, thread_safe_store=edge is not None)
    yield reg
    memory.close()
    if edge is not None:
        edge.close()


def _record(deal: str, n: int, section: str = "INSTRUMENTS_REGISTER") -> dict:
    return {
        "chunk_id": f"{deal[-1]}{n}".ljust(64, "c"), "deal_id": deal, "document_id": f"{deal}/title.pdf", "document_role": "TITLE_SEARCH",
        "section_type": section, "page_start": n, "page_end": n, "content_hash": "0" * 64, "ocr_confidence": 0.9, "token_count": 5,
        "zones": ["instruments_register"], "entity_ids": [], "sensitivity": "confidential", "document_created_at": None,
        "ingested_at": "2026-11-22T00:00:00+00:00",
    }


def test_registry_listing_is_scoped_and_filtered(registry, embedder):
    vecs = embedder.embed([f"chunk {i}" for i in range(6)])
    for i in range(4):
        registry.register_chunk(_record("D-A", i, "INSTRUMENTS_REGISTER" if i % 2 else "TITLE_SUMMARY"), f"deal A chunk {i}", vecs[i])
    for i in range(2):
        registry.register_chunk(_record("D-B", i), f"deal B chunk {i}", vecs[4 + i])
    assert sorted(r.content for r in registry.deal_records("D-A")) == [f"deal A chunk {i}" for i in range(4)]
    assert {r.page_start for r in registry.deal_records("D-A", section_types=["INSTRUMENTS_REGISTER"])} == {1, 3}
    assert [r.deal_id for r in registry.deal_records("D-B")] == ["D-B", "D-B"]
    assert registry.deal_records("D-C") == []
    assert registry.stats.by_op.get("register_chunk") == 6


def test_registry_listing_reads_what_mem0_get_all_lists(registry, embedder):
    """The registry lists a deal from Mem0's vector store without ``Memory.get_all``'s formatting: on both stores the
    records are the ones built from ``get_all``'s answer (text, every metadata field, memory id), and a memory Mem0
    considers expired is left out as ``get_all`` leaves it out."""
    vecs = embedder.embed([f"chunk {i}" for i in range(3)])
    ids = [registry.register_chunk(_record("D-E", i), f"deal E chunk {i}", vecs[i]) for i in range(3)]
    mem = registry.memory
    # one memory expired yesterday (Mem0 2.x's `expiration_date`), one expires in a year
    expired_id = mem.get_all(filters={"user_id": "conv-D-E"}, top_k=10)["results"][0]["id"]
    for mid, day in ((expired_id, "2000-01-01"), (next(m for m in mem.get_all(filters={"user_id": "conv-D-E"}, top_k=10)["results"] if m["id"] != expired_id)["id"], "2999-01-01")):
        payload = dict(mem.vector_store.get(mid).payload)
        mem.vector_store.update(mid, payload={**payload, "expiration_date": day})
    listed = mem.get_all(filters={"user_id": "conv-D-E", "kind": "chunk"}, top_k=100)["results"]
    assert len(listed) == 2 and expired_id not in {m["id"] for m in listed}
    from retrieval_node.values import ChunkView

    plain = ("chunk_id", "deal_id", "document_id", "document_role", "section_type", "page_start", "page_end", "content_hash",
             "ocr_confidence", "token_count", "sensitivity", "document_created_at", "ingested_at")
    expected = sorted((ChunkView(memory_id=m["id"], content=m["memory"], zones=tuple(m["metadata"]["zones"]),
                                 entity_ids=tuple(m["metadata"]["entity_ids"]), **{k: m["metadata"].get(k) for k in plain}) for m in listed),
                      key=lambda r: r.chunk_id)
    got = registry.deal_records("D-E")
    assert got == expected and {r.memory_id for r in got} <= set(ids)
    for bad in ("D E", "D\tE"):  # a scope id Mem0's get_all refuses is refused here too, not listed as an empty deal
        with pytest.raises(BackendError, match="whitespace"):
            registry.deal_records(bad)
        with pytest.raises(ValueError):
            mem.get_all(filters={"user_id": f"conv-{bad}"}, top_k=10)
    for r in got:
        assert r.content.startswith("deal E chunk ") and r.zones == ("instruments_register",) and r.ocr_confidence == 0.9


@pytest.mark.parametrize("damage", ["text_not_a_string", "field_missing"])
def test_a_malformed_registry_record_is_an_error_not_a_listed_chunk(registry, embedder, damage):
    """A registration whose payload lacks a field the record needs, or whose text is not a string, fails the listing
    (as ``get_all``'s formatting did): ingest must not count such a chunk as registered."""
    vec = embedder.embed(["chunk"])[0]
    mid = registry.register_chunk(_record("D-M", 1), "deal M chunk 1", vec)
    vs = registry.memory.vector_store
    payload = dict(vs.get(mid).payload)
    if damage == "text_not_a_string":
        payload["data"] = 5  # (None is dropped by qdrant-client: a missing text is listed as empty by get_all too)
    else:
        del payload["page_start"]
    vs.update(mid, vector=[float(x) for x in vec], payload=payload)  # a whole rewrite (a payload-only update merges)
    with pytest.raises(BackendError, match="malformed"):
        registry.deal_records("D-M")


def test_the_listing_applies_mem0s_own_rules() -> None:
    """The registry lists without ``Memory.get_all`` but by its rules: which memories have expired, which scope ids are
    refused. Compared with Mem0's own functions (private in mem0 2.2: if a release renames or changes them, this test
    is the signal to look again)."""
    from mem0.memory import main as mem0_main

    from retrieval_node.backends.mem0_registry import _entity_id, _expired

    for value in ("2000-01-01", "2999-12-31", "", None, "not a date", "2026-13-45", 20260101, "2026-11-24"):
        assert _expired({"expiration_date": value}) == mem0_main._payload_is_expired({"expiration_date": value}), value
    assert _expired({}) == mem0_main._payload_is_expired({})
    for value in ("conv-2026-A-1", " conv-x ", "conv x", "", "   ", "a\tb", 42, "conv-\u00e9"):
        try:
            ours: object = _entity_id(value, "user_id")
        except ValueError:
            ours = ValueError
        try:
            theirs: object = mem0_main._validate_and_trim_entity_id(value, "user_id")
        except ValueError:
            theirs = ValueError
        assert ours == theirs, value


def test_audit_patterns_search_update_delete_through_mem0(registry, embedder):
    aid = registry.add_audit("D-A", "Retrieval aud_1 for investigator", {"audit_id": "aud_1", "chunks_selected": 3})
    registry.add_audit("D-B", "Retrieval aud_2 for tax", {"audit_id": "aud_2", "chunks_selected": 1})
    assert [e["memory_id"] for e in registry.audit_entries("D-A")] == [aid]
    assert registry.audit_entries("D-A", audit_id="aud_2") == []
    assert registry.add_pattern("builder", "kodiak", "liens", "Kodiak files liens late") is not None
    assert registry.add_pattern("builder", "kodiak", "liens", "Kodiak files liens late") is None  # identical: kept once
    assert [p.entity_id for p in registry.patterns_for(["kodiak", "other"])] == ["kodiak"]
    mem = registry.memory
    found = mem.search("Kodiak liens", filters={"user_id": "global"}, top_k=3)["results"]
    assert found and found[0]["memory"] == "Kodiak files liens late"
    mem.update(aid, "Retrieval aud_1 for investigator (reviewed)")
    assert mem.get(aid)["memory"].endswith("(reviewed)")
    assert [h["event"] for h in mem.history(aid)] == ["ADD", "UPDATE"]
    mem.delete(aid)
    assert registry.audit_entries("D-A") == []


def test_the_edge_store_keeps_no_copy_of_the_text_for_a_keyword_search_it_does_not_have(tmp_path, embedder):
    """Mem0 writes ``text_lemmatized`` for stores with ``keyword_search``; the edge store has none (Mem0's base
    method), so the field is not stored on add or update, and what Mem0 returns is unchanged without it."""
    from mem0.vector_stores.base import VectorStoreBase
    from qdrant_client import QdrantClient

    assert EdgeMemoryStore.keyword_search is VectorStoreBase.keyword_search  # a store that searches by keyword needs the field
    shared = SharedEmbeddings(embedder)
    memory = build_memory(client=QdrantClient(location=":memory:"), collection="t_lem", dimension=384, embeddings=shared,
                          history_db_path=str(tmp_path / "history.db"))
    edge = EdgeMemoryStore.open(tmp_path / "mem0_edge", dimension=384)
    attach(memory, edge)
    try:
        reg = Mem0Registry(memory, shared, thread_safe_store=True)
        vec = embedder.embed(["a builders' lien"])[0]
        reg.register_chunk(_record("D-L", 1), "Builders' Lien registered against the lands for $45,000.", vec)
        aid = reg.add_audit("D-L", "Retrieval aud_9 for investigator", {"audit_id": "aud_9", "chunks_selected": 1})
        memory.update(aid, "Retrieval aud_9 for investigator (reviewed)")
        payloads = [o.payload for o in edge.list({"user_id": "conv-D-L"}, top_k=None)[0]]
        assert len(payloads) == 2 and all("text_lemmatized" not in p for p in payloads)
        assert [r.content for r in reg.deal_records("D-L")] == ["Builders' Lien registered against the lands for $45,000."]
        assert memory.get(aid)["memory"].endswith("(reviewed)")
        assert memory.search("builders lien", filters={"user_id": "conv-D-L"}, top_k=2)["results"]
    finally:
        memory.close()
        edge.close()


def test_compacting_removes_the_unread_copy_from_memories_written_before(tmp_path):
    """A store written before the field was left out (its points written straight into the shard, as Mem0 wrote them
    then) loses it at compaction; every other field and the vectors stay."""
    import qdrant_edge as qe

    st = EdgeMemoryStore.open(tmp_path / "m", dimension=4)
    try:
        ids = ["11111111-1111-1111-1111-111111111111", "22222222-2222-2222-2222-222222222222"]
        st._shard.update(qe.UpdateOperation.upsert_points([
            qe.Point(id=ids[0], vector={"dense": [1.0, 0, 0, 0]}, payload={"user_id": "a", "data": "Lien $5,000", "text_lemmatized": "lien $5,000"}),
            qe.Point(id=ids[1], vector={"dense": [0, 1.0, 0, 0]}, payload={"user_id": "b", "data": "Levy"})]))
        assert st.compact() is True
        assert sorted((o.payload["user_id"], sorted(o.payload)) for o in st.list(None, top_k=None)[0]) == [
            ("a", ["data", "user_id"]), ("b", ["data", "user_id"])]
        assert st.search("q", [1.0, 0, 0, 0], top_k=1)[0].payload["data"] == "Lien $5,000"
        assert st.drop_unread_fields() == 0  # nothing left to remove
    finally:
        st.close()


def test_edge_filter_rejects_what_it_cannot_express():
    with pytest.raises(ValueError, match="'title'"):
        build_filter({"title": {"contains": "lien"}})
    with pytest.raises(ValueError, match="mixed"):
        build_filter({"n": {"gt": 1, "eq": 2}})
    assert build_filter({"user_id": "*"}) is None


def test_edge_store_survives_reopen(tmp_path):
    st = EdgeMemoryStore.open(tmp_path / "m", dimension=4)
    st.insert([[1, 0, 0, 0], [0, 1, 0, 0]], [{"user_id": "a", "n": 1}, {"user_id": "b", "n": 2}], ["11111111-1111-1111-1111-111111111111", "22222222-2222-2222-2222-222222222222"])
    st.close()
    st = EdgeMemoryStore.open(tmp_path / "m", dimension=4)
    try:
        assert [o.payload["n"] for o in st.list({"user_id": "b"})[0]] == [2]
        assert sorted(o.payload["n"] for o in st.list({"OR": [{"user_id": "a"}, {"n": {"gte": 2}}]})[0]) == [1, 2]
        assert [o.payload["n"] for o in st.list({"n": {"ne": 1}})[0]] == [2]
        assert st.search("q", np.array([0, 1, 0, 0], dtype=float).tolist(), top_k=1)[0].payload["n"] == 2
    finally:
        st.close()


def test_store_refuses_other_engines_than_it_was_created_with(tmp_path, embedder):
    with Store.open(tmp_path / "s", embedder=embedder) as store:
        assert store.config.retrieval.mem0_vector_store == "edge"
        assert (tmp_path / "s" / "mem0_edge").is_dir() and not (tmp_path / "s" / "qdrant").exists()
    other = load_config(environ={"RETRIEVAL_NODE_MEM0_VECTOR_STORE": "qdrant"})
    with pytest.raises(ConfigError, match="mem0_vector_store: edge"):
        Store.open(tmp_path / "s", config=other, embedder=embedder)
    with Store.open(tmp_path / "s", embedder=embedder):  # the lock was released by the refused open
        pass


def test_store_from_before_the_manifest_is_recognised(tmp_path, embedder):
    """A store written before store.json existed kept Mem0 in qdrant-client local mode: opening it with the
    edge default must say so instead of showing an empty registry."""
    local = load_config(environ={"RETRIEVAL_NODE_MEM0_VECTOR_STORE": "qdrant"})
    with Store.open(tmp_path / "old", config=local, embedder=embedder) as store:
        store.registry.add_audit("D-A", "Retrieval aud_1", {"audit_id": "aud_1"})
    (tmp_path / "old" / "store.json").unlink()
    explicit_edge = load_config(environ={"RETRIEVAL_NODE_MEM0_VECTOR_STORE": "edge"})
    with pytest.raises(ConfigError, match="mem0_vector_store: qdrant"):
        Store.open(tmp_path / "old", config=explicit_edge, embedder=embedder)
    for cfg in (local, None):  # explicit, or the default 'auto': the recorded engine
        with Store.open(tmp_path / "old", config=cfg, embedder=embedder) as store:
            assert store.config.retrieval.mem0_vector_store == "qdrant"
            assert [e["audit_id"] for e in store.registry.audit_entries("D-A")] == ["aud_1"]


def test_mem0_has_no_llm_and_opening_a_store_imports_no_llm_sdk(tmp_path, registry):
    """Mem0's LLM slot refuses every call (nothing can be sent anywhere), and a store opens without importing the
    openai SDK (which Mem0's lmstudio/openai providers import: half a second of every CLI command)."""
    import subprocess
    import sys
    from pathlib import Path

    from retrieval_node.errors import BackendError

    with pytest.raises(BackendError, match="no LLM"):
        registry.memory.llm.generate_response([{"role": "user", "content": "summarise the deal"}])
    repo = Path(__file__).resolve().parent.parent
    probe = ("import sys; from retrieval_node.store import Store; Store.open(sys.argv[1]).close(); "
             "print('openai' in sys.modules, 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe, str(tmp_path / "store")], capture_output=True, text=True, timeout=300,
                         cwd=repo, env={**__import__("os").environ, "PYTHONPATH": str(repo), "HF_HUB_OFFLINE": "1"})
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["False", "False"]
