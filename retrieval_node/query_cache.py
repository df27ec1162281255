"""Query vectors kept in the store, so a profile intent needs no model load.

The agents' query texts are fixed per profile (the profile's ``query_text`` and, for coverage repair, one
``"<zone words>: <query text>"`` text per zone: :func:`profile_query_texts`). Their embeddings are kept in
``<store>/query_vectors.db`` (SQLite, owner-only 0600), keyed by the embedder's ``model_key``
(:func:`~retrieval_node.embedding.model_identity`: model files, library versions, pooling constants) and the text.
A vector is stored as the float32 bytes the model gave for that text alone (``embed([text])[0]``), so a vector read
back is bit-identical to one computed again. Rows of another model key are never served (and are deleted when the
store opens its cache under a new key).

The cache is filled whenever a query text is embedded (:meth:`QueryVectorCache.vector`), and ingest pre-fills it
with :func:`profile_query_texts` so the first ``retrieve`` after an ingest loads no model either.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np

#: the cache file inside the store directory
QUERY_DB = "query_vectors.db"
#: longest text kept (a free-text question longer than this is embedded every time)
MAX_TEXT_CHARS = 8_000


def owner_only_sqlite(path: Path) -> sqlite3.Connection:
    """A SQLite file of the store opened in autocommit mode, created owner-only (0600) before SQLite opens it, so
    its journal takes the same mode; an existing file is made 0600 again. Shared by the query-vector cache and the
    chunk findings (precompute.py)."""
    if not path.exists():
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))
    os.chmod(path, 0o600)
    return sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)


class QueryVectorCache:
    """Query text -> unit vector, persisted in the store directory under one model key.

    >>> cache = QueryVectorCache(home / "query_vectors.db", "minilm:...")      # doctest: +SKIP
    >>> vec, computed = cache.vector("reserve fund", lambda t: emb.embed([t])[0])  # doctest: +SKIP
    """

    def __init__(self, path: Path, model_key: str, *, dimension: int) -> None:
        self.path = path
        self.model_key = model_key
        self.dimension = dimension
        self._lock = threading.Lock()
        self._mem: dict[str, np.ndarray] = {}
        self._conn: sqlite3.Connection | None = owner_only_sqlite(path)
        self._conn.execute("CREATE TABLE IF NOT EXISTS query_vectors (model_key TEXT NOT NULL, text TEXT NOT NULL, "
                           "vector BLOB NOT NULL, PRIMARY KEY (model_key, text))")
        self._conn.execute("DELETE FROM query_vectors WHERE model_key != ?", (model_key,))  # another model: stale

    def get(self, text: str) -> np.ndarray | None:
        vec = self._mem.get(text)
        if vec is not None:
            return vec
        with self._lock:
            if self._conn is None:
                return None
            row = self._conn.execute("SELECT vector FROM query_vectors WHERE model_key = ? AND text = ?", (self.model_key, text)).fetchone()
        if row is None:
            return None
        vec = np.frombuffer(row[0], dtype="<f4").astype(np.float32)
        if vec.shape != (self.dimension,):
            return None  # a damaged row: computed again (and overwritten)
        self._mem[text] = vec
        return vec

    def put(self, text: str, vector: np.ndarray) -> np.ndarray:
        vec = np.asarray(vector, dtype=np.float32)
        if len(text) > MAX_TEXT_CHARS or vec.shape != (self.dimension,):
            return vec
        with self._lock:
            if self._conn is not None:
                self._conn.execute("INSERT OR REPLACE INTO query_vectors (model_key, text, vector) VALUES (?, ?, ?)",
                                   (self.model_key, text, vec.astype("<f4").tobytes()))
        self._mem[text] = vec
        return vec

    def vector(self, text: str, compute: Callable[[str], np.ndarray]) -> tuple[np.ndarray, bool]:
        """The cached vector of ``text``, else ``compute(text)`` stored; returns (vector, whether it was computed)."""
        vec = self.get(text)
        if vec is not None:
            return vec, False
        return self.put(text, compute(text)), True

    def fill(self, texts: Iterable[str], compute: Callable[[str], np.ndarray]) -> int:
        """Compute and store every text of ``texts`` not cached yet (one model call per text, as a query is embedded);
        returns how many were computed."""
        return sum(self.vector(t, compute)[1] for t in dict.fromkeys(texts))

    def __len__(self) -> int:
        with self._lock:
            if self._conn is None:
                return 0
            return int(self._conn.execute("SELECT COUNT(*) FROM query_vectors WHERE model_key = ?", (self.model_key,)).fetchone()[0])

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


def profile_query_texts(config: Any) -> list[str]:
    """Every text a profile intent embeds: each agent profile's ``query_text``, and the coverage-repair text of each
    of its ``required_zones`` (``"<zone words>: <query text>"``, as :class:`~retrieval_node.coverage.ZoneSource` builds
    it). An intent with other zones or another text embeds those on its first call (and keeps them)."""
    out: list[str] = []
    for profile in config.agents.values():
        q = profile.query_text
        out.append(q)
        out.extend(zone_query_text(z, q) for z in profile.required_zones or ())
    return list(dict.fromkeys(out))


def zone_query_text(zone: str, query_text: str) -> str:
    """The text coverage repair embeds for ``zone`` (must match :class:`~retrieval_node.coverage.ZoneSource`)."""
    return f"{zone.replace('_', ' ')}: {query_text}"


__all__ = ["QUERY_DB", "QueryVectorCache", "owner_only_sqlite", "profile_query_texts", "zone_query_text"]
