"""Mem0 OSS as the chunk registry, the pattern store and the audit log.

Mem0 returns untyped dicts; this module is the one place that reads them and
turns them into :class:`RegistryRecord` / :class:`PatternRecord` values.

Memory layout (spec 4.1), every record tagged with ``memory_path``:

* chunk registry: ``user_id=conv-{deal_id}``, ``agent_id=preprocessing_v1``,
  ``kind=chunk``, ``memory_path=deal/{deal_id}/chunks``; the memory text is the
  chunk's verbatim content and its vector is the chunk's first embedding window,
  computed once in the ingest batch (no second embedding call per chunk).
* retrieval audit: ``user_id=conv-{deal_id}``, ``agent_id=retrieval_v1``,
  ``kind=retrieval_audit``, ``memory_path=deal/{deal_id}/audit``.
* institutional patterns: ``user_id=global``, ``kind=pattern``,
  ``memory_path=global/{entity_type}/{entity_id}/{topic}``.

Every chunk Mem0 took is also appended to the store's registration ledger (``registered.jsonl``: deal id,
chunk id, content hash; owner-only): when Mem0 is down, the vector-payload fallback serves only the points the
ledger records as registered, never one a failed ingest left behind (:func:`ledger_records`).

Mem0 runs fully offline: Qdrant vector store (the client is passed in), our
MiniLM behind Mem0's ``langchain`` embedder slot, no LLM (every write uses
``infer=False``), telemetry off. Mem0 builds an LLM client whatever the
configuration says: it is built with the ``sarvam`` provider (whose module
imports nothing heavy; ``lmstudio``'s imports the ``openai`` SDK, half a second of
every command) and replaced before first use by :class:`NoLLM`, which refuses
every call, so nothing can ever be sent anywhere.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("MEM0_TELEMETRY", "False")
# Mem0 asks the passed-in client for payload indexes; local mode warns that they are no-ops. Expected, not actionable.
warnings.filterwarnings("ignore", message="Payload indexes have no effect in the local Qdrant")

from langchain_core.embeddings import Embeddings  # noqa: E402

from ..errors import BackendError  # noqa: E402
from ..values import ChunkView, PatternRecord  # noqa: E402

log = logging.getLogger(__name__)

GLOBAL_USER = "global"
REGISTRY_AGENT = "preprocessing_v1"
AUDIT_AGENT = "retrieval_v1"
#: Upper bound of records one registry listing may return; a deal above it is an error, never a silent cut.
MAX_LISTING = 1_000_000
#: The registration ledger in a store's directory.
LEDGER = "registered.jsonl"


def ledger_records(home: Path, deal_id: str) -> dict[str, str] | None:
    """chunk id -> content hash of every chunk of ``deal_id`` the ledger at ``home`` records as registered in Mem0,
    or None when the store has no ledger (made before it existed; an ingest with Mem0 up writes it). A line that
    does not parse is skipped (a torn last line after a crash): a chunk missing from the ledger is only excluded."""
    path = Path(home) / LEDGER
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise BackendError(f"cannot read the registration ledger {path}: {exc.strerror or exc}") from exc
    out: dict[str, str] = {}
    needle = json.dumps(deal_id)
    for ln in text.splitlines():
        if needle not in ln:
            continue
        try:
            row = json.loads(ln)
        except ValueError:
            continue
        if isinstance(row, dict) and row.get("deal_id") == deal_id and isinstance(row.get("chunk_id"), str):
            out[row["chunk_id"]] = str(row.get("content_hash"))
    return out


def ledger_deals(home: Path) -> set[str]:
    """Every deal the registration ledger at ``home`` records (none without a ledger)."""
    try:
        text = (Path(home) / LEDGER).read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return set()
    except OSError as exc:
        raise BackendError(f"cannot read the registration ledger {Path(home) / LEDGER}: {exc.strerror or exc}") from exc
    out: set[str] = set()
    for ln in text.splitlines():
        try:
            row = json.loads(ln)
        except ValueError:
            continue
        if isinstance(row, dict) and isinstance(row.get("deal_id"), str):
            out.add(row["deal_id"])
    return out


def deal_user_id(deal_id: str) -> str:
    """Mem0 scope of a deal (spec 2.1: ``conv-{DealId}``)."""
    return f"conv-{deal_id}"


class SharedEmbeddings(Embeddings):
    """LangChain ``Embeddings`` over the node's embedder, handed to Mem0.

    Texts whose vectors were already computed (chunk windows embedded in the
    ingest batch, the query of a retrieval) are served from ``precomputed``
    instead of running the model again.
    """

    def __init__(self, embedder: Any) -> None:
        self._embedder = embedder
        self._precomputed: dict[str, list[float]] = {}
        self._lock = threading.Lock()
        self.model_calls = 0

    def provide(self, text: str, vector: np.ndarray) -> None:
        with self._lock:
            self._precomputed[text] = np.asarray(vector, dtype=np.float32).tolist()

    def forget(self, text: str) -> None:
        with self._lock:
            self._precomputed.pop(text, None)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self.embed_query(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        with self._lock:
            hit = self._precomputed.get(text)
        if hit is not None:
            return hit
        self.model_calls += 1
        return self._embedder.embed([text])[0].tolist()


#: A registered chunk as the registry returns it (the pipeline's :class:`~retrieval_node.values.ChunkView`).
RegistryRecord = ChunkView


@dataclass(slots=True)
class Mem0Stats:
    calls: int = 0
    by_op: dict[str, int] = field(default_factory=dict)

    def hit(self, op: str) -> None:
        self.calls += 1
        self.by_op[op] = self.by_op.get(op, 0) + 1


def build_memory(*, client: Any, collection: str, dimension: int, embeddings: SharedEmbeddings, history_db_path: str) -> Any:
    """Construct a Mem0 ``Memory`` that needs no network and no API key."""
    try:
        from mem0 import Memory
        from mem0.configs.base import MemoryConfig

        config = MemoryConfig(
            vector_store={
                "provider": "qdrant",
                "config": {"client": client, "collection_name": collection, "embedding_model_dims": dimension},
            },
            embedder={"provider": "langchain", "config": {"model": embeddings, "embedding_dims": dimension}},
            # Replaced by NoLLM below, before first use: every write passes infer=False and no search asks for reranking.
            llm={"provider": "sarvam", "config": {"model": "unused", "api_key": "unused"}},
            history_db_path=history_db_path,
        )
        memory = Memory(config)
    except Exception as exc:
        raise BackendError(f"cannot start Mem0 (collection {collection!r}): {exc}") from exc
    memory.llm = NoLLM()
    return memory


class NoLLM:
    """Mem0's LLM slot in this node: every call is refused (nothing in the node infers memories or reranks)."""

    def generate_response(self, *args: Any, **kwargs: Any) -> str:
        raise BackendError("retrieval-node's Mem0 has no LLM: memories are written with infer=False and never rewritten by a model")


class Mem0Registry:
    """Typed access to the Mem0 memories this node reads and writes.

    >>> registry = Mem0Registry(memory, embeddings)                # doctest: +SKIP
    >>> [r.section_type for r in registry.deal_records("2026-ACME-0042")]  # doctest: +SKIP
    ['TITLE_SUMMARY', ...]
    """

    def __init__(self, memory: Any, embeddings: SharedEmbeddings, *, thread_safe_store: bool = False, ledger: Path | None = None) -> None:
        """``ledger``: the store's registration ledger (``<home>/registered.jsonl``), appended after each chunk Mem0
        takes; None keeps none (a registry outside a store)."""
        self._memory = memory
        self._embeddings = embeddings
        self.stats = Mem0Stats()
        self.ledger = ledger
        self._ledger_lock = threading.Lock()
        self._ledgered: dict[str, set[str]] | None = None  # deal -> chunk ids in the ledger (loaded when first needed)
        # qdrant-client's local mode is not safe for concurrent use ("cannot start a transaction within a
        # transaction" from its SQLite persistence): with it every Mem0 call goes through this lock. The
        # qdrant-edge store serialises its own writes and Mem0 (2.2) locks its SQLite history, so with
        # ``thread_safe_store`` calls run concurrently.
        self._lock: Any = _NoLock() if thread_safe_store else threading.RLock()
        self._read_lock: Any = self._lock

    @property
    def memory(self) -> Any:
        """The underlying ``mem0.Memory`` (for users who add their own memories)."""
        return self._memory

    # -- chunk registry ---------------------------------------------------------------
    def register_chunk(self, record: dict[str, Any], content: str, vector: np.ndarray) -> str:
        """Write one chunk registry memory; ``vector`` is reused instead of re-embedding ``content``."""
        deal_id = record["deal_id"]
        metadata = {
            "kind": "chunk",
            "memory_path": f"deal/{deal_id}/chunks",
            "page_range": f"{record['page_start']}-{record['page_end']}",
            **record,
        }
        self._embeddings.provide(content, vector)
        try:
            result = self._add(content, user_id=deal_user_id(deal_id), agent_id=REGISTRY_AGENT, metadata=metadata, op="register_chunk")
        finally:
            self._embeddings.forget(content)
        self._record_in_ledger([(deal_id, record["chunk_id"], record["content_hash"])])
        return result

    @staticmethod
    def written_record(memory_id: str, record: dict[str, Any], content: str) -> RegistryRecord:
        """The record :meth:`deal_records` lists for a chunk :meth:`register_chunk` wrote (``memory_id``: what it
        returned): built from the same payload fields by the same function, without reading Mem0."""
        return _registry_record(memory_id, {**record, "data": content})

    def _record_in_ledger(self, rows: Sequence[tuple[str, str, str]]) -> None:
        """Append (deal, chunk id, content hash) of chunks Mem0 holds to the ledger (owner-only; not fsynced: a line
        lost in a power cut only excludes its chunk from the Mem0-down fallback, and the next ingest writes it)."""
        if self.ledger is None or not rows:
            return
        with self._ledger_lock:
            if self._ledgered and not self.ledger.exists():  # deleted under us: write it again from what Mem0 lists
                self._ledgered = None
            known = self._ledger_index()
            fresh = [(d, c, h) for d, c, h in rows if c not in known.get(d, ())]
            if not fresh:
                return
            try:
                fd = os.open(self.ledger, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
                with os.fdopen(fd, "a", encoding="utf-8") as fh:
                    fh.write("".join(json.dumps({"deal_id": d, "chunk_id": c, "content_hash": h}, sort_keys=True) + "\n" for d, c, h in fresh))
            except OSError as exc:  # Mem0 has the chunks: the write stands; the fallback will exclude them until the next ingest
                log.warning("cannot append %d chunk(s) to the registration ledger %s (%s); with Mem0 down they are not served "
                            "until an ingest with Mem0 up records them", len(fresh), self.ledger, exc.strerror or exc)
                return
            for d, c, _ in fresh:
                known.setdefault(d, set()).add(c)

    def _ledger_index(self) -> dict[str, set[str]]:
        if self._ledgered is None:
            index: dict[str, set[str]] = {}
            if self.ledger is not None and self.ledger.exists():
                for ln in self.ledger.read_text(encoding="utf-8", errors="replace").splitlines():
                    try:
                        row = json.loads(ln)
                        index.setdefault(row["deal_id"], set()).add(row["chunk_id"])
                    except (ValueError, KeyError, TypeError):
                        continue
            self._ledgered = index
        return self._ledgered

    def deal_records(
        self,
        deal_id: str,
        *,
        section_types: Iterable[str] | None = None,
        document_roles: Iterable[str] | None = None,
    ) -> list[RegistryRecord]:
        """Structural filter (spec 4.2 read): the deal's chunks, optionally by section type / role."""
        filters: dict[str, Any] = {"user_id": deal_user_id(deal_id), "kind": "chunk"}
        if section_types is not None:
            filters["section_type"] = {"in": sorted(set(section_types))}
        if document_roles is not None:
            filters["document_role"] = {"in": sorted(set(document_roles))}
        records = [_registry_record(memory_id, payload) for memory_id, payload in self._listed(filters, op="deal_records")]
        # Mem0 results are re-checked: the scope is the deal, whatever the store returned.
        return sorted((r for r in records if r.deal_id == deal_id), key=lambda r: r.chunk_id)

    def registered_chunk_ids(self, deal_id: str) -> set[str]:
        """The deal's registered chunk ids (see :meth:`registered_records`)."""
        return {r.chunk_id for r in self.registered_records(deal_id)}

    def registered_records(self, deal_id: str) -> list[RegistryRecord]:
        """The deal's registered chunks (what ingest asks before writing: :meth:`deal_records`); chunks Mem0 holds that
        the ledger does not (a store from before the ledger) are added to it here, so one ingest with Mem0 up
        completes it."""
        records = self.deal_records(deal_id)
        self._record_in_ledger([(r.deal_id, r.chunk_id, r.content_hash) for r in records])
        return records

    # -- institutional patterns --------------------------------------------------------
    def add_pattern(self, entity_type: str, entity_id: str, topic: str, content: str, *, vector: np.ndarray | None = None) -> str | None:
        """Store a pattern memory once; returns its id, or None when an identical one exists."""
        existing = self._get_all({"user_id": GLOBAL_USER, "kind": "pattern", "entity_id": entity_id, "topic": topic}, op="patterns")
        if any(r.get("memory") == content for r in existing):
            return None
        metadata = {
            "kind": "pattern",
            "memory_path": f"global/{entity_type}/{entity_id}/{topic}",
            "entity_type": entity_type,
            "entity_id": entity_id,
            "topic": topic,
        }
        if vector is not None:
            self._embeddings.provide(content, vector)
        try:
            return self._add(content, user_id=GLOBAL_USER, agent_id=None, metadata=metadata, op="add_pattern")
        finally:
            if vector is not None:
                self._embeddings.forget(content)

    def patterns_for(self, entity_ids: Sequence[str]) -> list[PatternRecord]:
        """Patterns about any of ``entity_ids`` (spec 4.2 pattern retrieval, by entity)."""
        if not entity_ids:
            return []
        filters = {"user_id": GLOBAL_USER, "kind": "pattern", "entity_id": {"in": sorted(set(entity_ids))}}
        rows = self._get_all(filters, op="patterns")
        out = [
            PatternRecord(
                memory_id=r["id"],
                entity_type=r["metadata"]["entity_type"],
                entity_id=r["metadata"]["entity_id"],
                topic=r["metadata"]["topic"],
                content=r.get("memory", ""),
            )
            for r in rows
        ]
        return sorted(out, key=lambda p: (p.entity_id, p.topic, p.memory_id))

    def all_patterns(self) -> list[PatternRecord]:
        rows = self._get_all({"user_id": GLOBAL_USER, "kind": "pattern"}, op="patterns")
        return sorted(
            (PatternRecord(r["id"], r["metadata"]["entity_type"], r["metadata"]["entity_id"], r["metadata"]["topic"], r.get("memory", "")) for r in rows),
            key=lambda p: (p.entity_id, p.topic, p.memory_id),
        )

    # -- audit ------------------------------------------------------------------------
    def add_audit(self, deal_id: str, text: str, metadata: dict[str, Any], vector: np.ndarray | None = None) -> str:
        meta = {"kind": "retrieval_audit", "memory_path": f"deal/{deal_id}/audit", **metadata}
        if vector is not None:
            self._embeddings.provide(text, vector)
        try:
            return self._add(text, user_id=deal_user_id(deal_id), agent_id=AUDIT_AGENT, metadata=meta, op="add_audit")
        finally:
            if vector is not None:
                self._embeddings.forget(text)

    def audit_entries(self, deal_id: str, *, audit_id: str | None = None) -> list[dict[str, Any]]:
        filters: dict[str, Any] = {"user_id": deal_user_id(deal_id), "kind": "retrieval_audit"}
        if audit_id is not None:
            filters["audit_id"] = audit_id
        rows = self._get_all(filters, op="audit_entries")
        out = []
        for r in rows:
            row = {"memory_id": r["id"], "text": r.get("memory", ""), **(r.get("metadata") or {})}
            if isinstance(row.get("audit_entry"), str):  # stored as one JSON string (see AuditLog._memory); older entries as an object
                row["audit_entry"] = json.loads(row["audit_entry"])
            out.append(row)
        return out

    # -- plumbing ---------------------------------------------------------------------
    def _add(self, content: str, *, user_id: str, agent_id: str | None, metadata: dict[str, Any], op: str) -> str:
        self.stats.hit(op)
        try:
            with self._lock:
                result = self._memory.add(
                    [{"role": "user", "content": content}],
                    user_id=user_id,
                    agent_id=agent_id,
                    metadata=metadata,
                    infer=False,
                )
        except Exception as exc:
            raise BackendError(f"Mem0 add ({op}) failed: {exc}") from exc
        results = result.get("results") if isinstance(result, dict) else None
        if not results:
            raise BackendError(f"Mem0 add ({op}) stored nothing (returned {result!r})")
        return str(results[0]["id"])

    def _listed(self, filters: dict[str, Any], *, op: str) -> list[tuple[str, dict[str, Any]]]:
        """(memory id, payload) of every memory matching ``filters``, as ``Memory.get_all`` lists them: from Mem0's
        vector store (``VectorStoreBase.list``, the call ``get_all`` makes, with the same filters), expired memories
        left out as ``get_all`` leaves them, without ``get_all``'s per-memory formatting into a dict that moves each
        payload key to its place (~60 ms of a 2,000-chunk deal's listing, half of it). The payload is what Mem0
        stored: the memory text under ``data``, the metadata beside it. The limit is checked before expired memories
        are left out (``get_all`` cut its answer there silently; this refuses it)."""
        self.stats.hit(op)
        try:
            scoped = {**filters, **{k: _entity_id(filters[k], k) for k in ("user_id", "agent_id", "run_id") if k in filters}}
            with self._read_lock:
                result = self._memory.vector_store.list(filters=scoped, top_k=MAX_LISTING)
        except Exception as exc:
            raise BackendError(f"Mem0 listing ({op}) failed: {exc}") from exc
        # Mem0's stores answer [[memories]] (qdrant-edge, ours) or (memories, next offset) (its Qdrant class): get_all unwraps one level
        rows = result[0] if isinstance(result, (list, tuple)) and result and isinstance(result[0], (list, tuple)) else result
        if len(rows) >= MAX_LISTING:
            raise BackendError(f"Mem0 listing ({op}) hit its limit of {MAX_LISTING} records; refusing a partial result")
        out = []
        for m in rows:
            payload = m.payload or {}
            if not _expired(payload):
                out.append((str(m.id), payload))
        return out

    def _get_all(self, filters: dict[str, Any], *, op: str) -> list[dict[str, Any]]:
        self.stats.hit(op)
        try:
            with self._read_lock:
                result = self._memory.get_all(filters=filters, top_k=MAX_LISTING)
        except Exception as exc:
            raise BackendError(f"Mem0 get_all ({op}) failed: {exc}") from exc
        rows = result.get("results", []) if isinstance(result, dict) else []
        if len(rows) >= MAX_LISTING:
            raise BackendError(f"Mem0 listing ({op}) hit its limit of {MAX_LISTING} records; refusing a partial result")
        return rows


class _NoLock:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def _entity_id(value: Any, name: str) -> str:
    """Mem0's rule for the scope ids ``get_all`` is given (``mem0.memory.main._validate_and_trim_entity_id``, 2.2):
    as text, trimmed; empty or holding whitespace is refused (a deal id Mem0 would not list is an error, not an
    empty deal)."""
    trimmed = str(value).strip()
    if not trimmed or any(c.isspace() for c in trimmed):
        raise ValueError(f"Invalid {name}: {value!r} is empty or contains whitespace; Mem0 refuses it as a scope id")
    return trimmed


def _expired(payload: dict[str, Any]) -> bool:
    """Mem0's rule for a memory ``get_all`` does not list (``mem0.memory.main._payload_is_expired``, 2.2): an
    ``expiration_date`` (ISO date) before today, UTC; an unreadable date does not expire the memory."""
    expiration = payload.get("expiration_date")
    if not expiration:
        return False
    try:
        return date.fromisoformat(str(expiration)) < datetime.now(timezone.utc).date()
    except ValueError:
        return False


def _registry_record(memory_id: str, m: dict[str, Any]) -> RegistryRecord:
    """A chunk registry memory's payload (the metadata register_chunk wrote, the text under ``data``) as a record;
    a payload without a field the record needs, or whose text is not a string (``get_all``'s ``MemoryItem`` refused
    it), is an error: ingest must not count such a chunk as registered."""
    text = m.get("data", "")
    if not isinstance(text, str):
        raise BackendError(f"Mem0 registry record {memory_id} is malformed (its text is a {type(text).__name__}, not a string); "
                           "re-ingest the deal")
    try:
        return RegistryRecord(
            memory_id=memory_id,
            chunk_id=m["chunk_id"],
            deal_id=m["deal_id"],
            document_id=m["document_id"],
            document_role=m["document_role"],
            section_type=m["section_type"],
            page_start=int(m["page_start"]),
            page_end=int(m["page_end"]),
            content_hash=m["content_hash"],
            ocr_confidence=float(m["ocr_confidence"]),
            token_count=int(m["token_count"]),
            zones=tuple(m.get("zones") or ()),
            entity_ids=tuple(m.get("entity_ids") or ()),
            sensitivity=m.get("sensitivity", "confidential"),
            document_created_at=m.get("document_created_at"),
            ingested_at=m["ingested_at"],
            content=text,
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise BackendError(f"Mem0 registry record {memory_id} is malformed ({exc!r}); re-ingest the deal") from exc


__all__ = [
    "AUDIT_AGENT",
    "GLOBAL_USER",
    "REGISTRY_AGENT",
    "Mem0Registry",
    "PatternRecord",
    "RegistryRecord",
    "SharedEmbeddings",
    "build_memory",
    "deal_user_id",
    "ledger_deals",
    "ledger_records",
]
