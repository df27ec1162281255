"""One contract, every chunk-index backend: qdrant-edge (embedded default) and qdrant-client
(local mode here; the same class talks to a Qdrant server)."""

from __future__ import annotations

import uuid

import numpy as np
import pytest

from retrieval_node.agent import RetrievalAgent
from retrieval_node.backends.vectors import EdgeChunkIndex, QdrantChunkIndex, SearchScope, VectorPoint, point_id, point_uuid
from retrieval_node.config import load_config
from retrieval_node.ingest import Ingestor
from retrieval_node.store import Store
from tests.conftest import FULL_TRUST, write_jsonl


def _points():
    rng = np.random.default_rng(7)
    out = []
    for d, deal in enumerate(["A", "B"]):
        for i in range(6):
            cid = f"{d}{i}".ljust(64, "a")
            v = rng.standard_normal(8).astype(np.float32)
            v /= np.linalg.norm(v)
            payload = {"deal_id": deal, "chunk_id": cid, "window": 0, "n_windows": 1, "section_type": ["TITLE_SUMMARY", "GENERAL"][i % 2],
                       "document_role": "TITLE_SEARCH", "document_id": f"{deal}/t.pdf", "content": f"chunk {deal}{i}", "char_start": 0, "char_end": 8}
            out.append(VectorPoint(point_id(cid, 0), v, payload))
    return out


@pytest.fixture(params=["edge", "qdrant-client"])
def index(request, tmp_path):
    if request.param == "edge":
        ix = EdgeChunkIndex.open(tmp_path / "edge", dimension=8)
    else:
        ix = QdrantChunkIndex.in_memory(dimension=8)
    ix.upsert(_points())
    yield ix
    ix.close()


def test_search_is_scoped_to_one_deal(index):
    q = np.ones(8, dtype=np.float32) / np.sqrt(8)
    hits = index.search(q, SearchScope("A"), 100)
    assert len(hits) == 6 and {h.payload["deal_id"] for h in hits} == {"A"}
    assert hits == sorted(hits, key=lambda h: -h.score)
    assert hits[0].payload["chunk_id"] == hits[0].chunk_id  # the point's stored payload (the hot path uses search_points: no payloads)


def test_section_role_and_id_filters(index):
    q = np.ones(8, dtype=np.float32)
    assert {h.payload["section_type"] for h in index.search(q, SearchScope("B", section_types=("GENERAL",)), 100)} == {"GENERAL"}
    assert index.search(q, SearchScope("B", document_roles=("TAX_CERTIFICATE",)), 100) == []
    one = "12".ljust(64, "a")
    assert [h.chunk_id for h in index.search(q, SearchScope("B", chunk_ids=(one,)), 100)] == [one]
    assert index.search(q, SearchScope("B", chunk_ids=()), 100) == []
    with pytest.raises(ValueError):
        index.search(q, SearchScope(""), 10)


def test_payloads_deal_listing_and_count(index):
    pts = _points()
    got = index.payloads([pts[0].id, "00000000-0000-0000-0000-000000000000"])
    assert list(got) == [pts[0].id] and got[pts[0].id]["content"] == "chunk A0"
    only = index.payloads([pts[0].id], ("deal_id", "content_hash"))  # what a deal view's pairing reads: the rest stays on disk
    assert only == {pts[0].id: {k: pts[0].payload[k] for k in ("deal_id", "content_hash") if k in pts[0].payload}}
    assert "content" not in only[pts[0].id] and only[pts[0].id]["deal_id"] == "A"
    assert sorted(p["chunk_id"] for p in index.deal_payloads("B")) == sorted(p.payload["chunk_id"] for p in pts if p.payload["deal_id"] == "B")
    assert index.count() == 12


def test_present_answers_which_points_exist_in_a_deal_without_reading_payloads(index, monkeypatch):
    """What a deal view's pairing asks: of these point ids, which exist and are filed under this deal. Missing ids and
    another deal's points are not present; batches split anywhere give the same answer; the generic answer from the
    payloads (``DerivedSearch.present``) agrees with the index's own."""
    import retrieval_node.backends.vectors as vectors
    from retrieval_node.backends.vectors import DerivedSearch

    pts = _points()
    a_ids = [p.id for p in pts if p.payload["deal_id"] == "A"]
    b_ids = [p.id for p in pts if p.payload["deal_id"] == "B"]
    ghost = point_id("ghost".ljust(64, "f"), 0)
    asked = [a_ids[0], b_ids[0], ghost, *a_ids[1:], *b_ids[1:]]
    assert index.present(asked, "A") == set(a_ids)
    assert index.present(asked, "B") == set(b_ids)
    assert index.present(asked, "C") == set() and index.present([], "A") == set()
    assert DerivedSearch.present(index, asked, "A") == set(a_ids)
    monkeypatch.setattr(vectors, "PRESENT_BATCH", 2)
    assert index.present(asked, "A") == set(a_ids) and DerivedSearch.present(index, asked, "B") == set(b_ids)


def test_batch_search_matches_single(index):
    qs = np.eye(8, dtype=np.float32)[:3]
    batch = index.search_points_many([(q, SearchScope("A"), 4) for q in qs])
    for q, hits in zip(qs, batch, strict=True):
        assert [pid for pid, _ in hits] == [point_uuid(h.chunk_id, h.window) for h in index.search(q, SearchScope("A"), 4)]


def test_search_points_returns_the_same_ranking_without_payloads(index):
    q = np.ones(8, dtype=np.float32) / np.sqrt(8)
    for scope in (SearchScope("A"), SearchScope("B", section_types=("GENERAL",)), SearchScope("B", chunk_ids=("12".ljust(64, "a"),))):
        full = index.search(q, scope, 100)
        assert index.search_points(q, scope, 100) == [(point_uuid(h.chunk_id, h.window), pytest.approx(h.score)) for h in full]
    assert index.search_points(q, SearchScope("B", chunk_ids=()), 10) == []


def test_search_points_many_answers_each_request_as_search_points_does(index):
    qs = np.eye(8, dtype=np.float32)
    requests = [
        (qs[0], SearchScope("A"), 3),
        (qs[1], SearchScope("B", section_types=("GENERAL",)), 100),
        (qs[2], SearchScope("B", chunk_ids=()), 5),  # an empty id list matches nothing
        (qs[3], SearchScope("A", chunk_ids=("01".ljust(64, "a"), "03".ljust(64, "a"))), 10),
    ]
    got = index.search_points_many(requests)
    assert len(got) == len(requests) and got[2] == []
    for (v, scope, limit), hits in zip(requests, got, strict=True):
        assert hits == [(pid, pytest.approx(score)) for pid, score in index.search_points(v, scope, limit)]
    assert index.search_points_many([]) == []
    with pytest.raises(ValueError):
        index.search_points_many([(qs[0], SearchScope(""), 3)])


class _LeakyIndex:
    """FAULT INJECTION, not a backend: answers like the real index wrapped inside it, plus a point of
    another deal and a point id nobody wrote, as a broken filter or a corrupt index could."""

    def __init__(self, real, extra_ids):
        self.real, self.extra_ids = real, extra_ids

    def search_points(self, vector, scope, limit):
        return [*self.real.search_points(vector, scope, limit), *[(pid, 0.99) for pid in self.extra_ids]]

    def search_points_many(self, requests):
        return [[*hits, *[(pid, 0.99) for pid in self.extra_ids]] for hits in self.real.search_points_many(requests)]

    def __getattr__(self, name):
        return getattr(self.real, name)


def test_dense_hits_map_ids_to_the_deals_own_windows(tmp_path, embedder, make_chunk):
    """Hits come back as (chunk, window) of the view's deal only: another deal's point is dropped even when the
    index returns it; a window beyond the estimate is resolved from its payload."""
    with Store.open(tmp_path / "s", embedder=embedder) as store:
        long_text = " ".join(f"Instrument 25{i} 114 567 registered 2025/11/0{i % 9 + 1} builders lien for ${i},260.00." for i in range(60))
        mine = [make_chunk(long_text, page=1), make_chunk("Certificate of title, registered owner Dana Whitford", section="TITLE_SUMMARY", page=2)]
        other = [make_chunk("Another deal's caveat re purchaser's interest", page=1, deal_id="2026-TEST-0002")]
        Ingestor(store).ingest([write_jsonl(tmp_path / "c.jsonl", mine + other)])
        pipeline = RetrievalAgent(store, trust=FULL_TRUST).pipeline
        retriever = pipeline.retriever
        view, _ = pipeline.deals.view("2026-TEST-0001")
        q = store.embedder.embed(["builders lien"])[0]
        scope = SearchScope("2026-TEST-0001")
        by_payload = sorted((h.chunk_id, h.window, round(h.score, 5)) for h in store.chunks.search(q, scope, 100))
        assert max(w for _, w, _ in by_payload) >= 2  # the long chunk has several windows
        assert sorted((c, w, round(s, 5)) for c, w, s in retriever.dense_hits(view, q, scope, 100)) == by_payload
        # the estimate left out: every id is resolved from its payload
        rc = store.config.retrieval
        view.point_table(rc.window_tokens, rc.window_overlap_tokens).clear()
        assert sorted((c, w, round(s, 5)) for c, w, s in retriever.dense_hits(view, q, scope, 100)) == by_payload
        foreign = point_uuid(other[0].chunk_id, 0)
        store.chunks = _LeakyIndex(store.chunks, [foreign, uuid.UUID(int=0)])
        got = retriever.dense_hits(view, q, scope, 100)
        assert {c for c, _, _ in got} <= set(view.chunks) and other[0].chunk_id not in {c for c, _, _ in got}
        for many in retriever.dense_hits_many(view, [(q, scope, 100), (q, SearchScope("2026-TEST-0001", chunk_ids=(mine[1].chunk_id,)), 5)]):
            assert {c for c, _, _ in many} <= set(view.chunks) and other[0].chunk_id not in {c for c, _, _ in many}
        with pytest.raises(ValueError, match="not the view's deal"):
            retriever.dense_hits_many(view, [(q, scope, 10), (q, SearchScope("2026-TEST-0002"), 10)])
        with pytest.raises(ValueError, match="not the view's deal"):
            retriever.dense_hits(view, q, SearchScope("2026-TEST-0002"), 10)
        store.chunks = store.chunks.real


def test_pipeline_on_the_qdrant_client_backend(tmp_path, embedder, make_chunk):
    """The server code path (vector_backend and mem0_vector_store: qdrant), run against qdrant-client's in-process engine."""
    cfg = load_config(environ={"RETRIEVAL_NODE_VECTOR_BACKEND": "qdrant", "RETRIEVAL_NODE_MEM0_VECTOR_STORE": "qdrant",
                               "RETRIEVAL_NODE_VECTOR_DB_URL": ":memory:"})
    with Store.open(tmp_path / "s", config=cfg, embedder=embedder) as store:
        assert isinstance(store.chunks, QdrantChunkIndex)
        assert type(store.registry.memory.vector_store).__name__ == "Qdrant"  # Mem0's own class
        chunks = [make_chunk("252 114 567 2025/11/03 BUILDERS' LIEN for $48,260.00 unpaid", page=2),
                  make_chunk("Certificate of title, registered owner Dana Whitford", section="TITLE_SUMMARY", page=1)]
        assert Ingestor(store).ingest([write_jsonl(tmp_path / "c.jsonl", chunks)]).ingested == 2
        agent = RetrievalAgent(store, trust=FULL_TRUST)
        pkg, summary = agent.retrieve_sync(agent.intent_for("investigator", deal_id="2026-TEST-0001"))
        assert summary.risk_distribution.get("builders_lien") == 1
        assert {r.chunk_id for r in pkg.ordered_chunks} == {c.chunk_id for c in chunks}


def _legacy_shard(path, dimension):
    """A chunk shard as stores before the on-disk layout created it: default config, plain keyword indexes."""
    import qdrant_edge as qe

    shard = qe.EdgeShard.create(str(path), qe.EdgeConfig(vectors={EdgeChunkIndex.VECTOR: qe.EdgeVectorParams(size=dimension, distance=qe.Distance.Cosine)}))
    for field in ("deal_id", "chunk_id", "section_type", "document_role"):
        shard.update(qe.UpdateOperation.create_field_index(field, qe.PayloadSchemaType.Keyword))
    shard.update(qe.UpdateOperation.create_field_index("window", qe.PayloadSchemaType.Integer))
    shard.update(qe.UpdateOperation.create_field_index("ingested_at_ts", qe.PayloadSchemaType.Float))
    shard.close()


def _many_points(n_deals=4, per_deal=400, dim=384):
    rng = np.random.default_rng(11)
    out = []
    for d in range(n_deals):
        for i in range(per_deal):
            cid = f"{d}-{i}".ljust(64, "c")
            v = rng.standard_normal(dim).astype(np.float32)
            v /= np.linalg.norm(v)
            payload = {"deal_id": f"D{d}", "chunk_id": cid, "window": i % 3, "n_windows": 3, "section_type": ["TITLE_SUMMARY", "GENERAL"][i % 2],
                       "document_role": "TITLE_SEARCH", "document_id": f"D{d}/t.pdf", "char_start": 0, "char_end": 8, "ingested_at_ts": 1.0}
            if i % 3 == 0:
                payload["content"] = f"chunk {d}/{i}"
            out.append(VectorPoint(point_id(cid, i % 3), v, payload))
    return out


def _answers(ix, dim=384):
    rng = np.random.default_rng(3)
    out = []
    for d in range(4):
        for _ in range(5):
            q = rng.standard_normal(dim).astype(np.float32)
            out.append([(h.chunk_id, h.window, round(h.score, 5)) for h in ix.search(q, SearchScope(f"D{d}"), 50)])
            out.append([(h.chunk_id, h.window) for h in ix.search(q, SearchScope(f"D{d}", section_types=("GENERAL",)), 20)])
        out.append(sorted(p["chunk_id"] for p in ix.deal_payloads(f"D{d}")))
    return out


def test_a_legacy_shard_opens_and_compaction_keeps_every_answer(tmp_path):
    import json

    import qdrant_edge as qe

    path = tmp_path / "vectors"
    _legacy_shard(path, 384)
    ix = EdgeChunkIndex.open(path, dimension=384)  # a store from before the on-disk layout still opens and serves
    ix.upsert(_many_points())
    before = _answers(ix)
    assert ix.needs_compaction()
    assert ix.compact() is True
    assert not ix.needs_compaction()
    assert _answers(ix) == before
    params = ix._shard.info().payload_schema["deal_id"].params
    assert params.is_tenant and params.memory == qe.Memory.Cold
    ix.close()
    segments = [json.loads(p.read_text()) for p in path.glob("segments/*/segment.json")]
    assert any(s["config"]["vector_data"]["dense"]["storage_type"] == "Mmap" for s in segments)  # compacted: vectors read through mmap
    ix = EdgeChunkIndex.open(path, dimension=384)
    assert _answers(ix) == before and ix.count() == 1600
    ix.close()


def test_closing_after_a_large_write_compacts(tmp_path, monkeypatch):
    from retrieval_node.backends import vectors

    monkeypatch.setattr(vectors, "COMPACT_AFTER_POINTS", 1000)
    ix = EdgeChunkIndex.open(tmp_path / "v", dimension=384)
    assert not ix.needs_compaction()  # a new shard is created in the on-disk layout
    ix.upsert(_many_points())
    before = _answers(ix)
    ix.close()
    import json

    segments = [json.loads(p.read_text()) for p in (tmp_path / "v").glob("segments/*/segment.json")]
    assert any(s["config"]["vector_data"]["dense"]["storage_type"] == "Mmap" for s in segments)
    ix = EdgeChunkIndex.open(tmp_path / "v", dimension=384)
    assert _answers(ix) == before
    ix.close()


class _OneByOne:
    """Not a fake: the real index, sent each request of a batch on its own (what searching one by one gives)."""

    def __init__(self, real):
        self.real, self.batches = real, []

    def search_points_many(self, requests):
        return [self.real.search_points_many([r])[0] for r in requests]

    def __getattr__(self, name):
        return getattr(self.real, name)


class _SearchRecorder(_OneByOne):
    """Not a fake: the real index, with the size of each batch of searches it receives written down."""

    def search_points_many(self, requests):
        self.batches.append(len(requests))
        return self.real.search_points_many(requests)


def test_zone_searches_go_as_one_batch_and_give_the_same_packages(sample_store):
    """The coverage self-check's zone re-retrievals are searched up front in one batch: same packages as
    searching them one by one, on every bundled deal and profile."""
    from retrieval_node.evaluation import EVAL_TRUST, bundled_deals

    real = sample_store.chunks
    packages = {}
    try:
        for batch in (True, False):
            sample_store.chunks = recorder = (_SearchRecorder if batch else _OneByOne)(real)
            agent = RetrievalAgent(sample_store, trust=EVAL_TRUST)
            for deal in bundled_deals():
                for name in ("investigator", "tax", "condo", "scribe"):
                    intent = agent.intent_for(name, deal_id=deal.deal_id)
                    # one target section only: the other zones' members are not candidates, the self-check fetches them
                    narrow = intent.model_copy(update={"target_section_types": intent.target_section_types[:1]})
                    for kind, it in (("profile", intent), ("one section", narrow)):
                        pkg, _ = agent.retrieve_sync(it)
                        packages.setdefault((deal.deal_id, name, kind), set()).add(pkg.package_hash)
            if batch:
                assert recorder.batches and max(recorder.batches) >= 2  # several zones were re-retrieved in one request
    finally:
        sample_store.chunks = real
    assert all(len(hashes) == 1 for hashes in packages.values()), packages


def test_a_shard_keeps_the_vector_datatype_it_was_created_with(tmp_path):
    from retrieval_node.backends.vectors import recorded_datatype

    points = _many_points(n_deals=1, per_deal=60)
    for made, asked in (("float32", "float16"), ("float16", "float32")):
        path = tmp_path / made
        ix = EdgeChunkIndex.open(path, dimension=384, datatype=made)
        ix.upsert(points)
        q = points[5].vector
        before = [(h.chunk_id, h.window) for h in ix.search(q, SearchScope("D0"), 10)]
        ix.close()
        assert recorded_datatype(path, EdgeChunkIndex.VECTOR) == made
        ix = EdgeChunkIndex.open(path, dimension=384, datatype=asked)  # the other datatype asked: the shard's own is kept
        assert recorded_datatype(path, EdgeChunkIndex.VECTOR) == made
        assert [(h.chunk_id, h.window) for h in ix.search(q, SearchScope("D0"), 10)] == before
        assert before[0] == (points[5].payload["chunk_id"], points[5].payload["window"])
        ix.upsert(_many_points(n_deals=2, per_deal=10)[10:])  # and takes new points
        assert ix.count() == 70
        ix.close()
    assert recorded_datatype(tmp_path / "none", EdgeChunkIndex.VECTOR) is None
    with pytest.raises(ValueError, match="unknown vector datatype"):
        EdgeChunkIndex.open(tmp_path / "bad", dimension=8, datatype="int8")


def test_float16_vectors_take_half_the_space_and_score_within_a_thousandth(tmp_path):
    points = _many_points(n_deals=1, per_deal=1500)  # over the indexing threshold: compaction writes one vector matrix
    sizes, scores = {}, {}
    for datatype in ("float32", "float16"):
        ix = EdgeChunkIndex.open(tmp_path / datatype, dimension=384, datatype=datatype)
        ix.upsert(points)
        ix.compact()
        scores[datatype] = {(i, h.chunk_id, h.window): h.score for i, q in enumerate(points[:20]) for h in ix.search(q.vector, SearchScope("D0"), 1500)}
        ix.close()
        sizes[datatype] = sum(p.stat().st_size for p in (tmp_path / datatype).rglob("matrix.dat"))
    assert sizes["float32"] >= 1500 * 384 * 4, sizes
    assert sizes["float16"] < 0.6 * sizes["float32"], sizes
    assert scores["float32"].keys() == scores["float16"].keys()
    assert len(scores["float32"]) == 20 * 1500
    assert max(abs(scores["float32"][k] - scores["float16"][k]) for k in scores["float32"]) < 1e-3  # measured: 7e-5


def test_float16_and_float32_stores_give_the_same_packages(sample_store, tmp_path, embedder, node_config):
    """The default (float16) stores each vector in half the bytes; every bundled deal x profile gets the same chunks in
    the same order, the same material risks and the same token total as from float32 vectors (the scores move in
    the fourth decimal, so package hashes differ)."""
    from retrieval_node.evaluation import EVAL_TRUST, bundled_deals
    from retrieval_node.ingest import add_patterns, read_patterns

    from tests.conftest import SAMPLE_DATA

    assert sample_store.config.retrieval.vector_datatype == "float16"
    config32 = node_config.model_copy(update={"retrieval": node_config.retrieval.model_copy(update={"vector_datatype": "float32"})})
    st32 = Store.open(tmp_path / "f32", config=config32, embedder=embedder)
    try:
        assert Ingestor(st32).ingest(sorted(SAMPLE_DATA.glob("*/chunks.jsonl"))).rejected == []
        add_patterns(st32, read_patterns(SAMPLE_DATA / "patterns.jsonl")[0])
        compared = 0
        for deal in bundled_deals():
            for name in ("investigator", "tax", "condo", "scribe"):
                got = []
                for st in (sample_store, st32):
                    agent = RetrievalAgent(st, trust=EVAL_TRUST)
                    pkg, summary = agent.retrieve_sync(agent.intent_for(name, deal_id=deal.deal_id))
                    got.append(([c.chunk_id for c in pkg.ordered_chunks], pkg.total_tokens, pkg.risk_summary, summary.material_risks))
                    agent.close()
                assert got[0] == got[1], (deal.deal_id, name)
                compared += 1
        assert compared == 12
        agent = RetrievalAgent(st32, trust=EVAL_TRUST)
        before = agent.retrieve_sync(agent.intent_for("condo", deal_id=bundled_deals()[0].deal_id))[0]
        agent.close()
    finally:
        st32.close()
    st32 = Store.open(tmp_path / "f32", config=node_config, embedder=embedder)  # the default (float16) asked of a float32 store
    try:
        from retrieval_node.backends.vectors import recorded_datatype

        assert recorded_datatype(tmp_path / "f32" / "vectors", EdgeChunkIndex.VECTOR) == "float32"
        agent = RetrievalAgent(st32, trust=EVAL_TRUST)
        again = agent.retrieve_sync(agent.intent_for("condo", deal_id=bundled_deals()[0].deal_id))[0]
        agent.close()
        assert again.package_hash == before.package_hash  # nothing stored was lost or converted
    finally:
        st32.close()
