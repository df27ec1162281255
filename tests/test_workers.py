"""ProcessPoolRetrievalAgent: retrieval in worker processes over the real store (qdrant-edge, Mem0, MiniLM, tiktoken)."""

from __future__ import annotations

import json
import os
import signal
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from retrieval_node.agent import RetrievalAgent
from retrieval_node.errors import BackendError, IntentError
from retrieval_node.ingest import Ingestor
from retrieval_node.store import Store
from retrieval_node.workers import ProcessPoolRetrievalAgent
from tests.conftest import FULL_TRUST, write_jsonl
from tests.test_pipeline import DEAL, OTHER, two_deal_store

AGENTS = ("investigator", "tax", "condo", "scribe")


@pytest.fixture(scope="module")
def pool_store(tmp_path_factory, embedder, node_config, counter):
    home = tmp_path_factory.mktemp("workers")
    st, chunks, make_chunk = two_deal_store(home, embedder, node_config, counter)
    yield st, chunks, make_chunk, home
    st.close()


@pytest.fixture(scope="module")
def pool(pool_store):
    agent = ProcessPoolRetrievalAgent(pool_store[0], workers=2, trust=FULL_TRUST)
    yield agent
    agent.close()


def test_same_package_as_in_process(pool, pool_store):
    local = RetrievalAgent(pool_store[0], trust=FULL_TRUST)
    for deal in (DEAL, OTHER):
        for name in AGENTS:
            intent = pool.intent_for(name, deal_id=deal)
            a, sa = pool.retrieve_sync(intent)
            b, sb = local.retrieve_sync(intent)
            assert a == b and a.package_hash == b.package_hash, (deal, name)
            assert (sa.chunks_selected, sa.missing_zones, sa.risk_distribution) == (sb.chunks_selected, sb.missing_zones, sb.risk_distribution)


def test_other_deal_never_appears(pool, pool_store):
    _, chunks, _, _ = pool_store
    other_ids = {c.chunk_id for c in chunks if c.deal_id == OTHER}
    for name in AGENTS:
        pkg, _ = pool.retrieve_sync(pool.intent_for(name, deal_id=DEAL))
        assert pkg.deal_id == DEAL
        assert not other_ids & {r.chunk_id for r in pkg.ordered_chunks}


def test_concurrent_calls_write_every_audit_entry_once(pool, pool_store):
    store = pool_store[0]
    intents = [pool.intent_for(AGENTS[i % len(AGENTS)], deal_id=(DEAL, OTHER)[i % 2]) for i in range(12)]
    with ThreadPoolExecutor(max_workers=6) as ex:
        results = list(ex.map(pool.retrieve_sync, intents))
    assert pool.flush_audit()
    for intent, (pkg, summary) in zip(intents, results, strict=True):
        assert not [f for f in summary.fallbacks if f.startswith("audit")]
        entries = store.registry.audit_entries(intent.deal_id, audit_id=summary.audit_id)
        assert len(entries) == 1
        assert entries[0]["context_package_hash"] == pkg.package_hash
        replayed, _ = pool.replay(summary.audit_id)  # the snapshot the worker wrote, hash checked
        assert replayed == pkg
    assert len({s.audit_id for _, s in results}) == len(intents)


def test_an_audit_entry_mem0_refuses_is_journaled_and_said(pool, pool_store, monkeypatch):
    """FAULT INJECTION (Mem0 down for the audit write only): the call still returns its package, says the entry
    was journaled, and the entry reaches Mem0 with the next write; the worker was free meanwhile."""
    store = pool_store[0]

    def down(*args, **kwargs):
        raise BackendError("injected: Mem0 unavailable")

    with monkeypatch.context() as m:
        m.setattr(store.registry, "add_audit", down)
        pkg, summary = pool.retrieve_sync(pool.intent_for("investigator", deal_id=DEAL))
    assert pkg.ordered_chunks and any(f.startswith("audit_journaled") for f in summary.fallbacks)
    assert pool.audit.pending() == 1
    assert pool.audit.read_snapshot(summary.audit_id)["package"]["package_hash"] == pkg.package_hash
    # replay returns the summary as returned, note included, while the entry waits in the journal and after
    assert pool.replay(summary.audit_id)[1].model_dump(mode="json") == summary.model_dump(mode="json")
    _, later = pool.retrieve_sync(pool.intent_for("tax", deal_id=DEAL))  # flushes the journal first
    assert pool.audit.pending() == 0 and not any(f.startswith("audit") for f in later.fallbacks)
    assert len(store.registry.audit_entries(DEAL, audit_id=summary.audit_id)) == 1
    assert pool.replay(summary.audit_id)[1].model_dump(mode="json") == summary.model_dump(mode="json")


def test_a_pool_call_returns_the_summary_replay_returns(pool):
    """As in-process: the summary is final before its snapshot is written (its latency_ms stops before the audit;
    audit and total time are in the metrics), so the summary a pool call returns is the one replay returns."""
    intent = pool.intent_for("investigator", deal_id=DEAL)
    pkg, summary = pool.retrieve_sync(intent)
    assert pkg.ordered_chunks and "audit_ms" not in summary.latency_ms and "total_ms" not in summary.latency_ms
    replayed_pkg, replayed = pool.replay(summary.audit_id)
    assert replayed_pkg == pkg and replayed.model_dump(mode="json") == summary.model_dump(mode="json")
    _, with_metrics, metrics = pool.retrieve_with_metrics(intent)
    assert pool.replay(with_metrics.audit_id)[1] == with_metrics and metrics.total_latency_ms > 0


def test_a_pool_call_journals_its_entry_before_its_snapshot_and_a_crash_is_repaired_on_the_next_open(pool, pool_store):
    """FAULT INJECTION in the process that owns the store (where the pool's audit is written), as in-process
    (tests/test_audit.py): the entry is journaled before the snapshot reaches the disk; dying at the journal write
    leaves no snapshot behind (none exists without its entry); dying between the snapshot and the Mem0 write
    leaves the entry journaled, and the next AuditLog open writes it, so the snapshot replays."""
    from retrieval_node.audit import AuditLog
    from tests.test_audit import Crash, CrashBeforeMem0Registry

    store = pool_store[0]
    audit = pool.audit
    snapshots = audit.snapshot_path("aud_x").parent
    intent = pool.intent_for("investigator", deal_id=DEAL)

    # the order: when the snapshot is written, its entry is already in the journal
    seen: list[bool] = []
    write_body = audit._write_body

    def spy(audit_id, body, digest):
        seen.append(audit.journaled(audit_id) is not None)
        return write_body(audit_id, body, digest)

    with pytest.MonkeyPatch.context() as m:
        m.setattr(audit, "_write_body", spy)
        pool.retrieve_sync(intent)
    assert seen == [True]

    # dying at the journal write: nothing of the call is on disk
    before = set(snapshots.glob("aud_*.json.zst"))

    def die(*args, **kwargs):
        raise Crash("killed at the audit journal write (injected fault)")

    with pytest.MonkeyPatch.context() as m:
        m.setattr(audit, "_journal", die)
        with pytest.raises(Crash):
            pool.retrieve_sync(intent)
    assert set(snapshots.glob("aud_*.json.zst")) == before

    # dying between the snapshot and the Mem0 write: repaired when the audit log is next opened
    real = audit.registry
    audit.registry = CrashBeforeMem0Registry(real)
    try:
        with pytest.raises(Crash):
            pool.retrieve_sync(intent)
    finally:
        audit.registry = real
    [orphan] = [p.name.split(".")[0] for p in set(snapshots.glob("aud_*.json.zst")) - before]
    assert not store.registry.audit_entries(DEAL, audit_id=orphan) and audit.journaled(orphan) is not None
    reopened = AuditLog(store.home / "audit", store.registry, key=store.secret())  # the next open writes the journal
    [entry] = store.registry.audit_entries(DEAL, audit_id=orphan)
    assert entry["snapshot_sha256"] == json.loads(reopened.snapshot_bytes(orphan))["sha256"]
    assert reopened.pending() == 0 and pool.replay(orphan)[1].audit_id == orphan


def test_errors_come_back_as_raised(pool):
    with pytest.raises(IntentError):
        pool.retrieve_sync(pool.intent_for("investigator", deal_id="2026-NOPE-0000"))
    pool.retrieve_sync(pool.intent_for("investigator", deal_id=DEAL))  # the worker is still usable


def test_ingest_in_the_parent_reaches_the_workers(pool, pool_store):
    store, _, make_chunk, home = pool_store
    intent = pool.intent_for("tax", deal_id=DEAL)
    before, _ = pool.retrieve_sync(intent)
    pool.warm([intent])  # every worker has the deal cached now
    extra = make_chunk("Tax certificate 2026 supplement: a further $7,450.00 of arrears with penalty of $745.00 is outstanding.",
                       deal_id=DEAL, section="TAX_ARREARS", page=2, document_id=f"{DEAL}/tax-certificate.pdf", role="TAX_CERTIFICATE")
    Ingestor(store).ingest([write_jsonl(home / "extra.jsonl", [extra])])
    local = RetrievalAgent(store, trust=FULL_TRUST)
    for _ in range(2):  # whichever worker takes the call
        after, _ = pool.retrieve_sync(intent)
        assert extra.chunk_id in {r.chunk_id for r in after.ordered_chunks}
        assert after == local.retrieve_sync(intent)[0]
    assert after != before


def test_a_dead_worker_is_replaced(pool_store):
    agent = ProcessPoolRetrievalAgent(pool_store[0], workers=1, trust=FULL_TRUST)
    try:
        intent = agent.intent_for("investigator", deal_id=DEAL)
        expected, _ = agent.retrieve_sync(intent)
        os.kill(agent.worker_pids[0], signal.SIGKILL)
        time.sleep(0.2)
        with pytest.raises(BackendError):
            agent.retrieve_sync(intent)
        again, _ = agent.retrieve_sync(intent)
        assert again == expected
    finally:
        agent.close()
    assert all(not w.proc.is_alive() for w in agent._workers)


def test_store_close_stops_the_workers(tmp_path, embedder, node_config):
    st = Store.open(tmp_path / "store", config=node_config, embedder=embedder)
    agent = ProcessPoolRetrievalAgent(st, workers=1, trust=FULL_TRUST)
    procs = [w.proc for w in agent._workers]
    st.close()
    assert all(not p.is_alive() for p in procs)
