"""Retrieval in worker processes: concurrent calls of one deployment use every core.

A warm ``retrieve_sync`` holds the GIL for most of its time (ranking, packing, coverage and the
snapshot are Python), so ten threads of one process give 0.8-1.3x the sequential throughput on two cores. qdrant-edge shards
cannot be opened by a second process (each holds an exclusive lock on its WAL), and Mem0's edge
store is a qdrant-edge shard too, so workers cannot open the store themselves.

:class:`ProcessPoolRetrievalAgent` keeps the store in this process (the one writer: ingest, search,
Mem0, the audit journal) and runs the Python part of each call in a worker process:

* the worker runs the same :class:`~retrieval_node.pipeline.Pipeline` over *remote ports*
  (:mod:`retrieval_node.ports`): query embedding, vector search, the deal's registry listing and the
  pattern listing are requests back to this process, answered by the caller's thread on the real backends;
* the worker renders the audit snapshot (its canonical bytes, the GIL-bound part) and the Mem0 audit entry
  (:func:`~retrieval_node.audit.render_audit`), which come back with the call's result; this process's
  :class:`~retrieval_node.audit.AuditLog` writes them exactly as an in-process call does
  (:meth:`~retrieval_node.audit.AuditLog.write_rendered`: the entry journaled, then the snapshot, then the entry
  to Mem0 or the background writer) before the caller gets the package, while the worker already takes the next
  call: one writer, each entry recorded once, and a crash between the snapshot and the Mem0 write repaired on
  the next open. The summary returned is the one in the snapshot (replay returns it);
* the deal's ingest generation and the pattern generation travel with each call, so a worker reloads a
  deal's registry listing after an ingest (and the patterns after ``patterns add``) in this process exactly
  as the in-process caches do.

Same intent on the same store gives the same package as :class:`RetrievalAgent`: the same code
runs on the same inputs (vectors, hits and records come from the same backends).

    agent = ProcessPoolRetrievalAgent(store, workers=3, trust=trust)
    agent.warm([intent, ...])                 # optional: build every worker's caches before traffic
    package, summary = agent.retrieve_sync(intent)
    agent.close()

Costs: each worker is a ~0.3-0.4 GB process (imports, tokenizer, its own deal caches) and builds its own
caches, so a deal's first call costs its cold time once per worker (``warm`` does it up front); a worker
takes a few seconds to start; a single call is a few ms slower (a request to this process for each search);
this process still does every search and Mem0 write, holding its GIL, which is
what bounds the gain.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .agent import RetrievalAgent
from .pipeline import Pipeline
from .audit import AuditLog, RenderedAudit, render_audit
from .config import NodeConfig
from .errors import BackendError
from .models import RetrievalAuditEntry, TrustContext
from .store import Store

#: Seconds a worker may take to start (imports and tokenizer) before the pool gives up.
START_TIMEOUT_S = 120.0


# ------------------------------------------------------------------------------ worker side


class _Link:
    """The worker's end of its pipe: synchronous requests to the parent during a call."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn

    def call(self, name: str, *args: Any) -> Any:
        self.conn.send(("call", name, args))
        kind, value = self.conn.recv()
        if kind == "raise":
            raise value
        return value


class _RemoteEmbedder:
    def __init__(self, link: _Link, dimension: int) -> None:
        self._link = link
        self.dimension = dimension

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self._link.call("embed", list(texts))

    def window_spans(self, text: str, window_tokens: int, overlap_tokens: int) -> list[tuple[int, int]]:
        raise BackendError("a retrieval worker does not ingest: windows are cut by the process that owns the store")


class _RemoteChunks:
    """The :class:`~retrieval_node.ports.ChunkSearch` port, answered by the parent process."""

    def __init__(self, link: _Link) -> None:
        self._link = link

    def search_points_many(self, requests: Sequence[tuple[np.ndarray, Any, int]]) -> list[list[tuple[Any, float]]]:
        return self._link.call("search_points_many", list(requests))

    def payloads(self, point_ids: Sequence[str], fields: Sequence[str] | None = None) -> dict[str, dict[str, Any]]:
        return self._link.call("payloads", list(point_ids), None if fields is None else list(fields))

    def deal_payloads(self, deal_id: str) -> list[dict[str, Any]]:
        return self._link.call("deal_payloads", deal_id)

    def present(self, point_ids: Sequence[str], deal_id: str) -> set[str]:
        return self._link.call("present", list(point_ids), deal_id)


class _RemoteRegistry:
    """The :class:`~retrieval_node.ports.ChunkRegistry` port, answered by the parent process."""

    def __init__(self, link: _Link) -> None:
        self._link = link

    def deal_records(self, deal_id: str) -> list[Any]:
        return self._link.call("deal_records", deal_id)

    def all_patterns(self) -> list[Any]:
        return self._link.call("all_patterns")


class _RemoteBackends:
    """The :class:`~retrieval_node.ports.Backends` of a worker: the parent's store, reached through the pipe.
    The generations are the parent's, sent with each call."""

    def __init__(self, link: _Link, home: Path, config: NodeConfig) -> None:
        from .tokens import TiktokenCounter

        rc = config.retrieval
        self.home = home
        self.config = config
        self.tokens = TiktokenCounter(rc.tokenizer_encoding)
        self.embedder = _RemoteEmbedder(link, rc.embedding_dimension)
        self.chunks = _RemoteChunks(link)
        self.registry = _RemoteRegistry(link)
        self.generations: dict[str, int] = {}
        self.patterns_gen = 0
        self._secret: bytes | None = None

    def generation(self, deal_id: str) -> int:
        return self.generations.get(deal_id, 0)

    def patterns_generation(self) -> int:
        return self.patterns_gen

    def secret(self) -> bytes:
        from .store import read_or_create_secret

        if self._secret is None:
            self._secret = read_or_create_secret(self.home)
        return self._secret


class _DeferredAudit(AuditLog):
    """The :class:`~retrieval_node.ports.AuditSink` of a worker: it renders the snapshot (canonical bytes) and the
    Mem0 entry (:func:`~retrieval_node.audit.render_audit`), which travel back with the call's result; the
    parent's AuditLog writes them as an in-process call does (:meth:`~retrieval_node.audit.AuditLog.write_rendered`:
    journal, snapshot, Mem0), before the caller gets the package. Warm-up (``dry``) calls record nothing."""

    def __init__(self, directory: Path) -> None:
        super().__init__(directory, None)  # writes nothing: the snapshot's MAC is the writer's, in the parent
        self.rendered: RenderedAudit | None = None  # this call's audit, for the parent to write
        self.dry = False

    def write_journaled(self, audit_id: str, snapshot: dict[str, Any], entry: RetrievalAuditEntry, *,
                        vector: np.ndarray | None) -> tuple[str, str | None]:
        if self.dry:
            return "", None
        self.rendered = render_audit(audit_id, snapshot, entry, vector=vector)
        return self.rendered.digest, None  # a note on a failed Mem0 write is added by the parent


def _worker_main(conn: Any, home: str, config: NodeConfig) -> None:
    link = _Link(conn)
    try:
        backends = _RemoteBackends(link, Path(home), config)
        audit = _DeferredAudit(Path(home) / "audit")
        pipeline = Pipeline(backends, config, audit=audit)
    except BaseException as exc:  # reported to the parent, which raises it
        conn.send(("failed", repr(exc)))
        return
    conn.send(("ready", os.getpid()))
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg[0] == "stop":
            return
        _, intent, trust, generation, patterns_generation, dry = msg
        backends.generations[intent.deal_id] = generation
        backends.patterns_gen = patterns_generation
        audit.dry = dry
        audit.rendered = None
        try:
            out = pipeline.run(intent, trust)
            if dry:
                out = None
        except BaseException as exc:
            try:
                conn.send(("err", exc))
            except Exception:  # an exception that does not pickle
                conn.send(("err", BackendError(f"retrieval worker: {exc!r}")))
            continue
        conn.send(("ok", out, audit.rendered))


# ------------------------------------------------------------------------------ parent side


def _as_ints(points: Sequence[tuple[Any, float]]) -> list[tuple[int, float]]:
    """(point id as the UUID's integer, score): a UUID pickles as an object with state, an int as a few bytes."""
    return [(pid.int, score) for pid, score in points]


class _Worker:
    def __init__(self, ctx: Any, home: Path, config: NodeConfig) -> None:
        self.conn, child = ctx.Pipe(duplex=True)
        self.proc = ctx.Process(target=_worker_main, args=(child, str(home), config), name="retrieval-node-worker", daemon=True)
        self.proc.start()
        child.close()
        self.pid: int | None = None
        self.deals: set[str] = set()

    def wait_ready(self, timeout: float) -> None:
        if self.pid is not None:
            return
        if not self.conn.poll(timeout):
            raise BackendError(f"retrieval worker {self.proc.pid} did not start within {timeout:.0f} s")
        kind, value = self.conn.recv()
        if kind != "ready":
            raise BackendError(f"retrieval worker {self.proc.pid} failed to start: {value}")
        self.pid = value

    def stop(self) -> None:
        try:
            self.conn.send(("stop",))
        except Exception:
            pass
        self.proc.join(timeout=10)
        if self.proc.is_alive():
            self.proc.terminate()
            self.proc.join(timeout=5)
        self.conn.close()


class ProcessPoolRetrievalAgent(RetrievalAgent):
    """A :class:`RetrievalAgent` whose calls run in ``workers`` worker processes (see the module doc).

    The store stays open in this process only; ``workers`` defaults to the number of CPUs plus one (a worker
    waiting for this process to search leaves its core to another: on two cores, ten callers on 3 workers got
    1.63-1.71x the pool's sequential throughput at 10k and 100k chunks). Calls beyond
    the number of workers wait for a free one (and for ``max_concurrent_retrievals`` as before).
    Workers keep their own caches (deal registry listings, BM25 indexes, ranker memo); a call goes to an
    idle worker that already served its deal when there is one.
    """

    def __init__(self, store: Store, *, workers: int | None = None, config: NodeConfig | None = None,
                 trust: TrustContext | None = None, start_timeout: float = START_TIMEOUT_S) -> None:
        super().__init__(store, config=config, trust=trust)
        n = int(workers or (os.cpu_count() or 1) + 1)
        if n < 1:
            raise ValueError("workers must be >= 1")
        # in-process the cap is the cores (more GIL-bound threads than cores lowers throughput); here every
        # worker may be busy at once, unless max_concurrent_retrievals says fewer
        cap = self.config.retrieval.max_concurrent_retrievals or n
        self._semaphore = threading.BoundedSemaphore(cap)
        self._ctx = mp.get_context("spawn")
        self._start_timeout = start_timeout
        self._cond = threading.Condition()
        self._closed = False
        self._patterns_epoch = 0
        self._recording = 0  # audit entries being written for calls whose worker is already free
        self._workers = [_Worker(self._ctx, store.home, self.config) for _ in range(n)]
        self._idle: list[_Worker] = []
        try:
            for w in self._workers:
                w.wait_ready(start_timeout)
        except BaseException:
            for w in self._workers:
                w.stop()
            raise
        self._idle = list(self._workers)
        store.add_close_hook(self._stop_workers)  # workers first, then the audit writer, then the backends

    @property
    def worker_pids(self) -> list[int]:
        return [w.proc.pid for w in self._workers]

    def invalidate_patterns(self) -> None:
        super().invalidate_patterns()
        with self._cond:
            self._patterns_epoch += 1

    # -- dispatch ------------------------------------------------------------------------
    def _take(self, deal_id: str) -> _Worker:
        with self._cond:
            while not self._idle:
                if self._closed:
                    raise BackendError("the retrieval worker pool is closed")
                self._cond.wait()
            if self._closed:
                raise BackendError("the retrieval worker pool is closed")
            for i, w in enumerate(self._idle):
                if deal_id in w.deals:
                    return self._idle.pop(i)
            return self._idle.pop(0)

    def _give(self, w: _Worker) -> None:
        with self._cond:
            self._idle.append(w)
            self._cond.notify()

    def _replace(self, dead: _Worker) -> _Worker:
        dead.stop()
        fresh = _Worker(self._ctx, self.store.home, self.config)
        fresh.wait_ready(self._start_timeout)
        with self._cond:
            self._workers[self._workers.index(dead)] = fresh
        return fresh

    def warm(self, intents: Sequence[Any], *, trust: TrustContext | None = None) -> float:
        """Run ``intents`` once on every worker without recording anything (no snapshot, no audit entry), so
        that each worker's caches (deal listing, BM25 index, ranker memo) are built before traffic arrives.
        Returns the seconds taken (the workers warm up in parallel)."""
        caller = self._trust(trust)
        t = time.perf_counter()
        with self._cond:
            while len(self._idle) < len(self._workers):
                self._cond.wait()
            workers, self._idle = self._idle, []
        errors: list[BaseException] = []

        def run(w: _Worker) -> None:
            try:
                for intent in intents:
                    self._converse(w, intent, caller, dry=True)
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=run, args=(w,)) for w in workers]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        for w in workers:
            self._give(w)
        if errors:
            raise errors[0]
        return time.perf_counter() - t

    def _run(self, intent: Any, trust: TrustContext) -> Any:
        w = self._take(intent.deal_id)
        recording = False
        try:
            try:
                out, rendered = self._converse(w, intent, trust)
            except (EOFError, OSError) as exc:  # the worker died mid-call: nothing was recorded for it
                w = self._replace(w)
                raise BackendError(f"retrieval worker died during the call ({exc!r}); it was restarted") from exc
            with self._cond:
                self._recording += 1  # the pool does not stop before this entry is written
            recording = True
        finally:
            self._give(w)  # the worker takes the next call while this process writes the audit entry
        try:
            return self._record(out, rendered)
        finally:
            if recording:
                with self._cond:
                    self._recording -= 1
                    self._cond.notify_all()

    def _record(self, out: Any, rendered: RenderedAudit | None) -> Any:
        """Write the call's audit as an in-process call does (:meth:`~retrieval_node.audit.AuditLog.write_rendered`:
        the Mem0 entry journaled, then the snapshot, then the entry to Mem0). The summary is the one in the snapshot:
        the write's time goes to the metrics only; the ``audit_journaled`` note of an entry Mem0 did not take goes to
        the fallbacks, and is kept with the entry, so replay returns this summary."""
        if rendered is None:
            return out
        package, summary, metrics = out
        t = time.perf_counter()
        note = self.audit.write_rendered(rendered)
        ms = (time.perf_counter() - t) * 1000
        if note:
            summary = summary.model_copy(update={"fallbacks": [*summary.fallbacks, note]})
        metrics = metrics.model_copy(update={"total_latency_ms": metrics.total_latency_ms + ms})
        return package, summary, metrics

    def _converse(self, w: _Worker, intent: Any, trust: TrustContext, *, dry: bool = False) -> Any:
        """One call on worker ``w``: send the job, answer its requests, return its result."""
        w.deals.add(intent.deal_id)
        # the worker's pattern generation: the store's (patterns added here) plus explicit invalidations, both only grow
        w.conn.send(("run", intent, trust, self.store.generation(intent.deal_id), self.store.patterns_generation() + self._patterns_epoch, dry))
        while True:
            msg = w.conn.recv()
            if msg[0] == "call":
                try:
                    reply = ("ret", self._serve(msg[1], msg[2]))
                except Exception as exc:
                    reply = ("raise", exc)
                w.conn.send(reply)
            elif msg[0] == "ok":
                return msg[1], msg[2]
            else:
                raise msg[1]

    def _serve(self, name: str, args: tuple[Any, ...]) -> Any:
        store = self.store
        if name == "search_points_many":  # the hot path: ids (as the UUIDs' integers) and scores, mapped to chunk windows in the worker
            return [_as_ints(r) for r in store.chunks.search_points_many(*args)]
        if name == "embed":
            return store.embedder.embed(*args)
        if name == "deal_records":
            return store.registry.deal_records(*args)
        if name == "all_patterns":
            return store.registry.all_patterns()
        if name == "payloads":
            return store.chunks.payloads(*args)
        if name == "deal_payloads":
            return store.chunks.deal_payloads(*args)
        if name == "present":
            return store.chunks.present(*args)
        raise BackendError(f"unknown worker request {name!r}")

    # -- lifecycle -----------------------------------------------------------------------
    def _stop_workers(self) -> None:
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._cond.notify_all()
        deadline = time.monotonic() + 60
        with self._cond:  # calls in flight finish (their audit entries are recorded) before workers stop
            while (len(self._idle) < len(self._workers) or self._recording) and time.monotonic() < deadline:
                self._cond.wait(0.1)
        for w in self._workers:
            w.stop()

    def close(self) -> None:
        """Stop the workers, then write what the audit writer still holds."""
        self._stop_workers()
        super().close()


__all__ = ["ProcessPoolRetrievalAgent"]
