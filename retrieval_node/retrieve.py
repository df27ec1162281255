"""Segment-aware retrieval (spec 3.1): the contract plan's structural, semantic and lexical queries.

:meth:`SegmentAwareRetriever.retrieve` runs the typed queries of a compiled
:class:`~retrieval_node.contracts.ContractPlan` (nothing else is ever sent to a backend):

1. **Structural filter** (``structural_filter`` / ``broadened_search``) — the deal's registered chunks
   (a :class:`~retrieval_node.deals.DealView`) in the query's section types / document roles, that the
   call's :class:`~retrieval_node.deals.Gate` lets through (contract re-check, trust, ``as_of``).
2. **Semantic search** (``semantic_search``, or a broadened search on the vector source) — the query
   vector against the deal's windows in the chunk index, filtered by deal + sections + roles. Hits are
   candidates, never facts: a hit whose chunk is not in the structural result (other deal, other
   section, half-registered) is dropped.
3. **Lexical search** — BM25 (bm25s) over the deal's chunks, for instrument numbers, party names and
   dollar figures that MiniLM does not separate.
4. **Coherence grouping** — chunks of the same document and section whose page ranges touch are
   linked, so the packager can keep a register that spans pages together.

If the chunk index fails, a :class:`~retrieval_node.errors.BackendError` propagates.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence

import numpy as np

from .contracts import ContractQuery
from .deals import DealView, Gate
from .ports import Backends, SearchRequest, SearchScope
from .values import Candidate, ChunkView, RetrievalResult

#: Windows fetched to score the chunks kept for their risk outside the dense top hits.
KEPT_SEARCH_WINDOWS = 256


class SegmentAwareRetriever:
    """Structural filter + hybrid search over one deal.

    >>> retriever = SegmentAwareRetriever(store)                                # doctest: +SKIP
    >>> result = retriever.retrieve(plan.search_queries(), view=view, gate=gate, query="builders' lien",
    ...     query_vector=vec)                                                    # doctest: +SKIP
    """

    def __init__(self, backends: Backends) -> None:
        self.backends = backends

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
        return self.dense_hits_many(view, [(vector, scope, limit)])[0]

    def dense_hits_many(self, view: DealView, requests: Sequence[SearchRequest]) -> list[list[tuple[str, int, float]]]:
        """:meth:`dense_hits` for each ``(vector, scope, limit)``, searched as one batch."""
        for _, scope, _ in requests:
            if scope.deal_id != view.deal_id:
                raise ValueError(f"search scope deal {scope.deal_id!r} is not the view's deal {view.deal_id!r}")
        return [self._map_points(view, res) for res in self.backends.chunks.search_points_many(list(requests))]

    def _map_points(self, view: DealView, points: Sequence[tuple[uuid.UUID | int, float]]) -> list[tuple[str, int, float]]:
        # int keys: C-level hash and eq (a worker process receives the ints themselves: they pickle cheaper than UUIDs)
        raw = [(pid if isinstance(pid, int) else pid.int, score) for pid, score in points]
        rc = self.backends.config.retrieval
        table = view.point_table(rc.window_tokens, rc.window_overlap_tokens)
        unknown = [pid for pid, _ in raw if pid not in table]
        if unknown:
            for pid, payload in self.backends.chunks.payloads([str(uuid.UUID(int=u)) for u in unknown], ("deal_id", "chunk_id", "window")).items():
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
        queries: Sequence[ContractQuery],
        *,
        view: DealView,
        gate: Gate,
        query: str,
        query_vector: np.ndarray,
        keep: Callable[[ChunkView], bool] | None = None,
        top_k: int = 50,
    ) -> RetrievalResult:
        """Run a plan's queries: candidates of one deal with dense and BM25 evidence.

        ``queries`` are the plan's ``structural_filter`` (or ``broadened_search``) query, which names the
        sections and roles, with its ``semantic_search`` and ``lexical_search`` queries; no vector is
        searched unless one of them has the vector source. Candidates are the ``top_k`` chunks by dense
        similarity, the ``top_k`` by BM25, and every chunk for which ``keep(chunk)`` is true (the pipeline
        keeps chunks that carry a material risk, whatever their similarity).
        """
        structural_q = next(q for q in queries if q.type in ("structural_filter", "broadened_search"))
        risk_q = next((q for q in queries if q.type == "risk_scan"), None)
        if structural_q.deal_id != view.deal_id:
            raise ValueError(f"plan query for deal {structural_q.deal_id!r} run on deal {view.deal_id!r}")
        use_vectors = any(q.source == "vector" for q in queries)
        deal_id = view.deal_id
        timings: dict[str, float] = {}
        t0 = time.perf_counter()
        sections = frozenset(structural_q.section_types)
        roles = frozenset(structural_q.document_roles) if structural_q.document_roles is not None else None
        cutoff = gate.as_of.timestamp() if gate.as_of is not None else None
        eligible = gate.eligible

        def structural_set() -> list[ChunkView]:
            return [
                c for c in view.chunks.values()
                if c.section_type in sections
                and (roles is None or c.document_role in roles)
                and (cutoff is None or c.ingested_ts <= cutoff)
                and eligible(c)
            ]

        structural = view.structural(gate.key, sections, roles, cutoff, structural_set)
        timings["structural_ms"] = (time.perf_counter() - t0) * 1000
        if not structural:
            return RetrievalResult([], 0.0, timings, [], 0, 0, 0)

        t1 = time.perf_counter()
        scope = SearchScope(
            deal_id=deal_id,
            section_types=tuple(sorted(sections)),
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
            if risk_q is not None:  # a material risk anywhere the contract allows, whatever its page label
                for c in self._risk_pool(view, gate, risk_q, cutoff):
                    if c.chunk_id not in structural_ids and keep(c):
                        structural_ids[c.chunk_id] = c
                        chosen.add(c.chunk_id)
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
        lexical = view.bm25_scores(query)
        for cid in chosen:
            cos, win = dense.get(cid, (0.0, 0))
            candidates.append(Candidate(chunk=structural_ids[cid], cosine=cos, best_window=win, bm25=lexical.get(cid, 0.0)))
        best = max(bm25.values(), default=0.0)
        candidates.sort(key=lambda c: c.chunk.reading_key)
        _group_adjacent(candidates)
        return RetrievalResult(candidates, best, timings, [], 0, 0, len(structural))

    @staticmethod
    def _risk_pool(view: DealView, gate: Gate, query: ContractQuery, cutoff: float | None) -> list[ChunkView]:
        """The chunks of a ``risk_scan`` query: its sections and roles, through the call's gate."""
        sections = frozenset(query.section_types)
        roles = frozenset(query.document_roles) if query.document_roles is not None else None

        def build() -> list[ChunkView]:
            return [c for c in view.chunks.values() if c.section_type in sections and (roles is None or c.document_role in roles)
                    and (cutoff is None or c.ingested_ts <= cutoff) and gate.eligible(c)]

        return view.structural(("risk_scan", gate.key), sections, roles, cutoff, build)


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


__all__ = ["KEPT_SEARCH_WINDOWS", "SegmentAwareRetriever"]
