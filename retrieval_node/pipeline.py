"""The retrieval pipeline: one straight path from intent to package (spec 1.2).

::

    intent ─▶ plan (contract) ─▶ embed ─▶ deal view ─▶ retrieve ─▶ rank ─▶ select ─▶ coverage repair
           ─▶ finalize ─▶ explain ─▶ audit ─▶ (ContextPackage, RetrievalSummary, RetrievalMetrics)

:class:`Pipeline` wires the stages over one set of :class:`~retrieval_node.ports.Backends` and owns the
state of one process: the deal views (:class:`~retrieval_node.deals.DealCache`, keyed by ingest
generation), the query vectors (by text), the pattern rows (by pattern generation), the rankers' and
the packager's memos, the snapshot rows. :class:`~retrieval_node.agent.RetrievalAgent` runs it in
process; :mod:`retrieval_node.workers` runs the same pipeline in worker processes over remote ports.

Fallbacks (spec 5), each recorded in ``summary.fallbacks``:

* no chunk in the target sections -> minimal package, ``UNABLE_TO_ASSESS``, ``needs_human_input``;
* budget too small for the required zones or the material risks -> greedy by risk, shortfall reported;
* budget too small for any chunk found (an empty package, e.g. a question's) -> ``budget_shortfall``, ``needs_human_input``;
* Mem0 unavailable -> structural filter from the vector payloads;
* nothing scores above ``risk_threshold`` -> broaden to every section once, then flag for human review;
* Qdrant unavailable -> :class:`~retrieval_node.errors.BackendError`; no package is fabricated.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from .audit import SnapshotRows, record_retrieval
from .cache import BoundedCache
from .collector import paused
from .config import AgentProfile, NodeConfig
from .contracts import ContractPlan, compile_plan
from .coverage import CoverageSelfCheck, ZoneSource, repair
from .deals import DealCache, DealView, Gate
from .errors import AccessDenied, ContractViolation, IntentError
from .explain import explain
from .finalize import finalize
from .models import (
    ChunkReference,
    ContextPackage,
    QuestionIntent,
    RetrievalIntent,
    RetrievalMetrics,
    RetrievalSummary,
    TrustContext,
    build_package,
    to_reference,
)
from .pack import ContextPackager
from .passages import companions
from .precompute import offer_bodies, offer_mentions, seed_ranker
from .superseded import demote
from .ports import AuditSink, Backends
from .question import ParsedQuestion, QuestionResult, QuestionStage
from .rank import RankSettings, Rankers, rank
from .retrieve import SegmentAwareRetriever
from .values import Candidate, ChunkView, CoverageReport, Scored, Selection

#: Query vectors kept per pipeline (profile queries, zone queries and free-text questions).
QUERY_CACHE = 512


class Pipeline:
    """The stages over one set of backends, with the per-process state they keep.

    >>> pipeline = Pipeline(store, store.config, audit=AuditLog(store.home / "audit", store.registry))  # doctest: +SKIP
    >>> package, summary, metrics = pipeline.run(intent, trust)                                           # doctest: +SKIP
    """

    def __init__(self, backends: Backends, config: NodeConfig, *, audit: AuditSink) -> None:
        self.backends = backends
        self.config = config
        self.audit = audit
        self.rankers = Rankers(config)
        self.deals = DealCache(backends, config)
        self.retriever = SegmentAwareRetriever(backends)
        self.packager = ContextPackager(backends.tokens)
        self.deals.on_evict.append(self._forget_view)
        self.coverage = CoverageSelfCheck(self.packager)
        self.snapshot_rows = SnapshotRows()
        self._queries: BoundedCache[str, np.ndarray] = BoundedCache(QUERY_CACHE, ttl=float(config.retrieval.cache_ttl_seconds))
        self._patterns: tuple[int, float, list[tuple[str, str, str]]] | None = None  # (generation, loaded at, rows)
        self._patterns_lock = threading.Lock()
        self.questions = QuestionStage(config, self.retriever, lambda text: self.query_vector(text)[0])

    # -- identity and settings ----------------------------------------------------------------
    def agent_name(self, intent: RetrievalIntent) -> str:
        """The configured agent whose ``agent_id`` the intent names (its contract applies), else the id itself."""
        for name, profile in self.config.agents.items():
            if profile.agent_id == intent.agent_id:
                return name
        return intent.agent_id

    def profile(self, intent: RetrievalIntent) -> AgentProfile | None:
        for profile in self.config.agents.values():
            if profile.intent_id == intent.intent_id and profile.agent_id == intent.agent_id:
                return profile
        return None

    def plan(self, intent: RetrievalIntent) -> ContractPlan:
        """The compiled contract plan of ``intent`` (raises :class:`ContractViolation` before anything is fetched)."""
        if self.config.contracts is None:
            raise ContractViolation("no retrieval contracts are configured (configs/contracts.yaml); nothing is retrieved without one")
        return compile_plan(intent, self.agent_name(intent), self.config.contracts)

    # -- state --------------------------------------------------------------------------------
    def _forget_view(self, view: DealView) -> None:
        """A deal view left the deal cache: what the rankers, the packager and the question stage keep of its chunks
        goes with it (a process serving every deal of a large store keeps per-chunk state for the cached deals only)."""
        self.rankers.forget({c.content_hash for c in view.chunks.values()})
        self.packager.forget(set(view.chunks))
        self.questions.forget(view)

    def query_vector(self, text: str) -> tuple[np.ndarray, int]:
        """The embedding of ``text`` (cached) and how many model calls it took (0 or 1)."""
        vec = self._queries.get(text)
        if vec is not None:
            return vec, 0
        embed_query = getattr(self.backends, "embed_query", None)  # the store's persisted query vectors (query_cache.py)
        if embed_query is not None:
            vec, calls = embed_query(text)
            return self._queries.put(text, vec), calls
        return self._queries.put(text, self.backends.embedder.embed([text])[0]), 1

    def patterns(self, fallbacks: list[str]) -> tuple[list[tuple[str, str, str]], int]:
        """``(entity_id, topic, memory_id)`` of every pattern memory, reloaded when ``patterns add`` bumped the
        pattern generation (or after ``cache_ttl_seconds``); returns the rows and the Mem0 calls made."""
        ttl = float(self.config.retrieval.cache_ttl_seconds)
        gen = self.backends.patterns_generation()
        with self._patterns_lock:
            if self._patterns is not None and self._patterns[0] == gen and time.monotonic() - self._patterns[1] <= ttl:
                return self._patterns[2], 0
            try:
                rows = [(p.entity_id, p.topic, p.memory_id) for p in self.backends.registry.all_patterns()]
            except Exception as exc:  # patterns only refine γ; their loss is recorded, not fatal
                fallbacks.append(f"patterns_unavailable: γ term set to 0 ({exc})")
                return [], 1
            self._patterns = (gen, time.monotonic(), rows)
            return rows, 1

    def invalidate_patterns(self) -> None:
        with self._patterns_lock:
            self._patterns = None

    # -- the path -------------------------------------------------------------------------------
    def run(self, intent: RetrievalIntent, trust: TrustContext) -> tuple[ContextPackage, RetrievalSummary, RetrievalMetrics]:
        """One retrieval: the plan passes first (nothing is embedded or fetched before), then every stage in order,
        with Python's cyclic garbage collector paused (:mod:`retrieval_node.collector`, ``retrieval.pause_collector``)."""
        with paused(self.config.retrieval.pause_collector):
            return self._run(intent, trust)

    def _run(self, intent: RetrievalIntent, trust: TrustContext) -> tuple[ContextPackage, RetrievalSummary, RetrievalMetrics]:
        t_start = time.perf_counter()
        clock = _Clock()
        admit(trust, deal_id=intent.deal_id, agent_id=intent.agent_id, what=f"intent {intent.intent_id}")
        fallbacks: list[str] = []
        plan = self.plan(intent)
        settings = self.rankers.settings(intent, self.profile(intent))
        question = self.questions.parse(intent.query_text) if isinstance(intent, QuestionIntent) else None
        with clock("embed_ms"):
            qvec, emb_calls = self.query_vector(question.body if question else intent.query_text)
        view, mem0_calls = self.deals.view(intent.deal_id, fallbacks)
        if not view.chunks:
            raise IntentError(f"deal_id {intent.deal_id!r} has no registered chunks in this store; ingest its documents first")
        if view.rejected:
            fallbacks.append(f"integrity: {len(view.rejected)} registry record(s) failed their hash or chunk-id check and were skipped")
        gate = view.gate(plan, trust, intent.as_of)
        redacted, above_trust = gate.listed()
        seed_ranker(view, settings)  # the risk signals ingest stored for the deal (precompute.py)
        offer_bodies(view, self.packager, self.backends)  # and its chunks' body token counts
        ranked = self._rank(intent, question, plan=plan, settings=settings, view=view, gate=gate, qvec=qvec, clock=clock, fallbacks=fallbacks)
        scored, score, passages, confidence, needs_human = ranked.scored, ranked.score, ranked.passages, ranked.confidence, ranked.needs_human
        mem0_calls += ranked.mem0_calls
        if ranked.routed is not None:  # the redacted listing, like the search, covers the documents the question names
            redacted = [c for c in redacted if c.document_id in ranked.routed]

        budget = intent.max_tokens_budget
        overhead = self.packager.overhead(intent.deal_id, intent.intent_id, intent.agent_id)
        with clock("packaging_ms"):
            sel = self.packager.select(scored, budget=budget, overhead=overhead, zones=intent.required_structural_zones or (),
                                       risk_share=settings.risk_share, excerpt_for=settings.excerpt_for, companions=passages) if scored else Selection()
        found = {s.chunk.chunk_id: s for s in scored}
        with clock("coverage_ms"):
            zones = ZoneSource(plan=plan, retriever=self.retriever, view=view, gate=gate, query_text=intent.query_text,
                               query_vector=lambda text: self.query_vector(text)[0], scored=found,
                               score=score)
            report = repair(self.coverage, sel=sel, scored=scored, found=found, zones=zones, required=list(intent.required_structural_zones or []),
                            budget=budget, overhead=overhead, risk_share=settings.risk_share, excerpt_for=settings.excerpt_for)

        if question is not None:  # chosen by relevance; now screened, so the risk summary reports what the package holds
            self.questions.annotate(sel, lambda c: settings.ranker.risk(c.content_hash, c.content, settings.domains))
        with clock("packaging_ms"):
            refs, visible_text, total, code = finalize(self.packager, sel, budget=budget, deal_id=intent.deal_id, intent_id=intent.intent_id,
                                                       agent_id=intent.agent_id, key=self.backends.secret(),
                                                       redacted=[to_reference(c).model_copy(update={"content": "", "redacted": True}) for c in redacted])
            if report.required:
                report.covered = sorted({z for r in refs for z in r.zones} & set(report.required))
                report.unfit = sorted(set(report.unfit) | (set(report.required) - set(report.covered) - set(report.absent)))
            missed = [s for cid, s in found.items() if s.material and cid not in sel.chosen]
            needs_human = _degradations(fallbacks, needs_human, refs=refs, redacted=len(redacted), above_trust=above_trust if trust.authenticated else 0, missed=missed,
                                        report=report, budget=budget, searched=len(scored), what=f"{plan.sections} chunks for deal {intent.deal_id}")
            why = explain(intent=intent, view=view, sections=plan.sections, roles=plan.roles, refs=refs, sel=sel, scored=found, report=report,
                          missed=missed, inspected=len(scored), excerpt_for=settings.excerpt_for, trust=trust)
            package = build_package(deal_id=intent.deal_id, intent_id=intent.intent_id, agent_id=intent.agent_id, refs=refs,
                                    structural_toc=why.structural_toc, exclusions_note=why.exclusions_note, total_tokens=total,
                                    risk_summary=why.risk_summary, evidence_code=code)

        # the summary is final before the snapshot is written (stage timings up to here; audit and total time go
        # to the metrics), so the summary returned is the one replay returns
        stage_timings = dict(clock.timings)
        with clock("audit_ms"):
            summary, _note = record_retrieval(self.audit, self.snapshot_rows, intent=intent, plan=plan, trust=trust, package=package, refs=refs,
                                              sel=sel, scored=found, report=report, visible_text=visible_text, risk_distribution=why.risk_distribution,
                                              material_risks=why.material_risks, confidence=confidence, needs_human=needs_human, fallbacks=fallbacks,
                                              timings=stage_timings, vector=qvec)
        mem0_calls += 1
        timings = clock.timings
        timings["total_ms"] = (time.perf_counter() - t_start) * 1000
        metrics = RetrievalMetrics(
            deal_id=intent.deal_id, intent_id=intent.intent_id, agent_id=intent.agent_id,
            total_latency_ms=timings["total_ms"], mem0_query_time_ms=timings.get("structural_ms", 0.0),
            vector_search_time_ms=timings.get("vector_ms", 0.0) + timings.get("embed_ms", 0.0),
            ranking_time_ms=timings.get("ranking_ms", 0.0), packaging_time_ms=timings["packaging_ms"],
            chunks_inspected=len(found), chunks_selected=len(refs), tokens_selected=total,
            risk_distribution=why.risk_distribution, structural_coverage_score=report.score,
            embedding_api_calls=emb_calls, mem0_api_calls=mem0_calls, estimated_cost_usd=0.0,
        )
        return package, summary, metrics

    def _rank(self, intent: RetrievalIntent, question: ParsedQuestion | None, *, plan: ContractPlan, settings: RankSettings, view: DealView, gate: Gate,
              qvec: np.ndarray, clock: _Clock, fallbacks: list[str]) -> _Ranked:
        """The scored candidates of one call: a question's own ranking (question.py), else search, rank (superseded
        copies demoted), one broadened search when weak, and the passages material chunks continue into."""

        # a question ranks without patterns or superseded registers; a profile intent sets both below
        patterns: Sequence[tuple[str, str, str]] = []
        copies: Mapping[str, str] = {}
        best_bm25, beta = 0.0, settings.weights.beta

        def score(cands: list[Candidate], origin: str, best: float | None = None) -> list[Scored]:
            """rank, then a superseded copy of a register loses its finding to the newer search (superseded.py)."""
            ranked = rank(cands, best_bm25=best_bm25 if best is None else best, settings=settings, patterns=patterns, origin=origin)
            return demote(ranked, copies, beta) if copies else ranked

        if question is not None:  # a question: its own ranking (question.py) replaces retrieve + rank; the rest is shared
            asked = self.questions.rank(question, view=view, gate=gate, query_vector=qvec)
            clock.add(asked.timings_ms)
            fallbacks.extend(asked.notes)
            return _Ranked(asked.scored, score, {}, max((s.terms.dense for s in asked.scored), default=0.0), False, 0,
                           set(asked.routed) if asked.routed else None)
        rc, keep = self.config.retrieval, settings.keep(view)
        result = self.retriever.retrieve(plan.search_queries(), view=view, gate=gate, query=intent.query_text, query_vector=qvec,
                                         keep=keep, top_k=rc.semantic_top_k)
        clock.add(result.timings_ms)
        with clock("ranking_ms"):
            patterns, calls = self.patterns(fallbacks)
            offer_mentions(view, settings.ranker, frozenset(e for e, _, _ in patterns), self.backends)  # stored at ingest (precompute.py)
            copies, best_bm25 = view.superseded(), result.best_bm25
            scored = score(result.candidates, "search")
            scored, confidence, needs_human = self._broaden_if_weak(scored, plan, view, gate, intent, qvec, keep, score, fallbacks)
            passages, fresh = companions(scored, links=view.passage_links(), chunks=view.chunks,
                                         eligible=lambda c: gate.eligible(c) and gate.in_time(c),
                                         score=lambda cands: score(cands, "passage"))
        return _Ranked(scored + fresh, score, passages, confidence, needs_human, calls, None)

    def rank_question(self, intent: QuestionIntent, trust: TrustContext) -> QuestionResult:
        """The ranking a question's package is cut from, every eligible chunk best first, under the same admission,
        contract plan and gate as :meth:`run`; nothing is packaged or audited (what an evaluation reads)."""
        with paused(self.config.retrieval.pause_collector):
            return self._rank_question(intent, trust)

    def _rank_question(self, intent: QuestionIntent, trust: TrustContext) -> QuestionResult:
        admit(trust, deal_id=intent.deal_id, agent_id=intent.agent_id, what=f"question {intent.intent_id}")
        plan = self.plan(intent)
        question = self.questions.parse(intent.query_text)
        qvec, _ = self.query_vector(question.body)
        view, _ = self.deals.view(intent.deal_id, [])
        if not view.chunks:
            raise IntentError(f"deal_id {intent.deal_id!r} has no registered chunks in this store; ingest its documents first")
        return self.questions.rank(question, view=view, gate=view.gate(plan, trust, intent.as_of), query_vector=qvec)

    def _broaden_if_weak(self, scored: list[Scored], plan: ContractPlan, view: DealView, gate: Gate, intent: RetrievalIntent, qvec: np.ndarray,
                         keep: Callable[[ChunkView], bool], score: Callable[..., list[Scored]],
                         fallbacks: list[str]) -> tuple[list[Scored], float, bool]:
        """The plan's ``broadened_search``, once, when nothing in the target sections reaches ``risk_threshold``;
        returns (scored, confidence, needs human review)."""
        rc = self.config.retrieval
        confidence = max((max(s.terms.semantic, s.terms.risk) for s in scored), default=0.0)
        if not scored or confidence >= rc.risk_threshold:
            return scored, confidence, False
        broadened = self.retriever.retrieve([plan.query("broadened_search")], view=view, gate=gate, query=intent.query_text,
                                            query_vector=qvec, keep=keep, top_k=rc.semantic_top_k)
        known = {s.chunk.chunk_id for s in scored}
        fresh: list[Candidate] = [c for c in broadened.candidates if c.chunk.chunk_id not in known]
        scored = scored + score(fresh, "broadened", broadened.best_bm25)
        confidence = max((max(s.terms.semantic, s.terms.risk) for s in scored), default=0.0)
        if confidence < rc.risk_threshold:
            fallbacks.append(f"low_confidence: best score {confidence:.2f} < risk_threshold {rc.risk_threshold} after broadening to every section; human review needed")
            return scored, confidence, True
        fallbacks.append(f"low_confidence_broadened: no target-section chunk reached {rc.risk_threshold}; searched every section the contract allows once")
        return scored, confidence, False


def admit(trust: TrustContext, *, deal_id: str, agent_id: str, what: str) -> None:
    """Raise :class:`AccessDenied` unless ``trust`` reaches ``deal_id`` and, when it is bound to an agent, is that agent
    (identity comes from the caller, not from the request); ``what`` names the request in the message."""
    if not trust.in_scope(deal_id):
        raise AccessDenied(f"{trust.actor_id} has no scope for deal {deal_id} (scopes: {trust.scopes}); {what} is refused")
    if trust.agent_id is not None and agent_id != trust.agent_id:
        raise AccessDenied(f"{trust.actor_id} is agent {trust.agent_id!r}; {what} of agent {agent_id!r} is refused")


def _degradations(fallbacks: list[str], needs_human: bool, *, refs: Sequence[ChunkReference], redacted: int, above_trust: int,
                  missed: Sequence[Scored], report: CoverageReport, budget: int, searched: int, what: str) -> bool:
    """Record in ``fallbacks`` what the package lacks and why (``searched``: how many chunks the ranking found);
    returns whether a human must look."""
    if redacted:
        shown = sum(1 for r in refs if r.redacted)
        fallbacks.append(f"redacted: {redacted} chunk(s) one level above the caller's trust listed without content ({shown} fit the budget)")
    if above_trust:
        fallbacks.append(f"filtered_by_trust: {above_trust} chunk(s) above the caller's trust were not considered")
    if missed:
        needs_human = True
        fallbacks.append(f"budget_shortfall: {len(missed)} chunk(s) with material risk did not fit in {budget} tokens; greedy by risk kept the strongest")
    if report.unfit:
        needs_human = True
        fallbacks.append(f"budget_shortfall: required zone(s) {report.unfit} present in the deal but did not fit in {budget} tokens")
    if report.absent:
        needs_human = True
    if searched and not missed and not report.unfit and all(r.redacted for r in refs):
        # nothing material was lost, yet the package holds no chunk: the budget fits none of what was found
        needs_human = True
        fallbacks.append(f"budget_shortfall: none of the {searched} chunk(s) found fits in {budget} tokens; the package holds no evidence")
    if not searched:
        needs_human = True
        fallbacks.append(f"no_chunks: no {what}")
    return needs_human


@dataclass(slots=True)
class _Ranked:
    """What the ranking step hands the packager (:meth:`Pipeline._rank`)."""

    scored: list[Scored]
    score: Callable[..., list[Scored]]  # how further candidates (zone repair) are scored on this call
    passages: dict[str, list[Scored]]  # material chunk id -> the chunks its passage continues into
    confidence: float
    needs_human: bool
    mem0_calls: int
    routed: set[str] | None  # a question's routed documents, else None


class _Clock:
    """Milliseconds per stage; a stage timed twice adds up."""

    def __init__(self) -> None:
        self.timings: dict[str, float] = {}

    def add(self, timings: dict[str, float]) -> None:
        for k, v in timings.items():
            self.timings[k] = self.timings.get(k, 0.0) + v

    def __call__(self, name: str) -> _Lap:
        return _Lap(self, name)


class _Lap:
    def __init__(self, clock: _Clock, name: str) -> None:
        self.clock, self.name = clock, name

    def __enter__(self) -> None:
        self.t = time.perf_counter()

    def __exit__(self, *exc: object) -> None:
        self.clock.timings[self.name] = self.clock.timings.get(self.name, 0.0) + (time.perf_counter() - self.t) * 1000


__all__ = ["Pipeline", "admit"]
