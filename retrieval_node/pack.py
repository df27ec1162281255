"""Token-budget selection (spec 2.4, 5): which candidates go into the package, and the budget's accounting.

The package is what the downstream agent reads, rendered by
:func:`~retrieval_node.models.render_evidence`: a short preamble, then one fenced block per chunk with
its provenance and its verbatim content. The budget is counted in cl100k tokens of that whole
rendering, headers included. :class:`ContextPackager` keeps that accounting (a block's cost, an
excerpt's cost, what a selection uses) and its one stage, :meth:`ContextPackager.select`:

1. chunks carrying a material risk, highest risk first, cheaper first on ties (as verbatim excerpts
   when the risk share of the budget would not hold every risk whole);
2. every other candidate by combined score, skipping what no longer fits.

The coverage repair (:mod:`retrieval_node.coverage`) then changes the selection with the same
accounting; :func:`~retrieval_node.finalize.finalize` puts it in reading order and counts it exactly.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence, Set
from itertools import accumulate

from .cache import BoundedCache
from .models import (  # noqa: F401  (rendering lives with the package types; re-exported for callers of pack)
    PREAMBLE,
    SAMPLE_CODE,
    block_parts,
    build_package,
    evidence_parts,
    fence_for,
    package_hash,
    preamble,
    render_block,
    render_evidence,
    to_reference,
)
from .tokens import TokenCounter
from .values import ChunkView, Scored, Selection, zone_counts  # noqa: F401

#: Gives the verbatim excerpt ``(start, end)`` of a chunk's strongest risk passage, or None.
ExcerptFor = Callable[[ChunkView], "tuple[int, int] | None"]

#: Risk at or above this is never evicted to make room for a required zone.
STRONG_RISK = 0.9
#: Tokens kept per risk chunk still to be placed, when excerpts are allowed (about one excerpt block).
EXCERPT_RESERVE_TOKENS = 220
#: Below this much room no excerpt block fits (its header alone is ~40 tokens): none is cut.
MIN_EXCERPT_TOKENS = 60
#: Block costs kept per packager (a chunk's block, an excerpt's block).
COST_CACHE = 100_000


def weakest_first(s: Scored) -> tuple[float, float, str]:
    """Sort key: weakest risk, then lowest combined score, then chunk id."""
    return (s.terms.risk, s.terms.combined, s.chunk.chunk_id)


def count_evidence(tokens: TokenCounter, parts: Sequence[str], known: Mapping[int, int] | None = None) -> int:
    """Tokens of ``"".join(parts)``, piece by piece where the counter can do that exactly (``known``: part index ->
    its count, already had; see :meth:`~retrieval_node.tokens.TiktokenCounter.count_parts`)."""
    count_parts = getattr(tokens, "count_parts", None)
    if count_parts is None:
        return tokens.count("".join(parts))
    return count_parts(parts, known) if known else count_parts(parts)


class ContextPackager:
    """Fills a token budget with the candidates that cover the most risk per token.

    >>> packager = ContextPackager(TiktokenCounter())                       # doctest: +SKIP
    >>> sel = packager.select(scored, budget=4000, overhead=packager.overhead("D", "i", "a"))  # doctest: +SKIP
    """

    def __init__(self, tokens: TokenCounter) -> None:
        self.tokens = tokens
        self._cost_cache: BoundedCache[str, int] = BoundedCache(COST_CACHE)
        self._excerpt_cost_cache: BoundedCache[tuple[str, int, int], int] = BoundedCache(COST_CACHE)
        #: chunk id -> (content hash, tokens of its block body) as ingest counted them (precompute.offer_bodies)
        self._bodies: BoundedCache[str, tuple[str, int]] = BoundedCache(COST_CACHE)

    def forget(self, chunk_ids: Set[str]) -> int:
        """Drop the token costs kept for these chunks (their deal view left the deal cache); returns how many went."""
        if not chunk_ids:
            return 0
        return (self._cost_cache.discard(lambda k: k in chunk_ids)
                + self._excerpt_cost_cache.discard(lambda k: k[0] in chunk_ids)
                + self._bodies.discard(lambda k: k in chunk_ids))

    def offer_body(self, chunk_id: str, content_hash: str, tokens: int) -> None:
        """``tokens`` = this packager's count of :func:`~retrieval_node.models.quoted_body` of the content with
        ``content_hash`` (ingest counted it: :func:`~retrieval_node.precompute.offer_bodies`): :meth:`block_cost`
        uses it instead of tokenising the chunk's content."""
        if chunk_id not in self._cost_cache:
            self._bodies.put(chunk_id, (content_hash, tokens))

    def block_cost(self, chunk: ChunkView) -> int:
        """Tokens of one rendered block (with a two-digit citation id) plus its separators."""
        cost = self._cost_cache.get(chunk.chunk_id)
        if cost is None:
            head, body, end = block_parts(to_reference(chunk), 99, SAMPLE_CODE, chunk.deal_id)
            stored = self._bodies.get(chunk.chunk_id)
            known = {1: stored[1]} if stored is not None and stored[0] == chunk.content_hash else None
            cost = self._cost_cache.put(chunk.chunk_id, count_evidence(self.tokens, [head, body, end + "\n"], known))
            self._bodies.pop(chunk.chunk_id)  # the cost is kept now: the offer served its one use
        return cost

    def excerpt_cost(self, chunk: ChunkView, span: tuple[int, int]) -> int:
        """Tokens of the rendered block quoting ``content[start:end]`` (with a two-digit citation id)."""
        key = (chunk.chunk_id, span[0], span[1])
        cost = self._excerpt_cost_cache.get(key)
        if cost is None:
            head, body, end = block_parts(to_reference(chunk, span), 99, SAMPLE_CODE, chunk.deal_id)
            cost = self._excerpt_cost_cache.put(key, count_evidence(self.tokens, [head, body, end + "\n"]))
        return cost

    def cost(self, s: Scored) -> int:
        """What ``s`` costs as selected: its whole block, or its excerpt's."""
        return self.block_cost(s.chunk) if s.span is None else self.excerpt_cost(s.chunk, s.span)

    def overhead(self, deal_id: str, intent_id: str, agent_id: str) -> int:
        return self.tokens.count(preamble(deal_id, intent_id, agent_id, SAMPLE_CODE))

    def used(self, sel: Selection, overhead: int) -> int:
        return overhead + sum(self.cost(s) for s in sel.chosen.values())

    def select(
        self,
        scored: Sequence[Scored],
        *,
        budget: int,
        overhead: int,
        zones: Sequence[str] = (),
        risk_share: float = 1.0,
        excerpt_for: ExcerptFor | None = None,
        companions: Mapping[str, Sequence[Scored]] | None = None,
    ) -> Selection:
        """Risk chunks first (on equal risk: those in a required ``zones`` entry, then cheaper), then the rest by score.

        The risk phase may use ``risk_share`` of the budget. A risk chunk goes in whole when that
        leaves room for an excerpt-sized share of every risk chunk after it; otherwise, when
        ``excerpt_for(chunk)`` gives a span, as that verbatim excerpt (so a tight budget carries
        the passage of every risk before the whole text of a few). Excerpts are upgraded to the
        whole chunk, strongest first, while the risk room allows. Then the ``companions`` of each
        material chunk packed whole (:func:`~retrieval_node.passages.companions`: the chunks its
        passage runs into or out of), in the risk order, while the budget allows. What is left
        competes by combined score.

        Excerpts never place fewer material risks than whole chunks alone would: when the excerpt of a large risk chunk
        took the room of several smaller ones after it (a 1.0 lien's excerpt crowding out two 0.94 risks), the selection
        without excerpts is kept if it places more of them; equal counts keep the excerpts.
        """
        sel = Selection()
        wanted = set(zones)
        costs = {s.chunk.chunk_id: self.block_cost(s.chunk) for s in scored if s.material}
        risky = sorted(
            (s for s in scored if s.material),
            key=lambda s: (-s.terms.risk, not (wanted & set(s.chunk.zones)), costs[s.chunk.chunk_id], s.chunk.chunk_id),
        )
        remaining = budget - overhead
        risk_room = int(remaining * risk_share)
        # room kept for the risk chunks still to place: an excerpt's worth each, or the whole block if smaller
        need = [min(costs[s.chunk.chunk_id], EXCERPT_RESERVE_TOKENS) if excerpt_for is not None else 0 for s in risky]
        after = list(accumulate(reversed(need[1:] + [0])))[::-1]  # after[i] = sum(need[i + 1:])
        for i, s in enumerate(risky):
            cost = costs[s.chunk.chunk_id]
            room = min(remaining, risk_room)
            kinds = ", ".join(s.terms.risk_kinds)
            span = None
            if cost + after[i] > room and excerpt_for is not None and room >= MIN_EXCERPT_TOKENS:
                span = excerpt_for(s.chunk)
            if span is not None and (cost + after[i] > room) and self.excerpt_cost(s.chunk, span) <= room and self.excerpt_cost(s.chunk, span) < cost:
                s.span = span
                cost = self.excerpt_cost(s.chunk, span)
                self.add(sel, s, f"material risk ({kinds}), risk {s.terms.risk:.2f}; verbatim excerpt, the whole chunk needs {self.block_cost(s.chunk)} tokens")
            elif cost <= room:
                s.span = None
                self.add(sel, s, f"material risk ({kinds}), risk {s.terms.risk:.2f}")
            else:
                sel.excluded[s.chunk.chunk_id] = f"over budget: material risk ({kinds}) needs {cost} tokens, {remaining} left"
                continue
            remaining -= cost
            risk_room -= cost
        remaining, risk_room = self.upgrade(sel, risky, free=remaining, risk_room=risk_room)
        for s in risky if companions else ():
            if s.chunk.chunk_id not in sel.chosen or s.span is not None:
                continue
            for c in companions.get(s.chunk.chunk_id, ()):  # type: ignore[union-attr]
                if c.chunk.chunk_id in sel.chosen:
                    continue
                cost = self.block_cost(c.chunk)
                what = f"continues the passage of material chunk {s.chunk.chunk_id[:12]} ({', '.join(s.terms.risk_kinds)}), split by Stage 0"
                if cost <= remaining:
                    c.span = None
                    self.add(sel, c, what)
                    remaining -= cost
                else:
                    sel.excluded[c.chunk.chunk_id] = f"over budget: {what}; needs {cost} tokens, {remaining} left"
        rest = sorted((s for s in scored if s.chunk.chunk_id not in sel.chosen), key=lambda s: (-s.terms.combined, s.chunk.chunk_id))
        for s in rest:
            s.span = None
            cost = self.block_cost(s.chunk)
            if cost <= remaining:
                why = f"combined score {s.terms.combined:.2f}" + (f" (risk: {', '.join(s.terms.risk_kinds)})" if s.material else "")
                self.add(sel, s, why)
                remaining -= cost
            else:
                sel.excluded[s.chunk.chunk_id] = f"over budget: score {s.terms.combined:.2f} needs {cost} tokens, {remaining} left"
        if excerpt_for is not None and _excerpt_crowded_out(sel, scored):
            whole = self.select([Scored(x.chunk, x.terms, x.group, x.origin) for x in scored], budget=budget, overhead=overhead,
                                zones=zones, risk_share=risk_share, companions=companions)
            if _material_count(whole) > _material_count(sel):
                return _adopt(whole, scored)
        return sel

    def upgrade(self, sel: Selection, ordered: Sequence[Scored], *, free: int, risk_room: int) -> tuple[int, int]:
        """Packaged excerpts of ``ordered`` back to their whole chunk, in that order, while room allows;
        returns the room left (free, risk room)."""
        for c in ordered:
            if c.span is not None and c.chunk.chunk_id in sel.chosen:
                delta = self.block_cost(c.chunk) - self.excerpt_cost(c.chunk, c.span)
                if delta <= min(free, risk_room):
                    c.span = None
                    sel.reasons[c.chunk.chunk_id] = f"material risk ({', '.join(c.terms.risk_kinds)}), risk {c.terms.risk:.2f}"
                    free -= delta
                    risk_room -= delta
        return free, risk_room

    def saving(self, c: Scored, excerpt_for: ExcerptFor | None) -> tuple[tuple[int, int] | None, int]:
        """(excerpt span, tokens saved) by quoting whole chunk ``c`` as its excerpt; (None, 0) when it cannot be."""
        if excerpt_for is None or c.span is not None:
            return None, 0
        span = excerpt_for(c.chunk)
        if span is None:
            return None, 0
        return span, max(0, self.block_cost(c.chunk) - self.excerpt_cost(c.chunk, span))

    def plan_room(self, need: int, *, evict_first: Sequence[Scored], shrink: Sequence[Scored], evict_then: Sequence[Scored],
                   excerpt_for: ExcerptFor | None) -> tuple[list[tuple[Scored, tuple[int, int]]], list[Scored]] | None:
        """Moves that free at least ``need`` tokens, in order: evict ``evict_first``, shrink ``shrink`` (whole
        chunks with an excerpt cheaper than the whole), evict ``evict_then``; each only as far as needed.
        Returns (shrinks, evictions), or None when all of them together do not free enough."""
        freed = 0
        evict: list[Scored] = []
        shrinks: list[tuple[Scored, tuple[int, int]]] = []
        shrunk: dict[str, int] = {}
        for v in evict_first:
            if freed >= need:
                break
            evict.append(v)
            freed += self.cost(v)
        for v in shrink:
            if freed >= need:
                break
            if v in evict:
                continue
            span, saving = self.saving(v, excerpt_for)
            if span is not None and saving > 0:
                shrinks.append((v, span))
                shrunk[v.chunk.chunk_id] = self.excerpt_cost(v.chunk, span)
                freed += saving
        for v in evict_then:
            if freed >= need:
                break
            if v in evict:
                continue
            evict.append(v)
            freed += shrunk.get(v.chunk.chunk_id, self.cost(v))
        if freed < need:
            return None
        evicted = {v.chunk.chunk_id for v in evict}
        return [(v, sp) for v, sp in shrinks if v.chunk.chunk_id not in evicted], evict

    def shrink(self, sel: Selection, s: Scored, span: tuple[int, int], why: str) -> None:
        s.span = span
        sel.reasons[s.chunk.chunk_id] = f"{sel.reasons.get(s.chunk.chunk_id, '')}; {why}".lstrip("; ")

    @staticmethod
    def add(sel: Selection, s: Scored, reason: str) -> None:
        sel.chosen[s.chunk.chunk_id] = s
        sel.reasons[s.chunk.chunk_id] = reason
        sel.excluded.pop(s.chunk.chunk_id, None)
        sel.order.append(s.chunk.chunk_id)

    @staticmethod
    def remove(sel: Selection, chunk_id: str, reason: str) -> None:
        sel.chosen.pop(chunk_id, None)
        sel.reasons.pop(chunk_id, None)
        sel.excluded[chunk_id] = reason


def _material_count(sel: Selection) -> int:
    return sum(1 for s in sel.chosen.values() if s.material)


def _excerpt_crowded_out(sel: Selection, scored: Sequence[Scored]) -> bool:
    """Whether an excerpt may have taken the room of a risk chunk: one is packed as an excerpt and a material chunk is left
    out (with every material chunk in, no selection can place more)."""
    return any(s.span is not None for s in sel.chosen.values()) and any(
        s.material and s.chunk.chunk_id not in sel.chosen for s in scored)


def _adopt(whole: Selection, scored: Sequence[Scored]) -> Selection:
    """``whole`` (a selection made on copies of ``scored``) over the caller's own candidates: their excerpts undone."""
    own = {s.chunk.chunk_id: s for s in scored}
    for s in scored:
        s.span = None
    return Selection(chosen={cid: own.get(cid, s) for cid, s in whole.chosen.items()}, reasons=dict(whole.reasons),
                     excluded=dict(whole.excluded), order=list(whole.order))


__all__ = [
    "EXCERPT_RESERVE_TOKENS",
    "MIN_EXCERPT_TOKENS",
    "PREAMBLE",
    "STRONG_RISK",
    "ContextPackager",
    "ExcerptFor",
    "Scored",
    "Selection",
    "build_package",
    "count_evidence",
    "evidence_parts",
    "fence_for",
    "package_hash",
    "render_block",
    "render_evidence",
    "to_reference",
    "weakest_first",
    "zone_counts",
]

