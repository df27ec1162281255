"""One small bounded cache for every memo of the package.

The values cached are pure functions of their key (a chunk's content hash, a query text, a deal's
generation): a cache only saves work, it never changes an answer. Each cache is bounded; when full it
drops its oldest entry (reads take no lock: most lookups are on the retrieval's hot path). Where a value can go stale, its owner puts what makes it stale into
the key (a deal's ingest generation, the pattern generation) or passes a ``ttl``.

>>> costs = BoundedCache[str, int](limit=2)
>>> costs.get_or_build("a", lambda: 1), costs.get_or_build("a", lambda: 2)
(1, 1)
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")

_MISSING = object()


class BoundedCache(Generic[K, V]):
    """A thread-safe memo of at most ``limit`` entries (oldest dropped first), each kept at most ``ttl`` seconds
    (None: no expiry)."""

    def __init__(self, limit: int, *, ttl: float | None = None) -> None:
        if limit < 1:
            raise ValueError(f"a cache needs room for at least one entry, got limit={limit}")
        self.limit = limit
        self.ttl = ttl
        #: the value itself, or (when stored, value) with a ttl: no wrapper where none is needed (a tuple around a
        #: value that holds objects is one more object for each of Python's full garbage collections to visit)
        self._d: dict[K, V | tuple[float, V]] = {}
        self._lock = threading.Lock()

    def get(self, key: K, default: V | None = None) -> V | None:
        item = self._d.get(key, _MISSING)  # type: ignore[arg-type]  # one dict read: atomic, no lock needed
        if item is _MISSING:
            return default
        if self.ttl is None:
            return item  # type: ignore[return-value]
        at, value = item  # type: ignore[misc]
        if time.monotonic() - at > self.ttl:
            self.pop(key)
            return default
        return value

    def put(self, key: K, value: V) -> V:
        with self._lock:
            self._d.pop(key, None)
            self._d[key] = value if self.ttl is None else (time.monotonic(), value)
            while len(self._d) > self.limit:
                del self._d[next(iter(self._d))]
        return value

    def get_or_build(self, key: K, build: Callable[[], V]) -> V:
        """The cached value of ``key``, else ``build()`` (run outside the lock, so two threads may both build it)."""
        value = self.get(key, _MISSING)  # type: ignore[arg-type]
        if value is _MISSING:
            return self.put(key, build())
        return value  # type: ignore[return-value]

    def pop(self, key: K) -> None:
        with self._lock:
            self._d.pop(key, None)

    def clear(self) -> None:
        with self._lock:
            self._d.clear()

    def discard(self, drop: Callable[[K], bool]) -> int:
        """Remove every entry whose key ``drop`` accepts; returns how many went."""
        with self._lock:
            gone = [k for k in self._d if drop(k)]
            for k in gone:
                del self._d[k]
        return len(gone)

    def __len__(self) -> int:
        return len(self._d)

    def __contains__(self, key: object) -> bool:
        return key in self._d


__all__ = ["BoundedCache"]
