"""The benchmark scripts still run: a tiny --smoke run of each (figures come from full runs, not from here)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
QUERIES = REPO.parent / "shared" / "bench" / "legalbench-rag" / "queries" / "contractnli_dev.json"


def _one_deal_set(root: Path, deal: str, chunks: list) -> Path:
    """A set folder laid out as the dev sets are (``deals/<deal>.jsonl``, an empty ``gold/``) holding one deal."""
    from tests.conftest import write_jsonl

    (root / "deals").mkdir(parents=True)
    (root / "gold").mkdir()
    write_jsonl(root / "deals" / f"{deal}.jsonl", chunks)
    return root


def _run(args: list[str], out: Path) -> dict:
    proc = subprocess.run([sys.executable, *args, "--out", str(out)], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return json.loads(out.read_text())


@pytest.mark.slow
def test_ingest_throughput_smoke(tmp_path):
    data = _run(["benchmarks/ingest_throughput.py", "--smoke"], tmp_path / "ingest.json")
    assert data["results"]["reingest"]["all_unchanged"] is True
    assert all(run["rejected"] == 0 for run in data["results"]["ingest_runs"])
    assert data["results"]["precompute_alone"]["chunks_per_s"] > 0  # the risk scan's share of an ingest, timed alone
    from retrieval_node.embedding import EMBEDDING_BACKENDS

    # the backend that ran, never the configured "auto"
    assert data["settings"]["embedding_backend"] == data["results"]["embedding_backend"] in EMBEDDING_BACKENDS


@pytest.mark.slow
def test_ingest_throughput_on_existing_stage0_files(tmp_path, make_chunk):
    """``--chunk-dir`` ingests the chunks of Stage-0 files written elsewhere (here: two deals written for the test),
    all of them; a line ingest would refuse stops the run and names its file, line and field."""
    from tests.conftest import write_jsonl

    texts = tmp_path / "texts"
    texts.mkdir()
    a = [make_chunk(f"Item {i}. The purchaser takes possession at noon on the completion day; keys at the brokerage.",
                    deal_id="2026-CDB-0001", page=i) for i in (1, 2)]
    b = [make_chunk("CAVEAT 231 004 118 registered 2023-05-02 by Lakeside Framing Ltd. re: builders' lien claim of $18,400.",
                    deal_id="2026-CDB-0002")]
    write_jsonl(texts / "one.jsonl", a)
    write_jsonl(texts / "two.jsonl", b)
    data = _run(["benchmarks/ingest_throughput.py", "--smoke", "--chunk-dir", str(texts), "--without-findings"], tmp_path / "ingest.json")
    r = data["results"]
    assert r["chunks"] == 3 and r["deals"] == 2 and str(texts) in r["texts"]
    assert r["reingest"]["all_unchanged"] is True and all(run["ingested"] == 3 for run in r["ingest_runs"])
    # the diagnostic ingest without the risk precomputation ingests the same chunks, and is paired with raw passes
    assert [(run["ingested"], run["rejected"]) for run in r["without_findings_runs"]] == [(3, 0)]
    assert isinstance(r["overhead_without_findings_pct"], float) and len(r["overhead_without_findings_pairs_pct"]) == 1
    write_jsonl(texts / "two.jsonl", b, extra_lines=['{"deal_id": "2026-CDB-0002"}'])
    proc = subprocess.run([sys.executable, "benchmarks/ingest_throughput.py", "--smoke", "--chunk-dir", str(texts), "--out", str(tmp_path / "x.json")],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode != 0 and f"{texts / 'two.jsonl'}:2:" in proc.stderr


@pytest.mark.slow
def test_retrieval_latency_smoke(tmp_path):
    work = tmp_path / "work"
    data = _run(["benchmarks/retrieval_latency.py", "--smoke", "--workers", "2", "--workdir", str(work), "--keep"], tmp_path / "latency.json")
    assert data["results"] and all(r["node"]["warm"]["p50_ms"] > 0 for r in data["results"])
    for r in data["results"]:  # the process-pool mode ran on the same store, every audit entry found once
        pool = r["node"]["process_pool"]
        assert pool["warm"]["p50_ms"] > 0 and pool["integrity"]["ok"]
        assert pool["concurrency"]["concurrent_errors"] == 0
        # the first call on every deal is measured, and the fresh-process CLI answered without loading the model
        assert len(r["node"]["cold"]["calls"]) == r["fill"]["deals"] and r["fill"]["precomputed"]
        # a deal written right before its first call is measured, and removed again (the store keeps its size)
        fresh = r["node"]["fresh"]
        assert fresh["n"] == 1 and fresh["calls"][0]["chunks_selected"] > 0 and fresh["removed_again"] is True
        cli = r["node"]["cli"]
        assert cli["calls"] and all(c["exit"] == 0 for c in cli["calls"]) and cli["model_loaded_any"] is False
        if sys.platform == "linux":  # the RSS split: the process's own heap and its mapped files
            assert r["rss_mb"]["current_after_node_parts"]["anon"] > 0 and r["rss_mb"]["current_after_node_parts"]["file"] > 0
    if sys.platform == "linux":  # deal_memory.py runs on the store the latency run kept
        size = data["results"][-1]["size"]
        mem = _run(["benchmarks/deal_memory.py", "--store", str(work / f"store-{size}"), "--deals", "2"], tmp_path / "memory.json")
        assert [row["deal"] for row in mem["per_deal"]] == ["2026-SCALE-0001", "2026-SCALE-0002"]
        assert all(row["views"] >= 1 and row["anon"] > 0 and row["file"] > 0 for row in mem["per_deal"])


@pytest.mark.slow
@pytest.mark.skipif(not QUERIES.exists(), reason="shared/bench/legalbench-rag is not beside the repository")
def test_legalbench_smoke(tmp_path):
    data = _run(["benchmarks/legalbench/run.py", "--queries", str(QUERIES), "--smoke"], tmp_path / "lb.json")
    assert data["results"]
    for mode in ("corpus", "corpus_no_glossary", "corpus_unrouted"):  # the product asked in each setting, per subset and ALL
        res = data["results"][mode]
        assert res["ALL"]["queries"] == data["data"]["queries_evaluated"] and "contractnli" in res["by_subset"]
        assert set(res["ALL"]["recall_at_k_pct"]) == {"1", "2", "4", "8", "16", "32", "64"}
    assert data["routing"]["documents_in_deal"] > data["data"]["documents_referenced"]  # routed among more than the gold files
    from retrieval_node.embedding import EMBEDDING_BACKENDS

    assert data["settings"]["embedding_backend"] in EMBEDDING_BACKENDS  # the one that ran, never "auto"


def test_embedding_backends_smoke(tmp_path):  # ~20 s: not marked slow
    pytest.importorskip("onnxruntime")
    data = _run(["benchmarks/embedding_backends.py", "--smoke"], tmp_path / "emb.json")
    res = data["results"]
    assert set(res) == {"torch", "torch-bf16", "onnx", "onnx-int8"} and all(r["best_chunks_per_s"] > 0 for r in res.values())
    assert res["onnx"]["cosine_vs_torch"]["min"] >= 0.9999 and res["onnx-int8"]["cosine_vs_torch"]["min"] >= 0.95
    assert res["torch-bf16"]["cosine_vs_torch"]["min"] >= 0.999


def test_risk_probe_packages_smoke(tmp_path):
    data = _run(["benchmarks/risk_probe_packages.py", "--smoke"], tmp_path / "pp.json")
    row = data["results"]["set_c"]["title"]  # one deal ingested through the normal path, its agent asked, the excerpt counted
    assert row["material"] == 1 and row["packed"] in (0, 1) and row["reported"] in (0, 1) and len(row["not_packed"]) == 1 - row["packed"]


def test_a_lookalike_naming_the_material_excerpts_registration_stays_out_of_its_deal():
    """The package benchmark does not put a material excerpt's benign twin (the same registration, discharged) in its
    deal: the twin would read as a later search of the same title and rightly supersede it."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    from risk_probe_packages import lookalikes_for

    material = {"id": "m1", "text": "771 204 118  03/02/2025  CAVEAT  RE: LIEN  $12,400 subsisting"}
    benign = [{"id": "b1", "text": "771204118 03/02/2025 CAVEAT RE: LIEN discharged 10/06/2025 by 771 905 002"},
              {"id": "b2", "text": "902 441 300  12/12/2019  UTILITY RIGHT OF WAY"},
              {"id": "b3", "text": "Roll 771-204-118 taxes paid in full"}]
    kept, twins = lookalikes_for(material, benign)
    assert twins == ["b1"] and [b["id"] for b in kept] == ["b2", "b3"]


def test_risk_scaling_smoke(tmp_path):
    data = _run(["benchmarks/risk_scaling.py", "--smoke"], tmp_path / "scaling.json")
    rows = data["results"]["rows"]
    assert [(r["text"], r["layout"]) for r in rows] == [(t, lay) for t in ("deal", "dense") for _ in range(2) for lay in ("lines", "flat")]
    assert all(r["material_settings"] > 0 for r in rows if r["text"] == "dense")  # every line of it names a risk
    for lined, flat in zip(rows[::2], rows[1::2], strict=True):  # the same words, every line break read as a space
        assert lined["chars"] == flat["chars"] and lined["lines"] > 1 and flat["lines"] == 1
        assert lined["ms"] >= 0 and flat["ms"] >= 0


def test_risk_layouts_reads_a_set_folder_in_every_layout(tmp_path, make_chunk):
    """benchmarks/risk_layouts.py on a one-deal set written here: each layout re-lays the chunks out, the flag is read
    per chunk and domain, and the gold material chunk is counted per layout; a CRLF line ending changes no flag."""
    deal = "2026-LAY-0001"
    register = make_chunk("INSTRUMENTS\nREGISTRATION     DATE         PARTICULARS\n252 118 407      2025-03-14   BUILDERS' LIEN\n"
                          "                              LIENOR: TAMARACK DRYWALL LTD.\n                              AMOUNT: $48,210.00",
                          deal_id=deal, document_id=f"{deal}/title.pdf")
    note = make_chunk("The seller's solicitor confirmed in writing that the\nsurvey shows no encroachment onto the road\nallowance.",
                      deal_id=deal, document_id=f"{deal}/letter.pdf", role="OTHER", section="GENERAL", page=2)
    root = _one_deal_set(tmp_path / "set", deal, [register, note])
    (root / "gold" / f"{deal}.json").write_text(json.dumps({"deal_id": deal, "intents": {
        "title_risk_scan_v1": {"material_chunk_ids": [register.chunk_id]}}}))
    data = _run(["benchmarks/risk_layouts.py", "--set-dir", str(root), "--smoke"], tmp_path / "layouts.json")
    rows = {r["layout"]: r for r in data["results"]["rows"]}
    assert set(rows) == {"crlf", "prose-joined", "prose-wrapped-40", "paragraphs-joined", "flat"}
    assert data["results"]["chunks"] == 2
    for r in rows.values():
        assert r["gold_material"] == 1 and r["gold_found_original"] == 1 and 0 <= r["gold_found"] <= 1
    assert rows["crlf"]["gold_found"] == 1 and not rows["crlf"]["flags_lost"] and not rows["crlf"]["flags_gained"]
    assert rows["prose-joined"]["chunks_changed"] == 1  # the letter's wrapped sentence; the register has no prose break


def test_risk_probe_smoke(tmp_path):
    data = _run(["benchmarks/risk_probe.py", "--smoke"], tmp_path / "probe.json")
    for name in ("set_a", "set_b", "set_c", "set_d", "set_e", "set_f", "set_g", "set_h", "set_i", "set_j", "set_k"):  # every set read, its excerpts counted as material or benign
        total = data["results"][name]["all"]
        assert total["material"] + total["benign"] == 10
        assert 0 <= total["found"] <= total["material"] and 0 <= total["false_alarms"] <= total["benign"]


@pytest.mark.slow
def test_risk_probe_embedding_smoke(tmp_path):
    data = _run(["benchmarks/risk_probe_embedding.py", "--smoke"], tmp_path / "emb.json")
    for name in ("set_c", "set_d", "set_f", "set_h"):  # each held-out set judged by the flag, the model and both together
        counts = data["results"][name]
        assert set(counts) == {"lexicon", "embedding", "either", "both"}
        assert counts["both"]["found"] <= min(counts["lexicon"]["found"], counts["embedding"]["found"]) <= counts["either"]["found"]
        assert all(c["material"] + c["benign"] == 12 for c in counts.values())


def test_legalbench_reopens_a_kept_store_with_the_backend_its_vectors_came_from(tmp_path, monkeypatch):
    """The runner loads the embedder itself and passes it in: for a kept store it must load the store's backend, not
    what the default (auto) would give a new store on this CPU (a bf16 CPU would otherwise have the store refuse it)."""
    import importlib.util
    import json

    monkeypatch.delenv("RETRIEVAL_NODE_EMBEDDING_BACKEND", raising=False)
    spec = importlib.util.spec_from_file_location("legalbench_run", REPO / "benchmarks" / "legalbench" / "run.py")
    run = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "legalbench_run", run)  # its dataclasses look their module up there
    monkeypatch.setattr(sys, "path", list(sys.path))  # it puts benchmarks/ on the path for its helpers
    spec.loader.exec_module(run)
    home = tmp_path / "store"
    home.mkdir()
    assert run.existing_store_engines(home) == {}  # a new store: the library's defaults
    (home / "store.json").write_text(json.dumps({"format": 1, "vector_backend": "edge", "mem0_vector_store": "edge",
                                                "embedding_backend": "torch-bf16"}))
    assert run.existing_store_engines(home)["embedding_backend"] == "torch-bf16"
    (home / "store.json").write_text(json.dumps({"format": 1, "vector_backend": "edge", "mem0_vector_store": "edge"}))
    assert run.existing_store_engines(home)["embedding_backend"] == "torch"  # written before backends
    monkeypatch.setenv("RETRIEVAL_NODE_EMBEDDING_BACKEND", "onnx")
    assert "embedding_backend" not in run.existing_store_engines(home)  # the environment still wins


def test_question_risks_runs_on_a_set_folder(tmp_path, make_chunk):
    """benchmarks/question_risks.py on a one-deal set written here (deals/ + gold/ as the dev sets lay them out): it
    fills the store, asks its questions and counts the gold material chunks of each asked kind that were packed."""
    deal = "2026-QRB-0001"
    minutes = make_chunk("Item 3. Roof. The reserve fund cannot cover the $640,000 roof replacement. The Board will present a funding "
                         "proposal of about $9,800 per unit at a general meeting in June, payable in two instalments.",
                         deal_id=deal, document_id=f"{deal}/minutes.pdf", role="CONDO_DOCS", section="CONDO_MINUTES", page=4)
    bylaw = make_chunk("Article 7. Levies. The Corporation may raise a special levy by special resolution of the owners.",
                       deal_id=deal, document_id=f"{deal}/bylaws.pdf", role="CONDO_DOCS", section="CONDO_BYLAWS", page=2)
    _one_deal_set(tmp_path / "set", deal, [minutes, bylaw])
    (tmp_path / "set" / "gold" / f"{deal}.json").write_text(json.dumps(
        {"deal_id": deal, "intents": {"condo_check": {"gold": [{"chunk_id": minutes.chunk_id, "kind": "material"}]}}}))
    data = _run(["benchmarks/question_risks.py", "--set-dir", str(tmp_path / "set"), "--store", str(tmp_path / "store")], tmp_path / "qr.json")
    assert data["by_kind"]["special_levy"] == {"packed": 1, "material": 1}
    assert data["by_kind"]["builders_lien"] == {"packed": 0, "material": 0}  # no lien in this deal: nothing asked of it
    assert [r["kind"] for r in data["rows"]] == ["special_levy"]


def test_deal_questions_scores_ranks_and_packages(tmp_path, make_chunk):
    """benchmarks/deal_questions.py on a one-deal set and a question file written here: the first answer chunk's rank
    comes from the product's ranking, package recall from the product's package; a bad question line is refused
    with its line and field named."""
    deal = "2026-DQB-0001"
    deposit = make_chunk("3.1 Deposit. The Buyer shall pay a deposit of $25,000 to the Seller's brokerage within two Business "
                         "Days after the Conditions are removed, to be held in trust.",
                         deal_id=deal, document_id=f"{deal}/contract.pdf", role="PURCHASE_AGREEMENT", section="GENERAL", page=2)
    possession = make_chunk("4.1 Possession. The Buyer takes vacant possession at noon on the Completion Day, 30 June 2026.",
                            deal_id=deal, document_id=f"{deal}/contract.pdf", role="PURCHASE_AGREEMENT", section="GENERAL", page=3)
    _one_deal_set(tmp_path / "set", deal, [deposit, possession])
    lines = [{"id": "a", "deal_id": deal, "split": "dev", "category": "fact", "question": "How much is the deposit and when is it due?",
              "gold": [{"chunk_id": deposit.chunk_id, "role": "answer"}]},
             {"id": "b", "deal_id": deal, "split": "held", "category": "fact", "question": "When does the buyer get possession?",
              "gold": [{"chunk_id": possession.chunk_id, "role": "answer"}, {"chunk_id": deposit.chunk_id, "role": "support"}]}]
    qfile = tmp_path / "q.jsonl"
    qfile.write_text("".join(json.dumps(x) + "\n" for x in lines))
    args = ["benchmarks/deal_questions.py", "--questions", str(qfile), "--set-dir", str(tmp_path / "set"), "--store", str(tmp_path / "store")]
    data = _run(args, tmp_path / "dq.json")
    assert [r["first_answer_rank"] for r in data["rows"]] == [1, 1]
    assert data["all"]["hit@1"] == 1.0 and data["all"]["answer_recall"] == 1.0
    assert data["all"]["support_recall"] == 1.0  # two chunks fit the default budget whole
    held = _run([*args, "--split", "held"], tmp_path / "held.json")
    assert [r["id"] for r in held["rows"]] == ["b"] and held["by_split"].keys() == {"held"}
    qfile.write_text(json.dumps({**lines[0], "gold": [{"chunk_id": deposit.chunk_id, "role": "support"}]}) + "\n")
    proc = subprocess.run([sys.executable, *args], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode != 0 and "q.jsonl:1: no gold chunk with role 'answer'" in proc.stderr
