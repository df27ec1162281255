"""Required-zone coverage self-check and repair (spec 3.3): the whole of it, in one module.

After selection, the zones of the packaged chunks are compared with the intent's required zones. A zone
with no packaged chunk is *missing*; one with some but not all of its chunks is *partial*. For each gap
the plan's ``zone_lookup`` query runs (:class:`ZoneSource`: the zone's chunks this call may see, searched
against the query and scored like every candidate); the best one is merged within budget
(:meth:`CoverageSelfCheck.fit`: a required zone outranks a marginal risk chunk, never a strong one, see
:data:`~retrieval_node.pack.STRONG_RISK`). A zone the deal's documents do not contain is reported in
``missing_zones`` for a human: it is never papered over. Then every material chunk still left out gets
a place (:meth:`CoverageSelfCheck.place_risks`), and room freed by evictions is refilled.

The stage's entry point is :func:`repair`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from .contracts import ContractPlan
from .deals import DealView, Gate
from .pack import MIN_EXCERPT_TOKENS, STRONG_RISK, ContextPackager, ExcerptFor, weakest_first
from .ports import SearchScope
from .retrieve import SegmentAwareRetriever
from .values import Candidate, ChunkView, CoverageReport, Scored, Selection, coverage_score, zone_counts

#: Windows fetched when scoring a required zone's members against the zone query (the packer needs its best few).
ZONE_SEARCH_WINDOWS = 64

def _not_sole_cover(sel: Selection, required: Sequence[str]) -> Callable[[Scored], bool]:
    """Whether a packaged chunk can go without leaving one of the ``required`` zones uncovered."""
    req = set(required)
    cover = zone_counts(sel)
    return lambda s: all(cover.get(z, 0) > 1 for z in req & set(s.chunk.zones))


class ZoneSource:
    """The plan's ``zone_lookup`` queries: a required zone's chunks that this call may see (any section the
    contract allows, within the caller's trust), scored against the query like every other candidate.

    ``scored`` is the call's table of scored chunks (chunk id -> :class:`Scored`): a zone member already
    scored keeps its score; a new one is scored and added to it.
    """

    def __init__(self, *, plan: ContractPlan, retriever: SegmentAwareRetriever, view: DealView, gate: Gate, query_text: str,
                 query_vector: Callable[[str], np.ndarray], score: Callable[[list[Candidate], str], list[Scored]],
                 scored: dict[str, Scored]) -> None:
        self.plan = plan
        self.use_vectors = plan.vector_search
        self.retriever = retriever
        self.view = view
        self.gate = gate
        self.query_text = query_text
        self.query_vector = query_vector
        self.score = score
        self.scored = scored
        self._memo: dict[str, list[Scored]] = {}
        self._prefetched: dict[str, tuple[tuple[str, ...] | None, list[tuple[str, int, float]]]] = {}

    def members(self, zone: str) -> list[ChunkView]:
        if not any(q.type == "zone_lookup" and q.zone == zone for q in self.plan.queries):
            raise ValueError(f"zone {zone!r} is not a zone_lookup query of the plan")
        return self.gate.zone_members(zone)

    def _search(self, zone: str, missing: Sequence[ChunkView]) -> tuple[np.ndarray, SearchScope, int]:
        # the best-matching windows of the zone's members; a member outside them keeps semantic 0
        zvec = self.query_vector(f"{zone.replace('_', ' ')}: {self.query_text}")
        return zvec, SearchScope(deal_id=self.view.deal_id, chunk_ids=tuple(sorted(c.chunk_id for c in missing))), min(8 * len(missing), ZONE_SEARCH_WINDOWS)

    def prefetch(self, required: Sequence[str], sel: Selection) -> None:
        """The self-check asks for every required zone, missing ones first, each re-retrieving the members no earlier
        step scored: those searches are made up front as one batch. A zone whose members turn out otherwise when
        it is asked for (an eviction changed the order) searches again on its own."""
        if not self.use_vectors:
            return
        have = zone_counts(sel)
        unique = list(dict.fromkeys(required))
        seen = set(self.scored)
        batch: list[tuple[str, tuple[np.ndarray, SearchScope, int]]] = []
        for zone in [z for z in unique if have.get(z, 0) == 0] + [z for z in unique if have.get(z, 0) > 0]:
            missing = [c for c in self.members(zone) if c.chunk_id not in seen]
            if missing:
                seen.update(c.chunk_id for c in missing)
                batch.append((zone, self._search(zone, missing)))
        if len(batch) > 1:
            for (zone, req), hits in zip(batch, self.retriever.dense_hits_many(self.view, [req for _, req in batch]), strict=True):
                self._prefetched[zone] = (req[1].chunk_ids, hits)

    def __call__(self, zone: str) -> list[Scored]:
        """The zone's chunks, scored (empty when the deal has none this call may see)."""
        if zone in self._memo:
            return self._memo[zone]
        members = self.members(zone)
        if not members:
            self._memo[zone] = []
            return []
        missing = [c for c in members if c.chunk_id not in self.scored]
        if missing:
            hits = []
            if self.use_vectors:
                zvec, scope, limit = self._search(zone, missing)
                ready = self._prefetched.pop(zone, None)
                hits = ready[1] if ready is not None and ready[0] == scope.chunk_ids else self.retriever.dense_hits(self.view, zvec, scope, limit)
            best: dict[str, float] = {}
            for cid, _window, score in hits:
                best[cid] = max(best.get(cid, 0.0), score)
            bm = self.view.bm25_scores(self.query_text)
            extra = [Candidate(chunk=c, cosine=best.get(c.chunk_id, 0.0), bm25=bm.get(c.chunk_id, 0.0)) for c in missing]
            for s in self.score(extra, f"zone:{zone}"):
                self.scored[s.chunk.chunk_id] = s
        self._memo[zone] = [self.scored[c.chunk_id] for c in members]
        return self._memo[zone]


class CoverageSelfCheck:
    """Checks and repairs zone coverage of a selection, with the packager's budget accounting.

    >>> check = CoverageSelfCheck(packager)                                      # doctest: +SKIP
    >>> report = check.run(required=["caveats_section"], sel=sel, zone_candidates=fetch,
    ...                    budget=4000, overhead=60)                              # doctest: +SKIP
    """

    def __init__(self, packager: ContextPackager) -> None:
        self.packager = packager

    def run(
        self,
        *,
        required: Sequence[str],
        sel: Selection,
        zone_candidates: Callable[[str], list[Scored]],
        budget: int,
        overhead: int,
        excerpt_for: ExcerptFor | None = None,
    ) -> CoverageReport:
        report = CoverageReport(required=list(dict.fromkeys(required)))
        have = zone_counts(sel)
        gaps = [z for z in report.required if have.get(z, 0) == 0]
        # missing zones first: they matter more than completing a partial one
        for zone in gaps:
            cands = zone_candidates(zone)
            if not cands:
                report.absent.append(zone)
                continue
            best = sorted(cands, key=lambda s: (-s.terms.risk, -s.terms.combined, self.packager.block_cost(s.chunk), s.chunk.chunk_id))
            placed = False
            bound: dict[bool, int] = {}  # the most room fit() could make, per kind of item; sel does not change until a fit succeeds
            for cand in best:
                if cand.chunk.chunk_id in sel.chosen:
                    placed = True
                    break
                if cand.material not in bound:
                    bound[cand.material] = self.fit_bound(sel, budget=budget, overhead=overhead, material=cand.material,
                                                                   required=report.required, excerpt_for=excerpt_for)
                if self.packager.block_cost(cand.chunk) > bound[cand.material]:
                    continue
                cand.origin = f"zone:{zone}"
                evicted = self.fit(sel, cand, budget=budget, overhead=overhead, reason=f"required zone {zone}", required=report.required,
                                            excerpt_for=excerpt_for)
                if evicted is not None:
                    report.added.append(cand.chunk.chunk_id)
                    report.evicted.extend(evicted)
                    placed = True
                    break
            if not placed:
                report.unfit.append(zone)
        # partial zones: add the zone's remaining chunks where they fit without evicting anything
        have = zone_counts(sel)
        for zone in report.required:
            if have.get(zone, 0) == 0:
                continue
            cands = zone_candidates(zone)
            free = budget - self.packager.used(sel, overhead)
            for cand in sorted(cands, key=lambda s: (-s.terms.risk, -s.terms.combined, s.chunk.chunk_id)):
                if cand.chunk.chunk_id in sel.chosen:
                    continue
                cost = self.packager.block_cost(cand.chunk)
                if cost <= free:
                    cand.origin = f"zone:{zone}"
                    cand.span = None
                    self.packager.add(sel, cand, f"completes required zone {zone}")
                    report.added.append(cand.chunk.chunk_id)
                    free -= cost
            included = sum(1 for c in cands if c.chunk.chunk_id in sel.chosen)
            if included < len(cands):
                report.partial[zone] = (included, len(cands))
        report.covered = sorted(z for z in report.required if zone_counts(sel).get(z, 0) > 0)
        return report

    def fit(self, sel: Selection, item: Scored, *, budget: int, overhead: int, reason: str, required: Sequence[str] = (),
            excerpt_for: ExcerptFor | None = None) -> list[str] | None:
        """Add ``item`` (a chunk of a required zone), making room from the least valuable chunks if needed.

        Room is made in this order, each step only as far as needed: evict chunks without material
        risk by ascending score; shrink whole risk chunks to their verbatim excerpt (``excerpt_for``),
        weakest risk first, so the evidence stays; evict risk chunks below :data:`STRONG_RISK`; then,
        only when ``item`` itself carries a material risk, strong-risk chunks that are not the only
        packaged chunk of a ``required`` zone (a risk for a risk, plus the zone). Chunks placed for a zone
        are never touched. Returns the evicted ids, or None (nothing changed) when it cannot fit.
        """
        item.span = None  # a zone is placed with its whole chunk
        cost = self.packager.block_cost(item.chunk)
        free = budget - self.packager.used(sel, overhead)
        if cost <= free:
            self.packager.add(sel, item, reason)
            return []
        evict_plain, shrinkable, evict_then = self._fit_moves(sel, material=item.material, required=required)
        plan = self.packager.plan_room(cost - free, evict_first=evict_plain, shrink=shrinkable, evict_then=evict_then, excerpt_for=excerpt_for)
        if plan is None:
            return None
        shrinks, evict = plan
        for v, span in shrinks:
            self.packager.shrink(sel, v, span, f"shrunk to a verbatim excerpt to make room for a required zone ({reason})")
        for v in evict:
            self.packager.remove(sel, v.chunk.chunk_id, f"evicted for required zone ({reason})")
        self.packager.add(sel, item, reason)
        return [v.chunk.chunk_id for v in evict]

    def _fit_moves(self, sel: Selection, *, material: bool, required: Sequence[str]) -> tuple[list[Scored], list[Scored], list[Scored]]:
        """What :meth:`fit` may do, in order: evict plain chunks, shrink risk chunks, evict weak (then, for a
        material item, strong but not sole-cover) risk chunks. Chunks placed for a zone are never touched."""
        movable = [c for c in sel.chosen.values() if not c.origin.startswith("zone:")]
        plain = sorted((c for c in movable if not c.material), key=lambda c: (c.terms.combined, c.chunk.chunk_id))
        weak = sorted((c for c in movable if c.material and c.terms.risk < STRONG_RISK), key=weakest_first)
        strong: list[Scored] = []
        if material:
            spare = _not_sole_cover(sel, required)
            strong = sorted((c for c in movable if c.material and c.terms.risk >= STRONG_RISK and spare(c)), key=weakest_first)
        return plain, sorted((c for c in movable if c.material), key=weakest_first), weak + strong

    def fit_bound(self, sel: Selection, *, budget: int, overhead: int, material: bool, required: Sequence[str] = (),
                  excerpt_for: ExcerptFor | None = None) -> int:
        """The most room :meth:`fit` could make in ``sel`` for an item (material or not): a chunk costing more
        cannot be placed, so a caller trying several candidates skips it without planning."""
        plain, shrinkable, evict_then = self._fit_moves(sel, material=material, required=required)
        evictable = {c.chunk.chunk_id for c in plain + evict_then}
        return (budget - self.packager.used(sel, overhead) + sum(self.packager.cost(c) for c in plain + evict_then)
                + sum(self.packager.saving(c, excerpt_for)[1] for c in shrinkable if c.chunk.chunk_id not in evictable))

    def place_risks(self, sel: Selection, scored: Sequence[Scored], *, budget: int, overhead: int, risk_share: float = 1.0,
                    required: Sequence[str] = (), excerpt_for: ExcerptFor | None = None) -> list[str]:
        """After coverage: give every material chunk still left out (one found by a zone re-retrieval, or
        one that lost its place) a place, strongest first, whole if it fits, else as its verbatim excerpt.

        Room the package leaves unused is used first. Beyond that, room is made only from what is worth
        less than the evidence of a risk: chunks without material risk that are neither placed for a zone
        nor the only packaged chunk of a ``required`` zone (ascending score), then whole risk chunks shrunk
        to their excerpts, weakest first (their strongest passage stays, as in :meth:`select`). No risk
        chunk is evicted for another. Making room never lets risk chunks take more than ``risk_share`` of
        the budget after the preamble, as in :meth:`select`.
        Chunks evicted for a required zone stay out. Returns the ids placed.
        """
        placed: list[str] = []
        req = set(required)
        left = sorted(
            (s for s in scored if s.material and s.chunk.chunk_id not in sel.chosen and not sel.excluded.get(s.chunk.chunk_id, "").startswith("evicted")),
            key=lambda s: (-s.terms.risk, self.packager.block_cost(s.chunk), s.chunk.chunk_id),
        )
        share_room = int((budget - overhead) * risk_share)
        bounds: tuple[int, int, int, int] | None = None  # free, risk room, most freeable, most risk room: kept until a placement
        for s in left:
            if bounds is None:
                bounds = self._room_bounds(sel, budget=budget, overhead=overhead, share_room=share_room, required=req, excerpt_for=excerpt_for)
            free, risk_room, max_free, max_risk = bounds
            if max_free < MIN_EXCERPT_TOKENS:
                break  # no room and nothing to shrink or evict: no further risk can be placed (spares the excerpt search)
            whole = self.packager.block_cost(s.chunk)
            span = excerpt_for(s.chunk) if excerpt_for is not None and whole > min(free, risk_room) else None
            excerpt = self.packager.excerpt_cost(s.chunk, span) if span is not None else None
            cheapest = min(whole, excerpt) if excerpt is not None else whole
            if cheapest > max_free or (cheapest > free and cheapest > max_risk):
                continue  # cannot be made to fit in this state
            bounds = None
            if whole <= min(free, risk_room):
                s.span = None
            elif excerpt is not None and excerpt <= min(free, risk_room):
                s.span = span
            elif cheapest <= free:  # room the rest of the package left unused: the risk share reserves room, it does not waste it
                s.span = span if cheapest < whole else None
            else:
                # whole risk chunks keep their strongest passage (weakest risk first): the passage of every
                # risk before the whole text of a few, as in select()
                plain, whole_risks = self._risk_moves(sel, req)
                shrinks: list[tuple[Scored, tuple[int, int]]] = []
                if cheapest > risk_room:  # the risk share is full: only shrinking risk chunks makes room in it
                    plan = self.packager.plan_room(cheapest - risk_room, evict_first=[], shrink=whole_risks, evict_then=[], excerpt_for=excerpt_for)
                    if plan is None:
                        continue
                    shrinks = plan[0]
                saved = sum(self.packager.block_cost(v.chunk) - self.packager.excerpt_cost(v.chunk, sp) for v, sp in shrinks)
                evict: list[Scored] = []
                if cheapest > free + saved:
                    done = {v.chunk.chunk_id for v, _ in shrinks}
                    plan = self.packager.plan_room(cheapest - free - saved, evict_first=plain, shrink=[c for c in whole_risks if c.chunk.chunk_id not in done],
                                           evict_then=[], excerpt_for=excerpt_for)
                    if plan is None:
                        continue
                    shrinks += plan[0]
                    evict = plan[1]
                for v, vspan in shrinks:
                    self.packager.shrink(sel, v, vspan, f"shrunk to a verbatim excerpt to make room for another risk ({', '.join(s.terms.risk_kinds)})")
                for v in evict:
                    self.packager.remove(sel, v.chunk.chunk_id, f"over budget: left out for a material risk ({', '.join(s.terms.risk_kinds)})")
                s.span = span if cheapest < whole else None
            kinds = ", ".join(s.terms.risk_kinds)
            why = f"material risk ({kinds}), risk {s.terms.risk:.2f}, placed after coverage"
            if s.span is not None:
                why += f"; verbatim excerpt, the whole chunk needs {whole} tokens"
            self.packager.add(sel, s, why)
            placed.append(s.chunk.chunk_id)
        if placed:  # room left after shrinking: whole chunks again, strongest risk first, as in select()
            self.packager.upgrade(sel, sorted((c for c in sel.chosen.values() if c.material), key=lambda c: (-c.terms.risk, self.packager.block_cost(c.chunk), c.chunk.chunk_id)),
                          free=budget - self.packager.used(sel, overhead),
                          risk_room=share_room - sum(self.packager.cost(x) for x in sel.chosen.values() if x.material))
        return placed

    def _risk_moves(self, sel: Selection, required: set[str]) -> tuple[list[Scored], list[Scored]]:
        """What :meth:`place_risks` may do: evict plain chunks that no zone needs (ascending score), shrink
        whole risk chunks (weakest first). Risk chunks and chunks placed for a zone are never evicted."""
        movable = [c for c in sel.chosen.values() if not c.origin.startswith("zone:")]
        spare = _not_sole_cover(sel, required)
        plain = sorted((c for c in movable if not c.material and spare(c)), key=lambda c: (c.terms.combined, c.chunk.chunk_id))
        return plain, sorted((c for c in movable if c.material and c.span is None), key=weakest_first)

    def _room_bounds(self, sel: Selection, *, budget: int, overhead: int, share_room: int, required: set[str],
                     excerpt_for: ExcerptFor | None) -> tuple[int, int, int, int]:
        """(free room, risk room, the most room :meth:`_risk_moves` could give, the most risk room shrinking
        could give): a quick test before planning any move."""
        free = budget - self.packager.used(sel, overhead)
        risk_room = share_room - sum(self.packager.cost(c) for c in sel.chosen.values() if c.material)
        plain, whole_risks = self._risk_moves(sel, required)
        shrink = sum(self.packager.saving(c, excerpt_for)[1] for c in whole_risks)
        return free, risk_room, free + sum(self.packager.cost(c) for c in plain) + shrink, risk_room + shrink

    def refill(self, sel: Selection, scored: Sequence[Scored], *, budget: int, overhead: int) -> list[str]:
        """Use space freed by evictions: add left-out chunks (material first, then by score) that now fit."""
        added: list[str] = []
        free = budget - self.packager.used(sel, overhead)
        for s in sorted(scored, key=lambda s: (not s.material, -s.terms.combined, s.chunk.chunk_id)):
            cid = s.chunk.chunk_id
            if cid in sel.chosen or sel.excluded.get(cid, "").startswith("evicted"):
                continue
            cost = self.packager.block_cost(s.chunk)
            if cost <= free:
                s.span = None
                self.packager.add(sel, s, f"refill after coverage: score {s.terms.combined:.2f}")
                free -= cost
                added.append(cid)
        return added


def repair(
    check: CoverageSelfCheck,
    *,
    sel: Selection,
    scored: Sequence[Scored],
    found: dict[str, Scored],
    zones: ZoneSource,
    required: Sequence[str],
    budget: int,
    overhead: int,
    risk_share: float,
    excerpt_for: ExcerptFor | None,
) -> CoverageReport:
    """The coverage stage: required zones first (:meth:`CoverageSelfCheck.run`), then every material chunk still
    left out (``found``: everything scored so far, including what the zone lookups found) is placed, then room
    freed by evictions is refilled from ``scored`` (the search candidates)."""
    if required and scored:
        zones.prefetch(required, sel)
    report = check.run(required=required, sel=sel, zone_candidates=zones, budget=budget, overhead=overhead,
                       excerpt_for=excerpt_for) if required else CoverageReport(required=[])
    # a risk found only by a zone's re-retrieval, or one that lost its place, outranks plain context
    check.place_risks(sel, list(found.values()), budget=budget, overhead=overhead, risk_share=risk_share,
                      required=required, excerpt_for=excerpt_for)
    if report.evicted:
        check.refill(sel, scored, budget=budget, overhead=overhead)
    return report


__all__ = ["ZONE_SEARCH_WINDOWS", "CoverageReport", "CoverageSelfCheck", "ZoneSource", "coverage_score", "repair"]
