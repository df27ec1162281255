"""The RetrievalAgent: the public face of the pipeline (spec 1.2).

``RetrievalAgent.retrieve(intent)`` (async) and ``retrieve_sync(intent)`` return
``(ContextPackage, RetrievalSummary)``. Same intent on the same store gives the
same package and ``package_hash`` (ties broken by chunk id). The agent holds the caller's
default trust, bounds concurrent calls, builds intents from agent profiles, replays audit
snapshots and serves single chunks; the retrieval itself is :class:`~retrieval_node.pipeline.Pipeline`.
"""

from __future__ import annotations

import asyncio
import threading

from .audit import AuditLog
from .backends.vectors import point_id
from .config import AgentProfile, NodeConfig
from .contracts import narrow_to_contract
from .deals import view_from_payload
from .errors import AccessDenied, ChunkNotFound, IntegrityError, IntentError, TrustRequired, UnknownAgentError
from .models import (
    ChunkReference,
    ContextPackage,
    QuestionIntent,
    RetrievalIntent,
    RetrievalMetrics,
    RetrievalSummary,
    Stage,
    TrustContext,
    package_hash,
    sha256_hex,
    to_reference,
)
from .pipeline import Pipeline, admit
from .question import QuestionResult, question_intent
from .store import Store


def profile_stage(name: str, profile: AgentProfile, stage: Stage | str) -> Stage:
    """``stage`` if the agent's profile runs in it, else :class:`~retrieval_node.errors.IntentError` (a profile step and
    a question step of the agent refuse a stage alike)."""
    stage = Stage(stage)
    if stage not in profile.stages:
        raise IntentError(f"agent {name!r} does not run in stage {stage.value}; configured stages: {[s.value for s in profile.stages]}")
    return stage


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
    stage = profile_stage(name, profile, stage)
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

    >>> agent = RetrievalAgent(store, trust=trust)                               # doctest: +SKIP
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
        self.audit = AuditLog(store.home / "audit", store.registry, background=self.config.retrieval.audit_write == "background",
                              key=store.secret())
        if self.audit.background:
            store.add_close_hook(self.audit.close)  # the writer finishes before Mem0's client closes
        self.pipeline = Pipeline(store, self.config, audit=self.audit)
        self._semaphore = threading.BoundedSemaphore(self.config.retrieval.concurrency)
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

    # -- questions -----------------------------------------------------------------------
    def question_intent(self, deal_id: str, question: str, *, budget: int | None = None, stage: Stage | str = Stage.DILIGENCE,
                        trust: TrustContext | None = None) -> QuestionIntent:
        """The intent of a free-text question (:func:`~retrieval_node.question.question_intent`): the contract of the
        caller's agent (``trust.agent_id``), else the ``questions`` contract; every section it allows in ``stage``."""
        return question_intent(question, deal_id=deal_id, trust=self._trust(trust), config=self.config, stage=stage, budget=budget)

    async def ask(self, deal_id: str, question: str, *, budget: int | None = None, stage: Stage | str = Stage.DILIGENCE,
                  trust: TrustContext | None = None) -> tuple[ContextPackage, RetrievalSummary]:
        """Async: a package ranked for ``question`` (see :meth:`ask_sync`)."""
        return await asyncio.to_thread(self.ask_sync, deal_id, question, budget=budget, stage=stage, trust=trust)

    def ask_sync(self, deal_id: str, question: str, *, budget: int | None = None, stage: Stage | str = Stage.DILIGENCE,
                 trust: TrustContext | None = None) -> tuple[ContextPackage, RetrievalSummary]:
        """A ContextPackage ranked for a free-text question about ``deal_id`` ("In the purchase contract, what is the
        deposit?"): routed to the documents it names, packed to ``budget`` (default
        :data:`~retrieval_node.question.DEFAULT_QUESTION_BUDGET`), with the same contract, trust gate, audit,
        snapshot and replay as :meth:`retrieve_sync`."""
        return self.retrieve_sync(self.question_intent(deal_id, question, budget=budget, stage=stage, trust=trust), trust=trust)

    def rank_question(self, deal_id: str, question: str, *, stage: Stage | str = Stage.DILIGENCE,
                      trust: TrustContext | None = None) -> QuestionResult:
        """The full ranking a question's package is cut from (every eligible chunk, best first), under the same
        contract and trust; nothing is packaged or audited. For evaluations (benchmarks/legalbench)."""
        caller = self._trust(trust)
        intent = question_intent(question, deal_id=deal_id, trust=caller, config=self.config, stage=stage)
        with self._semaphore:
            return self.pipeline.rank_question(intent, caller)

    def _run(self, intent: RetrievalIntent, trust: TrustContext) -> tuple[ContextPackage, RetrievalSummary, RetrievalMetrics]:
        return self.pipeline.run(intent, trust)

    def _trust(self, trust: TrustContext | None) -> TrustContext:
        caller = trust or self.trust
        if caller is None:
            raise TrustRequired(
                "a TrustContext is required: pass trust=TrustContext(max_sensitivity=..., authenticated=..., actor_id=...) "
                "to RetrievalAgent(...) or to the call"
            )
        return caller

    def get_chunk(self, chunk_id: str, *, trust: TrustContext | None = None, stage: Stage | str = Stage.DILIGENCE) -> ChunkReference:
        """One chunk by id: the full reference, a redacted one (one level above the caller's trust),
        :class:`AccessDenied`, or :class:`ChunkNotFound`. A caller bound to an agent (``trust.agent_id``) reads only
        chunks its agent's contract allows at ``stage`` (a tax agent never reads lender instructions by id either)."""
        caller = self._trust(trust)
        payload = self.store.chunks.payloads([point_id(chunk_id, 0)]).get(point_id(chunk_id, 0))
        if payload is None or "content" not in payload:
            raise ChunkNotFound(f"no chunk {chunk_id!r} in this store")
        deal, sensitivity = payload["deal_id"], payload.get("sensitivity", "confidential")
        if sha256_hex(payload["content"]) != payload["content_hash"]:
            raise IntegrityError(f"chunk {chunk_id} does not match its content_hash")
        ref = to_reference(view_from_payload(payload))
        if caller.agent_id is not None:
            bound = next((name for name, p in self.config.agents.items() if p.agent_id == caller.agent_id), None)
            if bound is None:
                raise AccessDenied(f"{caller.actor_id} is bound to agent {caller.agent_id!r}, which no configured profile is; "
                                   f"its contract is unknown, so chunk {chunk_id} is not served")
            plan = self.pipeline.plan(self.intent_for(bound, deal_id=deal, stage=stage))
            if not plan.allows(ref.section_type.value, ref.document_role.value):
                raise AccessDenied(f"{caller.actor_id} (agent {caller.agent_id}) may not read chunk {chunk_id}: "
                                   f"{ref.section_type.value} of a {ref.document_role.value} document is outside the {bound} contract")
        if caller.allows(deal, sensitivity):
            return ref
        if caller.allows_redacted(deal, sensitivity):
            return ref.model_copy(update={"content": "", "redacted": True})
        raise AccessDenied(f"{caller.actor_id} may not read chunk {chunk_id} ({sensitivity}, deal {deal})")

    def invalidate_patterns(self) -> None:
        """Reload the pattern memories on the next call (``patterns add`` in this process does it by itself)."""
        self.pipeline.invalidate_patterns()

    def flush_audit(self, timeout: float = 30.0) -> bool:
        """Wait until every audit entry has reached Mem0 (True), or the timeout passes."""
        return self.audit.wait(timeout)

    def close(self) -> None:
        """Write what the audit writer still holds; journaled entries survive for the next start."""
        self.audit.close()

    # -- replay --------------------------------------------------------------------------
    def replay(self, audit_id: str, *, trust: TrustContext | None = None, allow_legacy: bool = False) -> tuple[ContextPackage, RetrievalSummary]:
        """The package exactly as it was given, from its audit snapshot; nothing is retrieved again.

        The caller's trust applies as in a retrieval: a package holding anything above it is refused
        (:class:`~retrieval_node.errors.AccessDenied`). Raises :class:`~retrieval_node.errors.IntegrityError`
        when the snapshot fails its hash or its MAC, holds another audit, or has no MAC (a snapshot written before
        snapshots carried one: pass ``allow_legacy=True`` if you trust the file).
        """
        return replay_snapshot(self.audit, audit_id, self._trust(trust), allow_legacy=allow_legacy)


def replay_snapshot(audit: AuditLog, audit_id: str, trust: TrustContext, *, allow_legacy: bool = False) -> tuple[ContextPackage, RetrievalSummary]:
    """The package of ``audit_id`` as it was given, if ``trust`` may read all of it (as a retrieval would let it):
    the deal in its scopes, every chunk's content within its clearance, every redacted listing at most one level
    above it, and the call that made it no wider than the caller (its summary and notes describe what that call's
    clearance saw, left-out risks included). Anything more is :class:`AccessDenied`, not a partial package (a replay is
    the package as given or nothing)."""
    snap = audit.read_snapshot(audit_id, allow_legacy=allow_legacy)
    package = ContextPackage.model_validate(snap["package"])
    fields = package.model_dump(mode="json")
    if package_hash(fields) != package.package_hash:
        raise IntegrityError(f"audit snapshot {audit_id}: the package does not match its package_hash")
    admit(trust, deal_id=package.deal_id, agent_id=package.agent_id, what=f"replay of audit {audit_id}")
    above = [r for r in package.ordered_chunks
             if not (trust.allows(package.deal_id, r.sensitivity) or (r.redacted and trust.allows_redacted(package.deal_id, r.sensitivity)))]
    if above:
        levels = sorted({r.sensitivity.value for r in above})
        raise AccessDenied(f"{trust.actor_id} may not replay audit {audit_id}: {len(above)} of its chunk(s) are {', '.join(levels)}, "
                           f"above the caller's clearance ({trust.max_sensitivity.value if trust.authenticated else 'public, unauthenticated'})")
    made = _recorded_clearance(snap.get("trust"))
    if made is not None and (made[0] > trust.effective_level or (made[1] and not trust.authenticated)):
        # the summary, risk summary, table of contents and notes describe the deal as that clearance saw it
        # (left-out risks with their words, counts of chunks): a narrower caller is refused, not given a part
        raise AccessDenied(f"{trust.actor_id} may not replay audit {audit_id}: it was made under a wider clearance than the caller's "
                           f"({trust.max_sensitivity.value if trust.authenticated else 'public, unauthenticated'}); its summary describes "
                           "what that clearance saw")
    summary = RetrievalSummary.model_validate(snap["summary"])
    return package, summary


def _recorded_clearance(recorded: object) -> tuple[int, bool] | None:
    """(effective level, authenticated) of the caller a snapshot records, or None for a snapshot without one."""
    if not isinstance(recorded, dict) or "max_sensitivity" not in recorded:
        return None
    try:
        made = TrustContext.model_validate(recorded)
    except ValueError as exc:
        raise IntegrityError(f"the snapshot's trust record is malformed: {exc}") from exc
    return made.effective_level, made.authenticated


__all__ = ["RetrievalAgent", "intent_from_profile", "replay_snapshot"]
