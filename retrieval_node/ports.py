"""The ports of the pipeline: what it needs from the outside world, as small protocols.

============================  ===========================================================  ==========================
port                          what the pipeline calls                                       implementations
============================  ===========================================================  ==========================
:class:`ChunkSearch`          ``search_points_many`` (the one search), ``payloads``,           ``EdgeChunkIndex``,
                              ``deal_payloads``                                             ``QdrantChunkIndex``,
                                                                                            the process pool's link
:class:`ChunkIndex`           the above plus ``upsert``, ``count``, ``flush``, ``close``    the two indexes
:class:`ChunkRegistry`        ``deal_records`` (the structural listing), ``all_patterns``   ``Mem0Registry``, the pool's link
:class:`Embedder`             ``embed``                                                     ``SentenceTransformerEmbedder``
:class:`TokenCounter`         ``count``                                                     ``TiktokenCounter``
:class:`AuditSink`            ``write_snapshot``, ``record``                                ``AuditLog``, the pool's deferred sink
:class:`Backends`             the above, the store's home and config, the generations       ``Store``, the pool's remote store
============================  ===========================================================  ==========================

An index implements one search, the batch; ``search_points`` and ``search`` are derived from it
(:class:`~retrieval_node.backends.vectors.DerivedSearch`). A point id comes back as a :class:`uuid.UUID` (or its integer, from another process).
"""

from __future__ import annotations

from collections.abc import Sequence
from uuid import UUID
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from .embedding import Embedder
from .tokens import TokenCounter
from .values import ChunkView, PatternRecord

if TYPE_CHECKING:
    from .config import NodeConfig
    from .models import RetrievalAuditEntry


@dataclass(frozen=True, slots=True)
class SearchScope:
    """The hard scope of a vector search: always one deal."""

    deal_id: str
    section_types: tuple[str, ...] | None = None
    document_roles: tuple[str, ...] | None = None
    chunk_ids: tuple[str, ...] | None = None


#: One search request: (query vector, scope, how many points).
SearchRequest = tuple[np.ndarray, SearchScope, int]
#: One scored point: (point id, cosine score).
PointScore = tuple[UUID | int, float]


@runtime_checkable
class ChunkSearch(Protocol):
    """The read side of the chunk index, what a retrieval calls.

    >>> [hits] = index.search_points_many([(vec, SearchScope(deal_id="2026-ACME-0042"), 10)])  # doctest: +SKIP
    """

    def search_points_many(self, requests: Sequence[SearchRequest]) -> list[list[PointScore]]:
        """For each ``(vector, scope, limit)``, in order: (point id, score) of the best ``limit`` points in the scope,
        without payloads (reading them costs more than the search: callers map ids back with ``point_uuid``).
        A scope with an empty ``chunk_ids`` tuple is answered by nothing."""
        ...

    def payloads(self, point_ids: Sequence[str], fields: Sequence[str] | None = None) -> dict[str, dict[str, Any]]:
        """Payloads of the points that exist, by point id: in full, or only ``fields`` (the rest is never read)."""
        ...

    def deal_payloads(self, deal_id: str) -> list[dict[str, Any]]:
        """Full first-window payloads of every chunk of one deal (the vector-only structural source)."""
        ...

    def present(self, point_ids: Sequence[str], deal_id: str) -> set[str]:
        """Those of ``point_ids`` whose point exists and belongs to ``deal_id``, answered from the id tracker and the
        ``deal_id`` payload index (no payload is read): what a deal view's pairing asks."""
        ...


@runtime_checkable
class ChunkIndex(ChunkSearch, Protocol):
    """Where chunk vectors and payloads live (what ingest writes)."""

    def upsert(self, points: Sequence[Any]) -> None: ...

    def count(self) -> int: ...

    def flush(self) -> None: ...

    def close(self) -> None: ...


@runtime_checkable
class ChunkRegistry(Protocol):
    """The structural layer (Mem0): a deal's registered chunks and the institutional patterns."""

    def deal_records(self, deal_id: str) -> list[ChunkView]:
        """Every registered chunk of ``deal_id`` (content included), in chunk-id order."""
        ...

    def all_patterns(self) -> list[PatternRecord]: ...


@runtime_checkable
class AuditSink(Protocol):
    """Where a retrieval's evidence goes: the snapshot of what the model saw, then the audit entry."""

    def write_snapshot(self, audit_id: str, snapshot: dict[str, Any]) -> str:
        """Store the snapshot; return the sha256 of its canonical bytes."""
        ...

    def record(self, entry: RetrievalAuditEntry, *, audit_id: str, snapshot_sha256: str, vector: np.ndarray | None) -> str | None:
        """Record the audit entry; return a fallback note when it had to be deferred, else None."""
        ...


@runtime_checkable
class Backends(Protocol):
    """What the pipeline reads from a store: its backends, its configuration and the generations that invalidate
    cached state (a deal's chunks, the pattern memories)."""

    home: Path
    config: NodeConfig
    tokens: TokenCounter
    embedder: Embedder
    chunks: ChunkSearch
    registry: ChunkRegistry

    def generation(self, deal_id: str) -> int: ...

    def patterns_generation(self) -> int: ...

    def secret(self) -> bytes:
        """The store's secret key (evidence codes of packages; never leaves the store's directory)."""
        ...


__all__ = [
    "AuditSink",
    "Backends",
    "ChunkIndex",
    "ChunkRegistry",
    "ChunkSearch",
    "Embedder",
    "PointScore",
    "SearchRequest",
    "SearchScope",
    "TokenCounter",
]
