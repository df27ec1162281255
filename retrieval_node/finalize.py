"""Finalize a selection (spec 2.4): reading order, the exact token count, trimmed until within budget.

The per-block costs the selection used are estimates of the rendered text; this stage renders the
package text itself (:func:`~retrieval_node.models.evidence_parts`), counts it exactly, and drops what
is worth least until it fits, so the budget is never exceeded.
"""

from __future__ import annotations

from collections.abc import Sequence

from .models import ChunkReference, evidence_code, evidence_parts, to_reference
from .pack import ContextPackager, count_evidence
from .values import Selection


def finalize(
    packager: ContextPackager,
    sel: Selection,
    *,
    budget: int,
    deal_id: str,
    intent_id: str,
    agent_id: str,
    redacted: Sequence[ChunkReference] = (),
    key: bytes | None = None,
) -> tuple[list[ChunkReference], str, int, str | None]:
    """Reading order, exact count, trim until within budget; returns (refs, rendered text, tokens, evidence code).

    ``redacted`` references (metadata only) are listed if they still fit; they go first when trimming. With the
    store's secret ``key`` the blocks end with the package's evidence code (:func:`~retrieval_node.models.evidence_code`).
    """
    extra = list(redacted)
    while True:
        chosen = sorted(sel.chosen.values(), key=lambda s: s.chunk.reading_key)
        refs = sorted([to_reference(s.chunk, s.span) for s in chosen] + extra,
                      key=lambda r: (r.document_id, int(r.page_range.split("-")[0]), int(r.page_range.split("-")[1]), r.chunk_id))
        code = evidence_code(key, deal_id, intent_id, agent_id, refs) if key is not None and refs else None
        parts = evidence_parts(deal_id, intent_id, agent_id, refs, code=code)
        text = "".join(parts)
        total = count_evidence(packager.tokens, parts)
        if total <= budget or not refs:
            return refs, text, total, code
        if extra:
            extra.pop()
            continue
        # the exact count disagrees with the per-block estimate: drop the least valuable chunk
        worst = min(chosen, key=lambda s: (s.material, s.origin.startswith("zone:"), s.terms.risk, s.terms.combined, s.chunk.chunk_id))
        packager.remove(sel, worst.chunk.chunk_id, "over budget after exact count")


__all__ = ["finalize"]
