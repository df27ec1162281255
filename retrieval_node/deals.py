"""Per-deal state: one owner (:class:`DealCache`), its keys and its invalidation.

A :class:`DealView` is everything the pipeline derives from one deal's registered chunks: the chunks
themselves (hash-checked), the zone index, the BM25 index, the point-id table, and memos of what
depends on the chunks and a few settings only (contract + trust eligibility, the redacted listing, the
structural set, risk flags, the table-of-contents groups). A view is built once per ingest generation of
its deal: :meth:`~retrieval_node.store.Store.bump` (called by ingest) makes the next call rebuild it, and
``cache_ttl_seconds`` bounds its age. Every memo key is built here, next to the memo.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from . import lexical
from .backends.mem0_registry import LEDGER, ledger_records
from .backends.vectors import point_int, point_ints, uuid_text
from .cache import BoundedCache
from .collector import paused
from .contracts import ContractPlan
from .errors import BackendError
from .models import TrustContext, compute_chunk_id, sha256_hex
from .passages import Links, continuation_links
from .ports import Backends
from .precompute import decode_signal, findings_of, setting_key
from .superseded import superseded_copies
from .values import ChunkView

if TYPE_CHECKING:
    from .config import NodeConfig

#: BM25 results kept per deal view (agents repeat their profile queries).
BM25_CACHE = 64


@dataclass(slots=True)
class DealView:
    """Everything the retriever knows about one deal, built once per ingest generation."""

    deal_id: str
    chunks: dict[str, ChunkView]
    rejected: list[str]
    source: str  # "mem0" or "vector_payloads"
    loaded_at: float
    generation: int
    notes: list[str] = field(default_factory=list)  # fallback notes every call on this view repeats (chunks left out)
    _bm25: Any = None
    _bm25_ids: list[str] = field(default_factory=list)
    _bm25_lock: threading.Lock = field(default_factory=threading.Lock)
    _bm25_cache: BoundedCache[str, dict[str, float]] = field(default_factory=lambda: BoundedCache(BM25_CACHE))
    _zones: dict[str, list[ChunkView]] | None = None
    _memo: dict[Any, Any] = field(default_factory=dict)
    #: the risk findings ingest stored for the deal's chunks (precompute.py), read per setting when first asked
    #: (:meth:`stored_findings`): setting key -> chunk id -> (material, encoded signal, encoded spans)
    findings: dict[str, dict[str, tuple[bool, str | None, str | None]]] = field(default_factory=dict)
    #: reads one setting's stored findings of the deal (None: nothing stored is read)
    load_findings: Callable[[str], dict[str, tuple[bool, str | None, str | None]]] | None = None
    #: rankers already handed the stored signals of this view (precompute.seed_ranker)
    seeded: set[Any] = field(default_factory=set)
    #: the store directory whose per-deal BM25 index (lexical.py) the view may read
    home: Any = None
    #: ((window_tokens, overlap_tokens), point id -> (chunk id, window)) of the points an ingest of this process wrote or
    #: found for the deal (Store.offered): exact where the point table would estimate
    offered_points: tuple[tuple[int, int], dict[int, tuple[str, int]]] | None = None

    def stored_findings(self, key: str) -> dict[str, tuple[bool, str | None, str | None]] | None:
        """chunk id -> (material, encoded signal, encoded spans) that ingest stored under risk setting ``key`` (current
        fingerprint only), or None when nothing is stored (the call computes them)."""
        if key not in self.findings and self.load_findings is not None:
            self.findings[key] = self.load_findings(key)
        return self.findings.get(key) or None

    def _memoised(self, key: Any, build: Callable[[], Any]) -> Any:
        value = self._memo.get(key)
        if value is None:
            value = build()
            self._memo[key] = value
        return value

    # -- indexes -------------------------------------------------------------------------
    def passage_links(self) -> Links:
        """Which chunk continues which (a passage Stage 0 split across chunks), built once per view."""
        return self._memoised(("passage_links",), lambda: continuation_links(self.chunks.values()))

    def superseded(self) -> dict[str, str]:
        """chunk id -> the newer search that shows again every registration of the chunk, built once per view."""
        return self._memoised(("superseded",), lambda: superseded_copies(self.chunks.values()))

    def zone_members(self, zone: str) -> list[ChunkView]:
        """The deal's chunks tagged with ``zone``, in chunk-id order (index built once per view)."""
        if self._zones is None:
            index: dict[str, list[ChunkView]] = {}
            for cid in sorted(self.chunks):
                for z in self.chunks[cid].zones:
                    index.setdefault(z, []).append(self.chunks[cid])
            self._zones = index
        return self._zones.get(zone, [])

    def bm25_scores(self, query: str) -> dict[str, float]:
        """BM25 score of every chunk of the deal for ``query`` (absent where no term matches). Do not mutate."""
        return self._bm25_cache.get_or_build(query, lambda: self._bm25_scores(query))

    def _bm25_scores(self, query: str) -> dict[str, float]:
        import bm25s

        with self._bm25_lock:
            if self._bm25 is None:
                self._bm25_ids = sorted(self.chunks)
                # the index ingest kept for exactly these chunks (lexical.py), else built here
                stored = lexical.load(self.home, self.deal_id, self._bm25_ids) if self.home is not None else None
                self._bm25 = stored or lexical.build([self.chunks[c].content for c in self._bm25_ids])
        model, vocab = self._bm25
        q = [t for t in bm25s.tokenize(query, stopwords="en", return_ids=False, show_progress=False)[0] if t in vocab]
        if not q or not self._bm25_ids:
            return {}
        scores = model.get_scores(q)
        return {cid: float(s) for cid, s in zip(self._bm25_ids, scores, strict=True) if s > 0}

    def point_table(self, window_tokens: int, overlap_tokens: int) -> dict[int, tuple[str, int]]:
        """point id (as the UUID's integer) -> (chunk id, window) for the windows each chunk probably has.

        Windows are cut in MiniLM word pieces, which the registry does not record; the estimate allows
        1.5 word pieces per cl100k token (a window beyond it is resolved from its payload when it is hit,
        and added to this table).
        """
        def build() -> dict[int, tuple[str, int]]:
            step = max(1, window_tokens - overlap_tokens)
            table: dict[int, tuple[str, int]] = {}
            known: set[str] = set()
            if self.offered_points is not None and self.offered_points[0] == (window_tokens, overlap_tokens):
                table = {pid: hit for pid, hit in self.offered_points[1].items() if hit[0] in self.chunks}
                known = {cid for cid, _w in table.values()}
            for cid, c in self.chunks.items():
                if cid in known:  # its windows as the ingest wrote them
                    continue
                n = 1 + max(0, math.ceil((1.5 * c.token_count - window_tokens) / step))
                for w, pid in enumerate(point_ints(cid, n)):
                    table[pid] = (cid, w)
            return table

        return self._memoised(("point_ids", window_tokens, overlap_tokens), build)

    # -- memos of the pipeline's stages ---------------------------------------------------
    def structural(self, gate_key: Any, sections: frozenset[str] | None, roles: frozenset[str] | None, cutoff: float | None,
                   build: Callable[[], list[ChunkView]]) -> list[ChunkView]:
        """The structural set of one gate and filter (built by the retriever once per key)."""
        return self._memoised(("structural", gate_key, sections, roles, cutoff), build)

    def risk_flags(self, domains: tuple[str, ...], kinds: tuple[str, ...] | None) -> dict[str, bool]:
        """chunk id -> whether it carries a material risk for ``domains`` / ``kinds``: the judgements ingest stored
        (:mod:`~retrieval_node.precompute`, current fingerprint only), the rest filled as chunks are asked about."""
        def build() -> dict[str, bool]:
            stored = self.stored_findings(setting_key(kinds, domains))
            return {cid: row[0] for cid, row in stored.items() if cid in self.chunks} if stored else {}

        return self._memoised(("material", domains, kinds), build)

    def material_kinds(self, keys: tuple[str, ...]) -> dict[str, frozenset[str]]:
        """chunk id -> the risk kinds of the chunks ingest found material under any of the risk settings ``keys``
        (stored findings only: a chunk without them, as in a store ``retrieval-node precompute`` has not completed,
        has none here)."""
        def build() -> dict[str, frozenset[str]]:
            out: dict[str, set[str]] = {}
            for key in keys:
                for cid, (material, raw, _spans) in (self.stored_findings(key) or {}).items():
                    if material and cid in self.chunks:
                        out.setdefault(cid, set()).update(decode_signal(raw).kinds)
            return {cid: frozenset(k) for cid, k in out.items()}

        return self._memoised(("material_kinds", keys), build)

    def toc_groups(self) -> list[tuple[tuple[str, str], list[ChunkView]]]:
        """The deal's chunks by (document id, role), sorted, each group in reading order (the table of contents)."""
        def build() -> list[tuple[tuple[str, str], list[ChunkView]]]:
            by_doc: dict[tuple[str, str], list[ChunkView]] = {}
            for c in self.chunks.values():
                by_doc.setdefault((c.document_id, c.document_role), []).append(c)
            return [(key, sorted(cs, key=lambda c: c.reading_key)) for key, cs in sorted(by_doc.items())]

        return self._memoised(("toc_groups",), build)

    def toc_targets(self, sections: frozenset[str], trust: TrustContext | None = None) -> dict[tuple[str, str], int]:
        """Per (document, role): how many of its chunks are of ``sections`` (with ``trust``: of those the caller may
        see, or see listed without content)."""
        def seen(c: ChunkView) -> bool:
            return trust is None or trust.allows(c.deal_id, c.sensitivity) or trust.allows_redacted(c.deal_id, c.sensitivity)

        key = None if trust is None else (trust.effective_level, trust.authenticated, tuple(trust.scopes))
        return self._memoised(("toc_targets", sections, key),
                              lambda: {k: sum(1 for c in cs if c.section_type in sections and seen(c)) for k, cs in self.toc_groups()})

    def gate(self, plan: ContractPlan, trust: TrustContext, as_of: datetime | None) -> Gate:
        """What ``trust`` may see of this deal under ``plan`` (answers kept on the view per plan and trust)."""
        key = (tuple(plan.allowed_sections), tuple(plan.forbidden_sections), plan.allowed_roles and tuple(plan.allowed_roles),
               tuple(plan.forbidden_roles), trust.effective_level, trust.authenticated, tuple(trust.scopes))  # authenticated: listed() depends on it
        return Gate(self, plan, trust, as_of, key, self._memoised(("eligible", key), dict))


@dataclass(slots=True)
class Gate:
    """The hard walls of one call over one deal: the contract's re-check and the caller's trust.

    Vector hits are candidates, never facts: every chunk passes :meth:`eligible` before it can be scored.
    """

    view: DealView
    plan: ContractPlan
    trust: TrustContext
    as_of: datetime | None
    key: tuple[Any, ...]
    _allowed: dict[str, bool]

    def eligible(self, chunk: ChunkView) -> bool:
        ok = self._allowed.get(chunk.chunk_id)
        if ok is None:
            ok = self._allowed[chunk.chunk_id] = self.plan.allows(chunk.section_type, chunk.document_role) and self.trust.allows(chunk.deal_id, chunk.sensitivity)
        return ok

    def in_time(self, chunk: ChunkView) -> bool:
        return self.as_of is None or chunk.ingested_ts <= self.as_of.timestamp()

    def listed(self) -> tuple[list[ChunkView], int]:
        """(chunks one level above the caller's trust, listed without content; chunks above that) of the plan's sections."""
        plan, trust, sections, roles = self.plan, self.trust, self.plan.sections, self.plan.roles

        def build() -> tuple[list[ChunkView], int]:
            in_plan = [c for c in self.view.chunks.values() if c.section_type in sections and (roles is None or c.document_role in roles)
                       and plan.allows(c.section_type, c.document_role) and self.in_time(c)]
            shown = sorted((c for c in in_plan if trust.allows_redacted(c.deal_id, c.sensitivity)), key=lambda c: c.reading_key)
            hidden = sum(1 for c in in_plan if not trust.allows(c.deal_id, c.sensitivity) and not trust.allows_redacted(c.deal_id, c.sensitivity))
            return shown, hidden

        return self.view._memoised(("listed", self.key, tuple(sections), roles and tuple(roles), self.as_of), build)

    def zone_members(self, zone: str) -> list[ChunkView]:
        """The zone's chunks this call may see (any section the contract allows)."""
        return [c for c in self.view.zone_members(zone) if self.eligible(c) and self.in_time(c)]


class DealCache:
    """The deal views of one process, keyed by deal and rebuilt when the deal's ingest generation changes; at most
    ``deal_cache_size`` of them, the least recently used dropped first. What other stages keep per chunk of a view
    (the rankers' signals, the packager's token costs) is dropped with it: each ``on_evict`` callback is called with
    every view the cache lets go."""

    def __init__(self, backends: Backends, config: NodeConfig | None = None) -> None:
        """``config``: whose ``retrieval`` settings (``deal_cache_size``, ``cache_ttl_seconds``) apply; default the
        backends' (a :class:`~retrieval_node.agent.RetrievalAgent` built with its own config passes it)."""
        self.backends = backends
        self.settings = (config or backends.config).retrieval
        self._deals: OrderedDict[str, DealView] = OrderedDict()
        self._lock = threading.Lock()
        self._loading: dict[str, threading.Lock] = {}
        self.on_evict: list[Callable[[DealView], None]] = []

    def _fresh(self, view: DealView, gen: int) -> bool:
        ttl = self.settings.cache_ttl_seconds
        return view.generation == gen and time.monotonic() - view.loaded_at <= ttl and view.source == "mem0"

    def view(self, deal_id: str, fallbacks: list[str] | None = None) -> tuple[DealView, int]:
        """The deal's registered chunks (cached); returns (view, Mem0 calls made).

        Both halves or nothing: a chunk is in the view only when its registry record and its vector point (window 0)
        agree (same deal, same content hash); chunks left out are said in ``fallbacks`` on every call. A deal whose
        registered chunks have no vectors at all (``vectors/`` deleted) is a :class:`BackendError`, never a view
        served from Mem0's content alone.

        With ``fallbacks`` given, a Mem0 failure serves the structure from the vector payloads of the chunks the
        store's registration ledger records as registered (points a failed ingest left unregistered are excluded and
        counted); without a ledger, or with none of the deal's points in it, the call fails. Such a view is not kept.
        """
        gen = self.backends.generation(deal_id)
        view = self._deals.get(deal_id)
        if view is not None and self._fresh(view, gen):
            self._touch(deal_id)
            return self._said(view, fallbacks), 0
        with self._lock:
            lock = self._loading.setdefault(deal_id, threading.Lock())
        with lock:  # one load per deal at a time; concurrent callers wait for it
            view = self._deals.get(deal_id)
            if view is not None and self._fresh(view, gen):
                return self._said(view, fallbacks), 0
            with paused(self.settings.pause_collector):  # a view build is the burst of a first call (the pipeline's own pause covers it too)
                return self._load(deal_id, gen, fallbacks)

    def _load(self, deal_id: str, gen: int, fallbacks: list[str] | None) -> tuple[DealView, int]:
        """Build the deal's view (the caller holds its loading lock)."""
        # what an ingest in this process wrote and knows to be the deal's whole listing (Store.offer_listing), at this
        # generation; else Mem0's listing. The same checks below run on either.
        offered = getattr(self.backends, "offered", None)
        given = offered(deal_id, gen) if offered is not None else None
        try:
            records = given.records if given is not None else self.backends.registry.deal_records(deal_id)
        except BackendError as exc:
            if fallbacks is None:
                raise
            view = self._vector_only_view(deal_id, gen, exc)
            return self._said(view, fallbacks), 0
        chunks: dict[str, ChunkView] = {}
        rejected: list[str] = []
        for rec in records:
            # the registry text is the verbatim content; its hash must match what Stage 0 signed, and the chunk id
            # must be the one Stage 0 derives from the document, the pages and that hash (what pairing relies on)
            if sha256_hex(rec.content) != rec.content_hash:
                rejected.append(f"{rec.chunk_id[:12]}: registry content does not match its hash")
                continue
            if compute_chunk_id(rec.document_id, rec.page_start, rec.page_end, rec.content_hash) != rec.chunk_id:
                rejected.append(f"{rec.chunk_id[:12]}: registry chunk id is not derived from its document, pages and content hash")
                continue
            chunks[rec.chunk_id] = rec
        # the chunks whose first vector point the offering ingest wrote or found under this deal are paired already
        notes = self._pair_with_vectors(deal_id, chunks, given.paired if given is not None else frozenset())
        view = DealView(deal_id, chunks, rejected, "mem0", time.monotonic(), gen, notes)
        view.offered_points = given.points if given is not None else None
        view.load_findings = self._findings(deal_id)
        view.home = getattr(self.backends, "home", None) if hasattr(self.backends, "add_close_hook") else None
        evicted: list[DealView] = []
        with self._lock:
            self._deals[deal_id] = view
            self._deals.move_to_end(deal_id)
            while len(self._deals) > self.settings.deal_cache_size:
                evicted.append(self._deals.popitem(last=False)[1])
        for old in evicted:
            for forget in self.on_evict:
                forget(old)
        return self._said(view, fallbacks), 1

    def _touch(self, deal_id: str) -> None:
        with self._lock:
            if deal_id in self._deals:
                self._deals.move_to_end(deal_id)

    def __len__(self) -> int:
        return len(self._deals)

    def _findings(self, deal_id: str) -> Callable[[str], dict[str, tuple[bool, str | None, str | None]]] | None:
        """Reads the risk findings ingest stored for the deal, one setting at a time (None without a findings file; a
        file that cannot be read gives nothing: the findings are then computed on the call, as they always could be)."""
        try:
            found = findings_of(self.backends)
        except Exception:  # a damaged findings file costs time, never an answer
            return None
        if found is None:
            return None

        def load(key: str) -> dict[str, tuple[bool, str | None, str | None]]:
            try:
                return found.deal(deal_id, key).get(key, {})
            except Exception:  # a damaged findings file costs time, never an answer
                return {}

        return load

    @staticmethod
    def _said(view: DealView, fallbacks: list[str] | None) -> DealView:
        if fallbacks is not None:
            fallbacks.extend(view.notes)
        return view

    def _pair_with_vectors(self, deal_id: str, chunks: dict[str, ChunkView], paired: frozenset[str] = frozenset()) -> list[str]:
        """Drop from ``chunks`` every registered chunk whose window-0 vector point is missing or filed under another
        deal; returns the note saying so (none when all pair). None of them paired: :class:`BackendError`.
        ``paired``: chunk ids known to pair (an ingest of this process wrote or found their points), not asked again.

        No payload is read: a chunk id is derived from its content hash (``compute_chunk_id``, checked for every
        registry record in :meth:`_load`) and the point id from the chunk id, so the point ingest wrote under that id
        holds the vectors of that content; whether it exists and which deal it is filed under are answered by the
        index's id tracker and ``deal_id`` payload index (``ChunkSearch.present``)."""
        if not chunks:
            return []
        ids = sorted(chunks)
        ask = [c for c in ids if c not in paired]
        points = [uuid_text(point_int(c, 0)) for c in ask]
        found = self.backends.chunks.present(points, deal_id) if points else set()
        unpaired = [cid for cid, pid in zip(ask, points, strict=True) if pid not in found]
        if not unpaired:
            return []
        if len(unpaired) == len(ids):
            raise BackendError(
                f"deal {deal_id}: its {len(ids)} registered chunk(s) have no vectors in the chunk index (vectors/ deleted or "
                "emptied?); nothing is served from the registry alone. Re-run ingest of the deal's files to write them again")
        for cid in unpaired:
            del chunks[cid]
        return [f"unpaired_excluded: {len(unpaired)} registered chunk(s) of deal {deal_id} without a matching vector point were "
                f"excluded ({', '.join(c[:12] for c in unpaired[:10])}{', …' if len(unpaired) > 10 else ''}); re-run ingest to repair them"]

    def _vector_only_view(self, deal_id: str, gen: int, cause: BackendError) -> DealView:
        """The Mem0-down view: vector payloads whose chunk the registration ledger records as registered, with that
        content hash. Points it does not record are excluded and counted in the view's note."""
        registered = ledger_records(self.backends.home, deal_id)
        if registered is None:
            raise BackendError(
                f"Mem0 is unavailable ({cause}) and this store has no registration ledger ({LEDGER}, written by ingest since "
                "issue 16): the vector payloads alone cannot tell registered chunks from points a failed ingest left, so "
                "nothing is served. Bring Mem0 back, or run ingest once with Mem0 up to record the ledger") from cause
        chunks: dict[str, ChunkView] = {}
        rejected: list[str] = []
        unregistered: list[str] = []
        for p in self.backends.chunks.deal_payloads(deal_id):
            if "content" not in p or sha256_hex(p["content"]) != p.get("content_hash"):
                rejected.append(f"{str(p.get('chunk_id'))[:12]}: content missing or hash mismatch")
                continue
            if registered.get(p["chunk_id"]) != p["content_hash"]:
                unregistered.append(str(p["chunk_id"]))
                continue
            chunks[p["chunk_id"]] = view_from_payload(p)
        if unregistered and not chunks:
            raise BackendError(
                f"Mem0 is unavailable ({cause}) and none of the {len(unregistered)} vector point(s) of deal {deal_id} is recorded "
                f"as registered in {LEDGER}; nothing is served. Bring Mem0 back, or re-run ingest with Mem0 up") from cause
        note = (f"mem0_unavailable: structural filter served from vector payloads ({cause}); only chunks the registration "
                f"ledger records as registered in Mem0: {len(chunks)} served, {len(unregistered)} vector point(s) never registered "
                "were excluded" + (f" ({', '.join(c[:12] for c in sorted(unregistered)[:10])}{', …' if len(unregistered) > 10 else ''})"
                                   if unregistered else ""))
        return DealView(deal_id, chunks, rejected, "vector_payloads", time.monotonic(), gen, [note])

    def invalidate(self, deal_id: str | None = None) -> None:
        """Forget one deal's view (or all): the next call rebuilds it from the registry."""
        with self._lock:
            if deal_id is None:
                self._deals.clear()
            else:
                self._deals.pop(deal_id, None)


def view_from_payload(p: dict[str, Any]) -> ChunkView:
    """A chunk view from a vector point's full payload (window 0 carries the chunk's content)."""
    return ChunkView(
        memory_id="",
        chunk_id=p["chunk_id"], deal_id=p["deal_id"], document_id=p["document_id"], document_role=p["document_role"],
        section_type=p["section_type"], page_start=int(p["page_start"]), page_end=int(p["page_end"]), content=p["content"],
        content_hash=p["content_hash"], token_count=int(p["token_count"]), ocr_confidence=float(p["ocr_confidence"]),
        zones=tuple(p.get("zones") or ()), entity_ids=tuple(p.get("entity_ids") or ()), sensitivity=p.get("sensitivity", "confidential"),
        document_created_at=p.get("document_created_at"), ingested_at=p["ingested_at"],
    )


__all__ = ["DealCache", "DealView", "Gate", "view_from_payload"]
