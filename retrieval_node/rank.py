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

from collections.abc import Callable, Iterable, Sequence, Set
from dataclasses import dataclass

from .cache import BoundedCache
from .config import AgentProfile, NodeConfig, RiskLexicon, RiskWeights
from .deals import DealView
from .errors import IntentError
from .models import RetrievalIntent
from .precompute import decode_signal
from .risk import EXCERPT_MAX_CHARS, RiskSignal, best_risk_span, entity_mentioned, mentioned_entities, risk_signal
from .values import Candidate, ChunkView, Scored, ScoreTerms

#: ``RiskAwareRanker._stored`` has no signal of the chunk (None is an encoded signal)
_NOT_OFFERED = object()
#: the answer of most chunks to "which pattern entities do you name": one shared empty set, not one per chunk (a set is
#: an object every full garbage collection visits, for as long as the ranker keeps the answer)
_NONE_NAMED: frozenset[str] = frozenset()

#: Weight of BM25 inside the semantic term (the rest is the dense cosine).
LEXICAL_WEIGHT = 0.3

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


class RiskAwareRanker:
    """Scores candidates with the profile's α/β/γ; ties are broken by chunk id.

    >>> ranker = RiskAwareRanker(lexicon, lexical_weight=0.3)           # doctest: +SKIP
    >>> ranked = ranker.rank(candidates, weights, domains=["title"], patterns=[])  # doctest: +SKIP
    """

    def __init__(self, lexicon: RiskLexicon, *, lexical_weight: float = 0.3, shortfall_ratio: float = 0.5) -> None:
        self.lexicon = lexicon
        self.lexical_weight = lexical_weight
        self.shortfall_ratio = shortfall_ratio
        self._risk_cache: BoundedCache[tuple[str, tuple[str, ...]], RiskSignal] = BoundedCache(200_000)
        self._span_cache: BoundedCache[tuple[str, tuple[str, ...], int], tuple[tuple[int, int] | None]] = BoundedCache(50_000)
        self._mention_cache: BoundedCache[str, tuple[frozenset[str], frozenset[str]]] = BoundedCache(200_000)
        self._static_cache: BoundedCache[tuple[object, ...], RiskSignal | tuple[RiskSignal, float, tuple[str, ...]]] = BoundedCache(100_000)
        #: signals ingest stored (precompute.py), still encoded: decoded when a chunk is first scored, not when offered
        self._stored: BoundedCache[tuple[str, tuple[str, ...]], str | None] = BoundedCache(200_000)

    def forget(self, content_hashes: Set[str]) -> int:
        """Drop what this ranker keeps of the chunks with these content hashes (their deal view left the deal cache:
        what is kept per chunk lives as long as the views that hold the chunk, not for every deal ever served).
        Returns how many entries went; a chunk asked about again is read again, with the same answer."""
        if not content_hashes:
            return 0

        def by_hash(key: object) -> bool:  # every key is the content hash or starts with it
            return (key if isinstance(key, str) else key[0]) in content_hashes  # type: ignore[index]

        return sum(c.discard(by_hash) for c in (self._risk_cache, self._span_cache, self._mention_cache, self._static_cache, self._stored))

    def offer(self, content_hash: str, domains: tuple[str, ...], encoded: str | None) -> None:
        """A chunk's signal as ingest stored it (:func:`~retrieval_node.precompute.decode_signal` of ``encoded`` is what
        :func:`risk_signal` returns for the chunk under this ranker's lexicon and ``domains``): :meth:`risk` serves it
        instead of reading the chunk again."""
        key = (content_hash, domains)
        if key not in self._risk_cache:
            self._stored.put(key, encoded)

    def risk(self, content_hash: str, content: str, domains: Sequence[str]) -> RiskSignal:
        key = (content_hash, tuple(domains))
        sig = self._risk_cache.get(key)
        if sig is None:
            stored = self._stored.get(key, _NOT_OFFERED)
            if stored is not _NOT_OFFERED:  # an encoded signal (None encodes "no risk"): decoded once, kept decoded
                self._stored.pop(key)
                try:
                    sig = decode_signal(stored)
                except (ValueError, TypeError):  # a damaged stored row costs time, never an answer: read the chunk
                    sig = None
            if sig is None:
                sig = risk_signal(content, self.lexicon, domains, shortfall_ratio=self.shortfall_ratio)
            self._risk_cache.put(key, sig)
        return sig

    def offer_span(self, content_hash: str, domains: tuple[str, ...], max_chars: int, span: tuple[int, int] | None) -> None:
        """A chunk's excerpt span as ingest stored it (what :func:`best_risk_span` returns for it)."""
        self._span_cache.put((content_hash, domains, max_chars), (span,))

    def excerpt_span(self, content_hash: str, content: str, domains: Sequence[str], *, max_chars: int = EXCERPT_MAX_CHARS) -> tuple[int, int] | None:
        """:func:`best_risk_span` of a chunk, cached by content hash, domains and ``max_chars``."""
        key = (content_hash, tuple(domains), max_chars)
        hit = self._span_cache.get(key)
        if hit is None:  # the span (or None) is kept in a 1-tuple, so "no span" is cached too
            hit = self._span_cache.put(key, (best_risk_span(content, self.lexicon, domains, max_chars=max_chars, shortfall_ratio=self.shortfall_ratio),))
        return hit[0]

    def offer_mentions(self, content_hash: str, entities: frozenset[str], found: frozenset[str]) -> None:
        """Which of ``entities`` the chunk's text names, as ingest stored it (:func:`mentioned_entities`)."""
        self._mention_cache.put(content_hash, (entities, found or _NONE_NAMED))

    def _mentioned(self, content_hash: str, content: str, entities: frozenset[str]) -> frozenset[str]:
        """The pattern entities whose name the chunk's text mentions, cached by content with the set of entities asked
        about (an answer for a wider set answers a narrower one: each entity is looked for on its own)."""
        cached = self._mention_cache.get(content_hash)
        if cached is not None and entities <= cached[0]:
            return cached[1] if entities == cached[0] else cached[1] & entities
        found = mentioned_entities(content, entities) or _NONE_NAMED
        self._mention_cache.put(content_hash, (entities, found))
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
            # most chunks name no pattern entity: their entry is the signal itself, not a tuple around it (one object
            # fewer per chunk for each full garbage collection while the deal's view is cached)
            static = self._static_cache.put(key, (sig, pattern_score(hits), tuple(sorted(f"{h.entity_id}/{h.topic}" for h in hits))) if hits else sig)
        if isinstance(static, RiskSignal):
            sig, pattern, pattern_names = static, 0.0, ()
        else:
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


@dataclass(frozen=True, slots=True)
class RankSettings:
    """How one intent is ranked and packed: its profile's ranker (lexicon of its risk kinds), α/β/γ, risk domains,
    risk kinds, risk share of the budget and excerpt length. Resolved once per call by :meth:`Rankers.settings`."""

    ranker: RiskAwareRanker
    weights: RiskWeights
    domains: tuple[str, ...]
    kinds: tuple[str, ...] | None
    risk_share: float
    excerpt_chars: int

    def keep(self, view: DealView) -> Callable[[ChunkView], bool]:
        """Whether a chunk of ``view`` carries a material risk: such a chunk is a candidate whatever its
        similarity. The answer depends on the chunk and the domains only, so it is kept on the deal view."""
        flags = view.risk_flags(self.domains, self.kinds)
        ranker, domains = self.ranker, self.domains

        def keep(chunk: ChunkView) -> bool:
            hit = flags.get(chunk.chunk_id)
            if hit is None:
                hit = flags[chunk.chunk_id] = ranker.risk(chunk.content_hash, chunk.content, domains).material
            return hit

        return keep

    def excerpt_for(self, chunk: ChunkView) -> tuple[int, int] | None:
        """The verbatim passage carrying ``chunk``'s strongest risk (what is quoted when it does not fit whole)."""
        return self.ranker.excerpt_span(chunk.content_hash, chunk.content, self.domains, max_chars=self.excerpt_chars)


class Rankers:
    """The rankers of one configuration: one over the whole lexicon, one per set of ``risk_kinds`` a profile acts on."""

    def __init__(self, config: NodeConfig) -> None:
        if config.risk_signals is None:
            raise IntentError("configs/risk_signals.yaml is missing: the ranker needs risk lexicons")
        self.config = config
        self.default = RiskAwareRanker(config.risk_signals, lexical_weight=LEXICAL_WEIGHT)
        self._by_kinds: dict[tuple[str, ...], RiskAwareRanker] = {}
        for profile in config.agents.values():
            if profile.risk_kinds is not None:
                key = tuple(profile.risk_kinds)
                if key not in self._by_kinds:
                    self._by_kinds[key] = RiskAwareRanker(config.risk_signals.only_kinds(key), lexical_weight=LEXICAL_WEIGHT)

    def forget(self, content_hashes: Set[str]) -> int:
        """:meth:`RiskAwareRanker.forget` on every ranker of the configuration."""
        return sum(r.forget(content_hashes) for r in (self.default, *self._by_kinds.values()))

    def settings(self, intent: RetrievalIntent, profile: AgentProfile | None) -> RankSettings:
        """The settings of ``intent``, built from its agent ``profile`` (None: the whole lexicon, every domain)."""
        assert self.config.risk_signals is not None
        kinds = None if profile is None or profile.risk_kinds is None else tuple(profile.risk_kinds)
        if profile is not None and profile.risk_domains:
            domains = tuple(profile.risk_domains)
        else:
            domains = tuple(sorted(self.config.risk_signals.domains))
        return RankSettings(
            ranker=self.default if kinds is None else self._by_kinds[kinds],
            weights=self.config.weights[intent.risk_profile],
            domains=domains,
            kinds=kinds,
            risk_share=profile.risk_budget_share if profile is not None else 1.0,
            excerpt_chars=profile.excerpt_max_chars if profile is not None else EXCERPT_MAX_CHARS,
        )


def rank(candidates: Sequence[Candidate], *, best_bm25: float, settings: RankSettings,
         patterns: Sequence[tuple[str, str, str]], origin: str) -> list[Scored]:
    """Score ``candidates`` (``combined = α·semantic + β·risk + γ·pattern``, every term kept).

    ``best_bm25`` normalises the lexical term (the deal's best BM25 for the query); ``patterns`` are
    ``(entity_id, topic, memory_id)`` of the global layer; ``origin`` records how the candidates were found
    (``search``, ``broadened``, ``zone:<name>``).
    """
    entities = frozenset(e for e, _, _ in patterns)
    patterns = tuple(patterns)  # tuples: the ranker's cache keys take them as they are
    ranker, weights, domains = settings.ranker, settings.weights, settings.domains
    out = []
    for c in candidates:
        terms = ranker.score(
            content_hash=c.chunk.content_hash, content=c.chunk.content, entity_ids=c.chunk.entity_ids,
            cosine=c.cosine, bm25=c.bm25, best_bm25=best_bm25, weights=weights, domains=domains, patterns=patterns,
            pattern_entities=entities,
        )
        out.append(Scored(chunk=c.chunk, terms=terms, group=c.group, origin=origin))
    return out


__all__ = [
    "LEXICAL_WEIGHT",
    "PatternHit",
    "RankSettings",
    "Rankers",
    "RiskAwareRanker",
    "ScoreTerms",
    "combined_score",
    "dense_score",
    "entity_mentioned",
    "lexical_score",
    "pattern_relevance",
    "pattern_score",
    "rank",
    "semantic_score",
]
