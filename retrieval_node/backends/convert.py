"""Rewrite an embedded qdrant-edge shard with another vector datatype, keeping every point (id, payload, vector).

A shard keeps the datatype it was created with (qdrant-edge refuses to load it under another), so a store made
before float16 vectors became the default holds float32 vectors until its shards are rewritten. Re-ingesting does
not do it (unchanged chunks are not written again), and a new store would lose the deal registrations' Mem0 ids and
the audit trail. :func:`convert_shard` copies the shard point by point into a new one beside it, checks the copy
against the original (same ids in the same order, same payloads, vectors within float16's rounding), and only then
swaps the directories:

1. ``<name>.<datatype>-new`` is written and checked, then marked complete (``CONVERTED``);
2. ``<name>`` is renamed ``<name>.<old datatype>-old``;
3. ``<name>.<datatype>-new`` is renamed ``<name>``;
4. ``<name>.<old datatype>-old`` is deleted.

Stopped anywhere (a crash, a full disk), the next run picks up where it was: an unmarked copy is thrown away and
made again; a marked one is swapped in; a leftover old shard is deleted once the new one is in place. Between steps
2 and 3 the shard's directory is missing: :func:`~retrieval_node.backends.vectors.interrupted` names the leftover, and opening the store refuses
with it rather than creating an empty shard in its place (``open_edge_shard``).
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import BackendError
from .vectors import check_datatype, old_shard_dirs, open_edge_shard, recorded_datatype, scroll_pages

#: Points per scroll page while copying and checking.
PAGE = 1024
#: The marker a checked copy carries before it is swapped in.
CONVERTED = "converted.json"
#: Largest difference allowed between a vector and its copy (float16 keeps ~3 decimal digits of values under 1).
TOLERANCE = {"float16": 2e-3, "float32": 1e-6}


def _new_dir(path: Path, datatype: str) -> Path:
    return path.with_name(f"{path.name}.{datatype}-new")


def _vector(record: Any, name: str) -> list[float]:
    vec = record.vector
    if isinstance(vec, dict):
        vec = vec.get(name)
    if vec is None:
        raise BackendError(f"point {record.id} has no {name!r} vector")
    return [float(x) for x in vec]


def convert_shard(path: Path, *, vector: str, dimension: int, indexes: dict[str, str], tenant: str, datatype: str) -> dict[str, Any]:
    """Rewrite the shard at ``path`` with ``datatype`` vectors (see the module's docstring). The caller holds the
    store's lock and has no shard open. Returns what was done: ``converted`` (False when it already had the
    datatype), ``from`` / ``to``, ``points``, ``seconds``."""
    check_datatype(datatype)
    t0 = time.perf_counter()
    new = _new_dir(path, datatype)
    if not path.exists():  # stopped between the renames: the old shard is at <name>.<x>-old
        old = old_shard_dirs(path)
        if not old:
            raise BackendError(f"no qdrant-edge shard at {path}")
        if new.is_dir() and (new / CONVERTED).exists():
            new.rename(path)
        else:  # nothing checked to swap in: the old shard goes back and is converted again
            old[0].rename(path)
    recorded = recorded_datatype(path, vector)
    if recorded is None:
        raise BackendError(f"no qdrant-edge shard at {path} (no edge_config.json)")
    if recorded == datatype:
        for leftover in [*old_shard_dirs(path), *([new] if new.exists() else [])]:  # a finished conversion's, or a stale copy
            shutil.rmtree(leftover)
        (path / CONVERTED).unlink(missing_ok=True)
        return {"converted": False, "from": recorded, "to": datatype, "points": None, "seconds": round(time.perf_counter() - t0, 2)}

    if new.exists() and not (new / CONVERTED).exists():
        shutil.rmtree(new)  # a copy that was never checked
    if not new.exists():
        points = _copy(path, new, vector=vector, dimension=dimension, indexes=indexes, tenant=tenant, recorded=recorded, datatype=datatype)
    else:
        points = json.loads((new / CONVERTED).read_text())["points"]
    old = path.with_name(f"{path.name}.{recorded}-old")
    if old.exists():
        shutil.rmtree(old)
    path.rename(old)
    new.rename(path)
    (path / CONVERTED).unlink()
    shutil.rmtree(old)
    return {"converted": True, "from": recorded, "to": datatype, "points": points, "seconds": round(time.perf_counter() - t0, 2)}


def _copy(path: Path, new: Path, *, vector: str, dimension: int, indexes: dict[str, str], tenant: str, recorded: str, datatype: str) -> int:
    """Write every point of ``path`` into a new ``datatype`` shard at ``new``, compact it, check it against the
    original and mark it complete; returns the number of points."""
    import qdrant_edge as qe

    src = open_edge_shard(path, vector=vector, dimension=dimension, indexes=indexes, tenant=tenant, datatype=recorded)
    try:
        dst = open_edge_shard(new, vector=vector, dimension=dimension, indexes=indexes, tenant=tenant, datatype=datatype)
        try:
            n = 0
            for records in scroll_pages(src, with_vector=True, page=PAGE):
                dst.update(qe.UpdateOperation.upsert_points(
                    [qe.Point(id=r.id, vector={vector: _vector(r, vector)}, payload=dict(r.payload or {})) for r in records]))
                n += len(records)
            dst.flush()
            dst.optimize()  # the on-disk layout, each tenant's points together (what EdgeShardLifecycle.compact does)
            dst.flush()
            _check(src, dst, vector=vector, tolerance=max(TOLERANCE[datatype], TOLERANCE[recorded]), expected=n)
        finally:
            dst.close()
    finally:
        src.close()
    (new / CONVERTED).write_text(json.dumps({"from": recorded, "to": datatype, "points": n}))
    return n


def _check(src: Any, dst: Any, *, vector: str, tolerance: float, expected: int) -> None:
    """The copy holds the same points as the original, page by page in id order: ids, payloads, vectors within
    ``tolerance``. Raises :class:`BackendError` naming the first point that differs."""
    if int(src.info().points_count) != expected or int(dst.info().points_count) != expected:
        raise BackendError(f"copy check: {expected} points copied, the original holds {src.info().points_count}, the copy {dst.info().points_count}")
    pages = zip(scroll_pages(src, with_vector=True, page=PAGE), scroll_pages(dst, with_vector=True, page=PAGE), strict=False)
    seen = 0
    for a, b in pages:
        if [r.id for r in a] != [r.id for r in b]:
            raise BackendError(f"copy check: the points after {seen} differ in id or order")
        for ra, rb in zip(a, b, strict=True):
            if (ra.payload or {}) != (rb.payload or {}):
                raise BackendError(f"copy check: point {ra.id} has another payload in the copy")
            if float(np.max(np.abs(np.asarray(_vector(ra, vector)) - np.asarray(_vector(rb, vector))))) > tolerance:
                raise BackendError(f"copy check: point {ra.id}'s vector differs by more than {tolerance} in the copy")
        seen += len(a)
    if seen != expected:
        raise BackendError(f"copy check: {seen} points read back of {expected}")
