"""The retrieval pipeline on the real embedded store (qdrant-edge, Mem0 on Qdrant local mode, MiniLM)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from retrieval_node.agent import RetrievalAgent
from retrieval_node.errors import BackendError, IntentError
from retrieval_node.ingest import Ingestor
from retrieval_node.models import DocumentChunk, RetrievalIntent
from retrieval_node.store import Store
from tests.conftest import FULL_TRUST, write_jsonl

DEAL = "2026-PIPE-0001"
OTHER = "2026-PIPE-0002"

TITLE = [
    ("TITLE_SUMMARY", "CERTIFICATE OF TITLE. LINC 0031 234 567. Registered owner: Marguerite Olsen of Calgary, Alberta. "
     "Estate: fee simple. Title number 211 045 889. This title is subject to the registrations listed in the instruments register."),
    ("LEGAL_DESCRIPTION", "LEGAL DESCRIPTION: Condominium Plan 0712345, Unit 12, and 135 undivided one ten thousandth shares in the common property. "
     "Excepting thereout all mines and minerals."),
    ("INSTRUMENTS_REGISTER", "REGISTRATION 072 114 001 2007/03/02 CONDOMINIUM PLAN. REGISTRATION 172 200 310 2017/06/11 MORTGAGE "
     "Mortgagee: ATB Financial, original principal amount $412,000."),
    ("INSTRUMENTS_REGISTER", "REGISTRATION 252 114 567 2025/11/03 BUILDERS' LIEN. Lienholder: Bow River Drywall Ltd. "
     "Amount: $48,260.00 claimed for unpaid work and materials supplied to Unit 12 between August and October 2025."),
    ("INSTRUMENTS_REGISTER", "REGISTRATION 152 331 908 2015/09/14 UTILITY RIGHT OF WAY. Grantee: ENMAX Power Corporation. "
     "Right of way for underground electrical distribution lines along the north boundary."),
    ("CAVEATS_SECTION", "CAVEATS. 212 300 111 caveat re: option to purchase, caveator Harold Finch. DISCHARGED by 232 001 002 on 2023/01/05."),
]


def _chunks(make_chunk, deal: str, *, noise: str = "") -> list[DocumentChunk]:
    out = []
    for page, (section, text) in enumerate(TITLE, start=1):
        out.append(make_chunk(text + noise, deal_id=deal, section=section, page=page, document_id=f"{deal}/title-search.pdf"))
    out.append(make_chunk("Tax certificate 2026: current levy $3,912.44 of which $3,912.44 remains outstanding as arrears with a penalty of $391.24.",
                          deal_id=deal, role="TAX_CERTIFICATE", section="TAX_ARREARS", page=1, document_id=f"{deal}/tax-certificate.pdf"))
    return out


def two_deal_store(home, embedder, node_config, counter):
    """A store with DEAL and OTHER ingested (same builder, same boilerplate); returns (store, chunks, make_chunk)."""

    def make_chunk(content, *, deal_id, section, page, document_id, role="TITLE_SEARCH"):
        return DocumentChunk.build(deal_id=deal_id, document_id=document_id, document_role=role, page_start=page, page_end=page,
                                   section_type=section, content=content, token_count=counter.count(content), ocr_confidence=0.97)

    st = Store.open(home / "store", config=node_config, embedder=embedder)
    chunks = _chunks(make_chunk, DEAL) + _chunks(make_chunk, OTHER, noise=" Same builder, same boilerplate.")
    Ingestor(st).ingest([write_jsonl(home / "c.jsonl", chunks)])
    return st, chunks, make_chunk


@pytest.fixture(scope="module")
def pipe_store(tmp_path_factory, embedder, node_config, counter):
    st, chunks, _ = two_deal_store(tmp_path_factory.mktemp("pipe"), embedder, node_config, counter)
    yield st, chunks
    st.close()


@pytest.fixture(scope="module")
def agent(pipe_store):
    return RetrievalAgent(pipe_store[0], trust=FULL_TRUST)


def test_material_risks_name_each_material_chunk_with_verbatim_evidence(agent):
    """summary.material_risks (interfaces.md section 4): the lien is listed with the words that carry it; the
    discharged caveat and the right of way are not; the risk summary's [E<n>] lines name the same chunks."""
    pkg, summary = agent.retrieve_sync(agent.intent_for("investigator", deal_id=DEAL))
    by_id = {r.chunk_id: r for r in pkg.ordered_chunks}
    assert summary.material_risks, pkg.risk_summary
    for m in summary.material_risks:
        assert m.in_package == (m.chunk_id in by_id)
        assert m.evidence in agent.get_chunk(m.chunk_id).content
    lien = next(m for m in summary.material_risks if "builders_lien" in m.kinds)
    assert "BUILDERS' LIEN" in lien.evidence and "DISCHARGED" not in " ".join(m.evidence for m in summary.material_risks)
    cited = {pkg.ordered_chunks[int(line.split("]")[0][2:]) - 1].chunk_id for line in pkg.risk_summary.splitlines() if line.startswith("[E")}
    assert cited == {m.chunk_id for m in summary.material_risks if m.in_package}
    replayed = agent.replay(summary.audit_id)[1]
    assert replayed.material_risks == summary.material_risks


def test_nothing_material_is_an_empty_list_and_a_plain_sentence(tmp_path, embedder, make_chunk):
    """A clean title (a discharged caveat, a utility right of way, a mortgage paid out) claims nothing material."""
    with Store.open(tmp_path / "s", embedder=embedder) as store:
        clean = [
            make_chunk("CERTIFICATE OF TITLE. Registered owner: Ines Tremblay. Estate in fee simple.", section="TITLE_SUMMARY", page=1),
            make_chunk("152 331 908 2015/09/14 UTILITY RIGHT OF WAY. Grantee: ATCO Gas.", page=2),
            make_chunk("CAVEATS. 212 300 111 caveat re: option to purchase. DISCHARGED by 232 001 002 on 2023/01/05.", section="CAVEATS_SECTION", page=3),
        ]
        Ingestor(store).ingest([write_jsonl(tmp_path / "c.jsonl", clean)])
        agent = RetrievalAgent(store, trust=FULL_TRUST)
        pkg, summary = agent.retrieve_sync(agent.intent_for("investigator", deal_id="2026-TEST-0001"))
        assert summary.material_risks == []
        assert pkg.risk_summary.startswith("NO MATERIAL RISK")


def test_builders_lien_found_and_benign_lookalike_ranks_below(agent):
    pkg, summary = agent.retrieve_sync(agent.intent_for("investigator", deal_id=DEAL))
    contents = [c.content for c in pkg.ordered_chunks]
    assert any("BUILDERS' LIEN" in c for c in contents)
    assert summary.risk_distribution.get("builders_lien") == 1
    assert "builders_lien" in pkg.risk_summary
    snap = agent.audit.read_snapshot(summary.audit_id)
    terms = {c["chunk_id"]: c["terms"] for c in snap["candidates"]}
    by_text = {c.content: c.chunk_id for c in pkg.ordered_chunks}
    lien = terms[next(v for k, v in by_text.items() if "BUILDERS' LIEN" in k)]
    discharged = terms[next(v for k, v in by_text.items() if "DISCHARGED" in k)]
    row = terms[next(v for k, v in by_text.items() if "RIGHT OF WAY" in k)]
    assert lien["combined"] > discharged["combined"] and lien["combined"] > row["combined"]
    assert discharged["risk_kinds"] == [] and any("discharged" in b for b in discharged["benign_terms"])


def test_package_is_verbatim_in_reading_order_with_provenance(agent, pipe_store):
    store, chunks = pipe_store
    pkg, _ = agent.retrieve_sync(agent.intent_for("investigator", deal_id=DEAL))
    by_id = {c.chunk_id: c for c in chunks}
    for ref in pkg.ordered_chunks:
        src = by_id[ref.chunk_id]
        assert (ref.content, ref.content_hash, ref.document_id, ref.page_range) == (src.content, src.content_hash, src.document_id, src.page_range)
    keys = [(r.document_id, int(r.page_range.split("-")[0])) for r in pkg.ordered_chunks]
    assert keys == sorted(keys)
    text = pkg.to_prompt()
    assert store.tokens.count(text) == pkg.total_tokens <= 4000


def test_identical_calls_give_identical_packages(agent):
    intent = agent.intent_for("investigator", deal_id=DEAL)
    a, sa = agent.retrieve_sync(intent)
    b, sb = agent.retrieve_sync(intent)
    assert a == b and a.package_hash == b.package_hash
    assert sa.audit_id != sb.audit_id


def test_other_deal_never_appears(agent, pipe_store):
    _, chunks = pipe_store
    other_ids = {c.chunk_id for c in chunks if c.deal_id == OTHER}
    for name in ("investigator", "tax", "condo", "scribe"):
        pkg, _ = agent.retrieve_sync(agent.intent_for(name, deal_id=DEAL))
        assert pkg.deal_id == DEAL
        assert not other_ids & {r.chunk_id for r in pkg.ordered_chunks}
        assert all(r.document_id.startswith(DEAL) for r in pkg.ordered_chunks)


def test_absent_zone_is_reported_not_papered_over(agent):
    pkg, summary = agent.retrieve_sync(agent.intent_for("condo", deal_id=DEAL))
    assert set(summary.missing_zones) == {"reserve_fund_report", "financial_statements", "special_resolutions"}
    assert summary.needs_human_input
    assert "MISSING" in pkg.structural_toc
    assert pkg.risk_summary.startswith("UNABLE_TO_ASSESS")


def test_tax_arrears_found_and_zone_check(agent):
    pkg, summary = agent.retrieve_sync(agent.intent_for("tax", deal_id=DEAL))
    assert any("arrears" in r.content for r in pkg.ordered_chunks)
    assert summary.risk_distribution.get("tax_arrears") == 1
    assert "tax_liens" in summary.missing_zones  # the deal has no tax lien zone: said, not hidden


@pytest.mark.parametrize("budget", [60, 120, 250, 400, 900, 4000])
def test_budget_is_never_exceeded(agent, budget):
    pkg, summary = agent.retrieve_sync(agent.intent_for("investigator", deal_id=DEAL, budget=budget))
    assert pkg.total_tokens <= budget
    assert summary.tokens_selected == pkg.total_tokens


def test_small_budget_keeps_the_lien_and_reports_shortfall(agent):
    pkg, summary = agent.retrieve_sync(agent.intent_for("investigator", deal_id=DEAL, budget=250))
    assert [r for r in pkg.ordered_chunks if "BUILDERS' LIEN" in r.content]
    assert summary.needs_human_input
    assert any(f.startswith("budget_shortfall") for f in summary.fallbacks)


def test_audit_entry_written_to_mem0(agent, pipe_store):
    store, _ = pipe_store
    _, summary = agent.retrieve_sync(agent.intent_for("investigator", deal_id=DEAL))
    assert agent.flush_audit()  # a no-op in sync mode; needed when audit_write is background
    entries = store.registry.audit_entries(DEAL, audit_id=summary.audit_id)
    assert len(entries) == 1
    e = entries[0]
    assert e["intent_id"] == "title_risk_scan_v1" and e["requesting_agent_id"] == "investigator_r1"
    assert e["chunks_selected"] == summary.chunks_selected
    assert e["audit_entry"]["context_package_hash"] == agent.audit.read_snapshot(summary.audit_id)["package"]["package_hash"]


def test_audit_entries_stored_as_objects_by_older_versions_still_read(pipe_store):
    store, _ = pipe_store
    entry = {"context_package_hash": "0" * 64, "exclusions": ["c1: over budget"]}
    store.registry.add_audit(DEAL, "older audit entry", {"audit_id": "aud_older", "audit_entry": entry})
    (row,) = store.registry.audit_entries(DEAL, audit_id="aud_older")
    assert row["audit_entry"] == entry


def test_unknown_deal_is_an_intent_error(agent):
    with pytest.raises(IntentError, match="NOPE"):
        agent.retrieve_sync(agent.intent_for("investigator", deal_id="NOPE"))


def test_as_of_excludes_later_chunks(agent):
    past = datetime.now(UTC) - timedelta(days=1)
    intent = agent.intent_for("investigator", deal_id=DEAL).model_copy(update={"as_of": past})
    pkg, summary = agent.retrieve_sync(RetrievalIntent.model_validate(intent.model_dump()))
    assert pkg.ordered_chunks == [] and summary.needs_human_input


class FailingRegistry:
    """Fault-injection fake: a Mem0 that is down. Every call raises like an unreachable backend."""

    def __init__(self, real):
        self._real = real

    def __getattr__(self, name):
        def fail(*a, **k):
            raise BackendError("Mem0 unreachable (injected fault)")

        return fail


def test_mem0_down_gives_vector_only_package(pipe_store, node_config):
    store, _ = pipe_store
    real = store.registry
    sync = node_config.model_copy(update={"retrieval": node_config.retrieval.model_copy(update={"audit_write": "sync"})})
    offered = store.offered(DEAL, store.generation(DEAL))
    store.registry = FailingRegistry(real)
    try:
        # the listing this module's ingest offered (no test before bumps DEAL) needs no Mem0: the structure is exact
        assert offered is not None
        agent = RetrievalAgent(store, config=sync, trust=FULL_TRUST)
        pkg, summary = agent.retrieve_sync(agent.intent_for("investigator", deal_id=DEAL))
        assert any("BUILDERS' LIEN" in r.content for r in pkg.ordered_chunks)
        assert not any(f.startswith("mem0_unavailable") for f in summary.fallbacks)
        assert any(f.startswith("audit_journaled") for f in summary.fallbacks)  # the audit write still needed Mem0
        store.bump([DEAL])  # the deal changed since: its view must be listed, and Mem0 is down
        agent = RetrievalAgent(store, config=sync, trust=FULL_TRUST)
        pkg, summary = agent.retrieve_sync(agent.intent_for("investigator", deal_id=DEAL))
    finally:
        store.registry = real
    assert any("BUILDERS' LIEN" in r.content for r in pkg.ordered_chunks)
    assert any(f.startswith("mem0_unavailable") for f in summary.fallbacks)
    assert any(f.startswith("audit_journaled") for f in summary.fallbacks)
    assert agent.audit.pending() >= 1
    # the journaled entry reaches Mem0 on the next call with Mem0 back
    agent2 = RetrievalAgent(store, config=sync, trust=FULL_TRUST)
    _, s2 = agent2.retrieve_sync(agent2.intent_for("tax", deal_id=DEAL))
    assert agent2.audit.pending() == 0
    assert store.registry.audit_entries(DEAL, audit_id=summary.audit_id)


class FailingChunkIndex:
    """Fault-injection fake: Qdrant is down."""

    def __getattr__(self, name):
        def fail(*a, **k):
            raise BackendError("Qdrant unreachable (injected fault)")

        return fail


def test_qdrant_down_raises_and_fabricates_nothing(pipe_store):
    store, _ = pipe_store
    real = store.chunks
    store.chunks = FailingChunkIndex()
    try:
        agent = RetrievalAgent(store, trust=FULL_TRUST)
        agent.pipeline.deals.invalidate()
        with pytest.raises(BackendError, match="Qdrant"):
            agent.retrieve_sync(agent.intent_for("investigator", deal_id=DEAL))
    finally:
        store.chunks = real


def test_background_audit_writer_journals_and_recovers(pipe_store, node_config):
    store, _ = pipe_store
    bg = node_config.model_copy(update={"retrieval": node_config.retrieval.model_copy(update={"audit_write": "background"})})
    agent = RetrievalAgent(store, config=bg, trust=FULL_TRUST)
    assert agent.audit.background
    real = store.registry
    store.registry = agent.audit.registry = FailingRegistry(real)  # Mem0 goes down after the agent started
    try:
        _, summary = agent.retrieve_sync(agent.intent_for("tax", deal_id=DEAL))
        assert not agent.flush_audit(timeout=5)
        assert agent.audit.pending() >= 1 and "injected fault" in (agent.audit.last_error or "")
    finally:
        store.registry = agent.audit.registry = real
    agent.audit.last_error = None
    assert agent.flush_audit(timeout=30)
    assert store.registry.audit_entries(DEAL, audit_id=summary.audit_id)
    agent.close()


class LateFailingRegistry:
    """Fault-injection fake: Mem0 stores the audit memory, then fails (e.g. its history write), like the
    real Mem0 did when its SQLite handle was closed under it. Everything else goes to the real registry."""

    def __init__(self, real):
        self._real = real

    def add_audit(self, *a, **k):
        self._real.add_audit(*a, **k)
        raise BackendError("Mem0 add (add_audit) failed after storing: history unavailable (injected fault)")

    def __getattr__(self, name):
        return getattr(self._real, name)


def test_audit_entry_that_failed_late_is_not_written_twice(pipe_store, node_config):
    store, _ = pipe_store
    sync = node_config.model_copy(update={"retrieval": node_config.retrieval.model_copy(update={"audit_write": "sync"})})
    agent = RetrievalAgent(store, config=sync, trust=FULL_TRUST)
    real = store.registry
    agent.audit.registry = LateFailingRegistry(real)
    try:
        _, summary = agent.retrieve_sync(agent.intent_for("tax", deal_id=DEAL))
    finally:
        agent.audit.registry = real
    assert any(f.startswith("audit_journaled") for f in summary.fallbacks)
    assert agent.audit.pending() == 1
    assert agent.audit.flush_journal() == 1 and agent.audit.pending() == 0
    assert len(real.audit_entries(DEAL, audit_id=summary.audit_id)) == 1  # stored once, not twice


def test_patterns_added_in_this_process_reach_the_next_call(tmp_path, embedder, make_chunk):
    """State and its invalidation: adding a pattern memory bumps the store's pattern generation, so the very next
    retrieval scores the γ term with it (no waiting for the cache lifetime, which is an hour by default)."""
    from retrieval_node.ingest import add_patterns
    from retrieval_node.models import PatternMemory

    with Store.open(tmp_path / "s", embedder=embedder) as store:
        lien = make_chunk("REGISTRATION 252 114 567 2025/11/03 BUILDERS' LIEN. Lienholder: Bow River Drywall Ltd. Amount: $48,260.00.",
                          deal_id=DEAL, page=2)
        title = make_chunk("CERTIFICATE OF TITLE. Registered owner: Marguerite Olsen.", deal_id=DEAL, section="TITLE_SUMMARY", page=1)
        Ingestor(store).ingest([write_jsonl(tmp_path / "c.jsonl", [lien, title])])
        agent = RetrievalAgent(store, trust=FULL_TRUST)
        intent = agent.intent_for("investigator", deal_id=DEAL)
        _, first = agent.retrieve_sync(intent)
        before = {c["chunk_id"]: c["terms"]["patterns"] for c in agent.audit.read_snapshot(first.audit_id)["candidates"]}
        assert before[lien.chunk_id] == []
        gen = store.patterns_generation()
        added, _ = add_patterns(store, [PatternMemory(entity_type="contractor", entity_id="contractor:bow-river-drywall", topic="liens",
                                                      content="Files liens on condo units when the builder pays late.")])
        assert added == 1 and store.patterns_generation() == gen + 1
        _, second = agent.retrieve_sync(intent)
        after = {c["chunk_id"]: c["terms"] for c in agent.audit.read_snapshot(second.audit_id)["candidates"]}
        assert after[lien.chunk_id]["patterns"] == ["contractor:bow-river-drywall/liens"] and after[lien.chunk_id]["pattern"] > 0
