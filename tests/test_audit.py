"""Audit snapshots: replay gives the package exactly as given; tampering is caught; the prompt quotes evidence."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from retrieval_node import snapshot_files
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
    data = json.loads(snapshot_files.read(path))
    data["snapshot"]["package"]["ordered_chunks"][0]["content"] = "No liens. Title is clear."
    snapshot_files.write(path, json.dumps(data).encode())
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
        [sys.executable, "-m", "retrieval_node.cli", "replay", summary.audit_id, "--store", str(store.home), "--json",
         "--max-sensitivity", "privileged"],  # the clearance it was made under
        capture_output=True, text=True, check=True,
    )
    doc = json.loads(out.stdout)
    assert doc["package"] == json.loads(pkg.model_dump_json())
    bad = subprocess.run([sys.executable, "-m", "retrieval_node.cli", "replay", "aud_nothere", "--store", str(store.home)], capture_output=True, text=True)
    assert bad.returncode == 2 and "aud_nothere" in bad.stderr


# -- issue 16 item 5: the snapshot against the independent Mem0 entry; journal first; the summary as given --------

DEAL = "2026-TEST-0001"


def _forge_with_key(agent, audit_id, edit):
    """Rewrite a snapshot and re-sign it with the store's own secret: a forger who has the key (an insider, a leaked
    secret.key). Only the independent Mem0 entry can catch this."""
    import hashlib

    from retrieval_node.audit import _mac, canonical_json
    from retrieval_node.models import package_hash

    path = agent.audit.snapshot_path(audit_id)
    snap = json.loads(snapshot_files.read(path))["snapshot"]
    edit(snap)
    snap["package"]["package_hash"] = package_hash(snap["package"])
    body = canonical_json(snap)
    snapshot_files.write(path, b'{"mac":"' + _mac(agent.audit.key, body).encode() + b'","sha256":"' + hashlib.sha256(body).hexdigest().encode()
                         + b'","snapshot":' + body + b"}")


def test_replay_checks_the_snapshot_against_its_mem0_entry(small):
    store, _ = small
    agent = RetrievalAgent(store, trust=FULL_TRUST)
    _, summary = agent.retrieve_sync(agent.intent_for("investigator", deal_id=DEAL))

    def clear_title(snap):
        snap["package"]["ordered_chunks"][0]["content"] = "No registrations. Title is clear."

    _forge_with_key(agent, summary.audit_id, clear_title)  # hash, MAC and the audit id inside all pass
    with pytest.raises(IntegrityError, match="not the one its Mem0 audit entry recorded"):
        agent.replay(summary.audit_id)
    # a snapshot no retrieval recorded (a new audit id, signed with the key) has no entry to agree with
    fake_id = "aud_" + "0" * 32
    agent.audit.snapshot_path(fake_id).write_bytes(agent.audit.snapshot_path(summary.audit_id).read_bytes())
    _forge_with_key(agent, fake_id, lambda snap: snap.update(audit_id=fake_id))
    with pytest.raises(IntegrityError, match="no audit entry in Mem0"):
        agent.replay(fake_id)


def test_replayed_summary_is_the_summary_returned(small):
    store, _ = small
    agent = RetrievalAgent(store, trust=FULL_TRUST)
    pkg, summary = agent.retrieve_sync(agent.intent_for("investigator", deal_id=DEAL))
    replayed_pkg, replayed = agent.replay(summary.audit_id)
    assert replayed.model_dump(mode="json") == summary.model_dump(mode="json")
    assert replayed_pkg == pkg


class AuditDownRegistry:
    """Fault-injection fake: Mem0 refuses audit entries (every other call goes to the real registry)."""

    def __init__(self, real):
        self._real = real

    def add_audit(self, *a, **k):
        from retrieval_node.errors import BackendError

        raise BackendError("Mem0 unreachable (injected fault)")

    def __getattr__(self, name):
        return getattr(self._real, name)


def test_replayed_summary_keeps_the_audit_journaled_note(small):
    store, _ = small
    agent = RetrievalAgent(store, trust=FULL_TRUST)
    real = agent.audit.registry
    agent.audit.registry = AuditDownRegistry(real)
    try:
        _, summary = agent.retrieve_sync(agent.intent_for("investigator", deal_id=DEAL))
        assert summary.fallbacks[-1].startswith("audit_journaled")
        # while the entry waits in the journal, the journal record is the independent one
        assert agent.replay(summary.audit_id)[1].model_dump(mode="json") == summary.model_dump(mode="json")
    finally:
        agent.audit.registry = real
    assert agent.audit.flush_journal() == 1 and agent.audit.pending() == 0
    assert agent.replay(summary.audit_id)[1].model_dump(mode="json") == summary.model_dump(mode="json")


class Crash(BaseException):
    """The process dies here (not an exception anything handles)."""


class CrashBeforeMem0Registry:
    """Fault-injection fake: the process dies between the snapshot write and the Mem0 audit write (the snapshot is
    on disk, Mem0 never sees the entry). Everything else goes to the real registry."""

    def __init__(self, real):
        self._real = real

    def add_audit(self, *a, **k):
        raise Crash("killed between the snapshot write and the Mem0 write (injected fault)")

    def __getattr__(self, name):
        return getattr(self._real, name)


def test_a_crash_between_snapshot_and_mem0_write_is_repaired_on_the_next_open(small):
    store, _ = small
    agent = RetrievalAgent(store, trust=FULL_TRUST)
    real = agent.audit.registry
    agent.audit.registry = CrashBeforeMem0Registry(real)
    with pytest.raises(Crash):
        agent.retrieve_sync(agent.intent_for("investigator", deal_id=DEAL))
    agent.audit.registry = real
    [orphan] = [p.name.split(".")[0] for p in agent.audit.snapshot_path("aud_x").parent.glob("aud_*.json.zst")]
    assert not store.registry.audit_entries(DEAL, audit_id=orphan)
    reopened = RetrievalAgent(store, trust=FULL_TRUST)  # the next open writes what the journal holds
    [entry] = store.registry.audit_entries(DEAL, audit_id=orphan)
    assert entry["snapshot_sha256"] == json.loads(reopened.audit.snapshot_bytes(orphan))["sha256"]
    assert reopened.audit.pending() == 0
    assert reopened.replay(orphan)[1].audit_id == orphan


class CrashInSnapshotWrite(BaseException):
    pass


def test_an_entry_whose_snapshot_was_never_written_is_dropped_on_the_next_open(small, monkeypatch):
    """FAULT INJECTION: the process dies after journaling the entry and before the snapshot reached the disk: that
    retrieval never returned a package, so no audit entry may claim it did."""
    import retrieval_node.audit as audit_mod

    store, _ = small
    agent = RetrievalAgent(store, trust=FULL_TRUST)

    def die(*a, **k):
        raise CrashInSnapshotWrite("killed during the snapshot write (injected fault)")

    with monkeypatch.context() as m:
        m.setattr(audit_mod.AuditLog, "_write_body", die)
        m.setattr(audit_mod.AuditLog, "_remove_journaled", lambda self, ids: None)  # dead: it cleans nothing up
        with pytest.raises(CrashInSnapshotWrite):
            agent.retrieve_sync(agent.intent_for("investigator", deal_id=DEAL))
    [item] = [json.loads(ln) for ln in agent.audit.journal_path.read_text().splitlines()]
    audit_mod._SHARED.clear()  # a new process: nothing of the old one is in flight
    RetrievalAgent(store, trust=FULL_TRUST)
    assert not store.registry.audit_entries(DEAL, audit_id=item["metadata"]["audit_id"])
    assert not agent.audit.journal_path.exists()


def test_snapshot_rows_kept_cost_their_size_not_orjsons_buffer():
    """The snapshot row cache keeps exact-size bytes: orjson's own output holds a ~4 KB buffer per row (50,000 kept
    rows were ~200 MB of a 100k-chunk process)."""
    import tracemalloc

    from retrieval_node.audit import SnapshotRows
    from retrieval_node.values import ChunkView, Scored, ScoreTerms

    def scored(i: int) -> tuple[str, Scored]:
        cid = f"{i:064d}"
        chunk = ChunkView(memory_id="", chunk_id=cid, deal_id="2026-TEST-0001", document_id="d", document_role="TITLE_SEARCH",
                          section_type="TITLE_SUMMARY", page_start=1, page_end=1, content="x", content_hash="h", token_count=1,
                          ocr_confidence=1.0, zones=(), entity_ids=(), sensitivity="confidential", document_created_at=None,
                          ingested_at="2026-01-01T00:00:00+00:00")
        terms = ScoreTerms(dense=0.5, lexical=0.1, semantic=0.4, risk=0.0, pattern=0.0, combined=0.3)
        return cid, Scored(chunk=chunk, terms=terms, origin="search")

    items = [scored(i) for i in range(500)]
    rows = SnapshotRows()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        rows.candidates(items)
        rows.rejected([(cid, "over budget") for cid, _ in items])
        per_row = (tracemalloc.get_traced_memory()[0] - before) / 1000
    finally:
        tracemalloc.stop()
    assert per_row < 1000, per_row  # ~200-400 bytes of JSON and key each; orjson's buffers alone were ~4,100


# --------------------------------------------------------------------------- compressed snapshot files


def test_snapshots_are_kept_compressed_and_replay_reads_them(small):
    store, _ = small
    agent = RetrievalAgent(store, trust=FULL_TRUST)
    pkg, summary = agent.retrieve_sync(agent.intent_for("investigator", deal_id=DEAL))
    path = agent.audit.snapshot_path(summary.audit_id)
    assert path.name == f"{summary.audit_id}.json.zst"
    raw = agent.audit.snapshot_bytes(summary.audit_id)
    assert raw.startswith(b'{"mac":"') and path.stat().st_size * 3 < len(raw)  # the candidates' rows compress well
    assert agent.replay(summary.audit_id)[0].model_dump_json() == pkg.model_dump_json()


def test_a_snapshot_written_before_compression_replays_and_compact_compresses_it(small):
    """A store written before snapshots were compressed keeps its snapshots readable; ``compact`` rewrites them
    compressed, byte for byte the same once decompressed, and a run stopped after the compressed file was written
    is finished by the next (its uncompressed original removed, never the other way round)."""
    store, _ = small
    agent = RetrievalAgent(store, trust=FULL_TRUST)
    pkg, summary = agent.retrieve_sync(agent.intent_for("investigator", deal_id=DEAL))
    _, second = agent.retrieve_sync(agent.intent_for("tax", deal_id=DEAL))
    packed = agent.audit.snapshot_path(summary.audit_id)
    raw = agent.audit.snapshot_bytes(summary.audit_id)
    legacy = packed.with_name(f"{summary.audit_id}.json")
    legacy.write_bytes(raw)  # as an older node wrote it
    packed.unlink()
    assert agent.audit.snapshot_path(summary.audit_id) == legacy
    assert agent.replay(summary.audit_id)[0].model_dump_json() == pkg.model_dump_json()
    # a stopped run: the second snapshot's compressed file was written, its original not yet removed
    second_raw = agent.audit.snapshot_bytes(second.audit_id)
    second_legacy = packed.with_name(f"{second.audit_id}.json")
    second_legacy.write_bytes(second_raw)
    out = store.compact()
    assert out[str(packed.parent)] is True
    assert not legacy.exists() and not second_legacy.exists()
    assert agent.audit.snapshot_path(summary.audit_id) == packed and agent.audit.snapshot_bytes(summary.audit_id) == raw
    assert agent.audit.snapshot_bytes(second.audit_id) == second_raw
    assert agent.replay(summary.audit_id)[0].model_dump_json() == pkg.model_dump_json()
    assert store.compact()[str(packed.parent)] is False  # nothing left to compress


def test_a_damaged_compressed_file_beside_its_original_is_rewritten_from_it(small):
    """``compact`` never removes an uncompressed snapshot whose compressed file does not read back as it."""
    store, _ = small
    agent = RetrievalAgent(store, trust=FULL_TRUST)
    _, summary = agent.retrieve_sync(agent.intent_for("investigator", deal_id=DEAL))
    packed = agent.audit.snapshot_path(summary.audit_id)
    raw = agent.audit.snapshot_bytes(summary.audit_id)
    legacy = packed.with_name(f"{summary.audit_id}.json")
    legacy.write_bytes(raw)
    packed.write_bytes(packed.read_bytes()[: packed.stat().st_size // 2])  # a torn write of the compressed copy
    store.compact()
    assert not legacy.exists() and agent.audit.snapshot_bytes(summary.audit_id) == raw
    assert agent.replay(summary.audit_id)[1].audit_id == summary.audit_id


def test_compact_never_overwrites_a_compressed_snapshot_with_a_different_uncompressed_one(small):
    """Two files of one audit that hold different snapshots (an old copy restored beside the genuine one, or a forged
    one): ``compact`` keeps both, says which, and replay still reads the compressed one, which it verifies."""
    store, _ = small
    agent = RetrievalAgent(store, trust=FULL_TRUST)
    pkg, summary = agent.retrieve_sync(agent.intent_for("investigator", deal_id=DEAL))
    _, other = agent.retrieve_sync(agent.intent_for("tax", deal_id=DEAL))
    packed = agent.audit.snapshot_path(summary.audit_id)
    genuine = packed.read_bytes()
    stranger = packed.with_name(f"{summary.audit_id}.json")
    stranger.write_bytes(agent.audit.snapshot_bytes(other.audit_id))  # another audit's snapshot under this name
    with pytest.raises(IntegrityError, match=summary.audit_id):
        store.compact()
    assert packed.read_bytes() == genuine and stranger.exists()
    assert agent.replay(summary.audit_id)[0].model_dump_json() == pkg.model_dump_json()


@pytest.mark.parametrize("damage", ["truncated", "not a frame", "edited", "claims too much", "no size", "bytes after", "a second frame"])
def test_a_damaged_compressed_snapshot_is_one_named_integrity_error(small, damage):
    import zstandard

    store, _ = small
    agent = RetrievalAgent(store, trust=FULL_TRUST)
    _, summary = agent.retrieve_sync(agent.intent_for("investigator", deal_id=DEAL))
    path = agent.audit.snapshot_path(summary.audit_id)
    data = path.read_bytes()
    raw = agent.audit.snapshot_bytes(summary.audit_id)
    bad = {
        "truncated": data[: len(data) // 2],
        "not a frame": raw,  # uncompressed bytes under the compressed name
        "edited": data[:-40] + bytes(b ^ 0xFF for b in data[-40:]),
        # a frame header that claims 1 TB: refused before anything is allocated
        "claims too much": zstandard.ZstdCompressor(write_content_size=True).compress(b"{}")[:4] + b"\xe4" + (1 << 40).to_bytes(8, "little"),
        "no size": zstandard.ZstdCompressor(write_content_size=False).compress(raw),
        "bytes after": data + b"not part of the snapshot",
        "a second frame": data + snapshot_files.pack(b'{"audit_id": "x"}'),
    }[damage]
    path.write_bytes(bad)
    with pytest.raises(IntegrityError, match=summary.audit_id):
        agent.replay(summary.audit_id)


@pytest.mark.parametrize("bad", ["aud_../../escape", "../aud_x", "aud_x/y", "aud_", "x"])
def test_a_name_that_is_not_an_audit_id_is_refused_before_any_file_is_written(small, bad):
    store, _ = small
    agent = RetrievalAgent(store, trust=FULL_TRUST)
    audit_dir = agent.audit.directory
    before = sorted(audit_dir.rglob("*"))
    with pytest.raises(ValueError, match="not an audit id"):
        agent.audit.write_snapshot(bad, {"audit_id": bad})
    with pytest.raises(ValueError, match="not an audit id"):
        agent.audit.snapshot_path(bad)
    assert sorted(audit_dir.rglob("*")) == before
    assert not [p for p in store.home.parent.rglob("*escape*")]
