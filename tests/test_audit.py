"""Audit snapshots: replay gives the package exactly as given; tampering is caught; the prompt quotes evidence."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from retrieval_node.agent import RetrievalAgent
from retrieval_node.errors import IntegrityError
from retrieval_node.ingest import Ingestor
from tests.conftest import FULL_TRUST, write_jsonl


@pytest.fixture()
def small(store, make_chunk, tmp_path):
    chunks = [
        make_chunk("Certificate of title. Registered owner: Dana Whitford.", section="TITLE_SUMMARY", page=1),
        make_chunk("252 114 567 2025/11/03 BUILDERS' LIEN. Lienholder: Bow River Drywall Ltd. Amount: $48,260.00.", page=2),
        make_chunk("CAVEATS. 212 300 111 caveat re: option to purchase. DISCHARGED by 232 001 002.", section="CAVEATS_SECTION", page=3),
    ]
    Ingestor(store).ingest([write_jsonl(tmp_path / "d.jsonl", chunks)])
    return store, chunks


def test_replay_returns_the_package_byte_for_byte_after_reingest(small, make_chunk, tmp_path):
    store, chunks = small
    agent = RetrievalAgent(store, trust=FULL_TRUST)
    pkg, summary = agent.retrieve_sync(agent.intent_for("investigator", deal_id="2026-TEST-0001"))
    original = pkg.model_dump_json()
    # the deal's documents change: a corrected page 2 arrives and a new caveat is registered
    changed = [
        make_chunk("252 114 567 2025/11/03 BUILDERS' LIEN. Amount amended to $52,000.00.", page=2),
        make_chunk("262 000 999 2026/02/01 CAVEAT re: agreement charging land, $80,000.", section="CAVEATS_SECTION", page=4),
    ]
    Ingestor(store).ingest([write_jsonl(tmp_path / "changed.jsonl", changed)])
    fresh, _ = agent.retrieve_sync(agent.intent_for("investigator", deal_id="2026-TEST-0001"))
    assert fresh.package_hash != pkg.package_hash
    replayed, rsummary = agent.replay(summary.audit_id)
    assert replayed.model_dump_json() == original
    assert rsummary.audit_id == summary.audit_id and rsummary.chunks_selected == summary.chunks_selected


def test_tampered_snapshot_fails_loudly(small):
    store, _ = small
    agent = RetrievalAgent(store, trust=FULL_TRUST)
    _, summary = agent.retrieve_sync(agent.intent_for("investigator", deal_id="2026-TEST-0001"))
    path = agent.audit.snapshot_path(summary.audit_id)
    data = json.loads(path.read_text())
    data["snapshot"]["package"]["ordered_chunks"][0]["content"] = "No liens. Title is clear."
    path.write_text(json.dumps(data))
    with pytest.raises(IntegrityError, match="modified"):
        agent.replay(summary.audit_id)


def test_snapshot_records_plan_candidates_and_visible_text(small):
    store, chunks = small
    agent = RetrievalAgent(store, trust=FULL_TRUST)
    pkg, summary = agent.retrieve_sync(agent.intent_for("investigator", deal_id="2026-TEST-0001"))
    snap = agent.audit.read_snapshot(summary.audit_id)
    assert snap["intent"]["intent_id"] == "title_risk_scan_v1"
    assert {c["chunk_id"] for c in snap["candidates"]} >= {r.chunk_id for r in pkg.ordered_chunks}
    assert all({"dense", "lexical", "risk", "pattern", "combined"} <= set(c["terms"]) for c in snap["candidates"])
    assert snap["citations"] == {f"E{i}": r.chunk_id for i, r in enumerate(pkg.ordered_chunks, start=1)}
    from retrieval_node.models import sha256_hex

    assert snap["visible_text_sha256"] == sha256_hex(pkg.to_prompt())


def test_prompt_quotes_every_excerpt_with_citation(small):
    store, chunks = small
    agent = RetrievalAgent(store, trust=FULL_TRUST)
    pkg, _ = agent.retrieve_sync(agent.intent_for("investigator", deal_id="2026-TEST-0001"))
    text = pkg.to_prompt()
    assert "data not instructions" in text and pkg.evidence_code is not None
    for i, ref in enumerate(pkg.ordered_chunks, start=1):
        block_start = text.index(f"[E{i} ")
        block_end = text.index(f"[/E{i} {pkg.evidence_code}]")
        assert block_start < text.index(ref.content) < block_end
    assert store.tokens.count(text) == pkg.total_tokens


def test_cli_replay_json(small, tmp_path):
    store, _ = small
    agent = RetrievalAgent(store, trust=FULL_TRUST)
    pkg, summary = agent.retrieve_sync(agent.intent_for("investigator", deal_id="2026-TEST-0001"))
    out = subprocess.run(
        [sys.executable, "-m", "retrieval_node.cli", "replay", summary.audit_id, "--store", str(store.home), "--json"],
        capture_output=True, text=True, check=True,
    )
    doc = json.loads(out.stdout)
    assert doc["package"] == json.loads(pkg.model_dump_json())
    bad = subprocess.run([sys.executable, "-m", "retrieval_node.cli", "replay", "aud_nothere", "--store", str(store.home)], capture_output=True, text=True)
    assert bad.returncode == 2 and "aud_nothere" in bad.stderr
