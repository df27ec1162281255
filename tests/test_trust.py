"""Trust-gated access, redaction, provenance on every excerpt, snapshots that differ only in time and ids."""

from __future__ import annotations

import pytest

from retrieval_node.agent import RetrievalAgent
from retrieval_node.backends.vectors import point_id
from retrieval_node.errors import AccessDenied, ChunkNotFound, TrustRequired
from retrieval_node.models import TrustContext, sha256_hex
from tests.conftest import FULL_TRUST

DEAL = "2026-TEST-0001"
READER = TrustContext(max_sensitivity="public", authenticated=True, actor_id="agent:investigator_r1")
CLERK = TrustContext(max_sensitivity="confidential", authenticated=True, actor_id="agent:clerk")


def test_trust_is_required(tiered):
    store, _ = tiered
    agent = RetrievalAgent(store)
    with pytest.raises(TrustRequired, match="TrustContext"):
        agent.retrieve_sync(agent.intent_for("investigator", deal_id=DEAL))


def test_chunks_above_trust_are_excluded_or_redacted(tiered):
    store, chunks = tiered
    agent = RetrievalAgent(store)
    pkg, summary = agent.retrieve_sync(agent.intent_for("investigator", deal_id=DEAL), trust=READER)
    by_id = {r.chunk_id: r for r in pkg.ordered_chunks}
    public, confidential, privileged = chunks
    assert by_id[public.chunk_id].content == public.content and not by_id[public.chunk_id].redacted
    red = by_id[confidential.chunk_id]  # exactly one level above: metadata only
    assert red.redacted and red.content == "" and red.page_range == "2-2" and red.content_hash == confidential.content_hash
    assert privileged.chunk_id not in by_id  # two levels above: not even listed
    assert "48,260" not in pkg.to_prompt() and "REDACTED" in pkg.to_prompt()
    assert "builders_lien" not in summary.risk_distribution and "lien" not in pkg.risk_summary.lower()
    assert any(f.startswith("redacted:") for f in summary.fallbacks) and any(f.startswith("filtered_by_trust:") for f in summary.fallbacks)


def test_unauthenticated_callers_see_public_only(tiered):
    store, chunks = tiered
    agent = RetrievalAgent(store)
    anon = TrustContext(max_sensitivity="privileged", authenticated=False, actor_id="anonymous")
    pkg, _ = agent.retrieve_sync(agent.intent_for("investigator", deal_id=DEAL), trust=anon)
    full = [r for r in pkg.ordered_chunks if not r.redacted]
    assert [r.chunk_id for r in full] == [chunks[0].chunk_id]


@pytest.mark.parametrize("first", ["anonymous", "reader"])
def test_a_shared_deal_view_keeps_an_unauthenticated_caller_blind(store, make_chunk, tmp_path, first):
    """Whatever another caller asked first on the same deal view: no redacted listing, no count of hidden chunks and
    no table-of-contents line naming a document wholly above public. An authenticated public caller still gets the
    confidential chunk listed without content."""
    from retrieval_node.ingest import Ingestor
    from tests.conftest import write_jsonl

    secret_doc = f"{DEAL}/quiet-settlement-file.pdf"
    chunks = [
        make_chunk("Certificate of title. Registered owner: Dana Whitford.", section="TITLE_SUMMARY", page=1, metadata={"sensitivity": "public"}),
        make_chunk("252 114 567 2025/11/03 BUILDERS' LIEN by Bow River Drywall Ltd. for $48,260.00.", document_id=secret_doc, page=1,
                   metadata={"sensitivity": "confidential"}),
        make_chunk("Instrument 252 114 999: caveat re purchase option, Larch Holdings.", document_id=secret_doc, page=2,
                   metadata={"sensitivity": "confidential"}),
    ]
    Ingestor(store).ingest([write_jsonl(tmp_path / "t.jsonl", chunks)])
    agent = RetrievalAgent(store)
    anon = TrustContext(max_sensitivity="confidential", authenticated=False, actor_id="anonymous")
    intent = agent.intent_for("investigator", deal_id=DEAL)
    order = [anon, READER] if first == "anonymous" else [READER, anon]
    got = {t.actor_id: agent.retrieve_sync(intent, trust=t) for t in order}
    pkg, summary = got["anonymous"]
    assert [r.chunk_id for r in pkg.ordered_chunks] == [chunks[0].chunk_id]
    said = "\n".join([pkg.to_prompt(), pkg.structural_toc, pkg.exclusions_note, pkg.risk_summary, *summary.fallbacks])
    assert "quiet-settlement-file" not in said and "252 114" not in said
    assert not any(f.startswith(("filtered_by_trust", "redacted")) for f in summary.fallbacks)
    reader_pkg, _ = got[READER.actor_id]
    assert {r.chunk_id for r in reader_pkg.ordered_chunks if r.redacted} == {chunks[1].chunk_id, chunks[2].chunk_id}


def test_scope_limits_deals(tiered):
    store, _ = tiered
    agent = RetrievalAgent(store)
    other = TrustContext(max_sensitivity="privileged", authenticated=True, actor_id="agent:x", scopes=["deal:2026-OTHER-0001"])
    with pytest.raises(AccessDenied, match=DEAL):
        agent.retrieve_sync(agent.intent_for("investigator", deal_id=DEAL), trust=other)


def test_get_chunk_returns_chunk_redacted_denied_or_not_found(tiered):
    store, chunks = tiered
    agent = RetrievalAgent(store)
    assert agent.get_chunk(chunks[1].chunk_id, trust=CLERK).content == chunks[1].content
    red = agent.get_chunk(chunks[2].chunk_id, trust=CLERK)
    assert red.redacted and red.content == ""
    with pytest.raises(AccessDenied):
        agent.get_chunk(chunks[2].chunk_id, trust=READER)
    with pytest.raises(ChunkNotFound):
        agent.get_chunk("0" * 64, trust=FULL_TRUST)


def test_every_excerpt_has_full_provenance_matching_the_store(tiered):
    store, _ = tiered
    agent = RetrievalAgent(store, trust=FULL_TRUST)
    for name in ("investigator", "scribe"):
        pkg, _ = agent.retrieve_sync(agent.intent_for(name, deal_id=DEAL))
        assert pkg.ordered_chunks
        for ref in pkg.ordered_chunks:
            stored = store.chunks.payloads([point_id(ref.chunk_id, 0)])[point_id(ref.chunk_id, 0)]
            assert (ref.document_id, ref.page_range, ref.content_hash) == (stored["document_id"], f"{stored['page_start']}-{stored['page_end']}", stored["content_hash"])
            assert sha256_hex(ref.content) == ref.content_hash == sha256_hex(stored["content"])
            assert ref.chunk_id and ref.document_role and ref.section_type


def test_identical_intents_give_identical_snapshots_but_for_time_and_ids(tiered):
    store, _ = tiered
    agent = RetrievalAgent(store, trust=FULL_TRUST)
    intent = agent.intent_for("investigator", deal_id=DEAL)
    _, a = agent.retrieve_sync(intent)
    _, b = agent.retrieve_sync(intent)
    sa, sb = agent.audit.read_snapshot(a.audit_id), agent.audit.read_snapshot(b.audit_id)

    def strip(snap):
        snap = dict(snap)
        snap.pop("audit_id")
        snap["summary"] = {k: v for k, v in snap["summary"].items() if k not in ("audit_id", "latency_ms")}
        snap["audit_entry"] = {k: v for k, v in snap["audit_entry"].items() if k != "timestamp"}
        return snap

    assert strip(sa) == strip(sb)
