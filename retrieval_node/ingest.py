"""Chunk registry ingest: Stage-0 JSONL -> validated chunks -> Qdrant vectors + Mem0 registry.

Every line is checked against interfaces.md section 1 (types, enums, hashes,
chunk id, cl100k token count). A bad line is reported with file, line, field and
reason; the good lines are still ingested. Re-ingesting a chunk changes nothing.

Write order per chunk: vectors first (all windows), then the Mem0 registry
record. Retrieval only serves chunks present in both, and a re-run completes any
chunk a crash left half-written, so a killed ingest never leaves a chunk visible
with missing parts.

Throughput: windows are embedded in batches on the calling thread while a
writer thread stores the previous batch (the stores' commits wait on disk, the
model on the CPU), so the registry costs little on top of embedding.
"""

from __future__ import annotations

import json
import queue
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, ValidationError

from .backends.vectors import VectorPoint, point_id
from .errors import BackendError, UsageError
from .models import DocumentChunk, PatternMemory
from .store import Store

#: Lines longer than this are rejected unread (a Stage-0 page chunk is a few KB).
MAX_LINE_BYTES = 4 * 1024 * 1024
_LOOKUP_BATCH = 512


class Rejection(BaseModel):
    """One input line that was not ingested, and why."""

    model_config = ConfigDict(frozen=True)

    file: str
    line: int
    field: str
    error: str


class IngestReport(BaseModel):
    """Outcome of one ingest run (the JSON of ``retrieval-node ingest --json``)."""

    model_config = ConfigDict(frozen=True)

    ingested: int
    unchanged: int
    rejected: list[Rejection]
    repaired: int = 0
    deals: list[str] = []

    @property
    def ok(self) -> bool:
        return not self.rejected


@dataclass(slots=True)
class _Pending:
    chunk: DocumentChunk
    file: str
    line: int
    needs_vectors: bool = True
    needs_registry: bool = True
    record: dict[str, Any] = field(default_factory=dict)


def iter_jsonl_files(paths: Iterable[str | Path]) -> list[Path]:
    """Expand files and folders (recursively, ``*.jsonl``) in a stable order."""
    files: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            files.extend(sorted(q for q in p.rglob("*.jsonl") if q.is_file()))
        elif p.is_file():
            files.append(p)
        else:
            raise UsageError(f"ingest path {p} does not exist")
    return files


def _field_of(err: dict[str, Any]) -> str:
    return ".".join(str(p) for p in err["loc"]) or "(line)"


def _describe(err: dict[str, Any]) -> str:
    value = err.get("input")
    shown = repr(value)
    if len(shown) > 80:
        shown = shown[:77] + "..."
    return f"{err['msg']} (got {shown})"


def parse_chunk_line(raw: bytes, *, file: str, line: int, count_tokens: Callable[[str], int] | None) -> DocumentChunk | Rejection:
    """Validate one JSONL line; never raises for bad input."""

    def reject(field_name: str, error: str) -> Rejection:
        return Rejection(file=file, line=line, field=field_name, error=error)

    if len(raw) > MAX_LINE_BYTES:
        return reject("(line)", f"line is {len(raw)} bytes, over the {MAX_LINE_BYTES} byte limit")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return reject("(line)", f"not valid UTF-8 at byte {exc.start}: {raw[exc.start:exc.start + 4]!r}")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        return reject("(line)", f"not valid JSON: {exc.msg} at column {exc.colno}")
    if not isinstance(data, dict):
        return reject("(line)", f"a chunk must be a JSON object, got {type(data).__name__}")
    wrong = _has_wrong_json_types(data)
    if wrong:
        return reject(wrong, f"must be a JSON number, got {type(data[wrong]).__name__} {data[wrong]!r}")
    try:
        chunk = DocumentChunk.model_validate(data, strict=False)
    except ValidationError as exc:
        errors = exc.errors()
        # Report the field the line got wrong; a model-level consistency error names its field in the text.
        first = errors[0]
        name = _field_of(first)
        msg = first["msg"]
        if name == "(line)" or not first["loc"]:
            # model-level checks start their message with the field they found wrong
            lead = msg.removeprefix("Value error, ").split(" ", 1)[0]
            if lead in DocumentChunk.model_fields:
                name = lead
        extra = f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""
        return reject(name, _describe(first) + extra)
    if count_tokens is not None:
        actual = count_tokens(chunk.content)
        if actual != chunk.token_count:
            return reject("token_count", f"token_count {chunk.token_count} is not the cl100k count of content ({actual})")
    return chunk


def _has_wrong_json_types(data: dict[str, Any]) -> str | None:
    """Pydantic's lax mode accepts "3" for 3; the interface says int/float, so reject strings there."""
    for key in ("page_start", "page_end", "token_count"):
        if key in data and not (isinstance(data[key], int) and not isinstance(data[key], bool)):
            return key
    if "ocr_confidence" in data and not (isinstance(data["ocr_confidence"], int | float) and not isinstance(data["ocr_confidence"], bool)):
        return "ocr_confidence"
    return None


def read_chunks(path: Path, *, count_tokens: Callable[[str], int] | None = None) -> Iterator[tuple[int, DocumentChunk | Rejection]]:
    """Yield ``(line number, chunk or rejection)`` for every non-blank line of ``path``."""
    name = str(path)
    with open(path, "rb") as fh:
        for line_no, raw in enumerate(fh, start=1):
            stripped = raw.strip()
            if not stripped:
                continue
            yield line_no, parse_chunk_line(stripped, file=name, line=line_no, count_tokens=count_tokens)


class Ingestor:
    """Ingest Stage-0 chunk files into a :class:`Store`.

    >>> report = Ingestor(store).ingest(["deal/chunks.jsonl"])   # doctest: +SKIP
    >>> report.ingested, report.unchanged, report.rejected        # doctest: +SKIP
    (38, 0, [])
    """

    _lock = threading.Lock()  # one ingest at a time per process: the registry check-then-write must not interleave

    def __init__(self, store: Store) -> None:
        self.store = store

    def ingest(self, paths: Iterable[str | Path], *, progress: bool = False) -> IngestReport:
        rejected: list[Rejection] = []
        chunks: list[tuple[DocumentChunk, str, int]] = []
        for f in iter_jsonl_files(paths):
            for line_no, item in read_chunks(f, count_tokens=self.store.tokens.count):
                if isinstance(item, Rejection):
                    rejected.append(item)
                else:
                    chunks.append((item, str(f), line_no))
        return self.ingest_chunks(chunks, rejected=rejected, progress=progress)

    def ingest_chunks(
        self,
        chunks: list[tuple[DocumentChunk, str, int]],
        *,
        rejected: list[Rejection] | None = None,
        progress: bool = False,
    ) -> IngestReport:
        rejected = list(rejected or [])
        with self._lock:
            pending, unchanged = self._plan(chunks, rejected)
            repaired = sum(1 for p in pending if not p.needs_vectors)
            self._write(pending, progress=progress)
        deals = sorted({p.chunk.deal_id for p in pending})
        self.store.bump(deals)
        return IngestReport(ingested=len(pending), unchanged=unchanged, rejected=rejected, repaired=repaired, deals=deals)

    # -- planning --------------------------------------------------------------------
    def _plan(self, chunks: list[tuple[DocumentChunk, str, int]], rejected: list[Rejection]) -> tuple[list[_Pending], int]:
        by_id: dict[str, _Pending] = {}
        unchanged = 0
        for chunk, file, line in chunks:
            seen = by_id.get(chunk.chunk_id)
            if seen is not None:
                if seen.chunk.deal_id != chunk.deal_id:
                    rejected.append(Rejection(file=file, line=line, field="deal_id",
                                              error=f"chunk {chunk.chunk_id[:12]}… also appears under deal {seen.chunk.deal_id!r} "
                                                    f"({seen.file}:{seen.line}); a chunk belongs to one deal"))
                else:
                    unchanged += 1
                continue
            by_id[chunk.chunk_id] = _Pending(chunk=chunk, file=file, line=line)

        ids = list(by_id)
        stored: dict[str, dict[str, Any]] = {}
        for i in range(0, len(ids), _LOOKUP_BATCH):
            batch = ids[i:i + _LOOKUP_BATCH]
            found = self.store.chunks.payloads([point_id(c, 0) for c in batch])
            for c in batch:
                payload = found.get(point_id(c, 0))
                if payload is not None:
                    stored[c] = payload

        # chunks whose first window exists: are all their windows there?
        extra_ids = [point_id(c, w) for c, p in stored.items() for w in range(1, int(p.get("n_windows", 1)))]
        present_extra: set[str] = set()
        for i in range(0, len(extra_ids), _LOOKUP_BATCH):
            present_extra.update(self.store.chunks.payloads(extra_ids[i:i + _LOOKUP_BATCH]))

        registered: dict[str, set[str]] = {}
        pending: list[_Pending] = []
        for cid, p in by_id.items():
            payload = stored.get(cid)
            if payload is not None and payload.get("deal_id") != p.chunk.deal_id:
                rejected.append(Rejection(file=p.file, line=p.line, field="deal_id",
                                          error=f"chunk {cid[:12]}… is already registered under deal {payload.get('deal_id')!r}; "
                                                f"it cannot also belong to {p.chunk.deal_id!r}"))
                continue
            if payload is not None:
                n = int(payload.get("n_windows", 1))
                p.needs_vectors = any(point_id(cid, w) not in present_extra for w in range(1, n))
            deal = p.chunk.deal_id
            if deal not in registered:
                registered[deal] = self.store.registry.registered_chunk_ids(deal)
            p.needs_registry = cid not in registered[deal]
            if p.needs_vectors or p.needs_registry:
                pending.append(p)
            else:
                unchanged += 1
        pending.sort(key=lambda p: (p.chunk.deal_id, p.chunk.document_id, p.chunk.page_start, p.chunk.chunk_id))
        return pending, unchanged

    # -- writing ---------------------------------------------------------------------
    def _record(self, chunk: DocumentChunk, ingested_at: datetime) -> dict[str, Any]:
        zones = self.store.config.zones.zones_for(chunk.section_type, chunk.document_role, chunk.metadata.zones)
        created = chunk.metadata.created_at
        return {
            "deal_id": chunk.deal_id,
            "chunk_id": chunk.chunk_id,
            "document_id": chunk.document_id,
            "document_role": chunk.document_role.value,
            "section_type": chunk.section_type.value,
            "page_start": chunk.page_start,
            "page_end": chunk.page_end,
            "content_hash": chunk.content_hash,
            "ocr_confidence": chunk.ocr_confidence,
            "token_count": chunk.token_count,
            "zones": zones,
            "entity_ids": list(chunk.metadata.entity_ids),
            "sensitivity": chunk.metadata.sensitivity.value,
            "document_created_at": created.isoformat() if created else None,
            "ingested_at": ingested_at.isoformat(),
            "ingested_at_ts": ingested_at.timestamp(),
        }

    def _write(self, pending: list[_Pending], *, progress: bool) -> None:
        if not pending:
            return
        rc = self.store.config.retrieval
        embedder = self.store.embedder
        now = datetime.now(UTC)
        bar = _progress(len(pending), progress)
        work: queue.Queue[Any] = queue.Queue(maxsize=2)
        failure: list[BaseException] = []

        def writer() -> None:
            while True:
                item = work.get()
                if item is None:
                    return
                if failure:
                    continue
                batch, points, first_vectors = item
                try:
                    self.store.chunks.upsert(points)
                    self.store.chunks.flush()
                    for p, vec in zip(batch, first_vectors, strict=True):
                        if p.needs_registry:
                            self.store.registry.register_chunk(p.record, p.chunk.content, vec)
                        bar.update(1)
                except BaseException as exc:  # surfaced on the calling thread below
                    failure.append(exc)

        thread = threading.Thread(target=writer, name="retrieval-node-ingest-writer", daemon=True)
        thread.start()
        try:
            window_budget = max(rc.embedding_batch_size, 1)
            batch: list[_Pending] = []
            texts: list[str] = []
            spans_of: list[list[tuple[int, int]]] = []
            for p in pending:
                if failure:
                    break
                p.record = self._record(p.chunk, now)
                spans = embedder.window_spans(p.chunk.content, rc.window_tokens, rc.window_overlap_tokens) if p.needs_vectors else [(0, len(p.chunk.content))]
                if not p.needs_vectors:
                    spans = spans[:1]
                batch.append(p)
                spans_of.append(spans)
                texts.extend(p.chunk.content[s:e] for s, e in spans)
                if len(texts) >= window_budget:
                    work.put(self._embed_batch(batch, spans_of, texts))
                    batch, texts, spans_of = [], [], []
            if batch and not failure:
                work.put(self._embed_batch(batch, spans_of, texts))
        finally:
            work.put(None)
            thread.join()
            bar.close()
        if failure:
            exc = failure[0]
            if isinstance(exc, BackendError):
                raise exc
            raise BackendError(f"ingest write failed: {exc}") from exc

    def _embed_batch(self, batch: list[_Pending], spans_of: list[list[tuple[int, int]]], texts: list[str]) -> tuple[list[_Pending], list[VectorPoint], list[np.ndarray]]:
        vectors = self.store.embedder.embed(texts)
        points: list[VectorPoint] = []
        first: list[np.ndarray] = []
        k = 0
        for p, spans in zip(batch, spans_of, strict=True):
            first.append(vectors[k])
            if p.needs_vectors:
                n = len(spans)
                for w, (s, e) in enumerate(spans):
                    payload: dict[str, Any] = {
                        "deal_id": p.record["deal_id"],
                        "chunk_id": p.record["chunk_id"],
                        "document_id": p.record["document_id"],
                        "section_type": p.record["section_type"],
                        "document_role": p.record["document_role"],
                        "window": w,
                        "n_windows": n,
                        "char_start": s,
                        "char_end": e,
                        "ingested_at_ts": p.record["ingested_at_ts"],
                    }
                    if w == 0:
                        payload.update(p.record)
                        payload["content"] = p.chunk.content
                        payload["stage0_metadata"] = p.chunk.metadata.model_dump(mode="json")
                    points.append(VectorPoint(point_id(p.chunk.chunk_id, w), vectors[k + w], payload))
            k += len(spans)
        # window 0 last: its presence marks the chunk's vectors as complete
        points.sort(key=lambda pt: pt.payload["window"] == 0)
        return batch, points, first


def _progress(total: int, enabled: bool) -> Any:
    if enabled:
        from tqdm import tqdm

        return tqdm(total=total, unit="chunk", desc="ingest", dynamic_ncols=True)

    class _Null:
        def update(self, n: int) -> None:
            pass

        def close(self) -> None:
            pass

    return _Null()


def read_patterns(path: Path) -> tuple[list[PatternMemory], list[Rejection]]:
    """Parse a pattern-memory JSONL file (interfaces.md section 2)."""
    good: list[PatternMemory] = []
    bad: list[Rejection] = []
    with open(path, "rb") as fh:
        for line_no, raw in enumerate(fh, start=1):
            raw = raw.strip()
            if not raw:
                continue
            try:
                good.append(PatternMemory.model_validate_json(raw))
            except ValidationError as exc:
                first = exc.errors()[0]
                bad.append(Rejection(file=str(path), line=line_no, field=_field_of(first), error=_describe(first)))
    return good, bad


def add_patterns(store: Store, patterns: list[PatternMemory]) -> tuple[int, int]:
    """Store pattern memories in Mem0's global layer; returns (added, unchanged)."""
    added = unchanged = 0
    texts = [p.content for p in patterns]
    vectors = store.embedder.embed(texts) if texts else []
    for p, vec in zip(patterns, vectors, strict=True):
        mid = store.registry.add_pattern(p.entity_type, p.entity_id, p.topic, p.content, vector=vec)
        if mid is None:
            unchanged += 1
        else:
            added += 1
    if added:
        store.bump_patterns()  # pipelines of this store reload their pattern rows on their next call
    return added, unchanged


__all__ = [
    "MAX_LINE_BYTES",
    "IngestReport",
    "Ingestor",
    "Rejection",
    "add_patterns",
    "iter_jsonl_files",
    "parse_chunk_line",
    "read_chunks",
    "read_patterns",
]
