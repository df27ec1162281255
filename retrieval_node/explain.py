"""Explain a package (spec 2.4, 3.3): its table of contents, its exclusions note and its risk summary.

Everything here is text for the downstream agent and the lawyer, derived from what the earlier stages
decided; nothing is decided here. The stage's entry point is :func:`explain`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from .deals import DealView
from .models import ChunkReference, MaterialRisk, RetrievalIntent, TrustContext
from .passages import is_furniture
from .risk import LINE_BREAK_CHARS, term_pattern
from .values import ChunkView, CoverageReport, Scored, Selection

#: a line break as Stage 0 may write one (:data:`~retrieval_node.risk.LINE_BREAK_CHARS`, ``\r\n`` as one)
_ANY_BREAK = re.compile("\r\n|[" + re.escape(LINE_BREAK_CHARS) + "]")
#: Longest evidence quoted in ``material_risks`` (characters, verbatim from the chunk).
EVIDENCE_MAX_CHARS = 300


@dataclass(frozen=True, slots=True)
class Explanation:
    """The package's explanatory fields and the counts behind the summary's ``risk_distribution``."""

    structural_toc: str
    exclusions_note: str
    risk_summary: str
    risk_distribution: dict[str, int]
    material_risks: list[MaterialRisk]


def explain(*, intent: RetrievalIntent, view: DealView, sections: Sequence[str], roles: Sequence[str] | None,
            refs: Sequence[ChunkReference], sel: Selection, scored: dict[str, Scored], report: CoverageReport,
            missed: Sequence[Scored], inspected: int,
            excerpt_for: Callable[[ChunkView], tuple[int, int] | None] | None = None, trust: TrustContext | None = None) -> Explanation:
    """The explanation of one package. ``scored`` is every chunk scored for the call; ``missed`` the material
    ones left out; ``inspected`` the number of search candidates; ``excerpt_for`` the passage carrying a
    chunk's risk (evidence for a risk stated in numbers only); ``trust`` the caller's (the table of contents names
    only documents holding chunks it may see or see listed)."""
    distribution: dict[str, int] = {}
    for r in refs:
        if r.redacted:
            continue
        for k in sel.chosen[r.chunk_id].terms.risk_kinds:
            distribution[k] = distribution.get(k, 0) + 1
    return Explanation(
        structural_toc=table_of_contents(view, sections, roles, refs, report, trust),
        exclusions_note=exclusions_note(sel, scored, report),
        risk_summary=risk_summary(intent, refs, sel, missed, inspected),
        risk_distribution=distribution,
        material_risks=material_risks(refs, sel, missed, excerpt_for, furniture=lambda c: view.passage_links().furniture(c.document_id)),
    )


def material_risks(refs: Sequence[ChunkReference], sel: Selection, missed: Sequence[Scored],
                   excerpt_for: Callable[[ChunkView], tuple[int, int] | None] | None = None,
                   furniture: Callable[[ChunkView], set[str]] | None = None) -> list[MaterialRisk]:
    """``summary.material_risks``: every packaged chunk with a material risk (in citation order), then every one
    left out, each with its kinds and the verbatim words that carry it (``furniture``: the running header and footer
    shapes of a chunk's document, never the first words of its evidence)."""
    def evidence(s: Scored) -> str:
        return risk_evidence(s, excerpt_for, furniture=furniture(s.chunk) if furniture is not None else frozenset())

    out = []
    for r in refs:
        if r.redacted:
            continue
        s = sel.chosen[r.chunk_id]
        if s.material:
            out.append(MaterialRisk(chunk_id=r.chunk_id, kinds=list(s.terms.risk_kinds), in_package=True, evidence=evidence(s)))
    out += [MaterialRisk(chunk_id=s.chunk.chunk_id, kinds=list(s.terms.risk_kinds), in_package=False, evidence=evidence(s))
            for s in missed]
    return out


def risk_evidence(s: Scored, excerpt_for: Callable[[ChunkView], tuple[int, int] | None] | None = None,
                  max_chars: int = EVIDENCE_MAX_CHARS, *, furniture: set[str] = frozenset()) -> str:  # type: ignore[assignment]
    """The verbatim words of ``s``'s chunk that carry its risk: the line around its first material term found in the
    text; for a risk read from numbers (or a term broken across lines), the passage that carries it, from its first
    line that is not a running header, footer or page number (``furniture``: :meth:`~retrieval_node.passages.Links.furniture`);
    at worst the chunk's opening. Always a substring of the chunk's content."""
    text = s.chunk.content
    found = _term_evidence(text, tuple(s.terms.risk_terms), max_chars)
    if found is not None:
        return found
    span = s.span or (excerpt_for(s.chunk) if excerpt_for is not None else None)
    if span is not None:
        span = _past_furniture(text, span, furniture)
        return _around(text, span[0], span[0], max_chars) if span[1] - span[0] > max_chars else text[span[0]:span[1]].strip() or text.strip()[:max_chars]
    start = _past_furniture(text, (0, len(text)), furniture)[0]  # the chunk's opening, after its running header
    return _around(text, start, start, max_chars)


@lru_cache(maxsize=4096)  # keyed by the chunk's text: a larger cache kept the texts of deals no view holds any more
def _term_evidence(text: str, terms: tuple[str, ...], max_chars: int) -> str | None:
    """The line around the first of ``terms`` found in ``text`` (kept: a warm call asks again about the same chunks)."""
    for term in terms:
        m = _case_blind(term).search(text)
        if m:
            return _around(text, m.start(), m.end(), max_chars)
    return None


@lru_cache(maxsize=4096)
def _case_blind(term: str) -> re.Pattern[str]:
    return re.compile(term_pattern(term).pattern, re.IGNORECASE)


def _past_furniture(text: str, span: tuple[int, int], furniture: set[str]) -> tuple[int, int]:
    """``span`` started after its leading running-header, footer, page-number and blank lines (unchanged when
    nothing else would be left)."""
    start, end = span
    while start < end:
        brk = _ANY_BREAK.search(text, start, end)
        if brk is None:
            break
        line = text[start:brk.start()]
        if line.strip() and not is_furniture(line, furniture):
            break
        start = brk.end()
    return (start, end) if text[start:end].strip() else span


def _around(text: str, start: int, end: int, max_chars: int) -> str:
    """The line holding ``text[start:end]`` (at any line break: :data:`~retrieval_node.risk.LINE_BREAK_CHARS`), cut to
    ``max_chars`` around it; stripped of surrounding blanks."""
    lo = max(text.rfind(c, 0, start) for c in LINE_BREAK_CHARS) + 1
    brk = _ANY_BREAK.search(text, end)
    hi = len(text) if brk is None else brk.start()
    if hi - lo > max_chars:
        lo = max(lo, start - max_chars // 3)
        hi = min(hi, lo + max_chars)
    return text[lo:hi].strip() or text.strip()[:max_chars]


def table_of_contents(view: DealView, sections: Sequence[str], roles: Sequence[str] | None, refs: Sequence[ChunkReference],
                      report: CoverageReport, trust: TrustContext | None = None) -> str:
    """Per document (in document order): the included chunks in reading order and how many target-section
    chunks were left; documents with neither are not listed. Then the required zones' state. With ``trust``, only
    chunks the caller may see, or see listed without content, are counted: a document wholly above its clearance
    is not named."""
    groups = view.toc_groups()
    wanted = frozenset(sections)
    targets = view.toc_targets(wanted, trust)
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


def exclusions_note(sel: Selection, scored: dict[str, Scored], report: CoverageReport) -> str:
    """What was quoted in part, what was left out (material risks by name), and the zones missing or unfit."""
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


def risk_summary(intent: RetrievalIntent, refs: Sequence[ChunkReference], sel: Selection, missed: Sequence[Scored], inspected: int) -> str:
    """The lines a reader sees first: each packaged chunk with a material risk (cited ``[E<n>]``), each one left out."""
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


#: How ``retrieval-node explain`` names the reason of each choice and each exclusion: the first prefix that a reason
#: written by the packager (pack.py), the coverage repair (coverage.py) or finalize starts with. Kept next to the texts
#: they read; tests/test_cli_explain.py checks every reason of real retrievals has a kind (a new reason text must be
#: added here).
CHOSEN_KINDS: tuple[tuple[str, str], ...] = (
    ("material risk", "risk"),                   # risk phase, or placed after coverage
    ("combined score", "score"),
    ("refill after coverage", "score"),
    ("required zone", "zone coverage"),
    ("completes required zone", "zone coverage"),
)
LEFT_OUT_KINDS: tuple[tuple[str, str], ...] = (
    ("over budget after exact count", "budget (exact count)"),
    ("over budget: left out for a material risk", "budget (room made for a risk)"),
    ("evicted for required zone", "budget (room made for a zone)"),
    ("over budget", "budget"),
)
#: Kinds of what the snapshot records without a packager reason.
NOT_NEEDED = "not needed (zone candidate)"
REDACTED = "redacted by trust"


def reason_kind(reason: str, *, chosen: bool) -> str:
    """The kind of a packager / coverage / finalize reason (see :data:`CHOSEN_KINDS`, :data:`LEFT_OUT_KINDS`);
    ``"other"`` for a text none of them starts with."""
    for prefix, kind in CHOSEN_KINDS if chosen else LEFT_OUT_KINDS:
        if reason.startswith(prefix):
            return kind
    return "other"


__all__ = ["CHOSEN_KINDS", "EVIDENCE_MAX_CHARS", "Explanation", "LEFT_OUT_KINDS", "NOT_NEEDED", "REDACTED", "exclusions_note", "explain", "material_risks", "reason_kind", "risk_evidence", "risk_summary", "table_of_contents"]
