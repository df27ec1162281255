"""The RetrievalAgent: composes retrieve -> rank -> pack -> coverage -> audit (spec 1.2).

``RetrievalAgent.retrieve(intent)`` (async) and ``retrieve_sync(intent)`` return
``(ContextPackage, RetrievalSummary)``. Same intent on the same store gives the
same package and ``package_hash`` (ties broken by chunk id).

Fallbacks (spec 5), each recorded in ``summary.fallbacks``:

* no chunk in the target sections -> minimal package, ``UNABLE_TO_ASSESS``, ``needs_human_input``;
* budget too small for the required zones or the material risks -> greedy by risk, shortfall reported;
* Mem0 unavailable -> structural filter from the vector payloads;
* nothing scores above ``risk_threshold`` -> broaden to every section once, then flag for human review;
* Qdrant unavailable -> :class:`~retrieval_node.errors.BackendError`; no package is fabricated.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np
import orjson

from .audit import AuditLog, canonical_json, new_audit_id
from .backends.vectors import SearchScope
from .config import AgentProfile, NodeConfig
from .coverage import CoverageReport, CoverageSelfCheck, zones_in
from .contracts import ContractPlan, compile_plan, narrow_to_contract
from .backends.vectors import point_id
from .errors import AccessDenied, ChunkNotFound, ContractViolation, IntegrityError, IntentError, TrustRequired, UnknownAgentError
from .models import (
    ChunkReference,
    ContextPackage,
    TrustContext,
    sha256_hex,
    RetrievalAuditEntry,
    RetrievalIntent,
    RetrievalMetrics,
    RetrievalSummary,
    Stage,
)
from .pack import ContextPackager, Scored, Selection, build_package, package_hash, to_reference
from .rank import EXCERPT_MAX_CHARS, RiskAwareRanker
from .retrieve import Candidate, ChunkView, DealView, RetrievalResult, SegmentAwareRetriever, _view_from_payload
from .store import Store

#: Weight of BM25 inside the semantic term (the rest is the dense cosine).
LEXICAL_WEIGHT = 0.3
#: Windows fetched when scoring a required zone's members against the zone query (the packer needs its best few).
ZONE_SEARCH_WINDOWS = 64


class _LRU:
    def __init__(self, size: int) -> None:
        self.size = size
        self._d: OrderedDict[str, tuple[float, np.ndarray]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str, ttl: float) -> np.ndarray | None:
        with self._lock:
            item = self._d.get(key)
            if item is None or time.monotonic() - item[0] > ttl:
                return None
            self._d.move_to_end(key)
            return item[1]

    def put(self, key: str, value: np.ndarray) -> None:
        with self._lock:
            self._d[key] = (time.monotonic(), value)
            self._d.move_to_end(key)
            while len(self._d) > self.size:
                self._d.popitem(last=False)


class _SnapshotRows:
    """The snapshot's ``candidates`` and ``rejected`` lists as pre-serialised JSON (orjson fragments).

    A row is a pure function of its key (chunk id and fields, origin, every score term), so its canonical
    bytes are kept and reused: building hundreds of dicts per call and serialising them held the GIL
    for about a quarter of a call. The snapshot's bytes are the same as serialising the dicts.
    """

    LIMIT = 50_000  # ~350 bytes a row: ~17 MB at most

    def __init__(self) -> None:
        self._rows: dict[tuple[Any, ...], bytes] = {}

    def _put(self, key: tuple[Any, ...], row: dict[str, Any]) -> bytes:
        body = canonical_json(row)
        if len(self._rows) >= self.LIMIT:
            self._rows.clear()
        self._rows[key] = body
        return body

    def candidates(self, items: Sequence[tuple[str, Scored]]) -> orjson.Fragment:
        out = []
        for cid, s in items:
            c = s.chunk
            key = ("c", cid, c.section_type, c.page_range, c.document_id, s.origin, s.terms.key())
            body = self._rows.get(key)
            if body is None:
                body = self._put(key, {"chunk_id": cid, "section_type": c.section_type, "page_range": c.page_range,
                                       "document_id": c.document_id, "origin": s.origin, "terms": s.terms.as_dict()})
            out.append(body)
        return orjson.Fragment(b"[" + b",".join(out) + b"]")

    def rejected(self, items: Sequence[tuple[str, str]]) -> orjson.Fragment:
        out = []
        for cid, why in items:
            key = ("r", cid, why)
            body = self._rows.get(key)
            if body is None:
                body = self._put(key, {"chunk_id": cid, "reason": why})
            out.append(body)
        return orjson.Fragment(b"[" + b",".join(out) + b"]")


def _doc_groups(chunks: Iterable[ChunkView]) -> list[tuple[tuple[str, str], list[ChunkView]]]:
    """A deal's chunks by (document id, role), sorted, each group in reading order (the package's table of contents)."""
    by_doc: dict[tuple[str, str], list[ChunkView]] = {}
    for c in chunks:
        by_doc.setdefault((c.document_id, c.document_role), []).append(c)
    return [(key, sorted(cs, key=lambda c: c.reading_key)) for key, cs in sorted(by_doc.items())]


def intent_from_profile(
    name: str,
    profile: AgentProfile,
    *,
    deal_id: str,
    stage: Stage | str = Stage.DILIGENCE,
    budget: int | None = None,
    query_text: str | None = None,
) -> RetrievalIntent:
    """Build the intent of a configured agent profile (what adapters start from)."""
    stage = Stage(stage)
    if stage not in profile.stages:
        raise IntentError(f"agent {name!r} does not run in stage {stage.value}; configured stages: {[s.value for s in profile.stages]}")
    return RetrievalIntent(
        intent_id=profile.intent_id,
        deal_id=deal_id,
        agent_id=profile.agent_id,
        query_text=query_text or profile.query_text,
        target_section_types=profile.target_section_types,
        risk_profile=profile.risk_profile,
        max_tokens_budget=budget if budget is not None else profile.max_tokens_budget,
        required_structural_zones=profile.required_zones or None,
        stage=stage,
        document_roles=profile.document_roles,
    )


class RetrievalAgent:
    """Stage-1 retrieval for one store.

    >>> agent = RetrievalAgent(store)                                            # doctest: +SKIP
    >>> package, summary = agent.retrieve_sync(agent.intent_for("investigator", deal_id="2026-ACME-0042"))  # doctest: +SKIP
    >>> summary.missing_zones, package.total_tokens <= 4000                      # doctest: +SKIP
    ([], True)
    """

    def __init__(self, store: Store, *, config: NodeConfig | None = None, trust: TrustContext | None = None) -> None:
        """``trust`` is the default caller trust; each call may pass its own, and one of the two is required."""
        self.store = store
        self.trust = trust
        self.config = config or store.config
        if self.config.risk_signals is None:
            raise IntentError("configs/risk_signals.yaml is missing: the ranker needs risk lexicons")
        self.retriever = SegmentAwareRetriever(store)
        self.ranker = RiskAwareRanker(self.config.risk_signals, lexical_weight=LEXICAL_WEIGHT)
        # agents that act on some risk kinds only (profile risk_kinds) get a ranker over that part of the lexicon
        self._rankers: dict[tuple[str, ...], RiskAwareRanker] = {}
        for profile in self.config.agents.values():
            if profile.risk_kinds is not None:
                key = tuple(profile.risk_kinds)
                if key not in self._rankers:
                    self._rankers[key] = RiskAwareRanker(self.config.risk_signals.only_kinds(key), lexical_weight=LEXICAL_WEIGHT)
        self.packager = ContextPackager(store.tokens)
        self.coverage = CoverageSelfCheck(self.packager)
        self.audit = AuditLog(store.home / "audit", store.registry, background=self.config.retrieval.audit_write == "background")
        if self.audit.background:
            store.add_close_hook(self.audit.close)  # the writer finishes before Mem0's client closes
        self._queries = _LRU(512)
        self._json_rows = _SnapshotRows()
        self._semaphore = threading.BoundedSemaphore(self.config.retrieval.concurrency)
        self._async_semaphore: asyncio.Semaphore | None = None
        self._patterns: tuple[float, list[tuple[str, str, str]]] | None = None
        self._patterns_lock = threading.Lock()
        self.active = 0
        self.peak_active = 0
        self._active_lock = threading.Lock()

    # -- intents -------------------------------------------------------------------------
    def intent_for(self, agent: str, *, deal_id: str, stage: Stage | str = Stage.DILIGENCE, budget: int | None = None, query_text: str | None = None) -> RetrievalIntent:
        profile = self.config.agents.get(agent)
        if profile is None:
            raise UnknownAgentError(f"unknown agent {agent!r}; configured agents: {sorted(self.config.agents)}")
        return self.narrow(intent_from_profile(agent, profile, deal_id=deal_id, stage=stage, budget=budget, query_text=query_text), agent)

    def narrow(self, intent: RetrievalIntent, agent: str) -> RetrievalIntent:
        """``intent``, built from ``agent``'s profile, without the profile's defaults its contract forbids at the intent's
        stage (:func:`~retrieval_node.contracts.narrow_to_contract`)."""
        profile = self.config.agents[agent]
        return narrow_to_contract(intent, agent, self.config.contracts, profile_sections=profile.target_section_types, profile_roles=profile.document_roles)

    def _profile(self, intent: RetrievalIntent) -> AgentProfile | None:
        for profile in self.config.agents.values():
            if profile.intent_id == intent.intent_id and profile.agent_id == intent.agent_id:
                return profile
        return None

    def _agent_name(self, intent: RetrievalIntent) -> str:
        for name, profile in self.config.agents.items():
            if profile.agent_id == intent.agent_id:
                return name
        return intent.agent_id

    def _plan(self, intent: RetrievalIntent) -> ContractPlan:
        if self.config.contracts is None:
            raise ContractViolation("no retrieval contracts are configured (configs/contracts.yaml); nothing is retrieved without one")
        return compile_plan(intent, self._agent_name(intent), self.config.contracts)

    def _ranker(self, intent: RetrievalIntent) -> RiskAwareRanker:
        profile = self._profile(intent)
        if profile is None or profile.risk_kinds is None:
            return self.ranker
        return self._rankers[tuple(profile.risk_kinds)]

    def _domains(self, intent: RetrievalIntent) -> list[str]:
        profile = self._profile(intent)
        if profile is not None and profile.risk_domains:
            return list(profile.risk_domains)
        return sorted(self.config.risk_signals.domains) if self.config.risk_signals else []

    # -- entry points --------------------------------------------------------------------
    async def retrieve(self, intent: RetrievalIntent, *, trust: TrustContext | None = None) -> tuple[ContextPackage, RetrievalSummary]:
        """Async entry point; the work runs in a thread, at most ``max_concurrent_retrievals`` at once."""
        return await asyncio.to_thread(self.retrieve_sync, intent, trust=trust)

    def retrieve_sync(self, intent: RetrievalIntent, *, trust: TrustContext | None = None) -> tuple[ContextPackage, RetrievalSummary]:
        caller = self._trust(trust)
        with self._semaphore:
            with self._active_lock:
                self.active += 1
                self.peak_active = max(self.peak_active, self.active)
            try:
                package, summary, _metrics = self._run(intent, caller)
                return package, summary
            finally:
                with self._active_lock:
                    self.active -= 1

    def retrieve_with_metrics(self, intent: RetrievalIntent, *, trust: TrustContext | None = None) -> tuple[ContextPackage, RetrievalSummary, RetrievalMetrics]:
        caller = self._trust(trust)
        with self._semaphore:
            return self._run(intent, caller)

    def _trust(self, trust: TrustContext | None) -> TrustContext:
        caller = trust or self.trust
        if caller is None:
            raise TrustRequired(
                "a TrustContext is required: pass trust=TrustContext(max_sensitivity=..., authenticated=..., actor_id=...) "
                "to RetrievalAgent(...) or to the call"
            )
        return caller

    def get_chunk(self, chunk_id: str, *, trust: TrustContext | None = None) -> ChunkReference:
        """One chunk by id: the full reference, a redacted one (one level above the caller's trust),
        :class:`AccessDenied`, or :class:`ChunkNotFound`."""
        caller = self._trust(trust)
        payload = self.store.chunks.payloads([point_id(chunk_id, 0)]).get(point_id(chunk_id, 0))
        if payload is None or "content" not in payload:
            raise ChunkNotFound(f"no chunk {chunk_id!r} in this store")
        deal, sensitivity = payload["deal_id"], payload.get("sensitivity", "confidential")
        if sha256_hex(payload["content"]) != payload["content_hash"]:
            raise IntegrityError(f"chunk {chunk_id} does not match its content_hash")
        ref = to_reference(_view_from_payload(payload))
        if caller.allows(deal, sensitivity):
            return ref
        if caller.allows_redacted(deal, sensitivity):
            return ref.model_copy(update={"content": "", "redacted": True})
        raise AccessDenied(f"{caller.actor_id} may not read chunk {chunk_id} ({sensitivity}, deal {deal})")

    # -- pipeline ------------------------------------------------------------------------
    def _query_vector(self, text: str) -> tuple[np.ndarray, int]:
        ttl = float(self.config.retrieval.cache_ttl_seconds)
        vec = self._queries.get(text, ttl)
        if vec is not None:
            return vec, 0
        vec = self.store.embedder.embed([text])[0]
        self._queries.put(text, vec)
        return vec, 1

    def _pattern_rows(self, fallbacks: list[str]) -> tuple[list[tuple[str, str, str]], int]:
        ttl = float(self.config.retrieval.cache_ttl_seconds)
        with self._patterns_lock:
            if self._patterns is not None and time.monotonic() - self._patterns[0] <= ttl:
                return self._patterns[1], 0
            try:
                rows = [(p.entity_id, p.topic, p.memory_id) for p in self.store.registry.all_patterns()]
            except Exception as exc:  # patterns only refine γ; their loss is recorded, not fatal
                fallbacks.append(f"patterns_unavailable: γ term set to 0 ({exc})")
                return [], 1
            self._patterns = (time.monotonic(), rows)
            return rows, 1

    def invalidate_patterns(self) -> None:
        with self._patterns_lock:
            self._patterns = None

    def _score(self, cands: Sequence[Candidate], result: RetrievalResult, intent: RetrievalIntent, patterns: list[tuple[str, str, str]], origin: str) -> list[Scored]:
        weights = self.config.weights[intent.risk_profile]
        domains = tuple(self._domains(intent))  # tuples: the ranker's cache keys take them as they are
        ranker = self._ranker(intent)
        entities = frozenset(e for e, _, _ in patterns)
        patterns = tuple(patterns)  # type: ignore[assignment]
        out = []
        for c in cands:
            terms = ranker.score(
                content_hash=c.chunk.content_hash, content=c.chunk.content, entity_ids=c.chunk.entity_ids,
                cosine=c.cosine, bm25=c.bm25, best_bm25=result.best_bm25, weights=weights, domains=domains, patterns=patterns,
                pattern_entities=entities,
            )
            out.append(Scored(chunk=c.chunk, terms=terms, group=c.group, origin=origin))
        return out

    def _run(self, intent: RetrievalIntent, trust: TrustContext) -> tuple[ContextPackage, RetrievalSummary, RetrievalMetrics]:
        t_start = time.perf_counter()
        if not trust.in_scope(intent.deal_id):
            raise AccessDenied(f"{trust.actor_id} has no scope for deal {intent.deal_id} (scopes: {trust.scopes})")
        timings: dict[str, float] = {}
        fallbacks: list[str] = []
        mem0_calls = 0
        rc = self.config.retrieval

        t = time.perf_counter()
        qvec, emb_calls = self._query_vector(intent.query_text)
        timings["embed_ms"] = (time.perf_counter() - t) * 1000

        plan = self._plan(intent)  # before any backend is touched: a forbidden request retrieves nothing

        view, calls = self.retriever.deal_view(intent.deal_id, fallbacks)
        mem0_calls += calls
        if not view.chunks:
            raise IntentError(f"deal_id {intent.deal_id!r} has no registered chunks in this store; ingest its documents first")
        if view.rejected:
            fallbacks.append(f"integrity: {len(view.rejected)} registry record(s) failed their hash check and were skipped")

        sections = plan.sections
        roles = plan.roles
        domains = self._domains(intent)

        # contract and trust answers depend on the chunk, the plan and the caller only: kept on the deal view
        plan_key = (tuple(plan.allowed_sections), tuple(plan.forbidden_sections), plan.allowed_roles and tuple(plan.allowed_roles),
                    tuple(plan.forbidden_roles), trust.effective_level, tuple(trust.scopes))
        allowed: dict[str, bool] = view.memo(("eligible", plan_key), dict)

        def eligible(chunk: ChunkView) -> bool:  # vector hits are candidates, never facts: contract and trust decide
            ok = allowed.get(chunk.chunk_id)
            if ok is None:
                ok = allowed[chunk.chunk_id] = plan.allows(chunk.section_type, chunk.document_role) and trust.allows(chunk.deal_id, chunk.sensitivity)
            return ok

        def listed() -> tuple[list[ChunkView], int]:  # (redacted chunks to list, chunks above trust) of the plan's sections
            in_plan = [c for c in view.chunks.values() if c.section_type in sections and (roles is None or c.document_role in roles)
                       and plan.allows(c.section_type, c.document_role) and (intent.as_of is None or c.ingested_ts <= intent.as_of.timestamp())]
            shown = sorted((c for c in in_plan if trust.allows_redacted(c.deal_id, c.sensitivity)), key=lambda c: c.reading_key)
            hidden = sum(1 for c in in_plan if not trust.allows(c.deal_id, c.sensitivity) and not trust.allows_redacted(c.deal_id, c.sensitivity))
            return shown, hidden

        redacted, above_trust = view.memo(("listed", plan_key, tuple(sections), roles and tuple(roles), intent.as_of), listed)

        # a chunk with a material risk is a candidate whatever its similarity; whether it is material depends on
        # the chunk and the domains only, so the answer is kept on the deal view (filled as chunks are asked about)
        ranker = self._ranker(intent)
        profile = self._profile(intent)
        kinds = None if profile is None or profile.risk_kinds is None else tuple(profile.risk_kinds)
        material: dict[str, bool] = view.memo(("material", tuple(domains), kinds), dict)

        def keep(chunk: ChunkView) -> bool:
            hit = material.get(chunk.chunk_id)
            if hit is None:
                hit = material[chunk.chunk_id] = ranker.risk(chunk.content_hash, chunk.content, domains).material
            return hit

        result = self.retriever.retrieve(
            deal_id=intent.deal_id, query=intent.query_text, query_vector=qvec, section_types=sections,
            document_roles=roles, as_of=intent.as_of, eligible=eligible, eligible_key=plan_key, keep=keep, top_k=rc.semantic_top_k,
            use_vectors=plan.vector_search,
        )
        fallbacks.extend(f for f in result.fallbacks if f not in fallbacks)
        for k, v in result.timings_ms.items():
            timings[k] = timings.get(k, 0.0) + v

        t = time.perf_counter()
        patterns, calls = self._pattern_rows(fallbacks)
        mem0_calls += calls
        scored = self._score(result.candidates, result, intent, patterns, "search")
        confidence = max((max(s.terms.semantic, s.terms.risk) for s in scored), default=0.0)
        needs_human = False
        if scored and confidence < rc.risk_threshold:
            broadened = self.retriever.retrieve(
                deal_id=intent.deal_id, query=intent.query_text, query_vector=qvec, section_types=plan.allowed_sections,
                document_roles=roles, as_of=intent.as_of, eligible=eligible, eligible_key=plan_key, keep=keep, top_k=rc.semantic_top_k,
                use_vectors=plan.vector_search,
            )
            known = {s.chunk.chunk_id for s in scored}
            scored += self._score([c for c in broadened.candidates if c.chunk.chunk_id not in known], broadened, intent, patterns, "broadened")
            confidence = max((max(s.terms.semantic, s.terms.risk) for s in scored), default=0.0)
            if confidence < rc.risk_threshold:
                needs_human = True
                fallbacks.append(f"low_confidence: best score {confidence:.2f} < risk_threshold {rc.risk_threshold} after broadening to every section; human review needed")
            else:
                fallbacks.append(f"low_confidence_broadened: no target-section chunk reached {rc.risk_threshold}; searched every section the contract allows once")
        timings["ranking_ms"] = (time.perf_counter() - t) * 1000

        t = time.perf_counter()
        budget = intent.max_tokens_budget
        overhead = self.packager.overhead(intent.deal_id, intent.intent_id, intent.agent_id)
        share = profile.risk_budget_share if profile is not None else 1.0
        excerpt_chars = profile.excerpt_max_chars if profile is not None else EXCERPT_MAX_CHARS

        def excerpt_for(chunk: ChunkView) -> tuple[int, int] | None:
            return ranker.excerpt_span(chunk.content_hash, chunk.content, domains, max_chars=excerpt_chars)

        sel = self.packager.select(scored, budget=budget, overhead=overhead, zones=intent.required_structural_zones or (), risk_share=share,
                                   excerpt_for=excerpt_for) if scored else Selection()
        timings["packaging_ms"] = (time.perf_counter() - t) * 1000

        t = time.perf_counter()
        required = list(intent.required_structural_zones or [])
        scored_by_id = {s.chunk.chunk_id: s for s in scored}

        zone_memo: dict[str, list[Scored]] = {}

        def zone_members(zone: str) -> list[ChunkView]:
            return [c for c in view.zone_members(zone) if eligible(c) and (intent.as_of is None or c.ingested_ts <= intent.as_of.timestamp())]

        def zone_search(zone: str, missing: Sequence[ChunkView]) -> tuple[np.ndarray, SearchScope, int]:
            # the best-matching windows of the zone's members; a member outside them keeps semantic 0
            zvec, _ = self._query_vector(f"{zone.replace('_', ' ')}: {intent.query_text}")
            return zvec, SearchScope(deal_id=intent.deal_id, chunk_ids=tuple(sorted(c.chunk_id for c in missing))), min(8 * len(missing), ZONE_SEARCH_WINDOWS)

        # the self-check asks for every required zone, missing ones first, each re-retrieving the members no earlier
        # step scored: those searches are made up front as one batch, and a zone whose members turn out otherwise
        # when it is asked for (an eviction changed the order) searches again on its own
        prefetched: dict[str, tuple[tuple[str, ...] | None, list[tuple[str, int, float]]]] = {}
        if required and plan.vector_search and scored:
            have = zones_in(sel)
            unique = list(dict.fromkeys(required))
            seen = set(scored_by_id)
            batch: list[tuple[str, tuple[np.ndarray, SearchScope, int]]] = []
            for zone in [z for z in unique if have.get(z, 0) == 0] + [z for z in unique if have.get(z, 0) > 0]:
                missing = [c for c in zone_members(zone) if c.chunk_id not in seen]
                if missing:
                    seen.update(c.chunk_id for c in missing)
                    batch.append((zone, zone_search(zone, missing)))
            if len(batch) > 1:
                for (zone, req), hits in zip(batch, self.retriever.dense_hits_many(view, [req for _, req in batch]), strict=True):
                    prefetched[zone] = (req[1].chunk_ids, hits)

        def zone_candidates(zone: str) -> list[Scored]:
            if zone in zone_memo:
                return zone_memo[zone]
            members = zone_members(zone)
            if not members:
                zone_memo[zone] = []
                return []
            missing = [c for c in members if c.chunk_id not in scored_by_id]
            if missing:
                hits = []
                if plan.vector_search:
                    zvec, scope, limit = zone_search(zone, missing)
                    ready = prefetched.pop(zone, None)
                    hits = ready[1] if ready is not None and ready[0] == scope.chunk_ids else self.retriever.dense_hits(view, zvec, scope, limit)
                best: dict[str, float] = {}
                for cid, _window, score in hits:
                    best[cid] = max(best.get(cid, 0.0), score)
                bm = view.bm25_scores(intent.query_text)
                extra = [Candidate(chunk=c, cosine=best.get(c.chunk_id, 0.0), bm25=bm.get(c.chunk_id, 0.0)) for c in missing]
                for s in self._score(extra, result, intent, patterns, f"zone:{zone}"):
                    scored_by_id[s.chunk.chunk_id] = s
            zone_memo[zone] = [scored_by_id[c.chunk_id] for c in members]
            return zone_memo[zone]

        report = self.coverage.run(required=required, sel=sel, zone_candidates=zone_candidates, budget=budget, overhead=overhead,
                                   excerpt_for=excerpt_for) if required else CoverageReport(required=[])
        # a risk found only by a zone's re-retrieval, or one that lost its place, outranks plain context
        self.packager.place_risks(sel, list(scored_by_id.values()), budget=budget, overhead=overhead, risk_share=share,
                                  required=required, excerpt_for=excerpt_for)
        if report.evicted:
            self.packager.refill(sel, scored, budget=budget, overhead=overhead)
        timings["coverage_ms"] = (time.perf_counter() - t) * 1000

        t = time.perf_counter()
        refs, visible_text, total = self.packager.finalize(
            sel, budget=budget, deal_id=intent.deal_id, intent_id=intent.intent_id, agent_id=intent.agent_id,
            redacted=[to_reference(c).model_copy(update={"content": "", "redacted": True}) for c in redacted],
        )
        if redacted:
            shown = sum(1 for r in refs if r.redacted)
            fallbacks.append(f"redacted: {len(redacted)} chunk(s) one level above the caller's trust listed without content ({shown} fit the budget)")
        if above_trust:
            fallbacks.append(f"filtered_by_trust: {above_trust} chunk(s) above the caller's trust were not considered")
        if report.required:
            report.covered = sorted({z for r in refs for z in r.zones} & set(report.required))
            report.unfit = sorted(set(report.unfit) | (set(report.required) - set(report.covered) - set(report.absent)))
        selected_ids = [r.chunk_id for r in refs if not r.redacted]
        missed_risks = [s for cid, s in scored_by_id.items() if s.material and cid not in sel.chosen]
        if missed_risks:
            needs_human = True
            fallbacks.append(f"budget_shortfall: {len(missed_risks)} chunk(s) with material risk did not fit in {budget} tokens; greedy by risk kept the strongest")
        if report.unfit:
            needs_human = True
            fallbacks.append(f"budget_shortfall: required zone(s) {report.unfit} present in the deal but did not fit in {budget} tokens")
        if report.absent:
            needs_human = True
        if not scored:
            needs_human = True
            fallbacks.append(f"no_chunks: no {sections} chunks for deal {intent.deal_id}")

        risk_distribution: dict[str, int] = {}
        for cid in selected_ids:
            for k in sel.chosen[cid].terms.risk_kinds:
                risk_distribution[k] = risk_distribution.get(k, 0) + 1
        toc = self._toc(view, sections, roles, refs, report)
        exclusions = self._exclusions(sel, scored_by_id, report)
        risk_summary = self._risk_summary(intent, refs, sel, missed_risks, len(scored))
        package = build_package(
            deal_id=intent.deal_id, intent_id=intent.intent_id, agent_id=intent.agent_id, refs=refs,
            structural_toc=toc, exclusions_note=exclusions, total_tokens=total, risk_summary=risk_summary,
        )
        timings["packaging_ms"] += (time.perf_counter() - t) * 1000

        t = time.perf_counter()
        audit_id = new_audit_id()
        entry = RetrievalAuditEntry(
            timestamp=datetime.now(UTC), deal_id=intent.deal_id, intent_id=intent.intent_id, agent_id=intent.agent_id,
            query_text=intent.query_text, target_sections=sections, risk_profile=intent.risk_profile.value,
            max_tokens=budget, candidates_found=len(scored_by_id), candidates_filtered=len(scored_by_id) - len(refs),
            final_chunks=len(refs), context_package_hash=package.package_hash,
            exclusions=sorted(f"{cid}: {why}" for cid, why in sel.excluded.items()),
            risk_flags=sorted(k for cid in selected_ids for k in sel.chosen[cid].terms.risk_kinds),
            confidence_score=min(1.0, confidence), coverage_completeness=report.score, human_review_required=needs_human,
        )
        summary = RetrievalSummary(
            audit_id=audit_id,
            chunks_inspected=len(scored_by_id),
            chunks_selected=len(refs),
            tokens_selected=total,
            risk_distribution=risk_distribution,
            structural_coverage_score=report.score,
            missing_zones=report.missing,
            needs_human_input=needs_human,
            fallbacks=list(fallbacks),
            latency_ms={k: round(v, 3) for k, v in timings.items()},
        )
        snapshot = {
            "audit_id": audit_id,
            "intent": intent.model_dump(mode="json"),
            "contract": plan.model_dump(mode="json"),
            "trust": trust.model_dump(mode="json"),
            "package": package.model_dump(mode="json"),
            "summary": summary.model_dump(mode="json"),
            "selected": [{"chunk_id": cid, "reason": sel.reasons.get(cid, ""), "origin": sel.chosen[cid].origin, "terms": sel.chosen[cid].terms.as_dict(),
                          "excerpt": list(sel.chosen[cid].span) if sel.chosen[cid].span is not None else None} for cid in selected_ids],
            "rejected": self._json_rows.rejected(sorted(sel.excluded.items())),
            "candidates": self._json_rows.candidates(sorted(scored_by_id.items())),
            "coverage": {"required": report.required, "covered": report.covered, "partial": {k: list(v) for k, v in report.partial.items()}, "absent": report.absent, "unfit": report.unfit},
            "visible_text_sha256": sha256_hex(visible_text),
            "citations": {f"E{i}": r.chunk_id for i, r in enumerate(refs, start=1)},
            "audit_entry": entry.model_dump(mode="json"),
        }
        digest = self.audit.write_snapshot(audit_id, snapshot)
        note = self.audit.record(entry, audit_id=audit_id, snapshot_sha256=digest, vector=qvec)
        mem0_calls += 1
        if note:
            fallbacks.append(note)
        timings["audit_ms"] = (time.perf_counter() - t) * 1000
        timings["total_ms"] = (time.perf_counter() - t_start) * 1000
        summary = summary.model_copy(update={"fallbacks": list(fallbacks), "latency_ms": {k: round(v, 3) for k, v in timings.items()}})
        metrics = RetrievalMetrics(
            deal_id=intent.deal_id, intent_id=intent.intent_id, agent_id=intent.agent_id,
            total_latency_ms=timings["total_ms"], mem0_query_time_ms=timings.get("structural_ms", 0.0),
            vector_search_time_ms=timings.get("vector_ms", 0.0) + timings.get("embed_ms", 0.0),
            ranking_time_ms=timings["ranking_ms"], packaging_time_ms=timings["packaging_ms"],
            chunks_inspected=len(scored_by_id), chunks_selected=len(refs), tokens_selected=total,
            risk_distribution=risk_distribution, structural_coverage_score=report.score,
            embedding_api_calls=emb_calls, mem0_api_calls=mem0_calls, estimated_cost_usd=0.0,
        )
        return package, summary, metrics

    def flush_audit(self, timeout: float = 30.0) -> bool:
        """Wait until every audit entry has reached Mem0 (True), or the timeout passes."""
        return self.audit.wait(timeout)

    def close(self) -> None:
        """Write what the audit writer still holds; journaled entries survive for the next start."""
        self.audit.close()

    # -- replay --------------------------------------------------------------------------
    def replay(self, audit_id: str) -> tuple[ContextPackage, RetrievalSummary]:
        """The package exactly as it was given, from its audit snapshot; nothing is retrieved again.

        Raises :class:`~retrieval_node.errors.IntegrityError` when the snapshot or the package inside it
        does not match its hash.
        """
        return replay_snapshot(self.audit, audit_id)

    # -- package text --------------------------------------------------------------------
    @staticmethod
    def _toc(view: DealView, sections: list[str], roles: list[str] | None, refs: Sequence[Any], report: CoverageReport) -> str:
        """Per document (in document order): the included chunks in reading order and how many target-section
        chunks were left; documents with neither are not listed."""
        groups = view.memo(("toc_groups",), lambda: _doc_groups(view.chunks.values()))
        wanted = frozenset(sections)
        targets: dict[tuple[str, str], int] = view.memo(
            ("toc_targets", wanted), lambda: {key: sum(1 for c in cs if c.section_type in wanted) for key, cs in groups})
        included: dict[tuple[str, str], list[ChunkView]] = {}
        for r in refs:
            c = view.chunks.get(r.chunk_id)
            if c is not None:
                included.setdefault((c.document_id, c.document_role), []).append(c)
        lines = [f"Included {len(refs)} chunk(s). Target sections: {', '.join(sections)}" + (f"; roles: {', '.join(roles)}" if roles else "")]
        for key, _cs in groups:
            got = sorted(included.get(key, ()), key=lambda c: c.reading_key)
            inn = [f"{c.section_type} p{c.page_range}" for c in got]
            avail = targets[key] - sum(1 for c in got if c.section_type in wanted)
            if not inn and not avail:
                continue
            doc, role = key
            lines.append(f"- {doc} [{role}]: " + ("; ".join(inn) if inn else "nothing included") + (f" (+{avail} target-section chunk(s) available, not included)" if avail else ""))
        if report.required:
            marks = []
            for z in report.required:
                if z in report.absent:
                    marks.append(f"{z}: MISSING (not in the deal's documents)")
                elif z in report.unfit:
                    marks.append(f"{z}: MISSING (did not fit the budget)")
                elif z in report.partial:
                    marks.append(f"{z}: partial ({report.partial[z][0]} of {report.partial[z][1]} chunks)")
                else:
                    marks.append(f"{z}: covered")
            lines.append("Required zones: " + "; ".join(marks))
        return "\n".join(lines)

    @staticmethod
    def _exclusions(sel: Selection, scored: dict[str, Scored], report: CoverageReport) -> str:
        parts: list[str] = []
        for cid in sorted(sel.chosen):
            s = sel.chosen[cid]
            if s.span is not None:
                parts.append(f"EXCERPTED (budget): {s.chunk.document_id} p{s.chunk.page_range} characters {s.span[0]}-{s.span[1]} "
                             f"of {len(s.chunk.content)} quoted; the whole chunk {cid[:12]} is available with get_chunk")
        over = [(cid, why) for cid, why in sorted(sel.excluded.items())]
        risky_out = [(cid, why) for cid, why in over if scored.get(cid) is not None and scored[cid].material]
        for cid, why in risky_out:
            s = scored[cid]
            parts.append(f"LEFT OUT WITH MATERIAL RISK: {s.chunk.document_id} p{s.chunk.page_range} ({', '.join(s.terms.risk_kinds)}): {why}")
        others = len(over) - len(risky_out)
        if others:
            parts.append(f"{others} lower-scoring chunk(s) left out for budget")
        not_considered = [cid for cid in scored if cid not in sel.chosen and cid not in sel.excluded]
        if not_considered:
            parts.append(f"{len(not_considered)} zone chunk(s) retrieved for coverage but not needed")
        for z in report.absent:
            parts.append(f"required zone {z} is missing from the deal's documents: needs human input")
        for z in report.unfit:
            parts.append(f"required zone {z} did not fit the budget")
        return "\n".join(parts) if parts else "Nothing excluded: every candidate fit the budget."

    @staticmethod
    def _risk_summary(intent: RetrievalIntent, refs: Sequence[Any], sel: Selection, missed: Sequence[Scored], inspected: int) -> str:
        if inspected == 0:
            return f"UNABLE_TO_ASSESS: no {', '.join(s.value for s in intent.target_section_types)} documents found for deal {intent.deal_id}"
        lines = []
        for i, r in enumerate(refs, start=1):
            if r.redacted:
                continue
            terms = sel.chosen[r.chunk_id].terms
            if terms.risk_kinds:
                evidence = ", ".join(list(terms.risk_terms) + list(terms.numeric))
                lines.append(f"[E{i}] {', '.join(terms.risk_kinds)} in {r.document_id} p{r.page_range} ({evidence})")
        if missed:
            lines += [f"NOT IN PACKAGE (budget): {', '.join(s.terms.risk_kinds)} in {s.chunk.document_id} p{s.chunk.page_range}" for s in missed]
        if lines:
            return f"MATERIAL RISK INDICATORS ({len(lines)}):\n" + "\n".join(lines)
        return f"NO MATERIAL RISK INDICATORS in {inspected} inspected chunk(s) (keyword and numeric screening; not a legal conclusion)"


def replay_snapshot(audit: AuditLog, audit_id: str) -> tuple[ContextPackage, RetrievalSummary]:
    snap = audit.read_snapshot(audit_id)
    package = ContextPackage.model_validate(snap["package"])
    fields = package.model_dump(mode="json")
    if package_hash(fields) != package.package_hash:
        raise IntegrityError(f"audit snapshot {audit_id}: the package does not match its package_hash")
    summary = RetrievalSummary.model_validate(snap["summary"])
    return package, summary


__all__ = ["RetrievalAgent", "intent_from_profile", "replay_snapshot"]
