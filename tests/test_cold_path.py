"""The cold path: a profile intent in a fresh process loads no model (query vectors kept in the store), and the
query-independent work done at ingest is served, versioned, to the first call."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from retrieval_node.embedding import LazyEmbedder, model_identity, resolve_model_path
from retrieval_node.ingest import Ingestor
from retrieval_node.query_cache import QUERY_DB, QueryVectorCache, profile_query_texts
from retrieval_node.store import Store
from tests.conftest import FULL_TRUST, SAMPLE_DATA

REPO = Path(__file__).resolve().parent.parent
DEAL = "2026-ACME-0042"

# Runs `retrieval-node retrieve --json` in this fresh process, then says whether the model's libraries were imported.
PROBE = """
import sys
from retrieval_node.cli import app
try:
    app(sys.argv[1:], prog_name="retrieval-node")
except SystemExit as exc:
    if exc.code:
        raise
print("MODEL_IMPORTED=" + str("torch" in sys.modules or "sentence_transformers" in sys.modules), file=sys.stderr)
"""


def _cli_retrieve(home: Path, agent: str) -> tuple[dict, bool]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RETRIEVAL_NODE_")}
    env.update(PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1")
    p = subprocess.run([sys.executable, "-c", PROBE, "retrieve", "--deal", DEAL, "--agent", agent, "--store", str(home), "--json"],
                       capture_output=True, text=True, env=env, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    imported = p.stderr.rpartition("MODEL_IMPORTED=")[2].strip()
    return json.loads(p.stdout), imported == "True"


@pytest.fixture(scope="module")
def ingested(tmp_path_factory, embedder, node_config) -> Path:
    """A closed store holding the sample deal, ingested with the real model (ingest pre-fills the query vectors)."""
    home = tmp_path_factory.mktemp("cold") / "store"
    with Store.open(home, config=node_config, embedder=embedder) as st:
        report = Ingestor(st).ingest([SAMPLE_DATA / "sample_deal" / "chunks.jsonl"])
        assert report.rejected == [] and report.ingested > 0
    return home


def test_profile_retrieve_in_a_fresh_process_loads_no_model_and_gives_the_same_package(ingested: Path, tmp_path: Path) -> None:
    home = tmp_path / "store"
    shutil.copytree(ingested, home)  # same secret: same evidence codes
    # the reference: the query vectors computed by the model in that process (cache file removed first)
    (home / QUERY_DB).unlink()
    computed, imported = _cli_retrieve(home, "investigator")
    assert imported, "without cached query vectors the model must load"
    cached, imported = _cli_retrieve(home, "investigator")
    assert not imported, "a profile intent answered from the store's query vectors must not import torch"
    assert cached["package"] == computed["package"]
    assert cached["package"]["ordered_chunks"]


def test_ingest_prefills_every_profile_text_so_the_first_call_needs_no_model(ingested: Path, embedder, node_config) -> None:
    with Store.open(ingested, config=node_config) as st:  # no embedder passed: the store's own, lazy
        assert isinstance(st.embedder, LazyEmbedder) and not st.embedder.loaded
        cache = st.query_cache()
        assert cache is not None
        for text in profile_query_texts(node_config):
            vec = cache.get(text)
            assert vec is not None, text
            ref = embedder.embed([text])[0]
            assert vec.dtype == np.float32 and vec.tobytes() == ref.tobytes()  # bit-identical to the model's vector
        from retrieval_node.agent import RetrievalAgent

        agent = RetrievalAgent(st, trust=FULL_TRUST)
        try:
            for name in ("condo", "tax", "investigator"):
                agent.retrieve_sync(agent.intent_for(name, deal_id=DEAL))
        finally:
            agent.close()
        assert not st.embedder.loaded
        vec, calls = st.embed_query("a free-text question nobody asked before")  # a free-text query loads the model
        assert calls == 1 and st.embedder.loaded
        assert st.embed_query("a free-text question nobody asked before")[1] == 0


def test_query_vectors_file_is_owner_only(ingested: Path) -> None:
    mode = stat.S_IMODE((ingested / QUERY_DB).stat().st_mode)
    assert mode == 0o600


def test_query_vectors_of_another_model_are_not_served(tmp_path: Path) -> None:
    path = tmp_path / QUERY_DB
    vec = np.arange(384, dtype=np.float32) / 1000
    cache = QueryVectorCache(path, "model-a", dimension=384)
    cache.put("lien", vec)
    cache.close()
    again = QueryVectorCache(path, "model-a", dimension=384)
    got = again.get("lien")
    assert got is not None and got.tobytes() == vec.tobytes()
    again.close()
    other = QueryVectorCache(path, "model-b", dimension=384)
    assert other.get("lien") is None and len(other) == 0
    other.close()
    assert QueryVectorCache(path, "model-a", dimension=384).get("lien") is None  # rows of the old model were dropped


def test_model_identity_changes_when_the_model_files_change(tmp_path: Path) -> None:
    src = Path(resolve_model_path())
    copy = tmp_path / "model"
    for f in src.rglob("*"):
        if f.is_file():
            dst = copy / f.relative_to(src)
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.symlink_to(f)
    assert model_identity(str(copy)) == model_identity(str(copy))
    before = model_identity(str(copy))
    cfg = copy / "config.json"
    text = cfg.read_text()
    cfg.unlink()
    cfg.write_text(text.replace("}", ', "edited": true}', 1))
    assert model_identity(str(copy)) != before


# --------------------------------------------------------------------------- risk findings kept at ingest


def _package_of(home: Path, node_config, agent_name: str):
    from retrieval_node.agent import RetrievalAgent

    with Store.open(home, config=node_config) as st:
        agent = RetrievalAgent(st, trust=FULL_TRUST)
        try:
            package, _summary = agent.retrieve_sync(agent.intent_for(agent_name, deal_id=DEAL))
        finally:
            agent.close()
    return package


def test_stored_findings_are_what_the_risk_module_computes(ingested: Path, node_config) -> None:
    from retrieval_node.precompute import FINDINGS_DB, ChunkFindings, SHORTFALL_RATIO, decode_signal
    from retrieval_node.risk import best_risk_span, risk_signal

    with Store.open(ingested, config=node_config) as st:
        records = {r.chunk_id: r for r in st.registry.deal_records(DEAL)}
    found = ChunkFindings(ingested / FINDINGS_DB, node_config)
    try:
        stored = found.deal(DEAL)
        assert {s.key for s in found.settings} == set(stored)
        material = 0
        for s in found.settings:
            assert set(stored[s.key]) == set(records)  # every chunk, every setting
            for cid, (is_material, raw, spans) in stored[s.key].items():
                ref = risk_signal(records[cid].content, s.lexicon, s.domains, shortfall_ratio=SHORTFALL_RATIO)
                assert decode_signal(raw) == ref and is_material == ref.material
                if ref.material:
                    material += 1
                    got = json.loads(spans)
                    for n in s.excerpt_chars:
                        span = best_risk_span(records[cid].content, s.lexicon, s.domains, max_chars=n, shortfall_ratio=SHORTFALL_RATIO)
                        assert (tuple(got[str(n)]) if got[str(n)] is not None else None) == span
        assert material > 0  # the sample deal carries risks: the comparison covered real signals
    finally:
        found.close()


def test_stored_body_counts_are_the_tokens_of_each_block_body(ingested: Path, node_config, monkeypatch) -> None:
    """Ingest counts every chunk's block body under the store's encoding; a change of the body's rendering (or another
    encoding) is never served the old counts."""
    from retrieval_node import precompute
    from retrieval_node.models import quoted_body
    from retrieval_node.precompute import FINDINGS_DB, ChunkFindings
    from retrieval_node.tokens import TiktokenCounter

    counter = TiktokenCounter(node_config.retrieval.tokenizer_encoding)
    with Store.open(ingested, config=node_config) as st:
        records = {r.chunk_id: r for r in st.registry.deal_records(DEAL)}
    found = ChunkFindings(ingested / FINDINGS_DB, node_config)
    try:
        stored = found.body_tokens(DEAL, counter.encoding_name)
        assert set(stored) == set(records)
        for cid, (content_hash, n) in stored.items():
            assert content_hash == records[cid].content_hash and n == counter.count(quoted_body(records[cid].content)), cid
        assert found.body_tokens(DEAL, "another_encoding") == {}
        real = precompute.inspect.getsource
        monkeypatch.setattr(precompute.inspect, "getsource", lambda obj: real(obj) + "\n# the body renders otherwise\n")
        assert found.body_tokens(DEAL, counter.encoding_name) == {}
    finally:
        found.close()


def test_packages_are_identical_with_and_without_stored_findings_and_lexical_index(ingested: Path, tmp_path: Path, node_config) -> None:
    from retrieval_node.precompute import FINDINGS_DB

    home = tmp_path / "store"
    shutil.copytree(ingested, home)
    assert (home / "lexical").is_dir()
    for name in ("investigator", "condo", "tax", "scribe"):
        with_findings = _package_of(home, node_config, name)
        (home / FINDINGS_DB).rename(home / "findings.aside")
        (home / "lexical").rename(home / "lexical.aside")
        without = _package_of(home, node_config, name)
        (home / FINDINGS_DB).unlink()  # the run without the file opened an empty one
        (home / "findings.aside").rename(home / FINDINGS_DB)
        (home / "lexical.aside").rename(home / "lexical")
        assert with_findings == without, name


def test_precompute_completes_a_store_ingested_without_its_first_call_data(ingested: Path, tmp_path: Path, node_config) -> None:
    """A store without the findings file and the BM25 indexes (an older version's, or one whose lexicon changed):
    `retrieval-node precompute` fills findings, body counts and the index; packages do not change, a second run
    computes nothing, and an unknown --deal is refused by name."""
    from retrieval_node.precompute import FINDINGS_DB, ChunkFindings

    home = tmp_path / "store"
    shutil.copytree(ingested, home)
    (home / FINDINGS_DB).unlink()
    shutil.rmtree(home / "lexical")
    before = {name: _package_of(home, node_config, name) for name in ("investigator", "condo")}
    (home / FINDINGS_DB).unlink()  # the calls opened an empty one
    with Store.open(home, config=node_config) as st:
        n = len(st.registry.deal_records(DEAL))
    run = subprocess.run([sys.executable, "-m", "retrieval_node.cli", "precompute", "--store", str(home), "--json"],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == {"computed": {DEAL: n}}
    found = ChunkFindings(home / FINDINGS_DB, node_config)
    try:
        with Store.open(home, config=node_config) as st:
            hashes = {r.chunk_id: r.content_hash for r in st.registry.deal_records(DEAL)}
        assert found.missing(DEAL, hashes) == {} and len(found.body_tokens(DEAL, node_config.retrieval.tokenizer_encoding)) == n
    finally:
        found.close()
    assert (home / "lexical").is_dir()
    for name, package in before.items():
        assert _package_of(home, node_config, name) == package, name
    again = subprocess.run([sys.executable, "-m", "retrieval_node.cli", "precompute", "--store", str(home), "--deal", DEAL, "--json"],
                           capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and json.loads(again.stdout) == {"computed": {DEAL: 0}}
    unknown = subprocess.run([sys.executable, "-m", "retrieval_node.cli", "precompute", "--store", str(home), "--deal", "2026-NONE-0000"],
                             capture_output=True, text=True, timeout=300)
    assert unknown.returncode == 2 and "2026-NONE-0000" in unknown.stderr and "no registered chunks" in unknown.stderr


def _to_older_layout(path: Path, node_config) -> None:
    """Rewrite a findings file in the layout before findings v3 (rowid tables, settings spelled out), rows unchanged."""
    import sqlite3

    from retrieval_node.precompute import risk_settings

    spelled = {s.key: json.dumps([list(s.kinds) if s.kinds is not None else None, list(s.domains)], separators=(",", ":"))
               for s in risk_settings(node_config)}
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("CREATE TABLE findings (fingerprint TEXT NOT NULL, deal_id TEXT NOT NULL, chunk_id TEXT NOT NULL, setting TEXT NOT NULL, "
                     "material INTEGER NOT NULL, signal TEXT, spans TEXT, PRIMARY KEY (fingerprint, deal_id, chunk_id, setting))")
        conn.execute("CREATE TABLE mentions (fingerprint TEXT NOT NULL, deal_id TEXT NOT NULL, chunk_id TEXT NOT NULL, found TEXT, "
                     "PRIMARY KEY (fingerprint, deal_id, chunk_id))")
        conn.execute("CREATE TABLE body_tokens (form TEXT NOT NULL, deal_id TEXT NOT NULL, chunk_id TEXT NOT NULL, content_hash TEXT NOT NULL, "
                     "n INTEGER NOT NULL, PRIMARY KEY (form, deal_id, chunk_id))")
        for fp, deal, cid, key, material, signal, spans in conn.execute("SELECT * FROM findings_v3").fetchall():
            conn.execute("INSERT INTO findings VALUES (?, ?, ?, ?, ?, ?, ?)", (fp, deal, cid, spelled[key], material, signal, spans))
        conn.execute("INSERT INTO mentions SELECT * FROM mentions_v3")
        conn.execute("INSERT INTO body_tokens SELECT * FROM body_tokens_v3")
        for table in ("findings_v3", "mentions_v3", "body_tokens_v3"):
            conn.execute(f"DROP TABLE {table}")
    finally:
        conn.close()


def test_precompute_moves_an_older_findings_file_into_its_layout_without_computing(ingested: Path, tmp_path: Path, node_config) -> None:
    """A findings file of the layout before (one page read per row on a cold first call) is not read; `precompute`
    copies its rows of the current rules into the clustered tables, computes nothing, drops the old tables and gives
    their space back; the rows served are the ones ingest wrote."""
    import sqlite3

    from retrieval_node.precompute import FINDINGS_DB, ChunkFindings

    home = tmp_path / "store"
    shutil.copytree(ingested, home)
    found = ChunkFindings(home / FINDINGS_DB, node_config)
    try:
        written = found.deal(DEAL)
        bodies = found.body_tokens(DEAL, node_config.retrieval.tokenizer_encoding)
    finally:
        found.close()
    assert written and bodies
    _to_older_layout(home / FINDINGS_DB, node_config)
    older = ChunkFindings(home / FINDINGS_DB, node_config)
    try:
        assert older.deal(DEAL) == {}  # the older tables are not read
    finally:
        older.close()
    with Store.open(home, config=node_config) as st:
        assert Ingestor(st).precompute([DEAL], parts=frozenset({"findings", "bodies"})) == {DEAL: 0}  # copied, not computed
    moved = ChunkFindings(home / FINDINGS_DB, node_config)
    try:
        assert moved.deal(DEAL) == written
        assert moved.body_tokens(DEAL, node_config.retrieval.tokenizer_encoding) == bodies
    finally:
        moved.close()
    conn = sqlite3.connect(home / FINDINGS_DB)
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert tables == {"findings_v3", "mentions_v3", "body_tokens_v3"}
        assert conn.execute("PRAGMA freelist_count").fetchone()[0] == 0  # the old tables' pages were given back
    finally:
        conn.close()


def test_findings_of_a_setting_no_profile_reads_do_not_stand_in_for_a_new_one(ingested: Path, node_config) -> None:
    """A profile now reading risk over other domains has a new setting: its findings are missing until computed,
    whatever rows the setting it replaced left under the same rules."""
    from retrieval_node.precompute import FINDINGS_DB, ChunkFindings, risk_settings

    condo = node_config.agents["condo"]
    domains = sorted({*condo.risk_domains, "closing"} if condo.risk_domains else {"closing"})
    edited = node_config.model_copy(update={"agents": {**node_config.agents, "condo": condo.model_copy(update={"risk_domains": domains})}})
    assert {s.key for s in risk_settings(edited)} - {s.key for s in risk_settings(node_config)}  # a setting no row is filed under
    with Store.open(ingested, config=node_config) as st:
        hashes = {r.chunk_id: r.content_hash for r in st.registry.deal_records(DEAL)}
    found = ChunkFindings(ingested / FINDINGS_DB, edited)
    try:
        assert found.fingerprint == ChunkFindings(ingested / FINDINGS_DB, node_config).fingerprint  # same rules, same lexicon
        assert found.missing(DEAL, hashes).get("findings") == set(hashes)
    finally:
        found.close()


def test_moving_an_older_findings_file_waits_for_no_other_program(ingested: Path, tmp_path: Path, node_config) -> None:
    """While another program reads the findings file, moving its older tables is refused with an error that says so
    and changes nothing; once it is closed, the move runs."""
    import sqlite3

    from retrieval_node.errors import BackendError
    from retrieval_node.precompute import FINDINGS_DB, ChunkFindings

    home = tmp_path / "store"
    shutil.copytree(ingested, home)
    found = ChunkFindings(home / FINDINGS_DB, node_config)
    try:
        written = found.deal(DEAL)
    finally:
        found.close()
    _to_older_layout(home / FINDINGS_DB, node_config)
    moving = ChunkFindings(home / FINDINGS_DB, node_config)
    reader = sqlite3.connect(home / FINDINGS_DB, isolation_level=None)
    reader.execute("BEGIN")
    assert reader.execute("SELECT COUNT(*) FROM findings").fetchone()[0] > 0  # holds the file open for reading
    try:
        moving._conn.execute("PRAGMA busy_timeout = 100")  # the test does not wait SQLite's default 5 s
        with pytest.raises(BackendError, match="another program has the file open"):
            moving.migrate()
        assert moving.deal(DEAL) == {}  # nothing moved
        reader.execute("COMMIT")
        reader.close()
        assert moving.migrate() > 0
        assert moving.deal(DEAL) == written
    finally:
        moving.close()


def test_space_is_given_back_when_no_reader_holds_the_findings_file(tmp_path: Path, caplog) -> None:
    """A findings file mostly free pages (rows deleted) is vacuumed; while another connection reads it the vacuum
    cannot run: the rows stay, the log says so, and the next try gives the space back."""
    import logging
    import sqlite3

    from retrieval_node.precompute import _give_space_back

    path = tmp_path / "f.db"
    conn = sqlite3.connect(path, isolation_level=None, timeout=0.1)
    conn.execute("CREATE TABLE t (k TEXT PRIMARY KEY, v TEXT) WITHOUT ROWID")
    conn.executemany("INSERT INTO t VALUES (?, ?)", [(f"k{i}", "x" * 500) for i in range(2000)])
    conn.execute("DELETE FROM t WHERE k != 'k7'")
    assert conn.execute("PRAGMA freelist_count").fetchone()[0] * 2 > conn.execute("PRAGMA page_count").fetchone()[0]
    reader = sqlite3.connect(path, isolation_level=None)
    reader.execute("BEGIN")
    assert reader.execute("SELECT v FROM t").fetchall()  # holds the file open for reading
    with caplog.at_level(logging.WARNING, logger="retrieval_node.precompute"):
        _give_space_back(conn, path)
    assert "could not be given back" in caplog.text and conn.execute("PRAGMA freelist_count").fetchone()[0] > 0
    reader.execute("COMMIT")
    reader.close()
    _give_space_back(conn, path)
    assert conn.execute("PRAGMA freelist_count").fetchone()[0] == 0
    assert conn.execute("SELECT k FROM t").fetchall() == [("k7",)]
    conn.close()


def _lexicon_edited(node_config):
    """``node_config`` with one term of its risk lexicon weighing half as much (a lexicon change)."""
    lex = node_config.risk_signals
    dom = sorted(lex.domains)[0]
    spec = lex.domains[dom]
    term = spec.terms[0]
    edited_spec = spec.model_copy(update={"terms": [term.model_copy(update={"weight": max(0.05, term.weight / 2)}), *spec.terms[1:]]})
    return node_config.model_copy(update={"risk_signals": lex.model_copy(update={"domains": {**lex.domains, dom: edited_spec}})})


def test_precompute_after_a_lexicon_change_stores_the_new_findings_and_drops_the_old(ingested: Path, tmp_path: Path, node_config) -> None:
    """After a lexicon change an ingest of unchanged files touches nothing; `Ingestor.precompute` computes the findings
    under the new lexicon (first calls read them) and deletes the rows no configuration of the store serves now."""
    from retrieval_node.precompute import FINDINGS_DB, ChunkFindings

    edited = _lexicon_edited(node_config)
    home = tmp_path / "store"
    shutil.copytree(ingested, home)
    with Store.open(home, config=edited) as st:
        hashes = {r.chunk_id: r.content_hash for r in st.registry.deal_records(DEAL)}
        assert Ingestor(st).ingest([SAMPLE_DATA / "sample_deal" / "chunks.jsonl"]).ingested == 0  # nothing changed: nothing computed
        before = ChunkFindings(home / FINDINGS_DB, edited)
        try:
            assert set(before.missing(DEAL, hashes)) == {"findings"}  # body counts and the rest still stand
        finally:
            before.close()
        assert Ingestor(st).precompute() == {DEAL: len(hashes)}
    new, old = ChunkFindings(home / FINDINGS_DB, edited), ChunkFindings(home / FINDINGS_DB, node_config)
    try:
        assert new.missing(DEAL, hashes) == {}
        assert old.missing(DEAL, hashes) == {"findings": set(hashes)}  # the old lexicon's rows are gone
    finally:
        new.close()
        old.close()


def test_a_rule_or_lexicon_change_is_not_served_stale_findings(ingested: Path, node_config, monkeypatch) -> None:
    from retrieval_node import precompute
    from retrieval_node.deals import DealCache
    from retrieval_node.precompute import fingerprint, risk_settings

    base = fingerprint(node_config)
    assert fingerprint(node_config) == base
    # a lexicon change: one term weighs less
    edited = _lexicon_edited(node_config)
    assert fingerprint(edited) != base
    keys = [s.key for s in risk_settings(node_config)]
    assert keys and keys == [s.key for s in risk_settings(edited)]  # the same settings, read under another lexicon
    with Store.open(ingested, config=edited) as st:
        view, _ = DealCache(st).view(DEAL)
        assert view.chunks and not any(view.stored_findings(k) for k in keys)  # nothing stored under the new lexicon: computed on the call
    with Store.open(ingested, config=node_config) as st:
        view, _ = DealCache(st).view(DEAL)
        assert all(view.stored_findings(k) for k in keys)  # the original lexicon still finds its rows

    # a rule change in risk.py: a fake source stands in for an edited module (fault injection, not a real edit)
    real = precompute.inspect.getsource
    monkeypatch.setattr(precompute.inspect, "getsource", lambda obj: real(obj) + "\n# a rule changed\n")
    assert fingerprint(node_config) != base
    with Store.open(ingested, config=node_config) as st:
        view, _ = DealCache(st).view(DEAL)
        assert view.chunks and not any(view.stored_findings(k) for k in keys)


def test_seeded_signals_are_what_the_ranker_serves(node_config) -> None:
    """A fake stored signal (fault injection: no chunk reads this way) must be what the ranker then returns, which
    pins the memo key precompute.seed_ranker relies on."""
    from retrieval_node.deals import DealView
    from retrieval_node.precompute import encode_signal, seed_ranker, setting_key
    from retrieval_node.rank import Rankers
    from retrieval_node.risk import RiskSignal
    from retrieval_node.values import ChunkView

    rankers = Rankers(node_config)
    profile = node_config.agents["condo"]
    from retrieval_node.agent import intent_from_profile

    intent = intent_from_profile("condo", profile, deal_id=DEAL)
    settings = rankers.settings(intent, profile)
    chunk = ChunkView(memory_id="", chunk_id="c1", deal_id=DEAL, document_id="d", document_role="CONDO_DOCS", section_type="CONDO_MINUTES",
                      page_start=1, page_end=1, content="The board met and adjourned.", content_hash="h1", token_count=6, ocr_confidence=1.0,
                      zones=(), entity_ids=(), sensitivity="confidential", document_created_at=None, ingested_at="2026-01-01T00:00:00+00:00")
    fake = RiskSignal(score=0.77, kinds=("special_levy",))
    view = DealView(DEAL, {"c1": chunk}, [], "mem0", 0.0, 0)
    view.findings = {setting_key(settings.kinds, settings.domains): {"c1": (True, encode_signal(fake), json.dumps({str(settings.excerpt_chars): [0, 9]}))}}
    seed_ranker(view, settings)
    assert settings.ranker.risk("h1", chunk.content, settings.domains) == fake
    assert settings.excerpt_for(chunk) == (0, 9)
    assert settings.keep(view)(chunk) is True


def test_a_damaged_stored_signal_is_read_from_the_chunk_instead(node_config) -> None:
    """Fault injection: stored signals that do not decode (a truncated row, another version's encoding, a wrong shape)
    cost a reading of the chunk, never an answer or an exception."""
    from retrieval_node.rank import RiskAwareRanker
    from retrieval_node.risk import risk_signal

    text = "A builders' lien for $48,200.00 was registered against the title by Northgate Framing Ltd."
    domains = ("title",)
    expected = risk_signal(text, node_config.risk_signals, domains)
    assert expected.material
    for damaged in ('[0.9,["builders_lien"]', '[0.9,["builders_lien"],[],[],[],[]]', '{"score":0.9}', "7"):
        ranker = RiskAwareRanker(node_config.risk_signals)
        ranker.offer("h", domains, damaged)
        assert ranker.risk("h", text, domains) == expected, damaged


def test_bm25_index_kept_at_ingest_scores_exactly_like_one_built_on_the_call(ingested: Path, node_config) -> None:
    import bm25s

    from retrieval_node import lexical
    from retrieval_node.deals import DealCache

    with Store.open(ingested, config=node_config) as st:
        view, _ = DealCache(st).view(DEAL)
    ids = sorted(view.chunks)
    loaded = lexical.load(ingested, DEAL, ids)
    assert loaded is not None
    built = lexical.build([view.chunks[c].content for c in ids])
    assert loaded[1] == built[1]
    for query in [*profile_query_texts(node_config), "builders lien 12,000 arrears levy"]:
        q = [t for t in bm25s.tokenize(query, stopwords="en", return_ids=False, show_progress=False)[0] if t in built[1]]
        if q:
            assert np.array_equal(loaded[0].get_scores(q), built[0].get_scores(q)), query
    assert lexical.load(ingested, DEAL, ids[:-1]) is None  # another set of chunks: not served
    assert lexical.load(ingested, "2026-OTHER-0001", ids) is None


def test_the_deal_view_reads_the_kept_bm25_index(ingested: Path, tmp_path: Path, node_config) -> None:
    """An index kept for the right chunk ids but built from other texts (fault injection) is what the view serves,
    so the view does read the stored index instead of building one."""
    from retrieval_node import lexical
    from retrieval_node.deals import DealCache

    home = tmp_path / "store"
    shutil.copytree(ingested, home)
    with Store.open(home, config=node_config) as st:
        view, _ = DealCache(st).view(DEAL)
        ids = sorted(view.chunks)
        lexical.save(home, DEAL, ids, ["zyzzyva"] * len(ids))
        scores = view.bm25_scores("zyzzyva")
        assert set(scores) == set(ids) and len(set(scores.values())) == 1


# -- pattern mentions kept at ingest, the point table's ids, the deal views kept -------------------------------------


@pytest.fixture(scope="module")
def patterned(tmp_path_factory, embedder, node_config) -> Path:
    """A closed store whose patterns were loaded before the sample deal was ingested (ingest keeps the mentions)."""
    from retrieval_node.ingest import add_patterns, read_patterns

    home = tmp_path_factory.mktemp("patterned") / "store"
    with Store.open(home, config=node_config, embedder=embedder) as st:
        patterns, bad = read_patterns(SAMPLE_DATA / "patterns.jsonl")
        assert bad == []
        add_patterns(st, patterns)
        report = Ingestor(st).ingest([SAMPLE_DATA / "sample_deal" / "chunks.jsonl"])
        assert report.rejected == [] and report.ingested > 0
    return home


def _entities(home: Path, node_config) -> frozenset[str]:
    with Store.open(home, config=node_config) as st:
        return frozenset(p.entity_id for p in st.registry.all_patterns())


def test_stored_mentions_are_what_the_text_names(patterned: Path, node_config) -> None:
    from retrieval_node.precompute import FINDINGS_DB, ChunkFindings
    from retrieval_node.risk import mentioned_entities

    entities = _entities(patterned, node_config)
    with Store.open(patterned, config=node_config) as st:
        records = {r.chunk_id: r for r in st.registry.deal_records(DEAL)}
    found = ChunkFindings(patterned / FINDINGS_DB, node_config)
    try:
        stored = found.mentions(DEAL, entities)
        assert set(stored) == set(records)
        for cid, named in stored.items():
            assert named == mentioned_entities(records[cid].content, entities), cid
        assert any(stored.values())  # the sample deal names a builder of the patterns: real answers were compared
        assert found.mentions(DEAL, entities - {next(iter(entities))}) == {}  # other entities: nothing served
    finally:
        found.close()


def test_patterns_added_after_ingest_get_their_mentions_kept(ingested: Path, tmp_path: Path, node_config) -> None:
    """The usual order (ingest the deal, then load the firm's patterns): `patterns add` works out which of the new
    pattern entities each registered chunk names, so first calls do not; with keep_mentions=False nothing is kept."""
    from retrieval_node.ingest import add_patterns, read_patterns
    from retrieval_node.precompute import FINDINGS_DB, ChunkFindings
    from retrieval_node.risk import mentioned_entities

    patterns, bad = read_patterns(SAMPLE_DATA / "patterns.jsonl")
    assert bad == [] and patterns
    for keep in (False, True):
        home = tmp_path / f"store-{keep}"
        shutil.copytree(ingested, home)
        with Store.open(home, config=node_config) as st:
            add_patterns(st, patterns, keep_mentions=keep)
            entities = frozenset(p.entity_id for p in st.registry.all_patterns())
            records = {r.chunk_id: r for r in st.registry.deal_records(DEAL)}
        found = ChunkFindings(home / FINDINGS_DB, node_config)
        try:
            stored = found.mentions(DEAL, entities)
            if not keep:
                assert stored == {}
                continue
            assert set(stored) == set(records)
            assert all(named == mentioned_entities(records[cid].content, entities) for cid, named in stored.items())
            assert any(stored.values())
        finally:
            found.close()


def test_packages_are_identical_with_and_without_stored_mentions(patterned: Path, tmp_path: Path, node_config) -> None:
    from retrieval_node.precompute import FINDINGS_DB

    home = tmp_path / "store"
    shutil.copytree(patterned, home)
    for name in ("investigator", "condo", "tax", "scribe"):
        kept = _package_of(home, node_config, name)
        (home / FINDINGS_DB).rename(home / "findings.aside")
        computed = _package_of(home, node_config, name)
        (home / FINDINGS_DB).unlink()
        (home / "findings.aside").rename(home / FINDINGS_DB)
        assert kept == computed, name


def test_offered_mentions_are_what_the_ranker_serves(node_config) -> None:
    """A fake stored mention (fault injection: the text does not name the builder) must be what the ranker then uses,
    for the entity set it was stored under and for a narrower one; a wider set is worked out from the text."""
    from retrieval_node.rank import Rankers

    ranker = Rankers(node_config).settings(*_condo_settings_args(node_config)).ranker
    text = "The board met and adjourned."
    builder, other = "builder:prairie-peak-homes", "municipality:city-of-calgary"
    ranker.offer_mentions("h1", frozenset({builder, other}), frozenset({builder}))
    assert ranker._mentioned("h1", text, frozenset({builder, other})) == {builder}
    assert ranker._mentioned("h1", text, frozenset({builder})) == {builder}
    assert ranker._mentioned("h1", text, frozenset({other})) == frozenset()
    assert ranker._mentioned("h1", text, frozenset({builder, other, "builder:kodiak-mechanical"})) == frozenset()  # read from the text


def _condo_settings_args(node_config):
    from retrieval_node.agent import intent_from_profile

    profile = node_config.agents["condo"]
    return intent_from_profile("condo", profile, deal_id=DEAL), profile


def test_point_ids_of_the_deal_table_are_the_stored_points_ids() -> None:
    from hypothesis import given, settings
    from hypothesis import strategies as st_

    from retrieval_node.backends.vectors import point_id, point_int, point_ints, point_uuid, uuid_text

    @settings(max_examples=300, deadline=None)
    @given(st_.text(max_size=80), st_.integers(min_value=0, max_value=10_000))
    def same(chunk_id: str, window: int) -> None:
        assert point_int(chunk_id, window) == point_uuid(chunk_id, window).int
        assert uuid_text(point_int(chunk_id, window)) == point_id(chunk_id, window)  # what pairing asks the index for

    @settings(max_examples=100, deadline=None)
    @given(st_.text(max_size=80), st_.integers(min_value=0, max_value=30))
    def every_window(chunk_id: str, windows: int) -> None:
        assert point_ints(chunk_id, windows) == [point_uuid(chunk_id, w).int for w in range(windows)]

    same()
    every_window()


def _views_limited(node_config, limit: int):
    """The suite's config keeping at most ``limit`` deal views."""
    return node_config.model_copy(update={"retrieval": node_config.retrieval.model_copy(update={"deal_cache_size": limit})})


def test_deal_views_kept_are_bounded_least_recently_used_first(sample_store, node_config) -> None:
    from retrieval_node.deals import DealCache

    cache = DealCache(sample_store, _views_limited(node_config, 2))
    a, b, c = "2026-ACME-0042", "2026-BRDG-0107", "2026-KEST-0313"
    assert cache.view(a)[1] == 1 and cache.view(b)[1] == 1
    assert cache.view(a)[1] == 0  # kept, and now the most recently used
    assert cache.view(c)[1] == 1 and len(cache) == 2  # b, the least recently used, was dropped
    assert cache.view(a)[1] == 0
    assert cache.view(b)[1] == 1  # rebuilt from the store
    assert len(cache) == 2


def test_building_a_view_leaves_the_garbage_collector_as_it_found_it(sample_store) -> None:
    import gc

    from retrieval_node.deals import DealCache

    assert gc.isenabled()
    DealCache(sample_store).view(DEAL)
    assert gc.isenabled()
    gc.disable()
    try:
        DealCache(sample_store).view(DEAL)
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_view_dropped_from_the_deal_cache_takes_what_is_kept_of_its_chunks_with_it(sample_store, node_config) -> None:
    """A process serving every deal of a large store: what the rankers and the packager keep per chunk (risk signals,
    spans, mentions, token costs) lives as long as the deal's view, not for every deal ever served; a deal served again
    after its view was dropped gets the same package."""
    from retrieval_node.agent import RetrievalAgent

    agent = RetrievalAgent(sample_store, config=_views_limited(node_config, 1), trust=FULL_TRUST)  # the agent's own config applies
    pipeline = agent.pipeline
    rankers = [pipeline.rankers.default, *pipeline.rankers._by_kinds.values()]

    def kept_signals(hashes: set[str]) -> int:
        caches = [c for r in rankers for c in (r._risk_cache, r._span_cache, r._mention_cache, r._static_cache, r._stored)]
        return sum(1 for c in caches for k in c._d if (k if isinstance(k, str) else k[0]) in hashes)

    def kept_costs(ids: set[str]) -> int:
        packager = pipeline.packager
        return (sum(1 for k in packager._cost_cache._d if k in ids) + sum(1 for k in packager._bodies._d if k in ids)
                + sum(1 for k in packager._excerpt_cost_cache._d if k[0] in ids))

    a, b = DEAL, "2026-BRDG-0107"
    first = pipeline.run(agent.intent_for("investigator", deal_id=a), FULL_TRUST)[0]
    view_a = pipeline.deals._deals[a]
    hashes_a, ids_a = {c.content_hash for c in view_a.chunks.values()}, set(view_a.chunks)
    assert kept_signals(hashes_a) > 0 and kept_costs(ids_a) > 0

    pipeline.run(agent.intent_for("investigator", deal_id=b), FULL_TRUST)
    view_b = pipeline.deals._deals[b]
    assert a not in pipeline.deals._deals
    only_a = hashes_a - {c.content_hash for c in view_b.chunks.values()}
    assert only_a and kept_signals(only_a) == 0
    assert kept_costs(ids_a - set(view_b.chunks)) == 0
    assert kept_signals({c.content_hash for c in view_b.chunks.values()}) > 0  # the cached deal keeps its own

    again = pipeline.run(agent.intent_for("investigator", deal_id=a), FULL_TRUST)[0]
    assert again.package_hash == first.package_hash
    assert [r.chunk_id for r in again.ordered_chunks] == [r.chunk_id for r in first.ordered_chunks]


def _long_deal(make_chunk, deal_id: str, n: int) -> list:
    """``n`` chunks of one deal in our own words: a title search (registrations, a lien now and then) and condominium
    documents (minutes, a reserve fund study, a levy now and then), several chunks to a page."""
    chunks = []
    for i in range(n):
        page = 1 + i // 3
        if i % 2 == 0:
            text = (f"Registration {100 + i:03d} 555 {i:03d} dated {1 + i % 27:02d}/03/2019: "
                    + ("builders' lien in favour of Northgate Framing Ltd. for $48,200.00" if i % 23 == 0 else "utility right of way to the city")
                    + f". Instrument reviewed against the owner's title, entry {i}.")
            chunks.append(make_chunk(text, deal_id=deal_id, document_id=f"{deal_id}/title.pdf", page=page))
        else:
            text = (f"Minutes item {i}: the board discussed landscaping, parking stalls and the window cleaning contract. "
                    + ("A special levy of $3,100 per unit was approved for the roof membrane." if i % 29 == 1 else "No assessment was raised.")
                    + " The reserve fund balance was reported as adequate.")
            chunks.append(make_chunk(text, deal_id=deal_id, document_id=f"{deal_id}/condo-minutes.pdf", role="CONDO_DOCS",
                                     section="CONDO_MINUTES", page=page))
    return chunks


def test_a_cached_deal_view_keeps_few_objects_per_chunk(store, make_chunk, tmp_path) -> None:
    """A process serving many deals keeps up to ``deal_cache_size`` deal views. Python's full garbage collections visit
    every object the process keeps, so what a view keeps per chunk is paid for again by every first call that triggers one.
    The rule: per chunk, its chunk view and at most one risk signal per agent's risk setting; links, memo tables and
    cache entries hold strings and tuples of them (which the collector stops tracking), not an object per chunk each."""
    import gc
    from collections import Counter

    from retrieval_node.agent import RetrievalAgent
    from retrieval_node.risk import RiskSignal
    from retrieval_node.values import ChunkView
    from tests.conftest import write_jsonl

    n = 240
    path = write_jsonl(tmp_path / "deals.jsonl", _long_deal(make_chunk, "2026-GCOB-0001", 12) + _long_deal(make_chunk, "2026-GCOB-0002", n))
    Ingestor(store).ingest([path])
    store.bump(["2026-GCOB-0001", "2026-GCOB-0002"])  # the views below are built by the calls, from Mem0's listing
    agent = RetrievalAgent(store, trust=FULL_TRUST)
    agents = sorted(agent.config.agents)
    for name in agents:  # imports, compiled patterns, the rankers: what any first call creates once per process
        agent.retrieve_sync(agent.intent_for(name, deal_id="2026-GCOB-0001"))
    gc.collect()
    gc.collect()
    before = {id(o) for o in gc.get_objects()}
    packages = [agent.retrieve_sync(agent.intent_for(name, deal_id="2026-GCOB-0002"))[0] for name in agents]
    gc.collect()
    gc.collect()
    answer = set()  # the packages themselves, which the caller holds
    todo: list = [packages]
    while todo:
        o = todo.pop()
        if id(o) not in answer:
            answer.add(id(o))
            todo.extend(r for r in gc.get_referents(o) if gc.is_tracked(r) and id(r) not in before)
    kept = [o for o in gc.get_objects() if id(o) not in before and id(o) not in answer]
    views = sum(isinstance(o, ChunkView) for o in kept)
    signals = sum(isinstance(o, RiskSignal) for o in kept)
    assert views == n  # one view per chunk, shared by every agent's call
    assert signals <= len(agents) * n
    # everything else is a constant: the view's tables, locks, a cache entry per agent (119 when written). An object
    # per chunk anywhere (a list, a set, a tuple around a signal) adds 240 and fails this.
    assert len(kept) - views - signals <= 200, sorted(Counter(type(o).__name__ for o in kept).items(), key=lambda kv: -kv[1])[:8]


# -- the page cache after open (backends/pagecache.py) ----------------------------------------------------------

from retrieval_node.backends import pagecache  # noqa: E402


def test_data_extents_cover_every_written_byte_and_skip_holes_where_the_file_system_keeps_them(tmp_path: Path) -> None:
    path = tmp_path / "sparse.dat"
    with open(path, "wb") as fh:
        fh.write(b"a" * 4096)
        fh.seek(1 << 20)
        fh.write(b"b" * 4096)
        fh.truncate(4 << 20)
    fd = os.open(path, os.O_RDONLY)
    try:
        extents = list(pagecache.data_extents(fd, 4 << 20))
        holes_kept = hasattr(os, "SEEK_HOLE") and os.lseek(fd, 0, os.SEEK_HOLE) < (4 << 20)
    finally:
        os.close(fd)
    covered = lambda off: any(start <= off < start + n for start, n in extents)  # noqa: E731
    assert covered(0) and covered(4095) and covered(1 << 20) and covered((1 << 20) + 4095)
    assert all(n > 0 for _, n in extents) and all(a + n <= b for (a, n), (b, _) in zip(extents, extents[1:]))
    if holes_kept:  # the 4 MiB file holds 8 KiB of data: the holes are not read ahead
        assert sum(n for _, n in extents) < 2 << 20
    (tmp_path / "empty.dat").touch()
    fd = os.open(tmp_path / "empty.dat", os.O_RDONLY)
    try:
        assert list(pagecache.data_extents(fd, 0)) == []
    finally:
        os.close(fd)


def test_the_files_warmed_are_the_stores_segments_findings_and_indexes_never_its_write_ahead_logs(ingested: Path, tmp_path: Path) -> None:
    home = tmp_path / "store"
    shutil.copytree(ingested, home)
    files = pagecache.store_files([home / "mem0_edge", home / "vectors", home / "chunk_findings.db", home / "lexical", home / "absent"])
    rel = {str(p.relative_to(home)) for p in files}
    assert any(r.startswith("mem0_edge/segments/") for r in rel) and any(r.startswith("vectors/segments/") for r in rel)
    assert "chunk_findings.db" in rel and any(r.startswith("lexical/") for r in rel)
    assert not any("/wal/" in f"/{r}" for r in rel)


@pytest.mark.skipif(not pagecache.SUPPORTED, reason="posix_fadvise is not available on this platform")
def test_an_opened_store_warms_its_index_files_in_the_background_and_a_cli_command_does_not(ingested: Path, tmp_path: Path, node_config) -> None:
    from retrieval_node import cli

    home = tmp_path / "store"
    shutil.copytree(ingested, home)
    with Store.open(home, config=node_config) as st:
        assert st.page_cache is not None and st.page_cache.wait(60)
        assert st.page_cache.files > 0 and st.page_cache.skipped == 0
        assert st.page_cache.advised_bytes > 0
    off = node_config.model_copy(update={"retrieval": node_config.retrieval.model_copy(update={"warm_page_cache": False})})
    with Store.open(home, config=off) as st:
        assert st.page_cache is None
    with Store.open(home, config=off, warm_page_cache=True) as st:  # the argument wins over the configuration
        assert st.page_cache is not None and st.page_cache.wait(60)
    with cli._open_store(home) as st:  # one command, then exit: nothing read ahead
        assert st.page_cache is None


@pytest.mark.skipif(not pagecache.SUPPORTED, reason="posix_fadvise is not available on this platform")
def test_a_file_gone_between_listing_and_reading_is_skipped_not_fatal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kept = [tmp_path / "a.dat", tmp_path / "c.dat"]
    for p in kept:
        p.write_bytes(b"x" * 10_000)
    # fault injected: the listing names a file a compaction removed before it is read
    monkeypatch.setattr(pagecache, "store_files", lambda roots: [kept[0], tmp_path / "gone.dat", kept[1]])
    warmer = pagecache.PageCacheWarmer([tmp_path])
    assert warmer.run() == 20_000
    assert (warmer.files, warmer.skipped) == (2, 1) and warmer.done


@pytest.mark.skipif(not pagecache.SUPPORTED, reason="posix_fadvise is not available on this platform")
def test_closing_the_store_stops_the_warming_first(ingested: Path, tmp_path: Path, node_config) -> None:
    home = tmp_path / "store"
    shutil.copytree(ingested, home)
    st = Store.open(home, config=node_config)
    warmer = st.page_cache
    st.close()
    assert warmer is not None and warmer._thread is not None and not warmer._thread.is_alive()


# -- the write-ahead logs' pages handed back after open (backends/pagecache.py, page_out_mapped) --------------------

import mmap  # noqa: E402


def _mapped_rss(path_prefix: str) -> int:
    """Resident bytes of this process's maps of files whose path starts with ``path_prefix`` (/proc/self/smaps)."""
    total, current = 0, False
    with open("/proc/self/smaps", encoding="utf-8", errors="replace") as fh:
        for line in fh:
            head = line.split(maxsplit=5)
            if head and "-" in head[0] and len(head) >= 5 and ":" not in head[0]:
                current = len(head) == 6 and head[5].strip().startswith(path_prefix)
            elif current and line.startswith("Rss:"):
                total += int(line.split()[1]) * 1024
    return total


def _page_out_works(tmp_path: Path) -> bool:
    """Whether this kernel reclaims pages on MADV_PAGEOUT (Linux 5.4+; a sandbox may accept the advice and do nothing):
    a probe on a mapping of our own, through libc directly (not through the code under test)."""
    import ctypes

    probe = tmp_path / "probe.dat"
    probe.write_bytes(b"p" * (16 * mmap.PAGESIZE))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    with open(probe, "r+b") as fh, mmap.mmap(fh.fileno(), 0) as mm:
        buf = ctypes.c_char.from_buffer(mm)
        try:
            assert mm[:] == b"p" * len(mm)  # every page touched: resident
            before = _mapped_rss(str(probe))
            ok = libc.madvise(ctypes.addressof(buf), len(mm), pagecache.MADV_PAGEOUT) == 0
            return ok and before > 0 and _mapped_rss(str(probe)) < before
        finally:
            del buf


needs_pageout = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/self/maps and madvise are Linux's")


@needs_pageout
def test_paging_out_a_directorys_mapped_files_changes_no_byte_and_leaves_other_files_mapped(tmp_path: Path) -> None:
    if not _page_out_works(tmp_path):
        pytest.skip("this kernel refuses MADV_PAGEOUT (before Linux 5.4)")
    logs, other = tmp_path / "wal", tmp_path / "segments"
    logs.mkdir()
    other.mkdir()
    size = 64 * mmap.PAGESIZE
    for d in (logs, other):
        (d / "a.dat").write_bytes(bytes(size))
    shared_f, other_f = open(logs / "a.dat", "r+b"), open(other / "a.dat", "r+b")
    private_f = open(logs / "a.dat", "rb")
    try:
        shared = mmap.mmap(shared_f.fileno(), 0)  # MAP_SHARED, as qdrant maps its log segments
        private = mmap.mmap(private_f.fileno(), 0, access=mmap.ACCESS_COPY)  # MAP_PRIVATE: its writes live only here
        kept = mmap.mmap(other_f.fileno(), 0)
        written = bytes((i * 7) % 251 for i in range(size))
        shared[:] = written
        shared.flush()  # clean pages: these the kernel can drop
        private[:] = b"\x01" * size  # a private copy nothing else holds
        kept[:] = written
        shared[: mmap.PAGESIZE] = b"\x02" * mmap.PAGESIZE  # one dirty shared page, not written back yet
        before_logs, before_other = _mapped_rss(str(logs)), _mapped_rss(str(other))
        assert before_logs >= 2 * size - mmap.PAGESIZE and before_other >= size - mmap.PAGESIZE

        advised = pagecache.page_out_mapped([logs])

        assert advised == 2 * size  # both maps of the log file, nothing of the other directory
        assert _mapped_rss(str(logs)) <= before_logs - (size - mmap.PAGESIZE)  # the clean shared pages went (the private copy may stay)
        assert _mapped_rss(str(other)) >= size - mmap.PAGESIZE  # another directory's maps are untouched
        # nothing a mapping holds changed: the dirty page, the written-back pages, the private copy
        assert shared[: mmap.PAGESIZE] == b"\x02" * mmap.PAGESIZE and shared[mmap.PAGESIZE:] == written[mmap.PAGESIZE:]
        assert private[:] == b"\x01" * size
        shared.flush()
        for m in (shared, private, kept):
            m.close()
    finally:
        for f in (shared_f, other_f, private_f):
            f.close()
    assert (logs / "a.dat").read_bytes() == b"\x02" * mmap.PAGESIZE + written[mmap.PAGESIZE:]  # and on disk
    assert pagecache.page_out_mapped([tmp_path / "nothing-mapped-here"]) == 0


def test_the_maps_listed_are_those_under_the_directories_given_whatever_the_path_holds(tmp_path: Path) -> None:
    wal = tmp_path / "store" / "vectors" / "wal"
    maps = "\n".join([
        f"7f00a0000000-7f00a2000000 rw-s 00000000 fe:00 11 {wal}/open-3",
        f"7f00a2000000-7f00a4000000 rw-s 00000000 fe:00 12 {wal}/closed-2 (deleted)",
        f"7f00a4000000-7f00a6000000 rw-s 00000000 fe:00 13 {wal}-old/open-1",  # a sibling whose name starts alike
        f"7f00a6000000-7f00a8000000 rw-s 00000000 fe:00 14 {tmp_path}/store/vectors/segments/x/matrix.dat",
        "7f00a8000000-7f00a8021000 rw-p 00000000 00:00 0 ",
        "7f00a9000000-7f00a9001000 r--p 00000000 fe:00 15 /usr/lib/with a space/lib.so",
        "not a maps line",
    ])
    listed = pagecache.mapped_ranges([wal], maps)
    assert [(hex(a), p.rsplit("/", 1)[1]) for a, _, p in listed] == [("0x7f00a0000000", "open-3"), ("0x7f00a2000000", "closed-2 (deleted)")]
    assert all(b - a == 32 << 20 for a, b, _ in listed)
    assert pagecache.mapped_ranges([], maps) == []


@needs_pageout
@pytest.mark.skipif(not pagecache.SUPPORTED, reason="posix_fadvise is not available on this platform")
def test_an_opened_store_hands_back_its_write_ahead_logs_pages_and_keeps_every_record(ingested: Path, tmp_path: Path, node_config) -> None:
    if not _page_out_works(tmp_path):
        pytest.skip("this kernel refuses MADV_PAGEOUT (before Linux 5.4)")
    home = tmp_path / "store"
    shutil.copytree(ingested, home)
    with Store.open(home, config=node_config, warm_page_cache=False) as st:  # the logs as opening leaves them
        counts = (st.chunks.count(), len(st.registry.deal_records("2026-ACME-0042")))
        logs_resident = _mapped_rss(str(home / "vectors" / "wal")) + _mapped_rss(str(home / "mem0_edge" / "wal"))
    assert logs_resident > 0  # opening read them
    with Store.open(home, config=node_config) as st:
        assert st.page_cache is not None and st.page_cache.wait(60)
        assert st.page_cache.paged_out_bytes > 0
        after = _mapped_rss(str(home / "vectors" / "wal")) + _mapped_rss(str(home / "mem0_edge" / "wal"))
        assert after < logs_resident
        assert (st.chunks.count(), len(st.registry.deal_records("2026-ACME-0042"))) == counts
    with Store.open(home, config=node_config) as st:  # and the next open reads the same store
        assert (st.chunks.count(), len(st.registry.deal_records("2026-ACME-0042"))) == counts
