"""The values passed between pipeline stages (a leaf module: it imports nothing of the package).

::

    retrieve ──▶ list[Candidate] ──▶ rank ──▶ list[Scored] ──▶ select ──▶ Selection
      ──▶ coverage repair ──▶ (Selection, CoverageReport) ──▶ finalize ──▶ refs ──▶ explain ──▶ audit

* :class:`ChunkView`: a registered chunk with its verbatim content, as every stage sees it (from the Mem0
  registry, or from the vector payloads when Mem0 is down).
* :class:`Candidate`: a chunk with its dense and lexical evidence for one query.
* :class:`ScoreTerms` / :class:`Scored`: every term of a candidate's score, kept for explanation and audit.
* :class:`Selection`: what the packager chose, with the reason for each choice and each exclusion.
* :class:`CoverageReport`: required zones covered, partial, absent from the deal, or left out for budget.

The pydantic models users exchange with the node (intents, packages, summaries) are in
:mod:`retrieval_node.models`; these are internal working values, plain dataclasses for speed.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime


def _shared(value: object) -> object:
    """The one copy of a string the process keeps (:func:`sys.intern`); anything else as it is."""
    return sys.intern(value) if type(value) is str else value


@dataclass(frozen=True, slots=True)
class ChunkView:
    """A registered chunk: its structural metadata and verbatim content, as every later stage sees it."""

    memory_id: str
    chunk_id: str
    deal_id: str
    document_id: str
    document_role: str
    section_type: str
    page_start: int
    page_end: int
    content_hash: str
    ocr_confidence: float
    token_count: int
    zones: tuple[str, ...]
    entity_ids: tuple[str, ...]
    sensitivity: str
    document_created_at: str | None
    ingested_at: str
    content: str
    #: derived once (read for every candidate of every call): "start-end", the reading-order key, the ingest instant
    page_range: str = field(init=False, repr=False, compare=False)
    reading_key: tuple[str, int, int, str] = field(init=False, repr=False, compare=False)
    ingested_ts: float = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # the fields that take a handful of values in a deal (its id, documents, roles, sections, zones, the ingest
        # instant) share one string each: a view of 2,000 chunks would otherwise hold 2,000 copies of each
        for name in ("deal_id", "document_id", "document_role", "section_type", "sensitivity", "ingested_at", "document_created_at"):
            object.__setattr__(self, name, _shared(getattr(self, name)))
        object.__setattr__(self, "zones", tuple(map(_shared, self.zones)))
        object.__setattr__(self, "entity_ids", tuple(map(_shared, self.entity_ids)))
        object.__setattr__(self, "page_range", f"{self.page_start}-{self.page_end}")
        object.__setattr__(self, "reading_key", (self.document_id, self.page_start, self.page_end, self.chunk_id))
        object.__setattr__(self, "ingested_ts", datetime.fromisoformat(self.ingested_at).timestamp())


@dataclass(frozen=True, slots=True)
class PatternRecord:
    """An institutional pattern memory of Mem0's global layer (interfaces.md section 2)."""

    memory_id: str
    entity_type: str
    entity_id: str
    topic: str
    content: str


@dataclass(slots=True)
class Candidate:
    """A chunk found for one query, with its evidence: best window cosine, BM25, adjacent-page group."""

    chunk: ChunkView
    cosine: float = 0.0
    best_window: int = 0
    bm25: float = 0.0
    group: int = 0


@dataclass(slots=True)
class RetrievalResult:
    """What the retrieve stage hands the ranker."""

    candidates: list[Candidate]
    best_bm25: float
    timings_ms: dict[str, float]
    fallbacks: list[str]
    mem0_calls: int
    embedding_calls: int
    structural_count: int


@dataclass(slots=True)
class ScoreTerms:
    """Every term of one chunk's score, kept for explanation and audit."""

    dense: float = 0.0
    lexical: float = 0.0
    semantic: float = 0.0
    risk: float = 0.0
    pattern: float = 0.0
    combined: float = 0.0
    risk_kinds: tuple[str, ...] = ()
    risk_terms: tuple[str, ...] = ()
    benign_terms: tuple[str, ...] = ()
    numeric: tuple[str, ...] = ()
    patterns: tuple[str, ...] = ()

    def key(self) -> tuple[object, ...]:
        """Every field, hashable (what :meth:`as_dict` is a function of)."""
        return (self.dense, self.lexical, self.semantic, self.risk, self.pattern, self.combined,
                self.risk_kinds, self.risk_terms, self.benign_terms, self.numeric, self.patterns)

    def as_dict(self) -> dict[str, object]:
        return {
            "dense": round(self.dense, 6),
            "lexical": round(self.lexical, 6),
            "semantic": round(self.semantic, 6),
            "risk": round(self.risk, 6),
            "pattern": round(self.pattern, 6),
            "combined": round(self.combined, 6),
            "risk_kinds": list(self.risk_kinds),
            "risk_terms": list(self.risk_terms),
            "benign_terms": list(self.benign_terms),
            "numeric": list(self.numeric),
            "patterns": list(self.patterns),
        }


@dataclass(slots=True)
class Scored:
    """A scored candidate; ``span`` and ``origin`` change as packing and coverage place it."""

    chunk: ChunkView
    terms: ScoreTerms
    group: int = 0
    origin: str = "search"  # search | zone:<name> | broadened
    span: tuple[int, int] | None = None  # a verbatim excerpt content[start:end] instead of the whole chunk

    @property
    def material(self) -> bool:
        return bool(self.terms.risk_kinds)


@dataclass(slots=True)
class Selection:
    """Chunks chosen so far, with the reason for each and for every exclusion."""

    chosen: dict[str, Scored] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)
    excluded: dict[str, str] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)


def zone_counts(sel: Selection) -> dict[str, int]:
    """Packaged chunks per zone."""
    out: dict[str, int] = {}
    for s in sel.chosen.values():
        for z in s.chunk.zones:
            out[z] = out.get(z, 0) + 1
    return out


def coverage_score(required: Sequence[str], covered: Sequence[str]) -> float:
    """``|covered ∩ required| / |required|``; 1.0 when nothing is required."""
    req = set(required)
    if not req:
        return 1.0
    return len(req & set(covered)) / len(req)


@dataclass(slots=True)
class CoverageReport:
    """Required zones after the coverage repair: covered, partial (included of available), absent from the
    deal's documents, present but left out for budget (unfit); chunks added and evicted by the repair."""

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


__all__ = [
    "Candidate",
    "ChunkView",
    "CoverageReport",
    "PatternRecord",
    "RetrievalResult",
    "ScoreTerms",
    "Scored",
    "Selection",
    "coverage_score",
    "zone_counts",
]
