"""The store: one directory holding every backend of the embedded default.

Layout of ``--store`` / ``$RETRIEVAL_NODE_HOME`` / ``./.retrieval-node``::

    vectors/          qdrant-edge shard with chunk vectors + payloads   (vector_backend: edge)
    mem0_edge/        qdrant-edge shard with Mem0's memories            (mem0_vector_store: edge)
    qdrant/           qdrant-client local database                       (only for vector_backend / mem0_vector_store: qdrant
                                                                          without a server URL)
    mem0_history.db   Mem0's history database (a warning at open when it is missing from a store with data)
    query_vectors.db  embeddings of query texts, by model key and text (query_cache.py; owner-only)
    chunk_findings.db each chunk's risk findings, written by ingest (precompute.py; owner-only)
    lexical/          each deal's BM25 index, written by ingest (lexical.py)
    store.json        which engines this store was created with (opening it with others is an error)
    registered.jsonl  the chunks Mem0 took (deal, chunk id, content hash): the Mem0-down fallback serves only these
    secret.key        the store's secret (evidence codes, snapshot MACs)
    audit/            audit snapshots and the audit write journal
    .lock             held while a process has the store open

With ``vector_db_url`` set to a Qdrant server, chunk vectors (``vector_backend:
qdrant``) and Mem0's collection (``mem0_vector_store: qdrant``) live on the server;
the same classes are used, only the client differs. :meth:`Store.open` is the one place that builds
clients and models; everything else receives them.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import threading
from collections.abc import Iterable
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .backends.mem0_edge import EdgeMemoryStore, attach
from .backends.mem0_registry import LEDGER, Mem0Registry, SharedEmbeddings, build_memory
from .backends.pagecache import PageCacheWarmer
from .backends.vectors import ChunkIndex, EdgeChunkIndex, QdrantChunkIndex
from .cache import BoundedCache
from .config import NodeConfig, load_config
from .embedding import AUTO_BACKEND, EMBEDDING_BACKENDS, Embedder, LazyEmbedder, resolve_backend
from .errors import BackendError, ConfigError, StoreLockedError, StorePathError
from .lexical import LEXICAL_DIR
from .query_cache import QUERY_DB, QueryVectorCache
from .tokens import TiktokenCounter, TokenCounter

#: Registry listings an in-process ingest offers are kept for this many deals (the most recent; Store.offer_listing).
OFFERED_LISTINGS = 4


@dataclass(frozen=True, slots=True)
class OfferedListing:
    """A deal's registry listing as an ingest of this process knows it (:meth:`Store.offer_listing`)."""

    generation: int  # the deal's generation it is true at
    records: list[Any]  # every registry record of the deal, as Mem0 lists them, in chunk-id order
    paired: frozenset[str]  # chunk ids whose first vector point the ingest wrote or found under the deal
    points: tuple[tuple[int, int], dict[int, tuple[str, int]]] | None  # ((window_tokens, overlap), point id -> (chunk, window))

log = logging.getLogger(__name__)

HOME_ENV = "RETRIEVAL_NODE_HOME"
DEFAULT_HOME = ".retrieval-node"
HISTORY_DB = "mem0_history.db"


def resolve_home(home: str | Path | None = None) -> Path:
    """``home`` if given, else ``$RETRIEVAL_NODE_HOME``, else ``./.retrieval-node``."""
    if home is not None:
        return Path(home)
    return Path(os.environ.get(HOME_ENV) or DEFAULT_HOME)


def _usable_home(home: Path) -> None:
    """Create ``home`` if needed; a path that is a file, or a directory this process cannot write, is a
    :class:`StorePathError` naming it (a store is always opened for writing: it takes a lock and keeps logs)."""
    if home.exists() and not home.is_dir():
        raise StorePathError(f"the store path {home} is a file, not a directory; point --store / "
                             f"{HOME_ENV} at a directory (it is created if missing)")
    created = not home.exists()
    try:
        home.mkdir(mode=0o700, parents=True, exist_ok=True)
        if created or _has_data(home):
            _owner_only(home)
    except (FileExistsError, NotADirectoryError) as exc:  # a parent is a file
        raise StorePathError(f"cannot create the store directory {home}: a parent of it is a file ({exc})") from exc
    except OSError as exc:
        raise StorePathError(f"cannot create the store directory {home}: {exc.strerror or exc}; "
                             "choose a directory you can write") from exc
    if not os.access(home, os.W_OK | os.X_OK):
        raise StorePathError(f"the store directory {home} is not writable by this user; a store is opened for "
                             "writing (lock file, write-ahead logs): fix its permissions or copy it somewhere writable")
    probe = home / f".write-probe-{os.getpid()}"
    try:  # os.access misses read-only mounts for root
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise StorePathError(f"cannot write in the store directory {home} ({exc.strerror or exc}); a store is "
                             "opened for writing: use a writable copy of it") from exc


def _owner_only(path: Path, mode: int = 0o700) -> None:
    """Give ``path`` (ours) ``mode`` when it is more open: a store's directory is 0700, so no other user can reach any
    file in it (Qdrant's and Mem0's files included), and the files this library writes are 0600 themselves."""
    try:
        st = path.stat()
        if st.st_uid == os.getuid() and st.st_mode & 0o777 & ~mode:
            os.chmod(path, mode)
    except OSError as exc:  # gone, or a read-only mount: the checks that follow say what matters
        log.debug("cannot make %s owner-only: %s", path, exc)


def _has_data(home: Path) -> bool:
    """Whether ``home`` already holds a store (its manifest or a shard directory)."""
    return (home / MANIFEST).exists() or (home / "vectors").is_dir() or (home / "mem0_edge").is_dir()


class _DirLock:
    """An exclusive, non-blocking lock on the store directory (released by the OS on crash)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fh: Any = None

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fh = os.fdopen(os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600), "a+")
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            fh.seek(0)
            holder = fh.read().strip() or "unknown"
            fh.close()
            raise StoreLockedError(
                f"the store {self.path.parent} is open in another process (pid {holder}); "
                "close it first, or point --store / RETRIEVAL_NODE_HOME at another directory"
            ) from exc
        fh.seek(0)
        fh.truncate()
        fh.write(str(os.getpid()))
        fh.flush()
        self._fh = fh

    def release(self) -> None:
        if self._fh is not None:
            fcntl.flock(self._fh.fileno(), fcntl.LOCK_UN)
            self._fh.close()
            self._fh = None


class Store:
    """Backends of one store, opened together and closed together.

    >>> with Store.open("/tmp/rn-store") as store:        # doctest: +SKIP
    ...     store.chunks.count()
    """

    def __init__(
        self,
        *,
        home: Path,
        config: NodeConfig,
        embedder: Embedder,
        tokens: TokenCounter,
        chunks: ChunkIndex,
        registry: Mem0Registry,
        closers: list[Any] | None = None,
        edge_shards: list[Any] | None = None,
    ) -> None:
        self.home = home
        self.edge_shards = edge_shards or []  # the qdrant-edge shards of this store (compact())
        self.config = config
        self.embedder = embedder
        self.tokens = tokens
        self.chunks = chunks
        self.registry = registry
        self._closers = closers or []
        self._generations: dict[str, int] = {}
        self._patterns_generation = 0
        self._secret: bytes | None = None
        self._close_hooks: list[Any] = []
        self._gen_lock = threading.Lock()
        self._query_cache: QueryVectorCache | None = None
        self._query_cache_lock = threading.Lock()
        #: the background read of the index files into the page cache (Store.open), None when not warming
        self.page_cache: PageCacheWarmer | None = None
        #: deal -> what an ingest in this process offered for its next view (offer_listing)
        self._offered: BoundedCache[str, OfferedListing] = BoundedCache(OFFERED_LISTINGS)

    @classmethod
    def open(
        cls,
        home: str | Path | None = None,
        *,
        config: NodeConfig | None = None,
        embedder: Embedder | None = None,
        warm_page_cache: bool | None = None,
    ) -> Store:
        """Open (or create) the store at ``home``. ``warm_page_cache`` overrides the configuration's
        (``retrieval.warm_page_cache``): whether an embedded store's index files are read into the OS page cache in
        the background (:mod:`~retrieval_node.backends.pagecache`)."""
        config = config or load_config()
        rc = config.retrieval
        home = resolve_home(home)
        _usable_home(home)
        had_data = _has_data(home)
        history_missing = had_data and not (home / HISTORY_DB).exists()
        lock = _DirLock(home / ".lock")
        lock.acquire()
        closers: list[Any] = []
        edge_shards: list[Any] = []
        try:
            configured = rc.embedding_backend
            # an embedder passed in decides a new store's backend (one that does not say: torch, as before backends)
            passed = None if embedder is None else getattr(embedder, "backend", "torch")
            config = _resolve_engines(home, config, passed)
            rc = config.retrieval
            # loaded on its first real use (ingest, a query text not in the query-vector cache, patterns add)
            embedder = embedder or LazyEmbedder(rc.embedding_model, path=rc.embedding_model_path, batch_size=rc.embedding_batch_size,
                                                dimension=rc.embedding_dimension, backend=rc.embedding_backend,
                                                onnx_dir=rc.embedding_onnx_dir)
            if embedder.dimension != rc.embedding_dimension:
                raise BackendError(f"embedding model gives {embedder.dimension}-d vectors but embedding_dimension is {rc.embedding_dimension}")
            if getattr(embedder, "backend", rc.embedding_backend) != rc.embedding_backend:
                said = "the configuration says" if configured != AUTO_BACKEND else "this store's vectors come from"
                raise ConfigError(f"the embedder passed in runs embedding_backend {embedder.backend!r} but {said} "
                                  f"{rc.embedding_backend!r}; vectors and the store's record of their backend would disagree: "
                                  f"pass an embedder loaded with backend={rc.embedding_backend!r}, or none (the store loads its own)")
            tokens = TiktokenCounter(rc.tokenizer_encoding)
            needs_client = rc.vector_backend == "qdrant" or rc.mem0_vector_store == "qdrant"
            qclient = _qdrant_client(config, home) if needs_client else _throwaway_client()
            closers.append(qclient)
            if rc.vector_backend == "edge":
                chunks: ChunkIndex = EdgeChunkIndex.open(home / "vectors", dimension=rc.embedding_dimension, datatype=rc.vector_datatype)
                edge_shards.append(chunks)
            else:
                remote = bool(rc.vector_db_url and "://" in rc.vector_db_url)
                chunks = QdrantChunkIndex(qclient, f"{rc.collection_prefix}_chunks", dimension=rc.embedding_dimension,
                                          retries=rc.vector_db_retries if remote else 0, datatype=rc.vector_datatype)
            closers.insert(0, chunks)
            shared = SharedEmbeddings(embedder)
            memory = build_memory(
                client=qclient,
                collection=f"{rc.collection_prefix}_mem0",
                dimension=rc.embedding_dimension,
                embeddings=shared,
                history_db_path=str(home / HISTORY_DB),
            )
            if rc.mem0_vector_store == "edge":
                mem_store = EdgeMemoryStore.open(home / "mem0_edge", dimension=rc.embedding_dimension, collection_name=f"{rc.collection_prefix}_mem0",
                                                 datatype=rc.vector_datatype)
                attach(memory, mem_store)
                closers.insert(0, mem_store)
                edge_shards.append(mem_store)
            closers.insert(0, memory)
            _owner_only(home / HISTORY_DB, 0o600)  # Mem0's history holds chunk text; SQLite gives its -wal/-shm the same mode
            _history_wal(memory)
            registry = Mem0Registry(memory, shared, thread_safe_store=rc.mem0_vector_store == "edge", ledger=home / LEDGER)
            _write_manifest(home, config)
            for part in ("vectors", "mem0_edge", "qdrant", "audit"):  # the engines' own files: unreachable past these
                _owner_only(home / part)
            for part in (f"{HISTORY_DB}-wal", f"{HISTORY_DB}-shm"):
                _owner_only(home / part, 0o600)
        except BaseException as exc:
            for c in closers:
                _close_quietly(c)
            lock.release()
            if isinstance(exc, BackendError) and not isinstance(exc, StoreLockedError) and "WouldBlock" in str(exc):
                # qdrant-edge locks its WAL: another process holds the store although .lock did not stop us
                # (someone deleted the holder's .lock, so the lock we took is on a new file)
                raise StoreLockedError(
                    f"the store {home} is open in another process (its write-ahead log is locked; the store's .lock "
                    "file was deleted while that process held it, so it cannot be named): close that process first, "
                    "or point --store / RETRIEVAL_NODE_HOME at another directory"
                ) from exc
            raise
        if history_missing:
            log.warning("store %s: %s was missing although the store holds data; Mem0 created an empty one. "
                        "Chunk and audit records are intact (they live in the vector stores); the history of "
                        "memory changes before now is lost. Restore the file from a backup if you need that history.",
                        home, HISTORY_DB)
        closers.append(lock)
        warm = rc.warm_page_cache if warm_page_cache is None else warm_page_cache
        warmer = None
        if warm and edge_shards:  # first the Mem0 listing's files, then the vectors', then what precompute keeps
            from .precompute import FINDINGS_DB  # the risk module behind it is not needed to open a store

            warmer = PageCacheWarmer([home / "mem0_edge", home / "vectors", home / FINDINGS_DB, home / LEXICAL_DIR],
                                     page_out=[home / "mem0_edge" / "wal", home / "vectors" / "wal"]).start()
            closers.insert(0, warmer)  # stopped before the shards close
        legacy = [str(s._path if hasattr(s, "_path") else s.path) for s in edge_shards if s.count() >= 5_000 and s.needs_compaction()]
        if legacy:
            log.warning("store %s: %s still in the in-memory layout of older stores (about 1 GB more RAM at 100k chunks); "
                        "run `retrieval-node compact --store %s` once (or ingest: closing after an ingest compacts)", home, ", ".join(legacy), home)
        if rc.vector_datatype == "float16":
            from .backends.vectors import recorded_datatype

            wide = []
            for part in (home / "vectors", home / "mem0_edge"):
                try:
                    if recorded_datatype(part, "dense") == "float32":
                        wide.append(part.name)
                except BackendError:  # the shard opened from that file a moment ago; a hint is not worth failing for
                    pass
            if wide:  # made before float16 was the default: the setting does not change an existing shard
                log.warning("store %s: %s keep float32 vectors although vector_datatype is float16 (twice the vector files and the "
                            "memory their pages take); run `retrieval-node convert --store %s` once to rewrite them, keeping every "
                            "registration and audit entry", home, " and ".join(wide), home)
        store = cls(home=home, config=config, embedder=embedder, tokens=tokens, chunks=chunks, registry=registry, closers=closers,
                    edge_shards=edge_shards)
        store.page_cache = warmer
        return store

    def compact(self) -> dict[str, bool]:
        """Rewrite the embedded qdrant-edge shards in their on-disk layout (see ``EdgeShardLifecycle.compact``) and the
        audit snapshots written before snapshots were compressed as compressed files
        (:func:`~retrieval_node.snapshot_files.compress_legacy`: each checked before its original is removed); by
        shard or snapshot directory, whether anything was rewritten. Slow (about a minute per 100k chunks); not for
        the retrieval path. The shards' part is a no-op for the qdrant-client backends."""
        from .snapshot_files import compress_legacy

        out: dict[str, bool] = {}
        for shard in self.edge_shards:
            name = str(getattr(shard, "_path", None) or getattr(shard, "path", "?"))
            out[name] = shard.compact()
        snapshots = self.home / "audit" / "snapshots"
        done = compress_legacy(snapshots)
        if done.files:
            log.info("compact: %d audit snapshot(s) compressed, %d -> %d bytes", done.files, done.bytes_before, done.bytes_after)
        out[str(snapshots)] = done.files > 0
        return out

    @classmethod
    def convert_vectors(cls, home: str | Path | None, datatype: str, *, config: NodeConfig | None = None) -> dict[str, dict[str, Any]]:
        """Rewrite the embedded store at ``home`` so both its qdrant-edge shards (chunk vectors, Mem0's memories) keep
        their vectors as ``datatype`` (``float16`` halves the vector files and the memory their pages take). Every
        point keeps its id and payload (registrations, patterns, audit entries); each copy is checked against the
        original before it replaces it, and a run stopped half way is finished by the next one
        (:mod:`~retrieval_node.backends.convert`). Takes the store's lock: the store must not be open elsewhere.
        By shard directory, what was done. About two minutes and up to 3 GB of RSS per 100k chunks (measured: 2 min
        13 s, 3.0 GB); needs the disk space of one more copy of the larger shard while it runs."""
        from .backends.convert import convert_shard
        from .backends.vectors import check_datatype, old_shard_dirs

        check_datatype(datatype)
        rc = (config or load_config()).retrieval
        home = resolve_home(home)
        if not _has_data(home):
            raise StorePathError(f"no store at {home} (no {MANIFEST} and no shard directory)")
        _usable_home(home)
        shards = (("vectors", EdgeChunkIndex), ("mem0_edge", EdgeMemoryStore))  # each with the indexes and tenant it opens with
        lock = _DirLock(home / ".lock")
        lock.acquire()
        try:
            out: dict[str, dict[str, Any]] = {}
            for name, holder in shards:
                path = home / name
                if not path.exists() and not old_shard_dirs(path):
                    continue  # this store keeps that part on a Qdrant server, or has none yet
                try:
                    out[name] = convert_shard(path, vector=holder.VECTOR, dimension=rc.embedding_dimension, indexes=dict(holder.INDEXES),
                                              tenant=holder.TENANT, datatype=datatype)
                except BackendError:
                    raise
                except Exception as exc:
                    raise BackendError(f"converting the qdrant-edge shard {path} to {datatype} failed: {exc}") from exc
                _owner_only(path)
            return out
        finally:
            lock.release()

    # -- query vectors (query_cache.py) --------------------------------------------------------
    def query_cache(self) -> QueryVectorCache | None:
        """The store's persisted query vectors under this embedder's ``model_key`` (None for an embedder without one)."""
        key = getattr(self.embedder, "model_key", None)
        if not key:
            return None
        with self._query_cache_lock:
            if self._query_cache is None or self._query_cache.model_key != key:
                self._query_cache = QueryVectorCache(self.home / QUERY_DB, key, dimension=self.config.retrieval.embedding_dimension)
                self._closers.insert(0, self._query_cache)
            return self._query_cache

    def embed_query(self, text: str) -> tuple[np.ndarray, int]:
        """The vector of a query text and how many model calls it took (0: read from the store's cache)."""
        cache = self.query_cache()
        if cache is None:
            return self.embedder.embed([text])[0], 1
        vec, computed = cache.vector(text, lambda t: self.embedder.embed([t])[0])
        return vec, int(computed)

    def prefill_queries(self, texts: list[str]) -> int:
        """Embed and keep the query texts not cached yet (ingest calls it with every profile's texts)."""
        cache = self.query_cache()
        return 0 if cache is None else cache.fill(texts, lambda t: self.embedder.embed([t])[0])

    # -- cache invalidation --------------------------------------------------------------
    def generation(self, deal_id: str) -> int:
        """Bumped whenever the deal's chunks change in this process; caches key on it."""
        with self._gen_lock:
            return self._generations.get(deal_id, 0)

    def bump(self, deal_ids: set[str] | list[str]) -> None:
        """Ingest changed these deals' chunks: cached deal views rebuild on their next call."""
        with self._gen_lock:
            for d in deal_ids:
                self._generations[d] = self._generations.get(d, 0) + 1
                self._offered.pop(d)  # a listing offered before the change is never served

    def offer_listing(self, deal_id: str, records: list[Any], paired: Iterable[str] = (),
                      points: tuple[tuple[int, int], dict[int, tuple[str, int]]] | None = None, *, generation: int | None = None) -> None:
        """An ingest in this process wrote ``deal_id``'s chunks and knows the deal's whole registry listing (what Mem0
        listed before its writes, plus the records it registered, as :meth:`Mem0Registry.deal_records` would list
        them, in chunk-id order): the deal's next view reads them here instead of listing Mem0 again, while the deal's
        generation is the one current now (any later change to the deal bumps it and the offer is not served).
        ``paired``: the chunk ids whose first vector point the ingest wrote, or found, under this deal (their
        pairing need not be asked of the index again; the deal's other chunks' is). ``points``: ((window_tokens,
        overlap_tokens), point id -> (chunk id, window)) of every point of those chunks, which a view's point table
        then need not compute. ``generation``: the deal's generation the listing is true at (the one the writer's own
        bump gave); when the deal has moved on since (another change bumped it), nothing is kept."""
        with self._gen_lock:
            current = self._generations.get(deal_id, 0)
            if generation is not None and generation != current:
                return
            self._offered.put(deal_id, OfferedListing(current, list(records), frozenset(paired), points))

    def offered(self, deal_id: str, generation: int) -> OfferedListing | None:
        """What :meth:`offer_listing` kept for ``deal_id``, if it was offered at ``generation``; else None (list Mem0)."""
        hit = self._offered.get(deal_id)
        return hit if hit is not None and hit.generation == generation else None

    def secret(self) -> bytes:
        """The store's secret key, created on first use in ``<home>/secret.key`` (owner-only): it keys the evidence
        codes that close a package's blocks, so the author of a chunk cannot compute them."""
        if self._secret is None:
            self._secret = read_or_create_secret(self.home)
        return self._secret

    def patterns_generation(self) -> int:
        """Bumped whenever pattern memories are added in this process; the pattern rows of a pipeline key on it."""
        with self._gen_lock:
            return self._patterns_generation

    def bump_patterns(self) -> None:
        with self._gen_lock:
            self._patterns_generation += 1

    # -- lifecycle -----------------------------------------------------------------------
    def add_close_hook(self, hook: Any) -> None:
        """Run ``hook()`` before the backends close (a background writer must finish first)."""
        self._close_hooks.append(hook)

    def close(self) -> None:
        hooks, self._close_hooks = self._close_hooks, []
        for hook in hooks:
            try:
                hook()
            except Exception:  # closing must go on; what a hook could not write stays journaled
                pass
        closers, self._closers = self._closers, []
        for c in closers:
            _close_quietly(c)

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


MANIFEST = "store.json"
_ENGINE_KEYS = ("vector_backend", "mem0_vector_store")
#: the embedding backend the store's vectors come from (a manifest without it is from before backends: torch)
_BACKEND_KEY = "embedding_backend"


def _resolve_engines(home: Path, config: NodeConfig, passed_backend: str | None = None) -> NodeConfig:
    """``mem0_vector_store: auto`` becomes what the store was created with ('edge' for a new store); an explicit
    engine other than the recorded one is refused (the store's data would look missing). ``embedding_backend: auto``
    likewise becomes the recorded backend; for a new store the backend of an embedder passed in (``passed_backend``),
    else :func:`~retrieval_node.embedding.default_backend`."""
    rc = config.retrieval
    path = home / MANIFEST
    recorded: dict[str, str] = {}
    if path.exists():
        recorded = _read_manifest(home, config, passed_backend)
    elif (home / "qdrant" / "collection" / f"{rc.collection_prefix}_mem0").exists() and not (home / "mem0_edge").exists():
        recorded = {"mem0_vector_store": "qdrant"}  # a store from before the manifest: Mem0 in qdrant-client local mode
    if not path.exists() and ((home / "vectors").is_dir() or (home / "mem0_edge").is_dir() or (home / "qdrant").is_dir()):
        recorded[_BACKEND_KEY] = "torch"  # a store from before the manifest: its vectors are PyTorch's
    if rc.mem0_vector_store == "auto":
        engine = recorded.get("mem0_vector_store", "edge")
        config = config.model_copy(update={"retrieval": rc.model_copy(update={"mem0_vector_store": engine})})
        rc = config.retrieval
    backend = recorded.get(_BACKEND_KEY)
    if rc.embedding_backend == AUTO_BACKEND:
        chosen = resolve_backend(AUTO_BACKEND, backend or passed_backend)
        config = config.model_copy(update={"retrieval": rc.model_copy(update={"embedding_backend": chosen})})
        rc = config.retrieval
    if backend is not None and backend != rc.embedding_backend:
        raise ConfigError(
            f"{home}: this store's vectors were made with embedding_backend: {backend}, but the configuration says "
            f"{rc.embedding_backend}; queries embedded by another backend would be compared with vectors they were not "
            f"made to match. Set embedding_backend: {backend} (or RETRIEVAL_NODE_EMBEDDING_BACKEND={backend}) to open it, "
            "or ingest into a new store"
        )
    for key in _ENGINE_KEYS:
        if key in recorded and recorded[key] != getattr(rc, key):
            raise ConfigError(
                f"{home}: this store was created with {key}: {recorded[key]}, but the configuration says "
                f"{getattr(rc, key)}; set {key}: {recorded[key]}{' or auto' if key == 'mem0_vector_store' else ''} "
                f"(or RETRIEVAL_NODE_{key.upper()}={recorded[key]}) "
                "to open it, or ingest into a new store"
            )
    return config


#: The manifest format this version writes and reads.
MANIFEST_FORMAT = 1
_ENGINES = ("edge", "qdrant")


def _engines_on_disk(home: Path, config: NodeConfig) -> dict[str, str]:
    """Which engine holds each part of the store, from its directories (a local store only; data on a Qdrant
    server cannot be seen from here)."""
    rc = config.retrieval
    local = rc.vector_db_url in (None, "")
    collections = home / "qdrant" / "collection"
    out: dict[str, str] = {}
    chunks_q = local and (collections / f"{rc.collection_prefix}_chunks").exists()
    mem0_q = local and (collections / f"{rc.collection_prefix}_mem0").exists()
    if (home / "vectors").is_dir() != bool(chunks_q):
        out["vector_backend"] = "edge" if (home / "vectors").is_dir() else "qdrant"
    if (home / "mem0_edge").is_dir() != bool(mem0_q):
        out["mem0_vector_store"] = "edge" if (home / "mem0_edge").is_dir() else "qdrant"
    return out


def _read_manifest(home: Path, config: NodeConfig, passed_backend: str | None = None) -> dict[str, str]:
    """``store.json``, checked: a JSON object of a known format, each engine ``edge`` or ``qdrant`` and the one
    whose data is in the store. Anything else is a :class:`ConfigError` that says what to write back; nothing
    in the store is opened or changed before (an edited manifest must not open the store on an empty engine
    and answer "no registered chunks")."""
    path = home / MANIFEST
    on_disk = _engines_on_disk(home, config)

    def fix() -> str:  # built only for an error: under auto it may ask the CPU (no work on a good manifest)
        suggested = json.dumps({key: on_disk.get(key, "edge") for key in _ENGINE_KEYS}
                               | {"format": MANIFEST_FORMAT, _BACKEND_KEY: resolve_backend(config.retrieval.embedding_backend, passed_backend)},
                               sort_keys=True)
        return (f"restore it from a backup, or write {suggested} (what this store's directories hold) into it; "
                f"{_BACKEND_KEY} is the one this process would run: write the backend the store was ingested with if it was "
                "another (a store an earlier version made under the defaults: torch); nothing in the store was changed")
    try:
        recorded = json.loads(path.read_bytes().decode("utf-8"))
    except (OSError, ValueError, RecursionError) as exc:
        raise ConfigError(f"{path}: unreadable store manifest ({exc.__class__.__name__}: {exc}); {fix()}") from exc
    if not isinstance(recorded, dict):
        raise ConfigError(f"{path}: not a store manifest (a JSON {type(recorded).__name__}, not an object); {fix()}")
    fmt = recorded.get("format")
    if isinstance(fmt, int) and not isinstance(fmt, bool) and fmt > MANIFEST_FORMAT:
        raise ConfigError(f"{path}: store format {fmt} was written by a newer retrieval-node (this one reads format "
                          f"{MANIFEST_FORMAT}); upgrade retrieval-node to open this store")
    problems = []
    if fmt != MANIFEST_FORMAT or isinstance(fmt, bool):
        problems.append("no 'format'" if "format" not in recorded else f"unknown format {fmt!r}")
    for key in _ENGINE_KEYS:
        value = recorded.get(key)
        if key not in recorded:
            problems.append(f"no {key!r}")
        elif value not in _ENGINES:
            problems.append(f"{key} is {value!r}, not one of {', '.join(_ENGINES)}")
        elif key in on_disk and on_disk[key] != value:
            problems.append(f"{key} is {value!r} but this store's data is in the {on_disk[key]} engine")
    if problems:
        raise ConfigError(f"{path}: the store manifest was edited or damaged ({'; '.join(problems)}); {fix()}")
    backend = recorded.get(_BACKEND_KEY, "torch")
    if backend not in EMBEDDING_BACKENDS:
        raise ConfigError(f"{path}: the store manifest was edited or damaged ({_BACKEND_KEY} is {backend!r}, not one of "
                          f"{', '.join(EMBEDDING_BACKENDS)}); write back the backend its vectors were made with; nothing in the store was changed")
    return {key: recorded[key] for key in _ENGINE_KEYS} | {_BACKEND_KEY: backend}


SECRET_FILE = "secret.key"


def read_secret(home: Path) -> bytes | None:
    """The store's secret if it has one (never creates it: for readers such as ``retrieval-node replay``)."""
    path = home / SECRET_FILE
    if not path.exists():
        return None
    return read_or_create_secret(home)


def read_or_create_secret(home: Path) -> bytes:
    """The 32-byte secret of the store at ``home``, written once (mode 0600, atomically) when missing."""
    path = home / SECRET_FILE
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        data = b""
    if len(data) == 32:
        return data
    if data:
        raise ConfigError(f"{path}: not a store secret ({len(data)} bytes, expected 32); restore it from a backup, or delete it "
                          "to make a new one (earlier packages then keep their codes, new ones get new codes)")
    key = os.urandom(32)
    tmp = path.with_name(f".{SECRET_FILE}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, key)
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(tmp, path)  # first writer wins; a concurrent opener reads the same key
    except FileExistsError:
        pass
    finally:
        tmp.unlink(missing_ok=True)
    data = path.read_bytes()
    if len(data) != 32:
        raise ConfigError(f"{path}: not a store secret")
    return data


def _history_wal(memory: Any) -> None:
    """Mem0's SQLite history in WAL mode: a commit (one per audit entry, under Mem0's own lock) is one
    append + fsync of the WAL instead of a rollback journal created, synced and deleted around a synced
    database write. ``synchronous`` stays FULL, so a committed row is as durable as before."""
    db = getattr(memory, "db", None)
    conn = getattr(db, "connection", None)
    if conn is None:
        return
    with getattr(db, "_lock", nullcontext()):
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")


def _write_manifest(home: Path, config: NodeConfig) -> None:
    path = home / MANIFEST
    if path.exists():
        return
    rc = config.retrieval
    body = {key: getattr(rc, key) for key in _ENGINE_KEYS} | {"format": MANIFEST_FORMAT, _BACKEND_KEY: rc.embedding_backend}
    tmp = path.with_suffix(".json.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(json.dumps(body, sort_keys=True, indent=2) + "\n")
    os.replace(tmp, path)


def _throwaway_client() -> Any:
    """Mem0 insists on building its Qdrant class; with the edge store it gets this empty client, never used."""
    from qdrant_client import QdrantClient

    return QdrantClient(location=":memory:")


def _qdrant_client(config: NodeConfig, home: Path) -> Any:
    from qdrant_client import QdrantClient

    rc = config.retrieval
    try:
        if rc.vector_db_url in (None, ""):
            return QdrantClient(path=str(home / "qdrant"))
        if rc.vector_db_url == ":memory:":
            return QdrantClient(location=":memory:")
        if "://" in rc.vector_db_url:
            return QdrantClient(url=rc.vector_db_url, api_key=rc.vector_db_api_key, timeout=int(rc.vector_db_timeout_s))
        return QdrantClient(path=rc.vector_db_url)
    except RuntimeError as exc:
        if "already accessed" in str(exc):
            raise StoreLockedError(f"the Qdrant database under {home} is open in another process: {exc}") from exc
        raise BackendError(f"cannot open Qdrant ({rc.vector_db_url or home / 'qdrant'}): {exc}") from exc
    except Exception as exc:
        raise BackendError(f"cannot open Qdrant ({rc.vector_db_url or home / 'qdrant'}): {exc}") from exc


def _close_quietly(obj: Any) -> None:
    if isinstance(obj, _DirLock):
        obj.release()
        return
    close = getattr(obj, "close", None)
    if close is None:
        return
    try:
        close()
    except Exception:  # closing must not mask the error being raised
        pass


__all__ = ["DEFAULT_HOME", "HOME_ENV", "Store", "resolve_home"]
