"""Python's cyclic garbage collector, paused while the node works: the one owner of the pause and its state.

A call allocates tens of thousands of short-lived, acyclic objects (registry records, candidates, scores, package
parts) that reference counting frees as soon as the call drops them. With the collector on, every young collection
during the call moves those still alive into an older generation, and once enough have moved Python runs a full
collection, a scan of every object the process holds (100-130 ms at 150k objects on the benchmark machine): every
few calls. Paused for the call, they are freed before any collection sees them (40 warm questions on a 2,000-chunk
deal: three full collections inside the calls and p95 132-159 ms, against none and p95 36-51 ms paused).

The pause is counted: overlapping calls in threads re-enable the collector once, when the last one leaves, and only
if it was on when the first one entered (a host that turned it off keeps it off). Calls that overlap without a gap
would keep it off for good, so once it has been off for :data:`MAX_PAUSE_S` seconds in a row, the call leaving runs a
full collection itself (cyclic garbage of the host's other threads is then collected at least that often). The pause
is process-wide; ``retrieval.pause_collector: false`` turns it off for a host that prefers its own collector settings.

>>> import gc
>>> with paused():
...     gc.isenabled()
False
>>> gc.isenabled()
True
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

#: Longest the collector stays off without a collection while calls keep overlapping (seconds).
MAX_PAUSE_S = 2.0

_LOCK = threading.Lock()
_state = {"count": 0, "resume": False, "since": 0.0}


@contextmanager
def paused(enabled: bool = True) -> Iterator[None]:
    """The collector off for the block (nothing changes with ``enabled`` false)."""
    if not enabled:
        yield
        return
    with _LOCK:
        if _state["count"] == 0:
            _state["resume"] = gc.isenabled()
            _state["since"] = time.monotonic()
            gc.disable()
        _state["count"] += 1
    try:
        yield
    finally:
        collect = False
        with _LOCK:
            _state["count"] -= 1
            if _state["count"] == 0:
                if _state["resume"]:
                    gc.enable()
            elif _state["resume"] and time.monotonic() - _state["since"] > MAX_PAUSE_S:
                _state["since"] = time.monotonic()
                collect = True
        if collect:
            gc.collect()


__all__ = ["MAX_PAUSE_S", "paused"]
