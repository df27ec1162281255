#!/usr/bin/env python
"""LegalBench-RAG retrieval quality of the node: character-level P@k / R@k and recall at token budgets.

What runs (issue 7, "LegalBench-RAG"):

1. **Chunk** every indexed document of the subset with an offset-keeping recursive
   splitter (``_chunking.py``: legal-text boundaries, at most ``--chunk-chars``
   characters, chunks tile the text) and build ``DocumentChunk`` s with
   ``DocumentChunk.build``: ``deal_id`` one id per subset (and chunk size),
   ``document_id`` the file path relative to the corpus, role OTHER, section
   GENERAL, pages 1-1, cl100k ``token_count`` from ``TiktokenCounter``, and
   ``metadata.char_start`` / ``char_end`` (``occurrences`` when the same text occurs
   more than once in a document: the chunk id is content-derived, so the copies are one chunk).
2. **Ingest** through our own path: one JSONL file per document, then
   ``Ingestor(store).ingest([...])`` into ``Store.open(workdir, embedder=...)``
   (line validation, MiniLM windows, qdrant-edge index, Mem0 registry). The store is
   kept in ``--workdir``: a re-run finds every chunk unchanged and only evaluates;
   an interrupted ingest resumes. Offsets are read back from the store's payloads
   and checked against the source text before anything is scored.
3. **Retrieve** each query (``_routing.py`` / ``_ranking.py``):
   * the "Consider <document>;" part routes to one document (file name + first lines;
     every file of the subset's corpus folder is a candidate, indexed or not);
   * that document's chunks are ranked by the question (the part after ';', generic
     lead-in such as "What is the" dropped): dense = ``store.chunks.search(query_vec,
     SearchScope(deal_id, chunk_ids=<the document's chunks>), limit=<its windows>)``,
     best window per chunk; lexical = BM25 over the document's chunks, each prefixed
     with the title of the section it sits in; fused (``--fusion norm``: min-max
     normalised, ``--lexical-weight 0.5``); chunks defining a term the question quotes
     get ``--define-boost``; then neighbour smoothing (``--smooth``: a chunk next to a
     strong one gains) and table-of-contents chunks last;
   * a question that is one of MAUD's category labels ("Where is the No-Shop Clause")
     is expanded with a hand-written profile (``_expansion.py``, general M&A drafting
     wording, not learned from gold answers): the dense score mixes in the similarity
     to the profile's pseudo-clauses (``--clause-weight``), the BM25 score the profile's
     drafting terms (``--term-weight``), and chunks under a matching article/section
     title gain ``--heading-boost``; ``--no-label-expansion`` switches it off.
4. **Score** with the paper's protocol (``_metrics.py``, checked against brute force at
   start-up): P@k / R@k for k = 1..64 over merged retrieved ranges, and recall when
   the ranked chunks are packed into 512..8k cl100k tokens. Modes:
   * ``corpus`` — corpus-wide: one index over the subset, routed as above;
   * ``gold_doc`` — gold-document-only: the same ranking restricted to the gold file(s);
   * ``corpus_unrouted`` — corpus-wide without routing (the paper's setting: the
     full query against every chunk of the index, dense top hits + BM25 fused).
   Chunk-level hit rate / MRR / nDCG and the routing accuracy come from ``ranx``.

    python benchmarks/legalbench/run.py --queries ../shared/bench/legalbench-rag/queries/contractnli_dev.json
    python benchmarks/legalbench/run.py --queries .../maud_dev.json --subset-limit 350 --seed 7         # reported (held out)
    python benchmarks/legalbench/run.py --queries .../maud_dev.json --subset-limit 250 --seed 20240811  # tuning sample
    python benchmarks/legalbench/run.py --queries .../contractnli_dev.json --smoke    # < 90 s

Writes ``benchmarks/results/legalbench_<subset>.json`` (``_smoke`` for ``--smoke``;
``--out`` overrides) with the machine, versions, settings, date and figures.
"""

from __future__ import annotations

import argparse
import os
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
    corpus_files,
    load_queries,
    read_document,
    sample_by_document,
    subset_name,
)
from _metrics import BUDGETS, KS, at_k, recall_at_budgets
from _metrics import self_check as metrics_self_check
from _ranking import (
    LexicalIndex,
    clean_question,
    defines_term,
    fuse,
    heading_paths,
    minmax,
    neighbour_smooth,
    order,
    quoted_terms,
    section_headings,
    toc_like,
)
from _expansion import Profile, profile_for
from _routing import DocumentRouter

NAME = "legalbench"
#: Corpus-wide mode indexes the whole subset folder when it is at most this large;
#: above it (MAUD: 51 MB, ~3 h of MiniLM on 2 busy cores) only the documents the
#: query file references are indexed, and the result file says so.
FULL_CORPUS_MAX_BYTES = 8_000_000
SMOKE_QUERIES = 6
SMOKE_DOCS = 2
SMOKE_MAX_DOC_CHARS = 40_000
MODES = ("corpus", "gold_doc", "corpus_unrouted")
UNROUTED_DENSE_LIMIT = 400


# --------------------------------------------------------------------------- chunks and ingest


@dataclass(slots=True)
class DocIndex:
    """The indexed chunks of one document, in reading order."""

    file: str
    chunk_ids: list[str] = field(default_factory=list)
    ranges: list[list[tuple[int, int]]] = field(default_factory=list)  # every occurrence of the chunk's text
    tokens: list[int] = field(default_factory=list)
    contents: list[str] = field(default_factory=list)
    headings: list[str] = field(default_factory=list)  # section title each chunk sits in (BM25 text only)
    paths: list[str] = field(default_factory=list)     # "<article title> / <section title>" (heading boost of the expansion)
    toc: np.ndarray | None = None                       # table-of-contents chunks
    windows: int = 0
    _lexical: LexicalIndex | None = None
    _lexical_headings: str = "section"
    _heading_hits: dict[str, np.ndarray] = field(default_factory=dict)

    def lexical(self, headings: str = "section") -> LexicalIndex:
        """BM25 over the chunks, each prefixed with its section title (``section``), its article and section titles (``path``) or nothing (``none``)."""
        if self._lexical is None or self._lexical_headings != headings:
            prefix = {"section": self.headings, "path": self.paths}.get(headings) or [""] * len(self.contents)
            texts = [f"{h} {c}" if h else c for h, c in zip(prefix, self.contents, strict=True)]
            self._lexical = LexicalIndex(texts)
            self._lexical_headings = headings
        return self._lexical

    def heading_hits(self, profile: Profile) -> np.ndarray:
        """1.0 for chunks whose article or section title matches the profile's heading pattern."""
        if profile.name not in self._heading_hits:
            pat = profile.headings
            self._heading_hits[profile.name] = np.array([bool(pat and h and pat.search(h)) for h in self.paths], dtype=np.float64)
        return self._heading_hits[profile.name]


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
        for content, occ in where.items():
            s, e = occ[0]
            meta: dict[str, Any] = {"char_start": s, "char_end": e, "source_chars": len(text)}
            if len(occ) > 1:
                meta["occurrences"] = [list(o) for o in occ]
                dupes += len(occ) - 1
            chunks.append(DocumentChunk.build(
                deal_id=deal_id, document_id=f, document_role="OTHER", page_start=1, page_end=1,
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
    payloads = [p for p in store.chunks.deal_payloads(deal_id) if p.get("document_id") in wanted]
    bad = 0
    for p in sorted(payloads, key=lambda p: (p["document_id"], p["stage0_metadata"]["char_start"])):
        meta = p["stage0_metadata"]
        f = p["document_id"]
        occ = [tuple(o) for o in meta.get("occurrences") or [(meta["char_start"], meta["char_end"])]]
        text = texts[f]
        if any(text[s:e] != p["content"] for s, e in occ):
            bad += 1
            continue
        d = docs[f]
        d.chunk_ids.append(p["chunk_id"])
        d.ranges.append(occ)
        d.tokens.append(int(p["token_count"]))
        d.contents.append(p["content"])
        d.windows += int(p.get("n_windows", 1))
    for f, d in docs.items():
        d.headings = section_headings(texts[f], [r[0][0] for r in d.ranges])
        d.paths = heading_paths(texts[f], [r[0][0] for r in d.ranges])
        d.toc = np.array([toc_like(c) for c in d.contents], dtype=bool)
    registered = store.registry.registered_chunk_ids(deal_id)
    ids = {c for d in docs.values() for c in d.chunk_ids}
    info = {
        "chunks_in_index": len(ids),
        "windows_in_index": sum(d.windows for d in docs.values()),
        "offset_mismatches": bad,
        "registered_in_mem0": len(ids & registered),
        "documents_missing": sorted(f for f, d in docs.items() if not d.chunk_ids),
    }
    return docs, info


def existing_store_engines(home: Path) -> dict[str, str]:
    """Engines an existing store was built with, so a kept store opens after the library's defaults changed.

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
    elif (home / "qdrant" / "collection").is_dir() and any((home / "qdrant" / "collection").glob("*_mem0")) and not (home / "mem0_edge").exists():
        out = {"mem0_vector_store": "qdrant"}
    return {k: v for k, v in out.items() if f"RETRIEVAL_NODE_{k.upper()}" not in os.environ}


# --------------------------------------------------------------------------- retrieval


@dataclass(slots=True)
class Ranked:
    spans: list[tuple[str, int, int]]     # one range per ranked occurrence
    tokens: list[int]
    chunk_ids: list[str]
    scores: list[float]


def _expand(docs: list[DocIndex], pairs: list[tuple[int, int]], scores: list[float]) -> Ranked:
    spans, toks, ids, sc = [], [], [], []
    for (di, ci), s in zip(pairs, scores, strict=True):
        d = docs[di]
        for k, (a, b) in enumerate(d.ranges[ci]):
            spans.append((d.file, a, b))
            toks.append(d.tokens[ci] if k == 0 else 0)  # the text is read once, whichever places it stands for
            ids.append(d.chunk_ids[ci])
            sc.append(s)
    return Ranked(spans, toks, ids, sc)


@dataclass(slots=True)
class ExpansionSettings:
    """How the hand-written label profiles (``_expansion.py``) enter the ranking; all off by default."""

    enabled: bool = False
    clause_weight: float = 0.0   # dense = (1-b)·sim(question) + b·max sim(pseudo-clauses)
    term_weight: float = 0.0     # lexical = (1-a)·mm(BM25(question)) + a·mm(BM25(profile terms))
    heading_boost: float = 0.0   # added to the fused score of chunks under a matching article/section title


class Retriever:
    def __init__(self, store: Any, deal_id: str, docs: dict[str, DocIndex], *, fusion: str, lexical_weight: float, rrf_k: float,
                 smooth: float = 0.0, headings: str = "section", toc_last: bool = True, define_boost: float = 0.0,
                 expansion: ExpansionSettings | None = None, embedder: Any = None) -> None:
        from retrieval_node.backends.vectors import SearchScope

        self.store = store
        self.deal_id = deal_id
        self.docs = docs
        self.fusion = fusion
        self.w = lexical_weight
        self.rrf_k = rrf_k
        self.smooth = smooth
        self.headings = headings
        self.toc_last = toc_last
        self.define_boost = define_boost
        self.expansion = expansion or ExpansionSettings()
        self.embedder = embedder
        self._defines: dict[tuple[str, tuple[str, ...]], np.ndarray] = {}
        self._clause_vecs: dict[str, np.ndarray] = {}
        self._dense_cache: dict[tuple[str, str, int], np.ndarray] = {}
        self._scope = SearchScope
        self._pos = {cid: (f, i) for f, d in docs.items() for i, cid in enumerate(d.chunk_ids)}
        self._flat: list[tuple[str, int]] = [(f, i) for f, d in docs.items() for i in range(len(d.chunk_ids))]
        self._corpus_lex: LexicalIndex | None = None
        self._flat_pos: dict[str, int] | None = None
        self.searches = 0
        self.search_ms: list[float] = []

    def _search(self, vec: np.ndarray, scope: Any, limit: int) -> list[Any]:
        t = time.perf_counter()
        hits = self.store.chunks.search(vec, scope, limit)
        self.search_ms.append((time.perf_counter() - t) * 1000)
        self.searches += 1
        return hits

    def _defining(self, d: DocIndex, terms: tuple[str, ...]) -> np.ndarray:
        key = (d.file, terms)
        if key not in self._defines:
            self._defines[key] = np.array([defines_term(c, terms) for c in d.contents], dtype=np.float64)
        return self._defines[key]

    def _dense(self, d: DocIndex, vec: np.ndarray) -> np.ndarray:
        """MiniLM similarity of every chunk of ``d`` to ``vec`` through the store (best window per chunk; -1 if absent)."""
        hits = self._search(vec, self._scope(deal_id=self.deal_id, chunk_ids=tuple(d.chunk_ids)), max(d.windows, 1))
        dense = np.full(len(d.chunk_ids), -1.0)
        for h in hits:
            f, i = self._pos.get(h.chunk_id, (None, -1))
            if f == d.file and h.score > dense[i]:
                dense[i] = h.score
        return dense

    def _clause_dense(self, d: DocIndex, profile: Profile) -> np.ndarray:
        """Best similarity of each chunk to any of the profile's pseudo-clauses (same for every query of the label: cached)."""
        if profile.name not in self._clause_vecs:
            self._clause_vecs[profile.name] = np.asarray(self.embedder.embed(list(profile.clauses)))
        out = None
        for k, v in enumerate(self._clause_vecs[profile.name]):
            key = (d.file, profile.name, k)
            if key not in self._dense_cache:
                self._dense_cache[key] = self._dense(d, v)
            out = self._dense_cache[key] if out is None else np.maximum(out, self._dense_cache[key])
        return out if out is not None else np.zeros(len(d.chunk_ids))

    def rank_documents(self, files: list[str], vec: np.ndarray, question: str, terms: tuple[str, ...] = (),
                       profile: Profile | None = None) -> Ranked:
        """Chunks of ``files`` ranked: dense (store) + BM25 (per document) fused, label expansion, defined-term boost, neighbour smoothing."""
        docs = [self.docs[f] for f in files if f in self.docs and self.docs[f].chunk_ids]
        if not docs:
            return Ranked([], [], [], [])
        ex = self.expansion
        if not ex.enabled:
            profile = None
        pairs: list[tuple[int, int]] = []
        fused_all: list[np.ndarray] = []
        for di, d in enumerate(docs):
            dense = self._dense(d, vec)
            lexical = d.lexical(self.headings).scores(question)
            if profile is not None:
                if ex.clause_weight and profile.clauses and self.embedder is not None:
                    dense = (1 - ex.clause_weight) * dense + ex.clause_weight * self._clause_dense(d, profile)
                if ex.term_weight and profile.terms:
                    lexical = (1 - ex.term_weight) * minmax(lexical) + ex.term_weight * minmax(d.lexical(self.headings).scores(profile.terms))
            fused = fuse(dense, lexical, method=self.fusion, weight=self.w, k=self.rrf_k)
            if terms and self.define_boost:
                fused = fused + self.define_boost * self._defining(d, terms)
            if profile is not None and ex.heading_boost and profile.headings is not None:
                fused = fused + ex.heading_boost * d.heading_hits(profile)
            fused = neighbour_smooth(fused, self.smooth)  # min-max normalised per document, then neighbours
            if self.toc_last and d.toc is not None:
                fused = fused - 10.0 * d.toc
            fused_all.append(fused)
            pairs.extend((di, i) for i in range(len(d.chunk_ids)))
        scores = np.concatenate(fused_all)
        idx = order(scores)
        return _expand(docs, [pairs[i] for i in idx], [float(scores[i]) for i in idx])

    def rank_unrouted(self, vec: np.ndarray, query: str, depth: int = 64) -> Ranked:
        """The paper's setting: the whole query against every chunk of the index (dense top hits + corpus BM25)."""
        if self._corpus_lex is None:
            self._corpus_lex = LexicalIndex([self.docs[f].contents[i] for f, i in self._flat])
        hits = self._search(vec, self._scope(deal_id=self.deal_id), UNROUTED_DENSE_LIMIT)
        if self._flat_pos is None:
            self._flat_pos = {self.docs[f].chunk_ids[i]: k for k, (f, i) in enumerate(self._flat)}
        flat_pos = self._flat_pos
        dense = np.full(len(self._flat), min((h.score for h in hits), default=0.0) - 1e-3)
        for h in hits:
            k = flat_pos.get(h.chunk_id)
            if k is not None and h.score > dense[k]:
                dense[k] = h.score
        lex = self._corpus_lex.scores(query)
        scores = fuse(dense, lex, method=self.fusion, weight=self.w, k=self.rrf_k)
        idx = order(scores)[: max(depth, 1) * 2]
        files = list(self.docs)
        fi = {f: n for n, f in enumerate(files)}
        docs = [self.docs[f] for f in files]
        return _expand(docs, [(fi[self._flat[i][0]], self._flat[i][1]) for i in idx], [float(scores[i]) for i in idx])


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
                    help="a LegalBench-RAG query file ({'tests': [...]})")
    ap.add_argument("--self-check", action="store_true", help="only check the span metrics against brute force and the chunker's tiling (no model, a second)")
    ap.add_argument("--corpus", default=None, help="corpus folder (default: corpus/ beside the queries/ folder of --queries, else $LEGALBENCH_RAG_DIR/corpus)")
    ap.add_argument("--subset-limit", type=int, default=None, help="at most N queries, whole documents at a time (seeded); the index holds only their documents")
    ap.add_argument("--smoke", action="store_true", help=f"{SMOKE_QUERIES} queries over {SMOKE_DOCS} short documents, fresh temporary store, no ranx (< 90 s)")
    ap.add_argument("--index", choices=("auto", "all", "referenced"), default="auto",
                    help=f"corpus-wide index: every file of the subset folder, or only those the queries reference (auto: all up to {FULL_CORPUS_MAX_BYTES / 1e6:g} MB)")
    ap.add_argument("--chunk-chars", type=int, default=500, help="maximum characters per chunk")
    ap.add_argument("--fusion", choices=("norm", "rrf", "dense", "bm25"), default="norm")
    ap.add_argument("--lexical-weight", type=float, default=0.5, help="share of BM25 in the fusion")
    ap.add_argument("--rrf-k", type=float, default=60.0)
    ap.add_argument("--smooth", type=float, default=0.4, help="neighbour smoothing λ (0 disables)")
    ap.add_argument("--define-boost", type=float, default=1.0, help="added to the fused score of chunks defining a term the question quotes (0 disables)")
    ap.add_argument("--no-headings", action="store_true", help="BM25 over chunk content only (same as --bm25-headings none)")
    ap.add_argument("--bm25-headings", choices=("section", "path", "none"), default="section",
                    help="prefix of each chunk's BM25 text: its section title, its article + section titles, or nothing")
    ap.add_argument("--no-label-expansion", action="store_true",
                    help="rank MAUD category-label questions by their own words only (no hand-written profiles from _expansion.py)")
    ap.add_argument("--clause-weight", type=float, default=0.7,
                    help="label expansion: share of the similarity to the profile's pseudo-clauses in the dense score")
    ap.add_argument("--term-weight", type=float, default=0.7, help="label expansion: share of BM25 of the profile's terms in the lexical score")
    ap.add_argument("--heading-boost", type=float, default=0.2,
                    help="label expansion: added to chunks whose article/section title matches the profile's headings")
    ap.add_argument("--no-toc-last", action="store_true", help="do not rank table-of-contents chunks last")
    ap.add_argument("--no-clean-question", action="store_true", help="keep generic lead-ins ('What is the ...') in the question")
    ap.add_argument("--modes", default=",".join(MODES), help=f"comma-separated subset of {','.join(MODES)}")
    ap.add_argument("--workdir", default=None, help="store + JSONL directory (default: <tmp>/retrieval-node-legalbench/<deal id>; kept between runs)")
    ap.add_argument("--fresh", action="store_true", help="delete the workdir first")
    ap.add_argument("--max-ingest-minutes", type=float, default=None, help="stop ingesting after this long (resume by running again); evaluation then covers indexed documents only")
    ap.add_argument("--ingest-only", action="store_true")
    ap.add_argument("--no-ranx", action="store_true", help="skip the ranx metrics (numba compiles them on first use)")
    ap.add_argument("--seed", type=int, default=20240811)
    ap.add_argument("--out", default=None, help="result file (default benchmarks/results/legalbench_<subset>[_smoke].json)")
    ap.add_argument("--quiet", action="store_true")
    return ap.parse_args(argv)


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
    subset = subset_name(all_queries, qpath)
    deviations: list[str] = []

    # ---- which queries, which documents
    if args.smoke:
        # the shortest documents, a few queries each: a real run end to end in well under 90 s
        by_doc: dict[str, list[Query]] = defaultdict(list)
        for q in all_queries:
            by_doc[q.gold_files[0]].append(q)
        sizes = {f: (corpus / f).stat().st_size for f in by_doc}
        small = sorted((f for f in by_doc if sizes[f] <= SMOKE_MAX_DOC_CHARS), key=lambda f: (sizes[f], f)) or sorted(by_doc, key=lambda f: sizes[f])
        docs_pick = small[:SMOKE_DOCS]
        queries = sorted([q for f in docs_pick for q in by_doc[f][: SMOKE_QUERIES // SMOKE_DOCS]], key=lambda q: q.index)
        deviations.append(f"smoke run: {len(queries)} queries over the {len(docs_pick)} shortest referenced documents; not a benchmark figure")
    else:
        queries = sample_by_document(all_queries, args.subset_limit, args.seed)
        if len(queries) < len(all_queries):
            deviations.append(f"--subset-limit {args.subset_limit}: {len(queries)} of {len(all_queries)} queries, "
                              f"all queries of {len({q.gold_files[0] for q in queries})} documents sampled with seed {args.seed}")
    referenced = sorted({f for q in queries for f in q.gold_files})
    folder = corpus_files(corpus, subset) if (corpus / subset).is_dir() else referenced
    folder_bytes = sum((corpus / f).stat().st_size for f in folder)
    index_mode = args.index
    if args.smoke:
        index_mode = "referenced"
    elif index_mode == "auto":
        index_mode = "all" if folder_bytes <= FULL_CORPUS_MAX_BYTES and len(queries) == len(all_queries) else "referenced"
    indexed = sorted(set(folder) | set(referenced)) if index_mode == "all" else referenced
    if index_mode == "referenced" and not args.smoke:
        deviations.append(f"corpus-wide index holds the {len(indexed)} documents the evaluated queries reference, "
                          f"not all {len(folder)} of corpus/{subset} ({folder_bytes / 1e6:.1f} MB); the router still ranks all "
                          f"{len(folder)} files, and routed retrieval only searches the routed document, so its figures equal a "
                          "full index's; corpus_unrouted competes against fewer documents than the paper's")

    # ---- store
    from retrieval_node.config import load_config
    from retrieval_node.embedding import SentenceTransformerEmbedder
    from retrieval_node.store import Store
    from retrieval_node.tokens import TiktokenCounter

    deal_id = f"legalbench-{subset}-c{args.chunk_chars}"
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
        print(f"LegalBench-RAG {subset}: {len(queries)} queries, {len(indexed)} documents indexed ({index_mode}), "
              f"chunks <= {args.chunk_chars} chars, store {workdir}", flush=True)
    timings: dict[str, float] = {}
    t = time.perf_counter()
    embedder = SentenceTransformerEmbedder.load(rc.embedding_model, path=rc.embedding_model_path, batch_size=rc.embedding_batch_size)
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

        # ---- route + retrieve
        t = time.perf_counter()
        router = DocumentRouter(folder, [read_document(corpus, f)[:2000] for f in folder])
        timings["router_build_s"] = round(time.perf_counter() - t, 2)
        modes = [m for m in args.modes.split(",") if m]
        unknown = set(modes) - set(MODES)
        if unknown:
            raise SystemExit(f"unknown mode(s) {sorted(unknown)}; choose from {MODES}")
        bm25_headings = "none" if args.no_headings else args.bm25_headings
        expansion = ExpansionSettings(enabled=not args.no_label_expansion, clause_weight=args.clause_weight,
                                      term_weight=args.term_weight, heading_boost=args.heading_boost)
        retriever = Retriever(store, deal_id, docs, fusion=args.fusion, lexical_weight=args.lexical_weight, rrf_k=args.rrf_k,
                              smooth=args.smooth, headings=bm25_headings, toc_last=not args.no_toc_last,
                              define_boost=args.define_boost, expansion=expansion, embedder=embedder)
        terms = [tuple(quoted_terms(q.question)) for q in queries]
        profiles = [profile_for(q.question) for q in queries]
        questions = [q.question if args.no_clean_question else clean_question(q.question) for q in queries]

        t = time.perf_counter()
        qvec_q = embedder.embed(questions)
        qvec_full = embedder.embed([q.text for q in queries]) if "corpus_unrouted" in modes else None
        timings["query_embedding_s"] = round(time.perf_counter() - t, 2)

        rows: dict[str, list[dict[str, Any]]] = {m: [] for m in modes}
        runs: dict[str, dict[str, dict[str, float]]] = {m: {} for m in modes}
        qrels: dict[str, dict[str, int]] = {}
        doc_runs: dict[str, dict[str, float]] = {}
        doc_qrels: dict[str, dict[str, int]] = {}
        per_query: list[dict[str, Any]] = []
        route_cache: dict[str, list[tuple[str, float]]] = {}
        routed_ok = 0
        retrieve_ms: dict[str, list[float]] = {m: [] for m in modes}
        t = time.perf_counter()
        for n, q in enumerate(queries):
            qid = f"q{q.index}"
            gold_files = list(q.gold_files)
            qrels[qid] = {cid: 1 for f in gold_files if f in docs for cid, rr in zip(docs[f].chunk_ids, docs[f].ranges, strict=True)
                          if any(a < e and s < b for a, b in rr for gf, s, e in q.gold if gf == f)}
            rec: dict[str, Any] = {"index": q.index, "gold_files": gold_files, "question": q.question,
                                   "profile": profiles[n].name if profiles[n] and expansion.enabled else None}
            routed: str | None = None
            if q.document_hint:
                if q.document_hint not in route_cache:
                    route_cache[q.document_hint] = router.rank(q.document_hint)
                ranking = route_cache[q.document_hint]
                routed = ranking[0][0]
                doc_runs[qid] = {f: s for f, s in ranking[:10]}
                doc_qrels[qid] = {f: 1 for f in gold_files}
                routed_ok += routed in gold_files
                rec["routed"] = routed
            for m in modes:
                t0 = time.perf_counter()
                if m == "gold_doc":
                    ranked = retriever.rank_documents(gold_files, qvec_q[n], questions[n], terms[n], profiles[n])
                elif m == "corpus" and routed is not None:
                    ranked = retriever.rank_documents([routed], qvec_q[n], questions[n], terms[n], profiles[n])
                else:  # unrouted, or a query without a "Consider ...;" part
                    vec = qvec_full[n] if qvec_full is not None else qvec_q[n]
                    ranked = retriever.rank_unrouted(vec, q.text)
                retrieve_ms[m].append((time.perf_counter() - t0) * 1000)
                s = score(ranked, q.gold)
                rows[m].append(s)
                run: dict[str, float] = {}
                for rank, cid in enumerate(ranked.chunk_ids[:64]):
                    run.setdefault(cid, float(64 - rank))
                runs[m][qid] = run
                rec[m] = {"p@1": round(s["p"][1], 4), "r@1": round(s["r"][1], 4), "r@8": round(s["r"][8], 4),
                          "r@64": round(s["r"][64], 4), "r@4k_tokens": round(s["budget"][4096], 4)}
            per_query.append(rec)
            if log and (n + 1) % 200 == 0:
                print(f"  queries: {n + 1}/{len(queries)}", flush=True)
        timings["retrieval_and_scoring_s"] = round(time.perf_counter() - t, 2)

        results = {m: aggregate(rows[m]) for m in modes}
        for m in modes:  # per question label (MAUD asks the same ~19 questions of every agreement)
            by_q: dict[str, list[dict[str, Any]]] = defaultdict(list)
            for q, row in zip(queries, rows[m], strict=True):
                by_q[q.question].append(row)
            if len(by_q) <= 40:
                results[m]["by_question"] = {k: {"queries": len(v), "p@1_pct": round(100 * statistics.mean(r["p"][1] for r in v), 1),
                                                 "r@8_pct": round(100 * statistics.mean(r["r"][8] for r in v), 1),
                                                 "r@64_pct": round(100 * statistics.mean(r["r"][64] for r in v), 1)}
                                             for k, v in sorted(by_q.items(), key=lambda kv: -len(kv[1]))}
        for m in modes:
            results[m]["retrieval_ms_p50"] = round(statistics.median(retrieve_ms[m]), 2) if retrieve_ms[m] else None
        routing = {"queries_with_hint": len(doc_runs), "top1_correct": routed_ok,
                   "accuracy_pct": round(100 * routed_ok / len(doc_runs), 2) if doc_runs else None}
        if not args.no_ranx and not args.smoke:
            t = time.perf_counter()
            results["ranx"] = ranx_metrics(runs, qrels, doc_runs, doc_qrels)
            timings["ranx_s"] = round(time.perf_counter() - t, 2)
        store_counts = {"vector_points": store.chunks.count()}
    finally:
        store.close()
        if tmp_root is not None:
            shutil.rmtree(tmp_root, ignore_errors=True)

    timings["total_s"] = round(time.perf_counter() - t_start, 2)
    settings = {
        "queries_file": str(qpath),
        "corpus": str(corpus),
        "subset": subset,
        "deal_id": deal_id,
        "smoke": args.smoke,
        "subset_limit": args.subset_limit,
        "seed": args.seed,
        "index": index_mode,
        "chunking": {"method": "recursive, legal-text boundaries (blank line, line, 3+ spaces, sentence/clause end, comma, space), tiling, no overlap",
                     "max_chars": args.chunk_chars},
        "routing": "'Consider ...;' hint -> file-name match (IDF-weighted words, 6-letter prefixes, initials) + 0.5 x BM25 of name + first 2,000 chars; top-1 document",
        "ranking_query": "the question after ';'" + ("" if args.no_clean_question else ", generic lead-in dropped ('What is the', 'Information about the', ...)")
                         + " (dense and BM25)" + ("" if args.no_label_expansion else ", plus the hand-written profile of a MAUD category label (label_expansion)")
                         + "; corpus_unrouted uses the full query",
        "smooth": args.smooth,
        "define_boost": args.define_boost,
        "headings_in_bm25": bm25_headings,
        "label_expansion": {"enabled": expansion.enabled, "clause_weight": args.clause_weight, "term_weight": args.term_weight,
                            "heading_boost": args.heading_boost, "queries_with_a_profile": sum(p is not None for p in profiles),
                            "profiles": "hand-written, _expansion.py (general M&A drafting wording, not learned from gold answers)"},
        "toc_last": not args.no_toc_last,
        "dense": f"store.chunks.search with SearchScope(deal_id, chunk_ids=<document's chunks>), limit = the document's windows; best window per chunk; MiniLM windows of {rc.window_tokens} word pieces, overlap {rc.window_overlap_tokens}",
        "lexical": "bm25s BM25 (k1 1.2, b 0.75) over the document's chunks (each prefixed with its section title), English stop words, light plural/-ing/-ed stemmer",
        "fusion": args.fusion,
        "lexical_weight": args.lexical_weight,
        "rrf_k": args.rrf_k if args.fusion == "rrf" else None,
        "modes": modes,
        "embedding_model": rc.embedding_model,
        "vector_backend": rc.vector_backend,
        "tokenizer": rc.tokenizer_encoding,
        "ks": list(KS),
        "token_budgets": list(BUDGETS),
        "workdir": None if tmp_root else str(workdir),
    }
    payload = {
        "benchmark": f"{NAME}_{subset}",
        "date": started,
        "finished": now_iso(),
        "command": "python " + " ".join([os.path.relpath(__file__, Path.cwd()) if not os.path.isabs(sys.argv[0]) else sys.argv[0]] + (argv if argv is not None else sys.argv[1:])),
        "machine": machine_info(),
        "settings": settings,
        "deviations": deviations,
        "data": {"queries_in_file": len(all_queries), "queries_evaluated": len(queries), "documents_referenced": len(referenced),
                 "documents_in_folder": len(folder), "folder_mb": round(folder_bytes / 1e6, 2), "documents_indexed": len(indexed)},
        "chunks": chunk_stats,
        "ingest": ingest_report,
        "ingest_history": ingest_history,  # every run against this workdir: the first one shows the real ingest cost
        "index": index_info,
        "store": store_counts,
        "routing": routing,
        "results": results,
        "timings": timings,
        "search_calls": retriever.searches,
        "search_ms_p50": round(statistics.median(retriever.search_ms), 2) if retriever.search_ms else None,
        "peak_rss_mb": peak_rss_mb(),
        "per_query": per_query,
        "reference": {"paper_best_row_mini": {"contractnli_r64": 61.72, "maud_r64": 28.28, "avg_p1": 6.41, "avg_r64": 62.22},
                      "targets": {"contractnli_r64": 85.0, "maud_r64": 65.0, "p1": 25.0}},
    }
    out = Path(args.out) if args.out else RESULTS_DIR / f"{NAME}_{subset}{'_smoke' if args.smoke else ''}.json"
    write_result(out, payload)
    if log:
        print_report(payload, out)
    return payload


def print_report(payload: dict[str, Any], out: Path) -> None:
    print()
    print_machine(payload["machine"])
    s = payload["settings"]
    print(f"subset {s['subset']}: {payload['data']['queries_evaluated']} queries, {payload['data']['documents_indexed']} documents indexed, "
          f"{payload['index']['chunks_in_index']:,} chunks / {payload['index']['windows_in_index']:,} windows; chunks <= {s['chunking']['max_chars']} chars; "
          f"fusion {s['fusion']} (lexical {s['lexical_weight']}), neighbour smoothing {s['smooth']}")
    r = payload["routing"]
    if r["queries_with_hint"]:
        print(f"routing: {r['top1_correct']}/{r['queries_with_hint']} queries to the gold document ({r['accuracy_pct']} %)")
    headers = ["mode", "P@1", *[f"R@{k}" for k in KS], *[f"R@{b // 1024}k" if b >= 1024 else f"R@{b}" for b in BUDGETS]]
    rows = []
    for m in s["modes"]:
        res = payload["results"][m]
        if not res.get("queries"):
            continue
        rows.append([m, res["precision_at_k_pct"]["1"], *[res["recall_at_k_pct"][str(k)] for k in KS],
                     *[res["recall_at_tokens_pct"][str(b)] for b in BUDGETS]])
    print("character-level, % (R@Nk = recall at N·1024 cl100k tokens)")
    print(table(headers, rows))
    prow = [[m, *[payload["results"][m]["precision_at_k_pct"][str(k)] for k in KS]] for m in s["modes"] if payload["results"][m].get("queries")]
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
