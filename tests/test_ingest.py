"""Ingest into the real embedded store: qdrant-edge, Mem0 on Qdrant local mode, MiniLM, tiktoken."""

from __future__ import annotations

import json

import pytest

from retrieval_node.backends.vectors import SearchScope, point_id
from retrieval_node.ingest import Ingestor, parse_chunk_line
from tests.conftest import write_jsonl

LIEN = (
    "INSTRUMENTS REGISTER (continued)\n252 114 567  2025/11/03  BUILDERS' LIEN\n"
    "Lienholder: Bow River Drywall Ltd. Amount: $48,260.00 for unpaid work and materials supplied to Unit 12."
)


def test_ingest_stores_vectors_and_registry(store, make_chunk, tmp_path):
    chunks = [make_chunk(LIEN, page=2), make_chunk("Certificate of Title. Registered owner: Jane Doe.", section="TITLE_SUMMARY", page=1)]
    report = Ingestor(store).ingest([write_jsonl(tmp_path / "a.jsonl", chunks)])
    assert (report.ingested, report.unchanged, report.rejected) == (2, 0, [])
    records = store.registry.deal_records("2026-TEST-0001")
    assert sorted(r.chunk_id for r in records) == sorted(c.chunk_id for c in chunks)
    lien = next(r for r in records if r.page_start == 2)
    assert lien.section_type == "INSTRUMENTS_REGISTER" and lien.zones == ("instruments_register",)
    payload = store.chunks.payloads([point_id(chunks[0].chunk_id, 0)])[point_id(chunks[0].chunk_id, 0)]
    assert payload["content"] == LIEN and payload["content_hash"] == chunks[0].content_hash
    # the registry write reused the batch embedding: Mem0 never ran the model
    assert store.registry._embeddings.model_calls == 0


def test_ingest_twice_reports_every_chunk_unchanged(store, make_chunk, tmp_path):
    chunks = [make_chunk(f"Page {i}: caveat re purchaser's interest, instrument 25{i} 001 00{i}", page=i) for i in range(1, 8)]
    path = write_jsonl(tmp_path / "deal.jsonl", chunks)
    first = Ingestor(store).ingest([path])
    count = store.chunks.count()
    second = Ingestor(store).ingest([path])
    assert first.ingested == 7
    assert (second.ingested, second.unchanged, second.rejected) == (0, 7, [])
    assert store.chunks.count() == count
    assert len(store.registry.deal_records("2026-TEST-0001")) == 7


def test_broken_lines_are_named_and_good_lines_kept(store, make_chunk, tmp_path):
    good = [make_chunk("Tax certificate: 2026 levy $3,912.44, arrears $0.00", role="TAX_CERTIFICATE", section="TAX_ARREARS", page=i) for i in (1, 2)]
    bad_hash = good[0].model_dump(mode="json") | {"content": "tampered text"}
    wrong_tokens = good[0].model_dump(mode="json") | {"token_count": 999}
    bad_enum = good[1].model_dump(mode="json") | {"section_type": "LIENS"}
    path = write_jsonl(
        tmp_path / "mixed.jsonl",
        good,
        [json.dumps(bad_hash), "{not json", json.dumps(wrong_tokens), json.dumps(bad_enum), b"\xff\xfe bad bytes", "[1, 2]"],
    )
    report = Ingestor(store).ingest([path])
    assert report.ingested == 2
    got = {(r.line, r.field) for r in report.rejected}
    assert got == {(3, "content_hash"), (4, "(line)"), (5, "token_count"), (6, "section_type"), (7, "(line)"), (8, "(line)")}
    assert all(r.file == str(path) for r in report.rejected)
    assert "LIENS" in next(r.error for r in report.rejected if r.field == "section_type")


def test_chunk_of_another_deal_is_rejected_not_moved(store, make_chunk, tmp_path):
    a = make_chunk("Caveat 252 300 111 re: option to purchase", deal_id="DEAL-A", document_id="shared/title.pdf")
    Ingestor(store).ingest([write_jsonl(tmp_path / "a.jsonl", [a])])
    b = a.model_copy(update={"deal_id": "DEAL-B"})
    report = Ingestor(store).ingest([write_jsonl(tmp_path / "b.jsonl", [b])])
    assert report.ingested == 0
    assert [(r.field, "DEAL-A" in r.error) for r in report.rejected] == [("deal_id", True)]
    assert store.registry.deal_records("DEAL-B") == []
    hits = store.chunks.search(store.embedder.embed(["option to purchase"])[0], SearchScope("DEAL-B"), 10)
    assert hits == []


def test_long_chunk_is_searchable_past_the_model_window(store, make_chunk, tmp_path):
    filler = " ".join(f"Bylaw {i}: owners shall keep balconies free of storage and comply with quiet hours." for i in range(60))
    tail = " The board records a special levy of $18,400 per unit for parkade membrane replacement."
    chunk = make_chunk(filler + tail, role="CONDO_DOCS", section="CONDO_BYLAWS")
    Ingestor(store).ingest([write_jsonl(tmp_path / "long.jsonl", [chunk])])
    payload = store.chunks.payloads([point_id(chunk.chunk_id, 0)])[point_id(chunk.chunk_id, 0)]
    n = payload["n_windows"]
    assert n >= 4
    q = store.embedder.embed(["special levy per unit for parkade membrane"])[0]
    hits = store.chunks.search(q, SearchScope("2026-TEST-0001"), 10)
    best = max(hits, key=lambda h: h.score)
    assert best.window == n - 1
    assert chunk.content[best.payload["char_start"]:best.payload["char_end"]].endswith("membrane replacement.")


def test_half_registered_chunk_is_repaired(store, make_chunk, tmp_path):
    chunk = make_chunk("Writ of enforcement 262 010 222 against the registered owner", page=4)
    ingestor = Ingestor(store)
    # simulate a crash between the vector write and the registry write: vectors only
    from retrieval_node.ingest import _Pending

    p = _Pending(chunk=chunk, file="x", line=1, needs_vectors=True, needs_registry=False)
    ingestor._write([p], progress=False)
    assert store.registry.deal_records("2026-TEST-0001") == []
    report = ingestor.ingest([write_jsonl(tmp_path / "r.jsonl", [chunk])])
    assert (report.ingested, report.repaired) == (1, 1)
    assert [r.chunk_id for r in store.registry.deal_records("2026-TEST-0001")] == [chunk.chunk_id]


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        (b'{"chunk_id": 5}', "chunk_id"),
        (b'"just a string"', "(line)"),
        (b"x" * (5 * 1024 * 1024), "(line)"),
    ],
)
def test_parse_chunk_line_never_raises(raw, field):
    out = parse_chunk_line(raw, file="f", line=1, count_tokens=None)
    assert out.field == field


def test_string_numbers_are_wrong_types(make_chunk):
    data = make_chunk("Legal description: Plan 0512345 Block 4 Lot 17").model_dump(mode="json") | {"page_start": "1"}
    out = parse_chunk_line(json.dumps(data).encode(), file="f", line=3, count_tokens=None)
    assert (out.line, out.field) == (3, "page_start")


def test_query_vector_of_registry_matches_the_chunk(store, make_chunk, tmp_path):
    chunk = make_chunk("Special assessment for roof replacement approved at the AGM")
    Ingestor(store).ingest([write_jsonl(tmp_path / "s.jsonl", [chunk])])
    res = store.registry.memory.search("roof special assessment", filters={"user_id": "conv-2026-TEST-0001"}, top_k=3)
    top = res["results"][0]
    assert top["metadata"]["chunk_id"] == chunk.chunk_id
    assert top["score"] > 0.3  # a real similarity of the chunk's own vector


def test_ingest_hands_the_model_windows_in_calls_of_embedding_call_windows(tmp_path, make_chunk, embedder, monkeypatch):
    """Ingest gathers chunks' windows until a call holds embedding_call_windows (never fewer than a batch) and hands
    them to the model at once (it sorts them by length, so a call of several batches pads less); every chunk is stored
    with the vector the model gives its text whatever call it came in."""
    from retrieval_node.config import load_config
    from retrieval_node.store import Store

    chunks = [make_chunk(f"Registration {i:03d} 114 567: a caveat by the lender on unit {i}, filed in 2025.", page=i + 1)
              for i in range(12)]
    path = write_jsonl(tmp_path / "c.jsonl", chunks)
    for call, batch, want in ((5, 2, 3), (2, 4, 3), (512, 64, 1)):  # 12 one-window chunks: 5+5+2, 4+4+4, all at once
        config = load_config(environ={"RETRIEVAL_NODE_EMBEDDING_CALL_WINDOWS": str(call), "RETRIEVAL_NODE_EMBEDDING_BATCH_SIZE": str(batch)})
        sizes: list[int] = []
        real = type(embedder).embed_windows
        # a spy, not a fake: the real model embeds every call; only the number of windows per call is recorded
        monkeypatch.setattr(embedder, "embed_windows", lambda texts: sizes.append(len(texts)) or real(embedder, texts))
        with Store.open(tmp_path / f"store-{call}-{batch}", config=config, embedder=embedder) as st:
            assert Ingestor(st).ingest([path]).ingested == 12
            assert len(sizes) == want and sum(sizes) == 12 and all(n >= max(call, batch) for n in sizes[:-1]), (call, batch, sizes)
            hit = st.chunks.search(embedder.embed([chunks[7].content])[0], SearchScope("2026-TEST-0001"), 1)[0]
            assert hit.chunk_id == chunks[7].chunk_id and hit.score > 0.9999  # its own text's vector, from any call


# -- the listing an ingest offers the first call (Store.offer_listing) ---------------------------------------------

def _listings(store) -> int:
    return store.registry.stats.by_op.get("deal_records", 0)


def _first_package(store, deal_id):
    from retrieval_node.agent import RetrievalAgent
    from tests.conftest import FULL_TRUST

    agent = RetrievalAgent(store, trust=FULL_TRUST)
    pkg, _ = agent.retrieve_sync(agent.intent_for("investigator", deal_id=deal_id))
    return [(r.chunk_id, r.content) for r in pkg.ordered_chunks]


def _varied_deal(make_chunk):
    return [
        make_chunk(LIEN, page=2, metadata={"sensitivity": "confidential", "entity_ids": ["contractor:bow-river-drywall"]}),
        make_chunk("Certificate of Title. Registered owner: Jane Doe.", section="TITLE_SUMMARY", page=1, metadata={"sensitivity": "public"}),
        make_chunk("Caveat 241 339 812 re purchaser's interest, filed 2024/06/12.", section="CAVEATS_SECTION", page=3,
                   metadata={"zones": ["caveats_section"], "created_at": "2026-02-01T09:30:00+00:00"}, ocr_confidence=0.81),
    ]


def test_the_first_call_after_an_ingest_reads_the_listing_the_ingest_offered_and_it_is_what_mem0_lists(store, make_chunk, tmp_path):
    deal = "2026-TEST-0001"
    Ingestor(store).ingest([write_jsonl(tmp_path / "a.jsonl", _varied_deal(make_chunk))])
    offered = store.offered(deal, store.generation(deal))
    assert offered is not None and offered.records == store.registry.deal_records(deal)  # every field, memory ids included
    before = _listings(store)
    first = _first_package(store, deal)
    assert _listings(store) == before  # the first call listed nothing from Mem0
    store.bump([deal])  # the offer is stale now: the next view lists Mem0
    assert store.offered(deal, store.generation(deal)) is None
    assert _first_package(store, deal) == first and _listings(store) == before + 1


def test_an_ingest_that_adds_to_a_deal_offers_the_whole_listing_and_a_later_change_is_never_served_stale(store, make_chunk, tmp_path):
    deal = "2026-TEST-0001"
    chunks = _varied_deal(make_chunk)
    Ingestor(store).ingest([write_jsonl(tmp_path / "a.jsonl", chunks[:2])])
    Ingestor(store).ingest([write_jsonl(tmp_path / "b.jsonl", chunks)])  # one new chunk beside two unchanged
    offered = store.offered(deal, store.generation(deal)).records
    assert offered == store.registry.deal_records(deal) and len(offered) == 3
    before = _listings(store)
    assert chunks[2].chunk_id in {c for c, _ in _first_package(store, deal)} and _listings(store) == before


def test_a_deal_whose_ingest_lost_a_write_is_not_offered(store, make_chunk, tmp_path, monkeypatch):
    deal = "2026-TEST-0001"
    chunks = _varied_deal(make_chunk)
    real = store.registry.register_chunk

    def refuses_the_caveat(record, content, vector):  # FAULT INJECTION: Mem0 refuses one registration
        if record["chunk_id"] == chunks[2].chunk_id:
            raise OSError("injected fault: registry write refused")
        return real(record, content, vector)

    monkeypatch.setattr(store.registry, "register_chunk", refuses_the_caveat)
    report = Ingestor(store).ingest([write_jsonl(tmp_path / "a.jsonl", chunks)])
    assert report.ingested == 2 and len(report.rejected) == 1
    assert store.offered(deal, store.generation(deal)) is None
    before = _listings(store)
    assert chunks[2].chunk_id not in {c for c, _ in _first_package(store, deal)} and _listings(store) == before + 1


def test_the_first_call_after_an_ingest_asks_the_index_only_about_chunks_the_ingest_did_not_write(store, make_chunk, tmp_path, monkeypatch):
    import qdrant_edge as qe

    deal = "2026-TEST-0001"
    chunks = _varied_deal(make_chunk)
    asked: list[list[str]] = []
    real_present = store.chunks.present

    def counted(point_ids, deal_id):  # the real index answers; the test only records what it was asked
        asked.append(list(point_ids))
        return real_present(point_ids, deal_id)

    monkeypatch.setattr(store.chunks, "present", counted)
    Ingestor(store).ingest([write_jsonl(tmp_path / "a.jsonl", chunks[:2])])
    first = _first_package(store, deal)
    assert asked == [] and len(first) >= 1  # the ingest wrote both chunks' points: no pairing asked
    # FAULT INJECTION behind ingest's back: the title page's first vector point is lost
    store.chunks._shard.update(qe.UpdateOperation.delete_points([point_id(chunks[1].chunk_id, 0)]))
    Ingestor(store).ingest([write_jsonl(tmp_path / "b.jsonl", chunks[2:])])  # a new chunk: the deal's listing is offered
    assert store.offered(deal, store.generation(deal)) is not None
    from retrieval_node.agent import RetrievalAgent
    from tests.conftest import FULL_TRUST

    agent = RetrievalAgent(store, trust=FULL_TRUST)
    pkg, summary = agent.retrieve_sync(agent.intent_for("investigator", deal_id=deal))
    assert len(asked) == 1 and len(asked[0]) == 2  # the two chunks this ingest did not write were asked about
    assert chunks[1].chunk_id not in {r.chunk_id for r in pkg.ordered_chunks}
    assert any(f.startswith("unpaired_excluded: 1 registered chunk(s)") for f in summary.fallbacks)


def test_the_point_table_an_ingest_offers_is_every_point_of_the_deal_in_the_index(store, make_chunk, tmp_path):
    from retrieval_node.backends.vectors import point_int

    deal = "2026-TEST-0001"
    chunks = _varied_deal(make_chunk) + [make_chunk(" ".join(["The reserve fund study recommends contributions of $48,000 a year."] * 60),
                                                    section="RESERVE_FUND_REPORT", role="CONDO_DOCS", page=9)]
    Ingestor(store).ingest([write_jsonl(tmp_path / "a.jsonl", chunks[:2])])
    Ingestor(store).ingest([write_jsonl(tmp_path / "b.jsonl", chunks)])  # two found complete, two written now
    windows_of = {c.chunk_id: int(store.chunks.payloads([point_id(c.chunk_id, 0)])[point_id(c.chunk_id, 0)]["n_windows"]) for c in chunks}
    assert windows_of[chunks[3].chunk_id] > 1  # the long chunk has several windows
    rc = store.config.retrieval
    key, table = store.offered(deal, store.generation(deal)).points
    assert key == (rc.window_tokens, rc.window_overlap_tokens)
    assert table == {point_int(cid, w): (cid, w) for cid, n in windows_of.items() for w in range(n)}


def test_a_listing_offered_for_a_generation_the_deal_has_left_is_not_kept(store, make_chunk, tmp_path):
    deal = "2026-TEST-0001"
    Ingestor(store).ingest([write_jsonl(tmp_path / "a.jsonl", _varied_deal(make_chunk))])
    records = store.registry.deal_records(deal)
    gen = store.generation(deal)
    store.bump([deal])  # the deal changed after the listing was read (another writer), before it was offered
    store.offer_listing(deal, records, generation=gen)
    assert store.offered(deal, store.generation(deal)) is None and store.offered(deal, gen) is None
    store.offer_listing(deal, records, generation=store.generation(deal))
    assert store.offered(deal, store.generation(deal)).records == records


# -- risk findings computed by the writer thread, batch by batch -------------------------------------------------

def test_findings_are_kept_for_every_stored_chunk_of_every_batch_and_for_no_refused_one(tmp_path, make_chunk, embedder, monkeypatch):
    """Ingest works each batch's findings out while the model embeds it and keeps them once the batch is stored: over
    several batches every stored chunk has them under every setting, exactly what the risk module computes, and a
    chunk the store refused has none."""
    from retrieval_node.config import load_config
    from retrieval_node.precompute import SHORTFALL_RATIO, decode_signal, findings_of
    from retrieval_node.risk import risk_signal
    from retrieval_node.store import Store

    texts = [LIEN, "Certificate of Title. Registered owner: Jane Doe.", "Caveat 241 339 812 re purchaser's interest, filed 2024/06/12.",
             "Tax certificate: arrears of $3,412.18 for 2025 remain unpaid.", "Tax certificate: balance owing $0.00; no arrears."]
    chunks = [make_chunk(t, page=i + 1) for i, t in enumerate(texts * 2)]
    chunks = list({c.chunk_id: c for c in chunks}.values())
    refused_id = chunks[3].chunk_id
    config = load_config(environ={"RETRIEVAL_NODE_EMBEDDING_CALL_WINDOWS": "2", "RETRIEVAL_NODE_EMBEDDING_BATCH_SIZE": "2"})
    with Store.open(tmp_path / "store", config=config, embedder=embedder) as st:
        real = st.registry.register_chunk

        def refuses_one(record, content, vector):  # FAULT INJECTION: Mem0 refuses one registration
            if record["chunk_id"] == refused_id:
                raise OSError("injected fault: registry write refused")
            return real(record, content, vector)

        monkeypatch.setattr(st.registry, "register_chunk", refuses_one)
        batches: list[int] = []
        found = findings_of(st)
        keep = type(found).keep

        def spy(rows, *args, **kwargs):  # a spy, not a fake: the real rows are kept; only the calls are counted
            batches.append(1)
            return keep(found, rows, *args, **kwargs)

        monkeypatch.setattr(found, "keep", spy)
        report = Ingestor(st).ingest([write_jsonl(tmp_path / "c.jsonl", chunks)])
        assert report.ingested == len(chunks) - 1 and len(report.rejected) == 1
        assert len(batches) >= 2  # computed batch by batch, not once at the end
        stored = found.deal("2026-TEST-0001")
        for s in found.settings:
            assert set(stored[s.key]) == {c.chunk_id for c in chunks} - {refused_id}
            for c in chunks:
                if c.chunk_id != refused_id:
                    assert decode_signal(stored[s.key][c.chunk_id][1]) == risk_signal(c.content, s.lexicon, s.domains, shortfall_ratio=SHORTFALL_RATIO)


@pytest.mark.parametrize("step", ["work_out", "keep"])
def test_a_failed_precomputation_is_raised_after_every_chunk_is_stored(store, make_chunk, tmp_path, monkeypatch, step):
    """The findings are a cache of what a first call would compute: when working them out or writing them fails, every
    chunk is still stored and registered, the deal still answers, and the error reaches the caller (nothing is
    silently skipped)."""
    from retrieval_node.precompute import findings_of

    found = findings_of(store)

    def broken(*_a, **_k):  # FAULT INJECTION: the findings cannot be worked out or written
        raise OSError("injected fault: findings not written")

    monkeypatch.setattr(found, step, broken)
    chunks = _varied_deal(make_chunk)
    with pytest.raises(OSError, match="findings not written"):
        Ingestor(store).ingest([write_jsonl(tmp_path / "a.jsonl", chunks)])
    assert {r.chunk_id for r in store.registry.deal_records("2026-TEST-0001")} == {c.chunk_id for c in chunks}
    monkeypatch.undo()
    assert LIEN in {content for _cid, content in _first_package(store, "2026-TEST-0001")}
