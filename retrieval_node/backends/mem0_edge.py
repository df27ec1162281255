"""Mem0's vector store on ``qdrant-edge``: the embedded default for the registry, patterns and audit.

Mem0 OSS talks to its vector store through ``mem0.vector_stores.base.VectorStoreBase``.
Its Qdrant implementation, given a ``qdrant-client`` in local mode, keeps every
memory (vector, payload and text) in Python objects and answers a filtered
listing by scanning all of them: at 100,000 chunk registrations that is about
2 GB of RAM and a second per listing, and qdrant-client itself warns above
20,000 points. :class:`EdgeMemoryStore` implements the same interface over a
qdrant-edge shard (Qdrant's embedded engine: on-disk segments, keyword payload
indexes, the same filter model), so Mem0's own code (``add(infer=False)``,
``get_all``, ``search``, ``get``, ``update``, ``delete``, history) runs
unchanged on top of it.

:func:`attach` swaps it into a constructed ``mem0.Memory``. Mem0 validates the
``vector_store.provider`` name against its built-in list, so the memory is
built with the ``qdrant`` provider over a throwaway in-memory client and the
vector store is replaced before first use; nothing is ever written to that
client. With a Qdrant server (``mem0_vector_store: qdrant``) Mem0's own Qdrant
class is used as is.

Mem0 writes ``text_lemmatized`` (a second copy of each memory's text, lemmatised for BM25) into every payload for
the stores that have ``keyword_search``. This one has none (Mem0 logs so and searches by vector only), so nothing
ever reads the field: :meth:`EdgeMemoryStore.insert` and :meth:`~EdgeMemoryStore.update` leave it out
(:data:`UNREAD_FIELDS`), and :meth:`~EdgeMemoryStore.compact` removes it from memories written before.
Without spaCy it is the text unchanged, so it doubled what each listing decodes; qdrant-edge compresses payloads,
so the copy cost little disk (a 100k-chunk store's registry payloads took 142 MiB on disk with it, 139 without)
and no measurable memory. With spaCy installed (``mem0ai[nlp]``) it is a different text, and costs more.

Filters follow Mem0's metadata-filter syntax (what ``Memory.get_all`` /
``search`` pass down): ``{"field": value}``, ``{"field": [a, b]}``, operators
``eq ne in nin gt gte lt lte``, ``"*"`` (any), and ``AND`` / ``OR`` / ``NOT``
(or ``$and`` / ``$or`` / ``$not``) lists. Anything else raises ``ValueError``
naming the field, like Mem0's Qdrant class.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mem0.vector_stores.base import VectorStoreBase

from ..errors import BackendError
from .vectors import EdgeShardLifecycle, check_datatype, exact_params, open_edge_shard

VECTOR = "dense"

#: Keyword payload indexes: Mem0's scope fields and the fields this node filters by.
KEYWORD_INDEXES = (
    "user_id", "agent_id", "run_id", "actor_id",
    "kind", "deal_id", "chunk_id", "section_type", "document_role", "audit_id", "entity_id", "topic",
)

#: Payload fields Mem0 writes for a keyword search this store does not have: not stored (see the module's docstring).
UNREAD_FIELDS = frozenset({"text_lemmatized"})


def _kept(payload: dict[str, Any]) -> dict[str, Any]:
    """``payload`` without :data:`UNREAD_FIELDS` (a new dict; Mem0's is not changed)."""
    return {k: v for k, v in payload.items() if k not in UNREAD_FIELDS}


@dataclass(slots=True)
class OutputData:
    """One memory as Mem0 expects it from a vector store (``id``, ``score``, ``payload``)."""

    id: str
    score: float | None
    payload: dict[str, Any]


class EdgeMemoryStore(EdgeShardLifecycle, VectorStoreBase):
    """Mem0 vector store over one qdrant-edge shard directory (``count`` / ``flush`` / ``close`` from
    :class:`~retrieval_node.backends.vectors.EdgeShardLifecycle`).

    >>> store = EdgeMemoryStore.open("/tmp/rn-store/mem0_edge", dimension=384)   # doctest: +SKIP
    >>> store.list(filters={"user_id": "conv-2026-ACME-0042", "kind": "chunk"}, top_k=10)  # doctest: +SKIP
    """

    VECTOR = VECTOR
    #: Payload indexes of Mem0's shard, and its tenant: a deal's registry is one user_id, stored together on compaction.
    INDEXES = {name: "keyword" for name in KEYWORD_INDEXES}
    TENANT = "user_id"

    def __init__(self, shard: Any, *, path: Path, dimension: int, collection_name: str = "mem0") -> None:
        self._shard = shard
        self.path = path
        self.embedding_model_dims = dimension
        self.collection_name = collection_name
        self._write_lock = threading.Lock()
        self._indexes = dict(self.INDEXES)
        self._tenant = self.TENANT
        self._written = 0

    @classmethod
    def open(cls, path: str | Path, *, dimension: int, collection_name: str = "mem0", datatype: str = "float32") -> EdgeMemoryStore:
        """Mem0's shard at ``path`` (created with ``datatype`` when new; an existing one keeps its own)."""
        check_datatype(datatype)
        path = Path(path)
        try:
            shard = open_edge_shard(path, vector=VECTOR, dimension=dimension, indexes=cls.INDEXES, tenant=cls.TENANT,
                                    datatype=datatype)
        except Exception as exc:
            raise BackendError(f"cannot open Mem0's qdrant-edge shard at {path}: {exc}") from exc
        return cls(shard, path=path, dimension=dimension, collection_name=collection_name)

    def compact(self) -> bool:
        """:meth:`drop_unread_fields`, then the shard's compaction (:meth:`EdgeShardLifecycle.compact`)."""
        dropped = self.drop_unread_fields()
        return super().compact() or dropped > 0

    def drop_unread_fields(self) -> int:
        """Remove :data:`UNREAD_FIELDS` from the memories a store written before they were left out still holds them in
        (run by :meth:`compact`: after a large ingest, or ``retrieval-node compact``). Reads every payload once; returns
        how many memories had them."""
        import qdrant_edge as qe

        holding = qe.Filter(should=[qe.Filter(must_not=[qe.IsEmptyCondition(key=f)]) for f in sorted(UNREAD_FIELDS)])
        with self._write_lock:
            n = int(self._shard.count(qe.CountRequest(filter=holding, exact=True)))
            if n:
                self._shard.update(qe.UpdateOperation.delete_payload_by_filter(holding, sorted(UNREAD_FIELDS)))
        return n

    # -- VectorStoreBase ------------------------------------------------------------------
    def create_col(self, name: str, vector_size: int, distance: Any) -> None:
        """The shard is the collection; it exists from :meth:`open`."""

    def insert(self, vectors: Sequence[Sequence[float]], payloads: Sequence[dict[str, Any]] | None = None, ids: Sequence[str] | None = None) -> None:
        import qdrant_edge as qe

        if not vectors:
            return
        if ids is None:
            raise ValueError("EdgeMemoryStore.insert needs ids (Mem0 always passes them)")
        points = [
            qe.Point(id=str(ids[i]), vector={VECTOR: np.asarray(vectors[i], dtype=np.float64).tolist()}, payload=_kept(payloads[i]) if payloads else {})
            for i in range(len(vectors))
        ]
        with self._write_lock:
            self._shard.update(qe.UpdateOperation.upsert_points(points))
            self._written += len(points)

    def search(self, query: str, vectors: Sequence[float], top_k: int = 5, filters: dict[str, Any] | None = None) -> list[OutputData]:
        import qdrant_edge as qe

        req = qe.QueryRequest(
            limit=int(top_k),
            query=qe.Query.Nearest([float(x) for x in vectors], using=VECTOR),
            filter=build_filter(filters),
            params=exact_params(),
            with_payload=True,
            with_vector=False,
        )
        return [OutputData(id=str(p.id), score=float(p.score), payload=dict(p.payload or {})) for p in self._shard.query(req)]

    def delete(self, vector_id: str) -> None:
        import qdrant_edge as qe

        with self._write_lock:
            self._shard.update(qe.UpdateOperation.delete_points([str(vector_id)]))

    def update(self, vector_id: str, vector: Sequence[float] | None = None, payload: dict[str, Any] | None = None) -> None:
        import qdrant_edge as qe

        vid = str(vector_id)
        with self._write_lock:
            if vector is not None and payload is not None:
                self._shard.update(qe.UpdateOperation.upsert_points([qe.Point(id=vid, vector={VECTOR: [float(x) for x in vector]}, payload=_kept(payload))]))
                return
            if payload is not None:
                self._shard.update(qe.UpdateOperation.overwrite_payload([vid], _kept(payload)))
            if vector is not None:
                self._shard.update(qe.UpdateOperation.update_vectors([qe.PointVectors(id=vid, vector={VECTOR: [float(x) for x in vector]})]))

    def get(self, vector_id: str) -> OutputData | None:
        records = self._shard.retrieve([str(vector_id)], with_payload=True, with_vector=False)
        if not records:
            return None
        r = records[0]
        return OutputData(id=str(r.id), score=None, payload=dict(r.payload or {}))

    def list_cols(self) -> list[str]:
        return [self.collection_name]

    def delete_col(self) -> None:
        import qdrant_edge as qe

        with self._write_lock:
            self._shard.update(qe.UpdateOperation.delete_points_by_filter(qe.Filter(must=[])))

    def col_info(self) -> dict[str, Any]:
        info = self._shard.info()
        return {"name": self.collection_name, "points_count": int(info.points_count), "path": str(self.path)}

    def list(self, filters: dict[str, Any] | None = None, top_k: int | None = 100) -> list[list[OutputData]]:
        """Every memory matching ``filters`` (up to ``top_k``), paged through the shard's scroll."""
        import qdrant_edge as qe

        limit = None if top_k is None else int(top_k)
        flt = build_filter(filters)
        out: list[OutputData] = []
        offset: Any = None
        while limit is None or len(out) < limit:
            page = 1024 if limit is None else min(1024, limit - len(out))
            records, offset = self._shard.scroll(qe.ScrollRequest(offset=offset, limit=page, filter=flt, with_payload=True, with_vector=False))
            # each read of ``payload`` builds a fresh dict from the shard's record: nothing else holds it, no copy
            out.extend(OutputData(id=str(r.id), score=None, payload=r.payload or {}) for r in records)
            if offset is None or not records:
                break
        return [out]

    def reset(self) -> None:
        self.delete_col()


# ------------------------------------------------------------------------------- filters

_LOGICAL = {"AND": "AND", "$and": "AND", "OR": "OR", "$or": "OR", "NOT": "NOT", "$not": "NOT"}


def build_filter(filters: dict[str, Any] | None) -> Any:
    """A qdrant-edge ``Filter`` from Mem0's filter dict (None when there is nothing to filter)."""
    import qdrant_edge as qe

    if not filters:
        return None
    must: list[Any] = []
    should: list[Any] = []
    must_not: list[Any] = []
    seen: set[str] = set()
    for key, value in filters.items():
        logical = _LOGICAL.get(key)
        if logical is not None:
            if logical in seen:  # Mem0 may pass both "OR" and "$or" for the same conditions
                continue
            seen.add(logical)
            subs = value if isinstance(value, list) else [value]
            built = [f for f in (build_filter(s) for s in subs) if f is not None]
            if logical == "AND":
                must.extend(built)
            elif logical == "OR":
                should.extend(built)
            else:
                must_not.extend(built)
            continue
        cond = _condition(qe, key, value)
        if cond is None:
            continue
        kind, c = cond
        (must if kind == "must" else must_not).append(c)
    if not (must or should or must_not):
        return None
    return qe.Filter(must=must or None, should=should or None, must_not=must_not or None)


def _condition(qe: Any, key: str, value: Any) -> tuple[str, Any] | None:
    fc = qe.FieldCondition
    if not isinstance(value, dict):
        if value == "*":
            return None
        if isinstance(value, list):
            return "must", fc(key=key, match=qe.MatchAny(any=list(value)))
        return "must", fc(key=key, match=qe.MatchValue(value=value))
    ops = set(value)
    ranges = ops & {"gt", "gte", "lt", "lte"}
    if ranges:
        if ops - ranges:
            raise ValueError(f"filter on {key!r}: range operators cannot be mixed with {sorted(ops - ranges)}")
        return "must", fc(key=key, range=qe.RangeFloat(**{op: float(value[op]) for op in ranges}))
    if ops == {"eq"}:
        return "must", fc(key=key, match=qe.MatchValue(value=value["eq"]))
    if ops == {"ne"}:
        return "must_not", fc(key=key, match=qe.MatchValue(value=value["ne"]))
    if ops == {"in"}:
        return "must", fc(key=key, match=qe.MatchAny(any=list(value["in"])))
    if ops == {"nin"}:
        return "must_not", fc(key=key, match=qe.MatchAny(any=list(value["nin"])))
    raise ValueError(f"filter on {key!r}: unsupported operator(s) {sorted(ops)} (supported: eq ne in nin gt gte lt lte, '*', AND/OR/NOT)")


def attach(memory: Any, store: EdgeMemoryStore) -> Any:
    """Make ``memory`` (a ``mem0.Memory``) keep its memories in ``store``; returns ``memory``."""
    memory.vector_store = store
    return memory


__all__ = ["EdgeMemoryStore", "OutputData", "attach", "build_filter"]
