"""Required-zone coverage self-check (spec 3.3).

After packaging, the zones of the packaged chunks are compared with the
intent's required zones. A zone with no packaged chunk is *missing*; one with
some but not all of its candidate chunks is *partial*. For each gap a targeted
retrieval (run by the agent) supplies the zone's chunks; the best one is merged
within budget, and a required zone outranks a marginal risk chunk (never a
strong one, see :data:`~retrieval_node.pack.STRONG_RISK`). A zone the deal's
documents do not contain is reported in ``missing_zones`` for a human: it is
never papered over.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from .pack import ContextPackager, ExcerptFor, Scored, Selection, zone_counts


def coverage_score(required: Sequence[str], covered: Sequence[str]) -> float:
    """``|covered ∩ required| / |required|``; 1.0 when nothing is required."""
    req = set(required)
    if not req:
        return 1.0
    return len(req & set(covered)) / len(req)


@dataclass(slots=True)
class CoverageReport:
    required: list[str]
    covered: list[str] = field(default_factory=list)
    partial: dict[str, tuple[int, int]] = field(default_factory=dict)
    absent: list[str] = field(default_factory=list)
    unfit: list[str] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    evicted: list[str] = field(default_factory=list)

    @property
    def missing(self) -> list[str]:
        return sorted(set(self.absent) | set(self.unfit))

    @property
    def score(self) -> float:
        return coverage_score(self.required, self.covered)


#: Packaged chunks per zone (kept under its earlier name).
zones_in = zone_counts


class CoverageSelfCheck:
    """Checks and repairs zone coverage of a selection.

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
        have = zones_in(sel)
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
                    bound[cand.material] = self.packager.fit_bound(sel, budget=budget, overhead=overhead, material=cand.material,
                                                                   required=report.required, excerpt_for=excerpt_for)
                if self.packager.block_cost(cand.chunk) > bound[cand.material]:
                    continue
                cand.origin = f"zone:{zone}"
                evicted = self.packager.fit(sel, cand, budget=budget, overhead=overhead, reason=f"required zone {zone}", required=report.required,
                                            excerpt_for=excerpt_for)
                if evicted is not None:
                    report.added.append(cand.chunk.chunk_id)
                    report.evicted.extend(evicted)
                    placed = True
                    break
            if not placed:
                report.unfit.append(zone)
        # partial zones: add the zone's remaining chunks where they fit without evicting anything
        have = zones_in(sel)
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
        report.covered = sorted(z for z in report.required if zones_in(sel).get(z, 0) > 0)
        return report


__all__ = ["CoverageReport", "CoverageSelfCheck", "coverage_score", "zones_in"]
