#!/usr/bin/env python
"""LegalBench-RAG retrieval quality of the product: character-level P@k / R@k and recall at token budgets.

The runner has no ranking code of its own (issue 19): it ingests the corpus as one deal and asks the product's
question retrieval (``RetrievalAgent.rank_question``, the ranking ``RetrievalAgent.ask`` packs from;
``retrieval_node/question.py`` and ``retrieval_node/routing.py``).

1. **Chunk** every indexed document with an offset-keeping recursive splitter (``_chunking.py``: legal-text
   boundaries, at most ``--chunk-chars`` characters, chunks tile the text) and build ``DocumentChunk`` s: one deal
   ``legalbench-c<chars>`` for the whole corpus folder, ``document_id`` the file path relative to the corpus (so
   a query file that mixes subsets routes among all of them), role OTHER, section GENERAL, each chunk its own
   "page" (its position in the document: a text file has no pages, and reading order is what the product's
   neighbour smoothing needs), cl100k ``token_count``, ``metadata.char_start`` / ``char_end``.
2. **Index** (``--index``): the documents the evaluated queries reference plus ``--others`` more drawn with
   ``--seed`` from the rest of the corpus folder (every subset; files up to ``--others-max-kb``), or ``all``.
   Ingest through ``Ingestor(store)`` into a store kept in ``--workdir``; offsets are read back and checked.
3. **Ask** each query, the full text ("Consider <document>; <question>"), with the evaluation trust:
   * ``corpus`` — the product as shipped: routing among every document of the deal, glossary on;
   * ``corpus_no_glossary`` — the same without ``configs/glossary.yaml`` (the vocabulary's effect, reported apart);
   * ``corpus_unrouted`` — the paper's setting: no routing, one index, the description kept in the question (its
     names still weigh the documents whose name or opening they match: ``QuestionSettings.document_weight``);
   * ``corpus_unrouted_no_evidence`` (on request) — the same without that document evidence (chunk scores only).
   No gold information reaches the product; the router's accuracy is also measured over *every* file of the
   corpus folder (``routing.folder``), indexed or not, with the product's ``DocumentRouter``.
4. **Score** with the paper's protocol (``_metrics.py``, checked against brute force at start-up): P@k / R@k for
   k = 1..64 over merged retrieved ranges, and recall when the ranked chunks are packed into 512..8k cl100k tokens;
   per subset and ALL (the unweighted mean of the subsets).

    python benchmarks/legalbench/run.py --queries ../shared/bench/legalbench-rag/queries/contractnli_dev.json
    python benchmarks/legalbench/run.py --queries .../maud_dev.json --subset-limit 120 --seed 7
    python benchmarks/legalbench/run.py --queries .../contractnli_dev.json --smoke    # < 90 s

Writes ``benchmarks/results/legalbench_<name>.json`` (``_smoke`` for ``--smoke``; ``--out`` overrides).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import numpy as np
from _chunking import chunk_spans
from _chunking import self_check as chunking_self_check
from _common import (
    RESULTS_DIR,
    machine_info,
    now_iso,
    peak_rss_mb,
    print_machine,
    table,
    write_result,
)
from _data import (
    DEFAULT_DATA,
    Query,
    load_queries,
    read_document,
    sample_by_document,
)
from _metrics import BUDGETS, KS, at_k, recall_at_budgets
from _metrics import self_check as metrics_self_check

NAME = "legalbench"
SMOKE_QUERIES = 6
SMOKE_DOCS = 2
SMOKE_MAX_DOC_CHARS = 40_000
MODES = ("corpus", "corpus_no_glossary", "corpus_unrouted", "corpus_unrouted_no_evidence")
DEFAULT_MODES = MODES[:3]


# --------------------------------------------------------------------------- chunks and ingest


@dataclass(slots=True)
class DocIndex:
    """The indexed chunks of one document, in reading order (to map the product's chunk ids back to spans)."""

    file: str
    chunk_ids: list[str] = field(default_factory=list)
    ranges: list[list[tuple[int, int]]] = field(default_factory=list)  # every occurrence of the chunk's text
    tokens: list[int] = field(default_factory=list)


def build_chunks(corpus: Path, files: list[str], deal_id: str, max_chars: int, counter: Any) -> tuple[dict[str, list[Any]], dict[str, Any]]:
    """``DocumentChunk`` s per file, plus chunking statistics."""
    from retrieval_node.models import DocumentChunk

    out: dict[str, list[Any]] = {}
    sizes: list[int] = []
    dupes = 0
    for f in files:
        text = read_document(corpus, f)
        spans = chunk_spans(text, max_chars)
        where: dict[str, list[tuple[int, int]]] = {}
        for s, e in spans:
            where.setdefault(text[s:e], []).append((s, e))
        chunks = []
        for page, (content, occ) in enumerate(where.items(), start=1):
            s, e = occ[0]
            meta: dict[str, Any] = {"char_start": s, "char_end": e, "source_chars": len(text)}
            if len(occ) > 1:
                meta["occurrences"] = [list(o) for o in occ]
                dupes += len(occ) - 1
            chunks.append(DocumentChunk.build(
                deal_id=deal_id, document_id=f, document_role="OTHER", page_start=page, page_end=page,
                section_type="GENERAL", content=content, token_count=counter.count(content), metadata=meta,
            ))
            sizes.append(e - s)
        out[f] = chunks
    stats = {
        "documents": len(files),
        "chunks": sum(len(v) for v in out.values()),
        "duplicate_texts_folded": dupes,
        "chars_mean": round(statistics.mean(sizes), 1) if sizes else 0,
        "chars_median": statistics.median(sizes) if sizes else 0,
        "chars_max": max(sizes) if sizes else 0,
    }
    return out, stats


def ingest(store: Any, chunks: dict[str, list[Any]], jsonl_dir: Path, *, max_minutes: float | None, log: bool) -> dict[str, Any]:
    """Write one JSONL per document and ingest them with our Ingestor, a few documents per call."""
    from retrieval_node.ingest import Ingestor

    jsonl_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, (f, cs) in enumerate(chunks.items()):
        p = jsonl_dir / f"{i:05d}.jsonl"
        p.write_text("".join(c.model_dump_json() + "\n" for c in cs), encoding="utf-8")
        paths.append((f, p, len(cs)))
    ingestor = Ingestor(store)
    totals = {"ingested": 0, "unchanged": 0, "rejected": 0, "repaired": 0, "rejections": []}
    t0 = time.perf_counter()
    done_chunks = 0
    total_chunks = sum(n for _f, _p, n in paths)
    stopped = False
    batch: list[tuple[str, Path, int]] = []

    def flush() -> None:
        nonlocal done_chunks
        if not batch:
            return
        rep = ingestor.ingest([p for _f, p, _n in batch])
        totals["ingested"] += rep.ingested
        totals["unchanged"] += rep.unchanged
        totals["repaired"] += rep.repaired
        totals["rejected"] += len(rep.rejected)
        totals["rejections"].extend(r.model_dump() for r in rep.rejected[:20])
        done_chunks += sum(n for _f, _p, n in batch)
        batch.clear()
        if log:
            el = time.perf_counter() - t0
            print(f"  ingest: {done_chunks:,}/{total_chunks:,} chunks, {el:,.0f} s, "
                  f"{totals['ingested'] / el if el else 0:,.1f} new chunks/s", flush=True)

    for item in paths:
        if max_minutes is not None and time.perf_counter() - t0 > max_minutes * 60:
            stopped = True
            break
        batch.append(item)
        if sum(n for _f, _p, n in batch) >= 500:
            flush()
    if not stopped:
        flush()
    totals["seconds"] = round(time.perf_counter() - t0, 2)
    totals["stopped_by_time_limit"] = stopped
    totals["new_chunks_per_s"] = round(totals["ingested"] / totals["seconds"], 2) if totals["seconds"] else None
    return totals


def _record_ingest(workdir: Path, report: dict[str, Any], date: str) -> list[dict[str, Any]]:
    """Append this run's ingest figures to ``<workdir>/ingest_history.json`` and return the history."""
    import json

    path = workdir / "ingest_history.json"
    try:
        history = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        history = []
    history.append({"date": date, **{k: v for k, v in report.items() if k != "rejections"}})
    path.write_text(json.dumps(history, indent=1), encoding="utf-8")
    return history


def load_index(store: Any, deal_id: str, corpus: Path, files: list[str]) -> tuple[dict[str, DocIndex], dict[str, Any]]:
    """Every indexed chunk of the wanted files, read back from the store, offsets checked against the source."""
    wanted = set(files)
    docs: dict[str, DocIndex] = {f: DocIndex(f) for f in files}
    texts = {f: read_document(corpus, f) for f in files}
    payloads = [p for p in store.chunks.deal_payloads(deal_id) if p.get("document_id") in wanted and "content" in p]
    bad = 0
    windows = 0
    for p in sorted(payloads, key=lambda p: (p["document_id"], p["stage0_metadata"]["char_start"])):
        meta = p["stage0_metadata"]
        f = p["document_id"]
        occ = [tuple(o) for o in meta.get("occurrences") or [(meta["char_start"], meta["char_end"])]]
        if any(texts[f][s:e] != p["content"] for s, e in occ):
            bad += 1
            continue
        d = docs[f]
        d.chunk_ids.append(p["chunk_id"])
        d.ranges.append(occ)
        d.tokens.append(int(p["token_count"]))
        windows += int(p.get("n_windows", 1))
    registered = store.registry.registered_chunk_ids(deal_id)
    ids = {c for d in docs.values() for c in d.chunk_ids}
    info = {
        "chunks_in_index": len(ids),
        "windows_in_index": windows,
        "offset_mismatches": bad,
        "registered_in_mem0": len(ids & registered),
        "documents_missing": sorted(f for f, d in docs.items() if not d.chunk_ids),
    }
    return docs, info


def existing_store_engines(home: Path) -> dict[str, str]:
    """Engines and embedding backend an existing store was built with, so a kept store opens after the library's
    defaults changed (the embedder this runner loads and passes in must be the store's).

    ``store.json`` when present; a store from before the manifest with Mem0 in
    qdrant-client local mode (``qdrant/collection/<prefix>_mem0``, no ``mem0_edge``)
    reads as ``mem0_vector_store: qdrant``. Environment settings still win.
    """
    import json

    out: dict[str, str] = {}
    manifest = home / "store.json"
    if manifest.exists():
        try:
            recorded = json.loads(manifest.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        out = {k: str(recorded[k]) for k in ("vector_backend", "mem0_vector_store") if k in recorded}
        # the backend its vectors come from (a manifest from before backends: torch); the embedder is loaded with it
        out["embedding_backend"] = str(recorded.get("embedding_backend", "torch")) if isinstance(recorded, dict) else "torch"
    elif (home / "qdrant" / "collection").is_dir() and any((home / "qdrant" / "collection").glob("*_mem0")) and not (home / "mem0_edge").exists():
        out = {"mem0_vector_store": "qdrant"}
    return {k: v for k, v in out.items() if f"RETRIEVAL_NODE_{k.upper()}" not in os.environ}


# --------------------------------------------------------------------------- retrieval


@dataclass(slots=True)
class Ranked:
    spans: list[tuple[str, int, int]]     # one range per ranked occurrence
    tokens: list[int]
    chunk_ids: list[str]


def to_spans(chunk_ids: list[str], where: dict[str, tuple[DocIndex, int]], depth: int | None = None) -> Ranked:
    """The product's ranked chunk ids as character ranges of the source files (every occurrence of a folded text)."""
    spans, toks, ids = [], [], []
    for cid in chunk_ids[:depth] if depth else chunk_ids:
        hit = where.get(cid)
        if hit is None:
            continue
        d, i = hit
        for k, (a, b) in enumerate(d.ranges[i]):
            spans.append((d.file, a, b))
            toks.append(d.tokens[i] if k == 0 else 0)  # the text is read once, whichever places it stands for
            ids.append(cid)
    return Ranked(spans, toks, ids)


# --------------------------------------------------------------------------- evaluation


def score(ranked: Ranked, gold: tuple[tuple[str, int, int], ...]) -> dict[str, Any]:
    pk = at_k(ranked.spans, gold)
    rb = recall_at_budgets(ranked.spans, ranked.tokens, gold)
    return {"p": {k: pk[k][0] for k in KS}, "r": {k: pk[k][1] for k in KS}, "budget": {b: rb[b] for b in BUDGETS}}


def aggregate(rows: list[dict[str, Any]]) -> dict[str, Any]:
    n = len(rows)
    if not n:
        return {"queries": 0}
    mean = lambda xs: round(100 * sum(xs) / len(xs), 2)
    return {
        "queries": n,
        "precision_at_k_pct": {str(k): mean([r["p"][k] for r in rows]) for k in KS},
        "recall_at_k_pct": {str(k): mean([r["r"][k] for r in rows]) for k in KS},
        "recall_at_tokens_pct": {str(b): mean([r["budget"][b] for r in rows]) for b in BUDGETS},
    }


def ranx_metrics(runs: dict[str, dict[str, dict[str, float]]], qrels: dict[str, dict[str, int]], doc_runs: dict[str, dict[str, float]], doc_qrels: dict[str, dict[str, int]]) -> dict[str, Any]:
    """Chunk-level hit rate / MRR / nDCG (relevant = overlaps a gold span) and routing accuracy, via ranx."""
    import warnings

    warnings.filterwarnings("ignore", module="ranx")
    warnings.filterwarnings("ignore", message=".*unsafe cast.*")
    from ranx import Qrels, Run, evaluate

    out: dict[str, Any] = {}
    metrics = ["hit_rate@1", "hit_rate@4", "hit_rate@16", "hit_rate@64", "mrr@64", "ndcg@10"]
    q = Qrels({k: v for k, v in qrels.items() if v})
    for mode, run in runs.items():
        r = Run({k: v for k, v in run.items() if k in q.qrels})
        res = evaluate(q, r, metrics, make_comparable=True)
        out[mode] = {m: round(float(res[m]), 4) for m in metrics}
    if doc_runs:
        res = evaluate(Qrels(doc_qrels), Run(doc_runs), ["hit_rate@1", "mrr@10"], make_comparable=True)
        out["routing"] = {m: round(float(v), 4) for m, v in res.items()}
    return out


# --------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--queries", required="--self-check" not in (argv if argv is not None else sys.argv[1:]),
                    help="a LegalBench-RAG query file ({'tests': [...]}); it may mix subsets")
    ap.add_argument("--self-check", action="store_true", help="only check the span metrics against brute force and the chunker's tiling (no model, a second)")
    ap.add_argument("--corpus", default=None, help="corpus folder (default: corpus/ beside the queries/ folder of --queries, else $LEGALBENCH_RAG_DIR/corpus)")
    ap.add_argument("--subset-limit", type=int, default=None, help="at most N queries, whole documents at a time (seeded)")
    ap.add_argument("--smoke", action="store_true", help=f"{SMOKE_QUERIES} queries over {SMOKE_DOCS} short documents + 2 others, fresh temporary store, no ranx (< 90 s)")
    ap.add_argument("--index", choices=("referenced", "all"), default="referenced",
                    help="the deal holds the documents the queries reference plus --others more (referenced), or every file of the corpus folder (all)")
    ap.add_argument("--others", type=int, default=10, help="documents not referenced by any evaluated query added to the deal (drawn with --seed)")
    ap.add_argument("--others-max-kb", type=float, default=60.0, help="only files up to this size are drawn as --others (ingest cost)")
    ap.add_argument("--chunk-chars", type=int, default=500, help="maximum characters per chunk")
    ap.add_argument("--modes", default=",".join(DEFAULT_MODES), help=f"comma-separated subset of {','.join(MODES)} (default: the first three)")
    ap.add_argument("--workdir", default=None, help="store + JSONL directory (default: <tmp>/retrieval-node-legalbench/<deal id>; kept between runs)")
    ap.add_argument("--fresh", action="store_true", help="delete the workdir first")
    ap.add_argument("--max-ingest-minutes", type=float, default=None, help="stop ingesting after this long (resume by running again)")
    ap.add_argument("--ingest-only", action="store_true")
    ap.add_argument("--no-ranx", action="store_true", help="skip the ranx metrics (numba compiles them on first use)")
    ap.add_argument("--seed", type=int, default=20240811)
    ap.add_argument("--out", default=None, help="result file (default benchmarks/results/legalbench_<query file stem>[_smoke].json)")
    ap.add_argument("--quiet", action="store_true")
    return ap.parse_args(argv)


def _subset(f: str) -> str:
    return f.split("/", 1)[0] if "/" in f else "corpus"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    t_start = time.perf_counter()
    started = now_iso()
    log = not args.quiet
    metrics_self_check(300 if args.smoke else 2000)
    chunking_self_check()
    if args.self_check:
        if log:
            print("self-check: span metrics equal brute force on 2,000 random cases; chunks tile their text")
        return {"self_check": "ok"}

    qpath = Path(args.queries).resolve()
    corpus = Path(args.corpus) if args.corpus else (qpath.parent.parent / "corpus" if (qpath.parent.parent / "corpus").is_dir() else DEFAULT_DATA / "corpus")
    all_queries = load_queries(qpath)
    name = qpath.stem
    deviations: list[str] = []
    folder = sorted(str(p.relative_to(corpus)) for p in corpus.rglob("*.txt"))
    sizes = {f: (corpus / f).stat().st_size for f in folder}

    # ---- which queries, which documents (the gold files choose what is indexed, never what a query is routed among)
    if args.smoke:
        by_doc: dict[str, list[Query]] = defaultdict(list)
        for q in all_queries:
            by_doc[q.gold_files[0]].append(q)
        small = sorted((f for f in by_doc if sizes.get(f, 0) <= SMOKE_MAX_DOC_CHARS), key=lambda f: (sizes.get(f, 0), f)) or sorted(by_doc, key=lambda f: sizes.get(f, 0))
        docs_pick = small[:SMOKE_DOCS]
        queries = sorted([q for f in docs_pick for q in by_doc[f][: SMOKE_QUERIES // SMOKE_DOCS]], key=lambda q: q.index)
        args.others = min(args.others, 2)
        args.others_max_kb = min(args.others_max_kb, 10.0)
        deviations.append(f"smoke run: {len(queries)} queries over the {len(docs_pick)} shortest referenced documents; not a benchmark figure")
    else:
        queries = sample_by_document(all_queries, args.subset_limit, args.seed)
        if len(queries) < len(all_queries):
            deviations.append(f"--subset-limit {args.subset_limit}: {len(queries)} of {len(all_queries)} queries, "
                              f"all queries of {len({q.gold_files[0] for q in queries})} documents sampled with seed {args.seed}")
    referenced = sorted({f for q in queries for f in q.gold_files})
    if args.index == "all":
        indexed = sorted(set(folder) | set(referenced))
        others: list[str] = []
    else:
        pool = [f for f in folder if f not in set(referenced) and sizes[f] <= args.others_max_kb * 1000]
        others = sorted(random.Random(args.seed).sample(pool, min(args.others, len(pool))))
        indexed = sorted(set(referenced) | set(others))
        deviations.append(f"the deal holds the {len(referenced)} referenced documents and {len(others)} others drawn with seed {args.seed} "
                          f"from the {len(folder)} files of the corpus folder (files <= {args.others_max_kb:g} KB); the product routes among "
                          f"these {len(indexed)}; routing.folder measures the same router over all {len(folder)} files")

    # ---- store
    from retrieval_node.agent import RetrievalAgent
    from retrieval_node.config import load_config
    from retrieval_node.embedding import SentenceTransformerEmbedder
    from retrieval_node.evaluation import EVAL_TRUST
    from retrieval_node.question import QuestionSettings, parse_question
    from retrieval_node.routing import DocumentDescription, DocumentRouter
    from retrieval_node.store import Store
    from retrieval_node.tokens import TiktokenCounter

    deal_id = f"legalbench-c{args.chunk_chars}"
    tmp_root: Path | None = None
    if args.smoke and not args.workdir:
        tmp_root = Path(tempfile.mkdtemp(prefix="rn-legalbench-smoke-"))
        workdir = tmp_root
    else:
        workdir = Path(args.workdir) if args.workdir else Path(tempfile.gettempdir()) / "retrieval-node-legalbench" / deal_id
    if args.fresh and workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    engines = existing_store_engines(workdir / "store")
    config = load_config(environ={**os.environ, **{f"RETRIEVAL_NODE_{k.upper()}": v for k, v in engines.items()}})
    rc = config.retrieval
    if engines:
        deviations.append(f"existing store opened with the engines it was built with: {engines}")

    if log:
        print(f"LegalBench-RAG {name}: {len(queries)} queries, {len(indexed)} documents in deal {deal_id} "
              f"({len(referenced)} referenced + {len(indexed) - len(referenced)} others), chunks <= {args.chunk_chars} chars, store {workdir}", flush=True)
    timings: dict[str, float] = {}
    t = time.perf_counter()
    embedder = SentenceTransformerEmbedder.load(rc.embedding_model, path=rc.embedding_model_path, batch_size=rc.embedding_batch_size,
                                              backend=rc.embedding_backend, onnx_dir=rc.embedding_onnx_dir)
    counter = TiktokenCounter(rc.tokenizer_encoding)
    timings["model_load_s"] = round(time.perf_counter() - t, 2)

    t = time.perf_counter()
    chunks, chunk_stats = build_chunks(corpus, indexed, deal_id, args.chunk_chars, counter)
    timings["chunking_s"] = round(time.perf_counter() - t, 2)

    store = Store.open(workdir / "store", config=config, embedder=embedder)
    try:
        t = time.perf_counter()
        ingest_report = ingest(store, chunks, workdir / "jsonl", max_minutes=args.max_ingest_minutes, log=log)
        timings["ingest_s"] = round(time.perf_counter() - t, 2)
        ingest_history = _record_ingest(workdir, ingest_report, started)
        if ingest_report["rejected"]:
            deviations.append(f"{ingest_report['rejected']} chunk lines rejected by the ingest")
        if ingest_report["stopped_by_time_limit"]:
            deviations.append(f"ingest stopped after --max-ingest-minutes {args.max_ingest_minutes}; documents not yet indexed score 0")
        if args.ingest_only:
            if log:
                print(f"ingest only: {ingest_report['ingested']} new, {ingest_report['unchanged']} unchanged, {ingest_report['rejected']} rejected")
            return {"ingest": ingest_report}

        t = time.perf_counter()
        docs, index_info = load_index(store, deal_id, corpus, indexed)
        timings["load_index_s"] = round(time.perf_counter() - t, 2)
        if index_info["offset_mismatches"]:
            raise SystemExit(f"{index_info['offset_mismatches']} stored chunks do not match their source offsets")
        where = {cid: (d, i) for d in docs.values() for i, cid in enumerate(d.chunk_ids)}

        modes = [m for m in args.modes.split(",") if m]
        unknown = set(modes) - set(MODES)
        if unknown:
            raise SystemExit(f"unknown mode(s) {sorted(unknown)}; choose from {MODES}")
        agent = RetrievalAgent(store, trust=EVAL_TRUST)
        stage = agent.pipeline.questions
        mode_settings = {"corpus": QuestionSettings(), "corpus_no_glossary": QuestionSettings(glossary=False),
                         "corpus_unrouted": QuestionSettings(routing=False),
                         "corpus_unrouted_no_evidence": QuestionSettings(routing=False, document_weight=0.0)}

        # the router alone over every file of the corpus folder (indexed or not): what "routing among all documents" gives
        t = time.perf_counter()
        folder_router = DocumentRouter([DocumentDescription(f, "OTHER", "", read_document(corpus, f)[:2000]) for f in folder])
        folder_ok = 0
        for q in queries:
            pq = parse_question(q.text)
            folder_ok += bool(pq.hint) and folder_router.route(pq.hint)[:1] == [q.gold_files[0]]
        timings["folder_routing_s"] = round(time.perf_counter() - t, 2)

        rows: dict[str, list[dict[str, Any]]] = {m: [] for m in modes}
        runs: dict[str, dict[str, dict[str, float]]] = {m: {} for m in modes}
        qrels: dict[str, dict[str, int]] = {}
        per_query: list[dict[str, Any]] = [{"index": q.index, "gold_files": list(q.gold_files), "question": q.question} for q in queries]
        routed_ok = 0
        retrieve_ms: dict[str, list[float]] = {m: [] for m in modes}
        embed_ms: dict[str, list[float]] = {m: [] for m in modes}
        t = time.perf_counter()
        for n, q in enumerate(queries):
            qrels[f"q{q.index}"] = {cid: 1 for f in q.gold_files if f in docs for cid, rr in zip(docs[f].chunk_ids, docs[f].ranges, strict=True)
                                    if any(a < e and s < b for a, b in rr for gf, s, e in q.gold if gf == f)}
        for m in modes:
            stage.settings = mode_settings[m]
            for n, q in enumerate(queries):
                t0 = time.perf_counter()
                agent.pipeline.query_vector(stage.parse(q.text).body)  # the embedding, timed apart (MiniLM, one text)
                embed_ms[m].append((time.perf_counter() - t0) * 1000)
                t0 = time.perf_counter()
                result = agent.rank_question(deal_id, q.text)  # warm: parse, route, search, score (query vector cached)
                retrieve_ms[m].append((time.perf_counter() - t0) * 1000)
                ranked = to_spans([s.chunk.chunk_id for s in result.scored], where)
                sc = score(ranked, q.gold)
                rows[m].append(sc)
                run: dict[str, float] = {}
                for rank, cid in enumerate(ranked.chunk_ids[:64]):
                    run.setdefault(cid, float(64 - rank))
                runs[m][f"q{q.index}"] = run
                rec = per_query[n]
                rec[m] = {"routed": result.routed, "p@1": round(sc["p"][1], 4), "r@1": round(sc["r"][1], 4), "r@8": round(sc["r"][8], 4),
                          "r@64": round(sc["r"][64], 4), "r@2k_tokens": round(sc["budget"][2048], 4)}
                if m == "corpus":
                    routed_ok += result.routed[:1] == [q.gold_files[0]]
                    rec["concepts"] = list(stage.parse(q.text).concepts)
                if log and (n + 1) % 200 == 0:
                    print(f"  {m}: {n + 1}/{len(queries)}", flush=True)
        stage.settings = QuestionSettings()
        timings["retrieval_and_scoring_s"] = round(time.perf_counter() - t, 2)

        results: dict[str, Any] = {}
        for m in modes:
            res = aggregate(rows[m])
            by_subset: dict[str, list[dict[str, Any]]] = defaultdict(list)
            for q, row in zip(queries, rows[m], strict=True):
                by_subset[_subset(q.gold_files[0])].append(row)
            res["by_subset"] = {k: aggregate(v) for k, v in sorted(by_subset.items())}
            res["ALL"] = _mean_of(list(res["by_subset"].values()))
            by_q: dict[str, list[dict[str, Any]]] = defaultdict(list)
            for q, row in zip(queries, rows[m], strict=True):
                by_q[q.question].append(row)
            if len(by_q) <= 40:
                res["by_question"] = {k: {"queries": len(v), "p@1_pct": round(100 * statistics.mean(r["p"][1] for r in v), 1),
                                          "r@8_pct": round(100 * statistics.mean(r["r"][8] for r in v), 1),
                                          "r@64_pct": round(100 * statistics.mean(r["r"][64] for r in v), 1)}
                                      for k, v in sorted(by_q.items(), key=lambda kv: -len(kv[1]))}
            res["retrieval_ms_p50"] = round(statistics.median(retrieve_ms[m]), 2) if retrieve_ms[m] else None  # query vector cached
            res["retrieval_ms_p95"] = round(float(np.percentile(retrieve_ms[m], 95)), 2) if retrieve_ms[m] else None
            res["embed_ms_p50"] = round(statistics.median(embed_ms[m]), 2) if embed_ms[m] else None
            results[m] = res
        with_hint = sum(1 for q in queries if parse_question(q.text).hint)
        routing = {"queries_with_hint": with_hint, "top1_correct": routed_ok,
                   "accuracy_pct": round(100 * routed_ok / with_hint, 2) if with_hint else None,
                   "documents_in_deal": len(indexed),
                   "folder": {"documents": len(folder), "top1_correct": folder_ok,
                              "accuracy_pct": round(100 * folder_ok / with_hint, 2) if with_hint else None}}
        if not args.no_ranx and not args.smoke:
            t = time.perf_counter()
            results["ranx"] = ranx_metrics(runs, qrels, {}, {})
            timings["ranx_s"] = round(time.perf_counter() - t, 2)
        store_counts = {"vector_points": store.chunks.count()}
        agent.close()
    finally:
        store.close()
        if tmp_root is not None:
            shutil.rmtree(tmp_root, ignore_errors=True)

    timings["total_s"] = round(time.perf_counter() - t_start, 2)
    settings = {
        "queries_file": str(qpath),
        "corpus": str(corpus),
        "deal_id": deal_id,
        "smoke": args.smoke,
        "subset_limit": args.subset_limit,
        "seed": args.seed,
        "index": args.index,
        "others": len(others),
        "chunking": {"method": "recursive, legal-text boundaries (blank line, line, 3+ spaces, sentence/clause end, comma, space), tiling, no overlap",
                     "max_chars": args.chunk_chars},
        "retrieval": "RetrievalAgent.rank_question (retrieval_node/question.py, routing.py) with the evaluation trust; the full query text",
        "modes": {m: {"routing": mode_settings[m].routing, "glossary": mode_settings[m].glossary,
                      "document_weight": mode_settings[m].document_weight} for m in modes},
        "glossary_concepts": len(config.glossary.concepts),
        "embedding_model": rc.embedding_model,
        "embedding_backend": embedder.backend,  # the one that ran (the configured one may be auto)
        "vector_backend": rc.vector_backend,
        "tokenizer": rc.tokenizer_encoding,
        "ks": list(KS),
        "token_budgets": list(BUDGETS),
        "workdir": None if tmp_root else str(workdir),
    }
    payload = {
        "benchmark": f"{NAME}_{name}",
        "date": started,
        "finished": now_iso(),
        "command": "python " + " ".join([os.path.relpath(__file__, Path.cwd()) if not os.path.isabs(sys.argv[0]) else sys.argv[0]] + (argv if argv is not None else sys.argv[1:])),
        "machine": machine_info(),
        "settings": settings,
        "deviations": deviations,
        "data": {"queries_in_file": len(all_queries), "queries_evaluated": len(queries), "documents_referenced": len(referenced),
                 "documents_in_folder": len(folder), "documents_indexed": len(indexed), "others": others},
        "chunks": chunk_stats,
        "ingest": ingest_report,
        "ingest_history": ingest_history,
        "index": index_info,
        "store": store_counts,
        "routing": routing,
        "results": results,
        "timings": timings,
        "peak_rss_mb": peak_rss_mb(),
        "per_query": per_query,
        "reference": {"paper_best_row_mini": {"contractnli_r64": 61.72, "maud_r64": 28.28, "avg_p1": 6.41, "avg_r64": 62.22},
                      "targets_issue19": {"p1": 35.0, "r8": 75.0, "r64": 95.0, "r2k_tokens": 85.0}},
    }
    out = Path(args.out) if args.out else RESULTS_DIR / f"{NAME}_{name}{'_smoke' if args.smoke else ''}.json"
    write_result(out, payload)
    if log:
        print_report(payload, out)
    return payload


def _mean_of(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """The unweighted mean of per-subset aggregates (ALL)."""
    parts = [p for p in parts if p.get("queries")]
    if not parts:
        return {"queries": 0}
    out: dict[str, Any] = {"queries": sum(p["queries"] for p in parts), "subsets": len(parts)}
    for key in ("precision_at_k_pct", "recall_at_k_pct", "recall_at_tokens_pct"):
        out[key] = {k: round(statistics.mean(p[key][k] for p in parts), 2) for k in parts[0][key]}
    return out


def print_report(payload: dict[str, Any], out: Path) -> None:
    print()
    print_machine(payload["machine"])
    s = payload["settings"]
    print(f"{payload['benchmark']}: {payload['data']['queries_evaluated']} queries, deal of {payload['data']['documents_indexed']} documents, "
          f"{payload['index']['chunks_in_index']:,} chunks / {payload['index']['windows_in_index']:,} windows; chunks <= {s['chunking']['max_chars']} chars")
    r = payload["routing"]
    if r["queries_with_hint"]:
        print(f"routing (product, among the deal's {r['documents_in_deal']} documents): {r['top1_correct']}/{r['queries_with_hint']} to the gold document "
              f"({r['accuracy_pct']} %); router over all {r['folder']['documents']} files of the corpus folder: {r['folder']['top1_correct']} "
              f"({r['folder']['accuracy_pct']} %)")
    headers = ["mode", "P@1", *[f"R@{k}" for k in KS], *[f"R@{b // 1024}k" if b >= 1024 else f"R@{b}" for b in BUDGETS]]
    rows = []
    for m in s["modes"]:
        for sub, res in [("ALL", payload["results"][m]["ALL"]), *payload["results"][m]["by_subset"].items()]:
            if not res.get("queries"):
                continue
            rows.append([f"{m} {sub}", res["precision_at_k_pct"]["1"], *[res["recall_at_k_pct"][str(k)] for k in KS],
                         *[res["recall_at_tokens_pct"][str(b)] for b in BUDGETS]])
    print("character-level, % (R@Nk = recall at N·1024 cl100k tokens)")
    print(table(headers, rows))
    prow = [[m, *[payload["results"][m]["ALL"]["precision_at_k_pct"][str(k)] for k in KS]] for m in s["modes"] if payload["results"][m]["ALL"].get("queries")]
    print("precision@k, %")
    print(table(["mode", *[f"P@{k}" for k in KS]], prow))
    first = next((m for m in s["modes"] if payload["results"][m].get("by_question")), None)
    if first and len(payload["results"][first]["by_question"]) > 1:
        bq = payload["results"][first]["by_question"]
        print(f"per question ({first} mode), %")
        print(table(["question", "n", "P@1", "R@8", "R@64"], [[k[:70], v["queries"], v["p@1_pct"], v["r@8_pct"], v["r@64_pct"]] for k, v in bq.items()]))
    if "ranx" in payload["results"]:
        rx = payload["results"]["ranx"]
        keys = ["hit_rate@1", "hit_rate@4", "hit_rate@16", "hit_rate@64", "mrr@64", "ndcg@10"]
        print("chunk level (ranx; relevant = overlaps a gold span)")
        print(table(["mode", *keys], [[m, *[rx[m][k] for k in keys]] for m in s["modes"] if m in rx], digits=3))
    for d in payload["deviations"]:
        print(f"note: {d}")
    t = payload["timings"]
    print(f"time: {t['total_s']:,.0f} s (ingest {t['ingest_s']:,.0f} s, {payload['ingest']['ingested']:,} new / {payload['ingest']['unchanged']:,} unchanged chunks; "
          f"retrieval + scoring {t['retrieval_and_scoring_s']:,.1f} s); peak RSS {payload['peak_rss_mb']:,.0f} MB")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
