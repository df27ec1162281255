"""Segment-aware retrieval (spec 3.1): structural filter in Mem0, semantic + lexical search in Qdrant.

1. **Structural filter** — the deal's chunk registry from Mem0 (``user_id=conv-{deal}``),
   then section types / document roles / ``as_of``. The registry listing of a deal is
   cached per (deal, ingest generation) for ``cache_ttl_seconds``: Mem0 local mode scans
   its whole collection for a filtered listing, which is the slow part of the naive path.
2. **Semantic search** — the query vector against the deal's windows in the chunk index,
   filtered by deal + sections + roles. Hits are candidates, never facts: a hit whose chunk
   is not in the structural result (other deal, other section, half-registered) is dropped.
3. **Lexical signal** — BM25 (bm25s) over the deal's chunks, for instrument numbers, party
   names and dollar figures that MiniLM does not separate.
4. **Coherence grouping** — chunks of the same document and section whose page ranges touch
   are linked, so the packager can keep a register that spans pages together.

If Mem0 fails, the structure comes from the vector payloads instead and the fallback is
recorded; if the chunk index fails, a :class:`~retrieval_node.errors.BackendError` propagates.
"""

from __future__ import annotations

import math
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np

from .backends.mem0_registry import RegistryRecord
from .backends.vectors import SearchScope, point_uuid
from .errors import BackendError
from .models import sha256_hex
from .store import Store


#: Windows fetched to score the chunks kept for their risk outside the dense top hits.
KEPT_SEARCH_WINDOWS = 256

#: A registered chunk with its verbatim content, as later stages see it (from Mem0, or from vector payloads).
ChunkView = RegistryRecord


@dataclass(slots=True)
class DealView:
    """Everything the retriever knows about one deal, built once per ingest generation."""

    deal_id: str
    chunks: dict[str, ChunkView]
    rejected: list[str]
    source: str  # "mem0" or "vector_payloads"
    loaded_at: float
    generation: int
    _bm25: Any = None
    _bm25_ids: list[str] = field(default_factory=list)
    _bm25_lock: threading.Lock = field(default_factory=threading.Lock)
    _bm25_cache: dict[str, dict[str, float]] = field(default_factory=dict)
    _zones: dict[str, list[ChunkView]] | None = None
    _memo: dict[Any, Any] = field(default_factory=dict)

    #: BM25 results kept per deal view (agents repeat their profile queries).
    BM25_CACHE = 64

    def zone_members(self, zone: str) -> list[ChunkView]:
        """The deal's chunks tagged with ``zone``, in chunk-id order (index built once per view)."""
        if self._zones is None:
            index: dict[str, list[ChunkView]] = {}
            for cid in sorted(self.chunks):
                for z in self.chunks[cid].zones:
                    index.setdefault(z, []).append(self.chunks[cid])
            self._zones = index
        return self._zones.get(zone, [])

    def memo(self, key: Any, build: Any) -> Any:
        """``build()`` once per view and key (for values that are a function of the deal's chunks only)."""
        value = self._memo.get(key)
        if value is None:
            value = build()
            self._memo[key] = value
        return value

    def bm25_scores(self, query: str) -> dict[str, float]:
        """BM25 score of every chunk of the deal for ``query`` (absent where no term matches). Do not mutate."""
        hit = self._bm25_cache.get(query)
        if hit is not None:
            return hit
        scores = self._bm25_scores(query)
        with self._bm25_lock:
            if len(self._bm25_cache) >= self.BM25_CACHE:
                self._bm25_cache.pop(next(iter(self._bm25_cache)))
            self._bm25_cache[query] = scores
        return scores

    def _bm25_scores(self, query: str) -> dict[str, float]:
        import bm25s

        with self._bm25_lock:
            if self._bm25 is None:
                self._bm25_ids = sorted(self.chunks)
                corpus = [self.chunks[c].content for c in self._bm25_ids]
                tokens = bm25s.tokenize(corpus, stopwords="en", show_progress=False) if corpus else None
                model = bm25s.BM25()
                if tokens is not None:
                    model.index(tokens, show_progress=False)
                self._bm25 = (model, tokens.vocab if tokens is not None else {})
        model, vocab = self._bm25
        q = [t for t in bm25s.tokenize(query, stopwords="en", return_ids=False, show_progress=False)[0] if t in vocab]
        if not q or not self._bm25_ids:
            return {}
        scores = model.get_scores(q)
        return {cid: float(s) for cid, s in zip(self._bm25_ids, scores, strict=True) if s > 0}


@dataclass(slots=True)
class Candidate:
    chunk: ChunkView
    cosine: float = 0.0
    best_window: int = 0
    bm25: float = 0.0
    group: int = 0


@dataclass(slots=True)
class RetrievalResult:
    candidates: list[Candidate]
    best_bm25: float
    timings_ms: dict[str, float]
    fallbacks: list[str]
    mem0_calls: int
    embedding_calls: int
    structural_count: int


def _view_from_payload(p: dict[str, Any]) -> ChunkView:
    return ChunkView(
        memory_id="",
        chunk_id=p["chunk_id"], deal_id=p["deal_id"], document_id=p["document_id"], document_role=p["document_role"],
        section_type=p["section_type"], page_start=int(p["page_start"]), page_end=int(p["page_end"]), content=p["content"],
        content_hash=p["content_hash"], token_count=int(p["token_count"]), ocr_confidence=float(p["ocr_confidence"]),
        zones=tuple(p.get("zones") or ()), entity_ids=tuple(p.get("entity_ids") or ()), sensitivity=p.get("sensitivity", "confidential"),
        document_created_at=p.get("document_created_at"), ingested_at=p["ingested_at"],
    )


class SegmentAwareRetriever:
    """Structural filter + hybrid search over one deal.

    >>> retriever = SegmentAwareRetriever(store)                                # doctest: +SKIP
    >>> result = retriever.retrieve(deal_id="2026-ACME-0042", query="builders' lien",
    ...     query_vector=vec, section_types=["INSTRUMENTS_REGISTER"])          # doctest: +SKIP
    """

    def __init__(self, store: Store) -> None:
        self.store = store
        self._deals: dict[str, DealView] = {}
        self._lock = threading.Lock()
        self._loading: dict[str, threading.Lock] = {}

    # -- structural layer --------------------------------------------------------------
    def deal_view(self, deal_id: str, fallbacks: list[str] | None = None) -> tuple[DealView, int]:
        """The deal's registered chunks (cached); returns (view, Mem0 calls made)."""
        gen = self.store.generation(deal_id)
        ttl = self.store.config.retrieval.cache_ttl_seconds
        now = time.monotonic()
        view = self._deals.get(deal_id)
        if view is not None and view.generation == gen and now - view.loaded_at <= ttl and view.source == "mem0":
            return view, 0
        with self._lock:
            lock = self._loading.setdefault(deal_id, threading.Lock())
        with lock:  # one load per deal at a time; concurrent callers wait for it
            view = self._deals.get(deal_id)
            if view is not None and view.generation == gen and time.monotonic() - view.loaded_at <= ttl and view.source == "mem0":
                return view, 0
            try:
                records = self.store.registry.deal_records(deal_id)
                chunks: dict[str, ChunkView] = {}
                rejected: list[str] = []
                for rec in records:
                    # the registry text is the verbatim content; its hash must match what Stage 0 signed
                    if sha256_hex(rec.content) != rec.content_hash:
                        rejected.append(f"{rec.chunk_id[:12]}: registry content does not match its hash")
                        continue
                    chunks[rec.chunk_id] = rec
                view = DealView(deal_id, chunks, rejected, "mem0", time.monotonic(), gen)
                self._deals[deal_id] = view
                return view, 1
            except BackendError as exc:
                if fallbacks is None:
                    raise
                fallbacks.append(f"mem0_unavailable: structural filter served from vector payloads ({exc})")
                return self._vector_only_view(deal_id, gen), 0

    def _vector_only_view(self, deal_id: str, gen: int) -> DealView:
        chunks: dict[str, ChunkView] = {}
        rejected: list[str] = []
        for p in self.store.chunks.deal_payloads(deal_id):
            if "content" not in p or sha256_hex(p["content"]) != p.get("content_hash"):
                rejected.append(f"{str(p.get('chunk_id'))[:12]}: content missing or hash mismatch")
                continue
            chunks[p["chunk_id"]] = _view_from_payload(p)
        return DealView(deal_id, chunks, rejected, "vector_payloads", time.monotonic(), gen)

    def invalidate(self, deal_id: str | None = None) -> None:
        with self._lock:
            if deal_id is None:
                self._deals.clear()
            else:
                self._deals.pop(deal_id, None)

    # -- dense search --------------------------------------------------------------------
    def dense_hits(self, view: DealView, vector: np.ndarray, scope: SearchScope, limit: int) -> list[tuple[str, int, float]]:
        """(chunk id, window, cosine) of the best ``limit`` windows in ``scope``, a chunk of ``view`` each.

        The search asks Qdrant for point ids and scores only and maps the ids back through the deal's own
        ``point_id(chunk, window)`` table: reading payloads of the hits cost more than the search itself.
        A point not in the table (a window beyond its estimate) is resolved from its payload once; a
        point of another deal or not registered in the view is dropped, whatever the filter let through.
        """
        if scope.deal_id != view.deal_id:
            raise ValueError(f"search scope deal {scope.deal_id!r} is not the view's deal {view.deal_id!r}")
        return self._map_points(view, self.store.chunks.search_points(vector, scope, limit))

    def dense_hits_many(self, view: DealView, requests: Sequence[tuple[np.ndarray, SearchScope, int]]) -> list[list[tuple[str, int, float]]]:
        """:meth:`dense_hits` for each ``(vector, scope, limit)``, searched as one batch when the index can."""
        for _, scope, _ in requests:
            if scope.deal_id != view.deal_id:
                raise ValueError(f"search scope deal {scope.deal_id!r} is not the view's deal {view.deal_id!r}")
        many = getattr(self.store.chunks, "search_points_many", None)
        if many is None or len(requests) == 1:
            results = [self.store.chunks.search_points(v, sc, lim) for v, sc, lim in requests]
        else:
            results = many(list(requests))
        return [self._map_points(view, res) for res in results]

    def _map_points(self, view: DealView, points: Sequence[tuple[uuid.UUID | int, float]]) -> list[tuple[str, int, float]]:
        # int keys: C-level hash and eq (a worker process receives the ints themselves: they pickle cheaper than UUIDs)
        raw = [(pid if isinstance(pid, int) else pid.int, score) for pid, score in points]
        table = view.memo(("point_ids",), lambda: _point_table(view, self.store.config.retrieval))
        unknown = [pid for pid, _ in raw if pid not in table]
        if unknown:
            for pid, payload in self.store.chunks.payloads([str(uuid.UUID(int=u)) for u in unknown]).items():
                cid = payload.get("chunk_id")
                if payload.get("deal_id") == view.deal_id and cid in view.chunks:
                    table[uuid.UUID(pid).int] = (cid, int(payload.get("window", 0)))
        out = []
        for pid, score in raw:
            hit = table.get(pid)
            if hit is not None:
                out.append((hit[0], hit[1], float(score)))
        return out

    # -- retrieval -----------------------------------------------------------------------
    def retrieve(
        self,
        *,
        deal_id: str,
        query: str,
        query_vector: np.ndarray,
        section_types: Sequence[str] | None,
        document_roles: Sequence[str] | None = None,
        as_of: datetime | None = None,
        eligible: Any = None,
        keep: Any = None,
        top_k: int = 50,
        use_vectors: bool = True,
        eligible_key: Any = None,
    ) -> RetrievalResult:
        """Candidates of one deal with dense and BM25 evidence.

        Candidates are the ``top_k`` chunks by dense similarity, the ``top_k`` by BM25,
        and every chunk for which ``keep(chunk)`` is true (the agent keeps chunks that
        carry a risk signal, whatever their similarity). ``eligible(chunk) -> bool``
        filters the structural set further; ``eligible_key``, a hashable key for what ``eligible`` depends on,
        lets the structural set be kept on the deal view for the next call with the same key.
        """
        timings: dict[str, float] = {}
        fallbacks: list[str] = []
        t0 = time.perf_counter()
        view, mem0_calls = self.deal_view(deal_id, fallbacks)
        sections = set(section_types) if section_types is not None else None
        roles = set(document_roles) if document_roles is not None else None
        cutoff = as_of.timestamp() if as_of is not None else None

        def structural_set() -> list[ChunkView]:
            return [
                c for c in view.chunks.values()
                if (sections is None or c.section_type in sections)
                and (roles is None or c.document_role in roles)
                and (cutoff is None or c.ingested_ts <= cutoff)
                and (eligible is None or eligible(c))
            ]

        if eligible is None or eligible_key is not None:
            key = ("structural", eligible_key, sections and frozenset(sections), roles and frozenset(roles), cutoff)
            structural = view.memo(key, structural_set)
        else:
            structural = structural_set()
        timings["structural_ms"] = (time.perf_counter() - t0) * 1000
        if not structural:
            return RetrievalResult([], 0.0, timings, fallbacks, mem0_calls, 0, 0)

        t1 = time.perf_counter()
        scope = SearchScope(
            deal_id=deal_id,
            section_types=tuple(sorted(sections)) if sections is not None else None,
            document_roles=tuple(sorted(roles)) if roles is not None else None,
        )
        hits = self.dense_hits(view, query_vector, scope, min(10_000, 4 * top_k)) if use_vectors else []
        timings["vector_ms"] = (time.perf_counter() - t1) * 1000

        t2 = time.perf_counter()
        structural_ids = {c.chunk_id: c for c in structural}
        dense: dict[str, tuple[float, int]] = {}
        for cid, window, score in hits:
            if cid not in structural_ids:  # another section, a cut-off, half-registered: not a candidate
                continue
            prev = dense.get(cid)
            if prev is None or score > prev[0] or (score == prev[0] and window < prev[1]):
                dense[cid] = (score, window)
        bm25 = {cid: v for cid, v in view.bm25_scores(query).items() if cid in structural_ids}
        chosen = set(sorted(dense, key=lambda c: (-dense[c][0], c))[:top_k])
        chosen |= set(sorted(bm25, key=lambda c: (-bm25[c], c))[:top_k])
        if keep is not None:
            chosen |= {c.chunk_id for c in structural if keep(c)}
        timings["lexical_ms"] = (time.perf_counter() - t2) * 1000
        # candidates kept for their risk but outside the dense top hits: score them against the query too
        missing = sorted(c for c in chosen if c not in dense)
        if missing and use_vectors:
            t3 = time.perf_counter()
            # the best windows among them get their cosine; a risk-kept chunk outside them keeps semantic 0
            # (its place in the package is decided by its risk, not its similarity)
            extra = self.dense_hits(view, query_vector, SearchScope(deal_id=deal_id, chunk_ids=tuple(missing)), min(KEPT_SEARCH_WINDOWS, 8 * len(missing)))
            for cid, window, score in extra:
                if cid in structural_ids:
                    prev = dense.get(cid)
                    if prev is None or score > prev[0]:
                        dense[cid] = (score, window)
            timings["vector_ms"] += (time.perf_counter() - t3) * 1000
        candidates = []
        for cid in chosen:
            cos, win = dense.get(cid, (0.0, 0))
            candidates.append(Candidate(chunk=structural_ids[cid], cosine=cos, best_window=win, bm25=bm25.get(cid, 0.0)))
        best = max(bm25.values(), default=0.0)
        candidates.sort(key=lambda c: c.chunk.reading_key)
        _group_adjacent(candidates)
        return RetrievalResult(candidates, best, timings, fallbacks, mem0_calls, 0, len(structural))


def _point_table(view: DealView, rc: Any) -> dict[int, tuple[str, int]]:
    """point id (as the UUID's integer) -> (chunk id, window) for the windows each chunk of ``view`` probably has.

    Windows are cut in MiniLM word pieces, which the registry does not record; the estimate allows
    1.5 word pieces per cl100k token (a window beyond it is resolved from its payload when it is hit).
    """
    step = max(1, rc.window_tokens - rc.window_overlap_tokens)
    table: dict[int, tuple[str, int]] = {}
    for cid, c in view.chunks.items():
        n = 1 + max(0, math.ceil((1.5 * c.token_count - rc.window_tokens) / step))
        for w in range(n):
            table[point_uuid(cid, w).int] = (cid, w)
    return table


def _group_adjacent(candidates: list[Candidate]) -> None:
    """Give chunks of one document and section whose page ranges touch the same group number."""
    group = 0
    prev: ChunkView | None = None
    for cand in candidates:  # already in reading order
        c = cand.chunk
        if not (prev is not None and prev.document_id == c.document_id and prev.section_type == c.section_type and c.page_start <= prev.page_end + 1):
            group += 1
        cand.group = group
        prev = c


__all__ = ["Candidate", "ChunkView", "DealView", "RetrievalResult", "SegmentAwareRetriever"]
