"""Risk-aware ranking (spec 3.2): ``combined = α·semantic + β·risk_signal + γ·mem0_pattern``.

Every term is a pure function returning a value in [0, 1]:

* :func:`semantic_score` fuses the dense cosine (absolute, clipped) with a BM25
  score normalised by the best BM25 score in the deal.
* the β term is the score of the chunk's :class:`~retrieval_node.risk.RiskSignal`
  (:mod:`retrieval_node.risk` reads the lexicon in context, a pure function of the text).
* :func:`pattern_score` rates institutional pattern memories that match an
  entity of the chunk.

:class:`RiskAwareRanker` applies them and keeps every term per chunk so each
selection can be explained.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from .config import RiskLexicon, RiskWeights
from .risk import EXCERPT_MAX_CHARS, RiskSignal, best_risk_span, normalise_ocr, risk_signal, term_pattern

# --------------------------------------------------------------------------- semantic


def dense_score(cosine: float) -> float:
    """Cosine similarity mapped to [0, 1] by clipping: ``max(0, min(1, cos))``.

    Absolute, not relative to the other candidates, so "nothing is similar" stays low.
    """
    return max(0.0, min(1.0, float(cosine)))


def lexical_score(bm25: float, best_bm25: float) -> float:
    """BM25 normalised by the deal's best BM25 for the same query: ``bm25 / best`` (0 when nothing matched)."""
    if best_bm25 <= 0.0 or bm25 <= 0.0:
        return 0.0
    return min(1.0, bm25 / best_bm25)


def semantic_score(dense: float, lexical: float, lexical_weight: float) -> float:
    """``(1 - w)·dense + w·lexical``, both already in [0, 1]."""
    return (1.0 - lexical_weight) * dense + lexical_weight * lexical


def combined_score(weights: RiskWeights, semantic: float, risk: float, pattern: float) -> float:
    """``α·semantic + β·risk + γ·pattern`` (spec 3.2); in [0, 1] because α+β+γ = 1."""
    return weights.alpha * semantic + weights.beta * risk + weights.gamma * pattern


# --------------------------------------------------------------------------- patterns


@dataclass(frozen=True, slots=True)
class PatternHit:
    entity_id: str
    topic: str
    memory_id: str
    relevance: float


def entity_mentioned(entity_id: str, text_low: str) -> bool:
    """True when the entity's name (``type:some-name`` -> "some name") appears in lower-cased text."""
    name = entity_id.split(":", 1)[1].replace("-", " ").replace("_", " ").strip()
    return bool(name) and term_pattern(name).search(text_low) is not None


def pattern_score(hits: Sequence[PatternHit]) -> float:
    """γ term: the best relevance among matching pattern memories, in [0, 1]."""
    return max((h.relevance for h in hits), default=0.0)


def pattern_relevance(topic: str, chunk_kinds: Iterable[str]) -> float:
    """1.0 when the pattern's topic names a risk kind present in the chunk (liens ~ builders_lien), else 0.5."""
    stem = topic.lower().rstrip("s").replace("-", "_")
    for kind in chunk_kinds:
        if stem and (stem in kind or kind in stem):
            return 1.0
    return 0.5


# --------------------------------------------------------------------------- ranker


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
class RankedChunk:
    chunk_id: str
    terms: ScoreTerms = field(default_factory=ScoreTerms)


class RiskAwareRanker:
    """Scores candidates with the profile's α/β/γ; ties are broken by chunk id.

    >>> ranker = RiskAwareRanker(lexicon, lexical_weight=0.3)           # doctest: +SKIP
    >>> ranked = ranker.rank(candidates, weights, domains=["title"], patterns=[])  # doctest: +SKIP
    """

    def __init__(self, lexicon: RiskLexicon, *, lexical_weight: float = 0.3, shortfall_ratio: float = 0.5) -> None:
        self.lexicon = lexicon
        self.lexical_weight = lexical_weight
        self.shortfall_ratio = shortfall_ratio
        self._risk_cache: dict[tuple[str, tuple[str, ...]], RiskSignal] = {}
        self._span_cache: dict[tuple[str, tuple[str, ...], int], tuple[int, int] | None] = {}
        self._mention_cache: dict[str, tuple[frozenset[str], frozenset[str]]] = {}
        self._static_cache: dict[tuple[object, ...], tuple[RiskSignal, float, tuple[str, ...]]] = {}

    def risk(self, content_hash: str, content: str, domains: Sequence[str]) -> RiskSignal:
        key = (content_hash, tuple(domains))
        sig = self._risk_cache.get(key)
        if sig is None:
            sig = risk_signal(content, self.lexicon, domains, shortfall_ratio=self.shortfall_ratio)
            if len(self._risk_cache) > 200_000:
                self._risk_cache.clear()
            self._risk_cache[key] = sig
        return sig

    def excerpt_span(self, content_hash: str, content: str, domains: Sequence[str], *, max_chars: int = EXCERPT_MAX_CHARS) -> tuple[int, int] | None:
        """:func:`best_risk_span` of a chunk, cached by content hash, domains and ``max_chars``."""
        key = (content_hash, tuple(domains), max_chars)
        if key not in self._span_cache:
            if len(self._span_cache) > 50_000:
                self._span_cache.clear()
            self._span_cache[key] = best_risk_span(content, self.lexicon, domains, max_chars=max_chars, shortfall_ratio=self.shortfall_ratio)
        return self._span_cache[key]

    def _mentioned(self, content_hash: str, content: str, entities: frozenset[str]) -> frozenset[str]:
        """The pattern entities whose name the chunk's text mentions, cached by content and the set of entities asked about."""
        cached = self._mention_cache.get(content_hash)
        if cached is not None and cached[0] == entities:
            return cached[1]
        low = normalise_ocr(content)
        found = frozenset(e for e in entities if entity_mentioned(e, low))
        if len(self._mention_cache) > 200_000:
            self._mention_cache.clear()
        self._mention_cache[content_hash] = (entities, found)
        return found

    def score(
        self,
        *,
        content_hash: str,
        content: str,
        entity_ids: Sequence[str],
        cosine: float,
        bm25: float,
        best_bm25: float,
        weights: RiskWeights,
        domains: Sequence[str],
        patterns: Sequence[tuple[str, str, str]],
        pattern_entities: frozenset[str] | None = None,
    ) -> ScoreTerms:
        """All terms for one chunk. ``patterns`` are ``(entity_id, topic, memory_id)`` of the global layer;
        ``pattern_entities``, their entity ids, may be passed by a caller scoring many chunks against the same patterns."""
        # the risk signal and the pattern term depend on the chunk, the domains and the patterns only, not on the
        # query: kept per (content, entities, domains, patterns) for the next call that scores the chunk
        key = (content_hash, tuple(entity_ids), tuple(domains), tuple(patterns))
        static = self._static_cache.get(key)
        if static is None:
            sig = self.risk(content_hash, content, domains)
            hits: list[PatternHit] = []
            if patterns:
                entities = pattern_entities if pattern_entities is not None else frozenset(e for e, _, _ in patterns)
                mentioned = self._mentioned(content_hash, content, entities)
                for entity_id, topic, memory_id in patterns:
                    if entity_id in mentioned or entity_id in entity_ids:
                        hits.append(PatternHit(entity_id, topic, memory_id, pattern_relevance(topic, sig.kinds)))
            static = (sig, pattern_score(hits), tuple(sorted(f"{h.entity_id}/{h.topic}" for h in hits)) if hits else ())
            if len(self._static_cache) > 100_000:
                self._static_cache.clear()
            self._static_cache[key] = static
        sig, pattern, pattern_names = static
        dense = dense_score(cosine)
        lexical = lexical_score(bm25, best_bm25)
        semantic = semantic_score(dense, lexical, self.lexical_weight)
        return ScoreTerms(
            dense=dense,
            lexical=lexical,
            semantic=semantic,
            risk=sig.score,
            pattern=pattern,
            combined=combined_score(weights, semantic, sig.score, pattern),
            risk_kinds=sig.kinds,
            risk_terms=sig.risk_terms,
            benign_terms=sig.benign_terms,
            numeric=sig.numeric,
            patterns=pattern_names,
        )


__all__ = [
    "PatternHit",
    "RankedChunk",
    "RiskAwareRanker",
    "ScoreTerms",
    "combined_score",
    "dense_score",
    "entity_mentioned",
    "lexical_score",
    "pattern_relevance",
    "pattern_score",
    "semantic_score",
]
