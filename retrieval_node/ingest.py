"""Chunk registry ingest: Stage-0 JSONL -> validated chunks -> Qdrant vectors + Mem0 registry.

Every line is checked against interfaces.md section 1 (types, enums, hashes,
chunk id, cl100k token count). A bad line is reported with file, line, field and
reason; the good lines are still ingested. Re-ingesting a chunk changes nothing.
Beyond the interface's rules, a line is rejected (never repaired) when it

* repeats a key in one object (``json.loads`` would keep the last value silently),
* nests deeper than Python can read, or ``metadata`` deeper than ``MAX_METADATA_DEPTH``,
* holds a lone surrogate (``"\ud800"``) anywhere, an integer beyond 64 bits or a
  non-finite number in ``metadata``,
* has a ``deal_id`` with any whitespace or invisible character, or a ``document_id``
  with leading/trailing whitespace or a tab, newline or invisible character (ids
  are used exactly as given; inner spaces of file names are allowed),
* has a page number above ``MAX_PAGE``, or content with no visible character.

A chunk the store refuses to write (vectors or registry) is reported as a
rejection with field ``(store)``; the other chunks are still written. Before each
batch the free disk space is checked (:func:`check_free_space`): qdrant-edge
writes through memory-mapped sparse files, where a full disk is SIGBUS, not an error.

Write order per chunk: vectors first (all windows), then the Mem0 registry
record. Retrieval only serves chunks present in both, and a re-run completes any
chunk a crash left half-written, so a killed ingest never leaves a chunk visible
with missing parts.

Throughput: windows are embedded in batches on the calling thread while a
writer thread stores the previous batch (the stores' commits wait on disk), and
a worker thread works out each batch's risk findings while the model embeds it
(the model releases the GIL while it runs), so the registry and the
precomputation cost little on top of embedding.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import reprlib
import shutil
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from . import lexical
from .backends.mem0_registry import LEDGER, ledger_deals
from .backends.vectors import VectorPoint, point_id, point_ints
from .errors import BackendError, IntentError, NoInputFiles, StorageFullError, UsageError
from .models import MAX_METADATA_DEPTH, DocumentChunk, PatternMemory, sha256_hex
from .precompute import PARTS, ChunkFindings, ComputedRows, findings_of
from .query_cache import profile_query_texts
from .store import Store

log = logging.getLogger(__name__)

#: Lines longer than this are rejected unread (a Stage-0 page chunk is a few KB).
MAX_LINE_BYTES = 4 * 1024 * 1024
_LOOKUP_BATCH = 512
#: Refused chunk writes in a row after which the store, not the chunks, is taken to be failing.
MAX_CONSECUTIVE_WRITE_FAILURES = 32
#: Free space always left on the store's disk (bytes) on top of what an ingest is estimated to need.
FREE_SPACE_RESERVE = 64 * 1024 * 1024


class Rejection(BaseModel):
    """One input line that was not ingested, and why."""

    model_config = ConfigDict(frozen=True)

    file: str
    line: int
    field: str
    error: str

    @field_validator("file", "field", "error")
    @classmethod
    def _printable_text(cls, value: str) -> str:
        return value if value.isascii() else _printable(value)


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
    refused: bool = False  # the store refused its write (reported as a rejection)
    written: bool = False  # every write it needed landed
    windows: int = 0  # its vector points in the index once written (found complete, or written by this ingest)
    memory_id: str | None = None  # its registry memory, when this ingest registered it


def iter_jsonl_files(paths: Iterable[str | Path]) -> list[Path]:
    """Expand files and folders (recursively, ``*.jsonl``) in a stable order.

    A missing path, or a folder without any ``*.jsonl`` file, is a :class:`UsageError` naming it.
    """
    files: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            found = sorted(q for q in p.rglob("*.jsonl") if q.is_file())
            if not found:
                raise NoInputFiles(f"ingest folder {p} holds no *.jsonl file (searched recursively); "
                                   "pass the folder of Stage-0 chunk files, or the files themselves")
            files.extend(found)
        elif p.is_file():
            files.append(p)
        else:
            raise UsageError(f"ingest path {p} does not exist")
    return files


def _field_of(err: dict[str, Any]) -> str:
    return ".".join(str(p) for p in err["loc"]) or "(line)"


_REPR = reprlib.Repr()
_REPR.maxstring = 60
_REPR.maxother = 60
_REPR.maxlevel = 3


def _describe(err: dict[str, Any]) -> str:
    # reprlib: bounded in length and depth whatever the input (a 900-deep list must not recurse here)
    return f"{err['msg'].removeprefix('Value error, ')} (got {_REPR.repr(err.get('input'))})"


def _printable(text: str) -> str:
    """``text`` with lone surrogates escaped, so a rejection can always be printed and dumped."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


class _DuplicateKey(Exception):
    def __init__(self, key: str) -> None:
        self.key = key


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    d = dict(pairs)
    if len(d) != len(pairs):
        seen: set[str] = set()
        for k, _ in pairs:
            if k in seen:
                raise _DuplicateKey(k)
            seen.add(k)
    return d


#: One decoder for every line: duplicate keys raise instead of the last one winning silently.
_DECODER = json.JSONDecoder(object_pairs_hook=_unique_pairs)


class _Dup(dict[str, Any]):
    dup: str = ""


def _marking_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    d = _Dup(pairs)
    if len(d) != len(pairs):
        seen: set[str] = set()
        for k, _ in pairs:
            if k in seen:
                d.dup = k
                break
            seen.add(k)
    return d


def _duplicate_path(text: str) -> str | None:
    """Dotted path of the first duplicated key (error path only: the line is decoded a second time)."""
    data = json.JSONDecoder(object_pairs_hook=_marking_pairs).decode(text)
    stack: list[tuple[Any, str]] = [(data, "")]
    while stack:
        value, path = stack.pop()
        if isinstance(value, _Dup):
            if value.dup:
                return f"{path}.{value.dup}" if path else value.dup
            stack.extend((v, f"{path}.{k}" if path else str(k)) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend((v, f"{path}[{i}]") for i, v in enumerate(value))
    return None


def load_json_object(raw: bytes, *, file: str, line: int) -> dict[str, Any] | Rejection:
    """Decode one JSONL line into an object, or say why not (file, line, field); never raises for bad input.

    Stricter than ``json.loads``: duplicate keys are an error (naming the key's path), nesting past Python's
    recursion limit is a rejection and not a ``RecursionError``, and so are integers over 4,300 digits.
    """

    def reject(field_name: str, error: str) -> Rejection:
        return Rejection(file=file, line=line, field=field_name, error=error)

    if len(raw) > MAX_LINE_BYTES:
        return reject("(line)", f"line is {len(raw)} bytes, over the {MAX_LINE_BYTES} byte limit")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return reject("(line)", f"not valid UTF-8 at byte {exc.start}: {raw[exc.start:exc.start + 4]!r}")
    try:
        data = _DECODER.decode(text)
    except json.JSONDecodeError as exc:
        return reject("(line)", f"not valid JSON: {exc.msg} at column {exc.colno}")
    except _DuplicateKey as exc:
        path = _duplicate_path(text) or exc.key
        return reject(path, f"key {exc.key!r} appears twice in one object; which value is meant is ambiguous, so neither is taken")
    except RecursionError:
        return reject("(line)", "JSON nested too deeply to read (a chunk line nests 3 levels; "
                                f"metadata may nest at most {MAX_METADATA_DEPTH})")
    except ValueError as exc:  # e.g. an integer of more than 4,300 digits
        return reject("(line)", f"not readable JSON: {str(exc)[:120]}")
    if not isinstance(data, dict):
        return reject("(line)", f"a chunk must be a JSON object, got {type(data).__name__}")
    return data


_CHUNK_FIELDS = frozenset(DocumentChunk.model_fields)


def parse_chunk_line(raw: bytes, *, file: str, line: int, count_tokens: Callable[[str], int] | None) -> DocumentChunk | Rejection:
    """Validate one JSONL line; never raises for bad input (the line is decoded once)."""

    def reject(field_name: str, error: str) -> Rejection:
        return Rejection(file=file, line=line, field=field_name, error=error)

    data = load_json_object(raw, file=file, line=line)
    if isinstance(data, Rejection):
        return data
    if not _CHUNK_FIELDS.issuperset(data):
        key = next(k for k in data if k not in _CHUNK_FIELDS)
        return reject(key, f"unknown field {_REPR.repr(key)}; a chunk has exactly the fields {sorted(_CHUNK_FIELDS)}")
    wrong = _has_wrong_json_types(data)
    if wrong:
        return reject(wrong, f"must be a JSON number, got {type(data[wrong]).__name__} {_REPR.repr(data[wrong])}")
    try:
        chunk = DocumentChunk.model_validate(data, strict=False)
    except ValidationError as exc:
        return _rejection_of(exc, file=file, line=line)
    if count_tokens is not None:
        actual = count_tokens(chunk.content)
        if actual != chunk.token_count:
            return reject("token_count", f"token_count {chunk.token_count} is not the cl100k count of content ({actual})")
    return chunk


def _rejection_of(exc: ValidationError, *, file: str, line: int, fields: Iterable[str] = DocumentChunk.model_fields) -> Rejection:
    """The first error of ``exc`` as a rejection naming the field the line got wrong."""
    errors = exc.errors()
    first = errors[0]
    name = _field_of(first)
    msg = first["msg"].removeprefix("Value error, ")
    lead = msg.split(" ", 1)[0].rstrip(":")
    if name == "(line)" or not first["loc"]:
        # model-level checks start their message with the field they found wrong
        if lead in fields:
            name = lead
    elif lead.startswith(name + ".") or lead.startswith(name + "["):
        name = lead  # a nested value named by its path (metadata.source.pages)
    extra = f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""
    return Rejection(file=file, line=line, field=name, error=_describe(first) + extra)


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


class _BatchFindings:
    """Ingest's precomputation of risk findings (:mod:`~retrieval_node.precompute`), batch by batch: a worker thread
    works a batch out while the model embeds it (the model releases the GIL while it runs), and the writer keeps the
    rows of the chunks the batch stored (a refused chunk gets none). A failure stops the later batches' and is raised
    by the ingest once every chunk is stored."""

    def __init__(self, findings: ChunkFindings, entities: frozenset[str]) -> None:
        self.findings = findings
        self.entities = entities
        self.failed: list[BaseException] = []
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="retrieval-node-ingest-findings")

    @classmethod
    def of(cls, ingestor: Ingestor) -> _BatchFindings | None:
        findings = findings_of(ingestor.store)
        return None if findings is None else cls(findings, ingestor._pattern_entities())

    def start(self, batch: list[_Pending]) -> Future[ComputedRows] | None:
        """Work ``batch`` out on the worker thread (nothing after a failure)."""
        if self.failed:
            return None
        return self._pool.submit(self.findings.work_out, [(p.chunk.deal_id, p.chunk.chunk_id, p.chunk.content) for p in batch], self.entities)

    def keep(self, worked_out: Future[ComputedRows] | None, stored: list[_Pending]) -> None:
        """Keep what was worked out for the chunks of its batch that were ``stored`` (the writer thread calls it)."""
        if worked_out is None or self.failed:
            return
        try:
            self.findings.keep(worked_out.result(), [p.chunk.chunk_id for p in stored])
        except Exception as exc:
            self.failed.append(exc)

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


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
            pending, unchanged, listed, found = self._plan(chunks, rejected)
            # query-independent work, once: each chunk's risk findings (precompute.py), worked out batch by batch
            # beside the model and kept for the chunks each batch stored
            findings = _BatchFindings.of(self) if pending else None
            try:
                refused = self._write(pending, progress=progress, findings=findings)
            finally:
                if findings is not None:
                    findings.close()
                self.store.bump(sorted({p.chunk.deal_id for p in pending}))  # some may have landed before an error
            # the generation each listed deal has now, after this ingest's own bump: the listings are true at it
            self._offer_listings(pending, listed, found, {d: self.store.generation(d) for d in listed})
        if findings is not None and findings.failed:  # every chunk is stored; what failed is the precomputation a first
            raise findings.failed[0]  # call would otherwise do itself
        stored = [p for p in pending if not p.refused]
        for deal_id in sorted({p.chunk.deal_id for p in stored}):  # and each changed deal's BM25 index (lexical.py)
            self.save_lexical(deal_id)
        if any(p.needs_vectors for p in stored):  # the model is loaded: the first retrieve after this ingest needs it not
            prefill = getattr(self.store, "prefill_queries", None)
            if prefill is not None:
                prefill(profile_query_texts(self.store.config))
        repaired = sum(1 for p in stored if not p.needs_vectors)
        deals = sorted({p.chunk.deal_id for p in stored})
        return IngestReport(ingested=len(stored), unchanged=unchanged, rejected=rejected + refused, repaired=repaired, deals=deals)

    def _offer_listings(self, pending: list[_Pending], listed: dict[str, list[Any]], found: dict[str, dict[str, int]],
                        generations: dict[str, int]) -> None:
        """Hand the store each deal's whole registry listing where this ingest knows it exactly: what Mem0 listed
        before the writes plus the records registered, for a deal every pending chunk of which landed (one refused
        or not attempted: nothing offered, the next view lists Mem0). The first call on the deal then reads no
        listing from Mem0 (Store.offer_listing), and asks the vector index only about the pairing of the deal's
        chunks this ingest neither wrote nor found complete under the deal (``found``)."""
        offer = getattr(self.store, "offer_listing", None)
        if offer is None:
            return
        by_deal: dict[str, list[_Pending]] = {}
        for p in pending:
            by_deal.setdefault(p.chunk.deal_id, []).append(p)
        for deal_id, before in listed.items():
            mine = by_deal.get(deal_id, [])
            if any(not p.written or (p.needs_registry and p.memory_id is None) for p in mine):
                continue
            added = [self.store.registry.written_record(p.memory_id, p.record, p.chunk.content) for p in mine
                     if p.needs_registry and p.memory_id is not None]
            windows = {**found.get(deal_id, {}), **{p.chunk.chunk_id: p.windows for p in mine if p.windows}}
            rc = self.store.config.retrieval
            table = {pid: (cid, w) for cid, n in windows.items() for w, pid in enumerate(point_ints(cid, n))}
            offer(deal_id, sorted([*before, *added], key=lambda r: r.chunk_id), set(windows) | {p.chunk.chunk_id for p in mine},
                  ((rc.window_tokens, rc.window_overlap_tokens), table), generation=generations[deal_id])

    def _pattern_entities(self) -> frozenset[str]:
        """The entities of the store's institutional patterns (whose mentions ingest keeps; none when they cannot be read)."""
        try:
            return frozenset(p.entity_id for p in self.store.registry.all_patterns())
        except Exception as exc:  # the mentions are then worked out on the call
            log.warning("patterns unreadable (%s): chunk mentions of pattern entities are not kept", exc)
            return frozenset()

    def precompute(self, deal_ids: Sequence[str] | None = None, *, parts: frozenset[str] = PARTS | {"lexical"}) -> dict[str, int]:
        """Complete what ingest keeps for fast first calls on chunks already registered: each chunk's risk findings,
        pattern mentions and body token count under the current rules, patterns and encoding (:mod:`precompute`), and
        each deal's BM25 index (:mod:`lexical`); ``parts`` limits it to some of ``findings``, ``mentions``, ``bodies``,
        ``lexical``. For a store ingested before one of them existed, or after a lexicon, rule or pattern change (whose
        chunks an ingest of unchanged files does not touch); the rows of other rules are deleted, those an older version
        of the findings file keeps under the current rules are copied into its layout (:meth:`ChunkFindings.migrate`). ``deal_ids``: default
        every deal the registration ledger records. Returns deal id -> chunks something was computed for (an index
        rebuilt counts its deal's chunks). Nothing served changes: the calls computed the same on the fly."""
        unknown = set(parts) - PARTS - {"lexical"}
        if unknown:
            raise UsageError(f"parts: unknown {sorted(unknown)}; choose from {sorted(PARTS | {'lexical'})}")
        findings = findings_of(self.store)
        entities = self._pattern_entities()
        if deal_ids is None and not (self.store.home / LEDGER).exists():
            raise UsageError(f"this store has no registration ledger ({LEDGER}, written by ingest since issue 16) to list its deals "
                             "from: name them (--deal ID, repeatable)")
        deals = list(deal_ids) if deal_ids is not None else sorted(ledger_deals(self.store.home))
        out: dict[str, int] = {}
        with self._lock:
            if findings is not None:
                findings.migrate()  # an older version's rows under the current rules: copied, not computed again
            for deal_id in deals:
                records = [r for r in self.store.registry.deal_records(deal_id) if sha256_hex(r.content) == r.content_hash]
                if not records and deal_ids is not None:
                    raise IntentError(f"deal_id {deal_id!r} has no registered chunks in this store; nothing to precompute")
                done: set[str] = set()
                if findings is not None:
                    lacking = findings.missing(deal_id, {r.chunk_id: r.content_hash for r in records}, entities)
                    for part in sorted(set(lacking) & parts):
                        todo = lacking[part]
                        findings.compute(((deal_id, r.chunk_id, r.content) for r in records if r.chunk_id in todo), entities, frozenset({part}))
                        done |= todo
                ids = sorted(r.chunk_id for r in records)
                if "lexical" in parts and records and lexical.load(self.store.home, deal_id, ids) is None:
                    self.save_lexical(deal_id)
                    done |= set(ids)
                out[deal_id] = len(done)
            if findings is not None:
                findings.drop_stale(entities)
        return out

    def save_lexical(self, deal_id: str) -> None:
        """Rebuild and keep the deal's BM25 index over its registered chunks (what its deal view would build; a
        failure here costs the first call that time, never an answer)."""
        try:
            records = {r.chunk_id: r.content for r in self.store.registry.deal_records(deal_id) if sha256_hex(r.content) == r.content_hash}
            ids = sorted(records)
            lexical.save(self.store.home, deal_id, ids, [records[c] for c in ids])
        except Exception as exc:  # the view builds its own
            log.warning("deal %s: its BM25 index was not kept (%s); its first call builds it", deal_id, exc)

    # -- planning --------------------------------------------------------------------
    def _plan(self, chunks: list[tuple[DocumentChunk, str, int]], rejected: list[Rejection]
              ) -> tuple[list[_Pending], int, dict[str, list[Any]], dict[str, dict[str, int]]]:
        """The chunks to write, how many are unchanged, each listed deal's registry records (Mem0's listing), and per
        deal the chunks of this ingest whose vectors are all in the index under that deal already (-> their windows)."""
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

        registered: dict[str, set[str] | BackendError] = {}
        listed: dict[str, list[Any]] = {}
        found: dict[str, dict[str, int]] = {}
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
                if not p.needs_vectors:
                    found.setdefault(p.chunk.deal_id, {})[cid] = n
                    p.windows = n
            deal = p.chunk.deal_id
            if deal not in registered:
                try:
                    listed[deal] = self.store.registry.registered_records(deal)
                    registered[deal] = {r.chunk_id for r in listed[deal]}
                except BackendError as exc:  # this deal's lookup failed; the other deals go on
                    registered[deal] = exc
            known = registered[deal]
            if isinstance(known, BackendError):
                rejected.append(Rejection(file=p.file, line=p.line, field="(store)",
                                          error=f"chunk {cid[:12]}… not stored: the registry could not list deal "
                                                f"{deal!r} ({known}); the other deals were stored"))
                continue
            p.needs_registry = cid not in known
            if p.needs_vectors or p.needs_registry:
                pending.append(p)
            else:
                unchanged += 1
        pending.sort(key=lambda p: (p.chunk.deal_id, p.chunk.document_id, p.chunk.page_start, p.chunk.chunk_id))
        return pending, unchanged, listed, found

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

    def _write(self, pending: list[_Pending], *, progress: bool, findings: _BatchFindings | None = None) -> list[Rejection]:
        """Embed and store ``pending``; returns a rejection for each chunk the store refused. ``findings``: each batch's
        risk findings are worked out while the model embeds it and kept by the writer for the chunks it stored.

        One chunk's failed write never stops the others: a failed batch upsert is retried chunk by chunk to
        find the chunk at fault, and a refused registry write is reported for its chunk only. After
        :data:`MAX_CONSECUTIVE_WRITE_FAILURES` refusals in a row the store itself is failing; the chunks not
        yet written are then reported as not attempted instead of being tried one by one.
        """
        if not pending:
            return []
        rc = self.store.config.retrieval
        embedder = self.store.embedder
        now = datetime.now(UTC)
        bar = _progress(len(pending), progress)
        work: queue.Queue[Any] = queue.Queue(maxsize=2)
        failure: list[BaseException] = []
        refused: list[Rejection] = []
        done: set[int] = set()  # ids of the _Pending the writer finished with (stored or refused)
        streak = [0]
        # bytes still to write from pending[i] on (the free-space check runs before every batch)
        left = [0] * (len(pending) + 1)
        for i in range(len(pending) - 1, -1, -1):
            left[i] = left[i + 1] + _bytes_needed(pending[i].chunk)

        def check_space() -> None:
            start = len(done)
            check_free_space(self.store.home, left[start],
                             what=f"{len(pending) - start} chunk(s) still to store ({start} of {len(pending)} stored)")

        def refuse(p: _Pending, what: str, exc: BaseException) -> None:
            p.refused = True
            refused.append(Rejection(file=p.file, line=p.line, field="(store)",
                                     error=f"chunk {p.chunk.chunk_id[:12]}… not stored: the {what} write failed ({exc}); "
                                           "the other chunks were stored; run the ingest again to retry it"))
            streak[0] += 1

        def store_batch(batch: list[_Pending], groups: list[list[VectorPoint]], first_vectors: list[np.ndarray]) -> None:
            ok = [True] * len(batch)
            try:
                # windows > 0 first, window 0 last: its presence marks the chunk's vectors as complete
                self.store.chunks.upsert([pt for g in groups for pt in g[:-1]] + [g[-1] for g in groups if g])
                self.store.chunks.flush()
            except Exception:
                for i, (p, g) in enumerate(zip(batch, groups, strict=True)):
                    if not g:
                        continue
                    try:
                        self.store.chunks.upsert(g)
                        self.store.chunks.flush()
                    except Exception as exc:
                        ok[i] = False
                        refuse(p, "vector", exc)
            for p, vec, good in zip(batch, first_vectors, ok, strict=True):
                if good and p.needs_registry:
                    try:
                        p.memory_id = self.store.registry.register_chunk(p.record, p.chunk.content, vec)
                    except Exception as exc:
                        good = False
                        refuse(p, "registry", exc)
                if good:
                    streak[0] = 0
                    p.written = True
                done.add(id(p))
                bar.update(1)

        def writer() -> None:
            while True:
                item = work.get()
                if item is None:
                    return
                if failure or streak[0] >= MAX_CONSECUTIVE_WRITE_FAILURES:
                    continue
                embedded, worked_out = item
                try:
                    store_batch(*embedded)
                    if findings is not None:
                        findings.keep(worked_out, [p for p in embedded[0] if p.written])
                except BaseException as exc:  # surfaced on the calling thread below
                    failure.append(exc)

        thread = threading.Thread(target=writer, name="retrieval-node-ingest-writer", daemon=True)
        thread.start()
        try:
            # windows per model call: the model sorts a call's windows by length before batching them, so a call
            # of several batches pads less than one batch of consecutive chunks' windows (embedding_call_windows)
            window_budget = max(rc.embedding_call_windows, rc.embedding_batch_size, 1)

            def send(batch: list[_Pending], spans_of: list[list[tuple[int, int]]], texts: list[str]) -> None:
                """One model call: the batch's findings start beside it, the writer gets both."""
                check_space()
                worked_out = findings.start(batch) if findings is not None else None
                work.put((self._embed_batch(batch, spans_of, texts), worked_out))

            batch: list[_Pending] = []
            texts: list[str] = []
            spans_of: list[list[tuple[int, int]]] = []
            for p in pending:
                if failure or streak[0] >= MAX_CONSECUTIVE_WRITE_FAILURES:
                    break
                p.record = self._record(p.chunk, now)
                spans = embedder.window_spans(p.chunk.content, rc.window_tokens, rc.window_overlap_tokens)
                if not p.needs_vectors:
                    spans = spans[:1]  # repair: the registry's vector is the first window's, as on a first ingest
                batch.append(p)
                spans_of.append(spans)
                texts.extend(p.chunk.content[s:e] for s, e in spans)
                if len(texts) >= window_budget:
                    send(batch, spans_of, texts)
                    batch, texts, spans_of = [], [], []
            if batch and not failure:
                send(batch, spans_of, texts)
        finally:
            work.put(None)
            thread.join()
            bar.close()
        if failure:
            exc = failure[0]
            if isinstance(exc, BackendError):
                raise exc
            raise BackendError(f"ingest write failed: {exc}") from exc
        if streak[0] >= MAX_CONSECUTIVE_WRITE_FAILURES:
            last = refused[-1].error if refused else ""
            for p in pending:
                if id(p) not in done:
                    p.refused = True
                    refused.append(Rejection(file=p.file, line=p.line, field="(store)",
                                             error=f"chunk {p.chunk.chunk_id[:12]}… not attempted: the store refused "
                                                   f"{MAX_CONSECUTIVE_WRITE_FAILURES} chunks in a row (last: {last[:200]})"))
        return refused

    def _embed_batch(self, batch: list[_Pending], spans_of: list[list[tuple[int, int]]], texts: list[str]) -> tuple[list[_Pending], list[list[VectorPoint]], list[np.ndarray]]:
        embedder = self.store.embedder
        # windows of window_tokens <= 254 word pieces fit the model: skip the embedder's length check when it has one
        vectors = getattr(embedder, "embed_windows", embedder.embed)(texts)
        groups: list[list[VectorPoint]] = []
        first: list[np.ndarray] = []
        k = 0
        for p, spans in zip(batch, spans_of, strict=True):
            first.append(vectors[k])
            group: list[VectorPoint] = []
            if p.needs_vectors:
                n = p.windows = len(spans)
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
                    group.append(VectorPoint(point_id(p.chunk.chunk_id, w), vectors[k + w], payload))
                group.append(group.pop(0))  # window 0 last (see store_batch)
            groups.append(group)
            k += len(spans)
        return batch, groups, first


def _bytes_needed(chunk: DocumentChunk) -> int:
    """Rough upper estimate of the disk bytes one chunk takes: its text in the vector payload, in Mem0's
    payload, in Mem0's history and in two write-ahead logs; a vector (and its WAL copy) per window in each
    store; a few KB of metadata per record."""
    text = len(chunk.content) * 4  # characters -> UTF-8 bytes, pessimistic
    windows = chunk.token_count // 120 + 1  # 200-word-piece windows, word pieces >= cl100k tokens
    return 5 * text + windows * 4 * 384 * 4 + 16 * 1024


def _sparse_holes(home: Path) -> int:
    """Bytes that files under ``home`` may still claim without growing: qdrant-edge creates its files sparse
    (``ftruncate``) and writes them through ``mmap``, so filling a hole takes disk space at page-fault time,
    where a full disk is a SIGBUS, not an error."""
    holes = 0
    stack = [home]
    while stack:
        d = stack.pop()
        try:
            entries = list(os.scandir(d))
        except OSError:
            continue
        for e in entries:
            try:
                if e.is_dir(follow_symlinks=False):
                    stack.append(Path(e.path))
                elif e.is_file(follow_symlinks=False):
                    st = e.stat(follow_symlinks=False)
                    holes += max(0, st.st_size - st.st_blocks * 512)
            except OSError:
                continue
    return holes


def check_free_space(home: Path, needed: int, *, what: str) -> None:
    """Raise :class:`StorageFullError` unless the disk of ``home`` can take ``needed`` bytes more, plus the
    holes of the store's sparse mmap'd files, plus :data:`FREE_SPACE_RESERVE`.

    Conservative on purpose: every hole is counted as if this write filled it (the payload-index maps are
    written at scattered offsets), because running out of space inside a mapped file kills the process with
    SIGBUS (exit 135) instead of raising, possibly half-way through a write. Files the shards add while
    growing hold the data counted in ``needed``."""
    free = shutil.disk_usage(home).free
    holes = _sparse_holes(home)
    required = needed + holes + FREE_SPACE_RESERVE
    if free < required:
        mib = 1024 * 1024
        raise StorageFullError(
            f"not enough disk space under {home}: {free // mib} MiB free, about {required // mib} MiB needed for "
            f"{what} (data ~{needed // mib} MiB, space the store's memory-mapped files may fill "
            f"~{holes // mib} MiB, reserve {FREE_SPACE_RESERVE // mib} MiB); nothing more was "
            "written. Free space on that disk (or point --store / RETRIEVAL_NODE_HOME at a larger one) and run the "
            "ingest again: chunks already stored are kept and reported unchanged"
        )


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
    """Parse a pattern-memory JSONL file (interfaces.md section 2), with the chunk lines' strict JSON rules."""
    good: list[PatternMemory] = []
    bad: list[Rejection] = []
    name = str(path)
    with open(path, "rb") as fh:
        for line_no, raw in enumerate(fh, start=1):
            raw = raw.strip()
            if not raw:
                continue
            data = load_json_object(raw, file=name, line=line_no)
            if isinstance(data, Rejection):
                bad.append(data)
                continue
            try:
                good.append(PatternMemory.model_validate(data, strict=True))
            except ValidationError as exc:
                bad.append(_rejection_of(exc, file=name, line=line_no, fields=PatternMemory.model_fields))
    return good, bad


def add_patterns(store: Store, patterns: list[PatternMemory], *, keep_mentions: bool = True) -> tuple[int, int]:
    """Store pattern memories in Mem0's global layer; returns (added, unchanged).

    When some were added and ``keep_mentions``, which of the new set of pattern entities each registered chunk names is
    worked out and kept (:meth:`Ingestor.precompute` of ``mentions``; a store without a registration ledger is left
    as it is): otherwise every first call reads the mentions of its candidates itself, ~0.4 ms a chunk with four
    entities. About a minute at 100k chunks."""
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
        if keep_mentions and (store.home / LEDGER).exists():
            try:
                Ingestor(store).precompute(parts=frozenset({"mentions"}))
            except Exception as exc:  # the patterns are stored; first calls work the mentions out
                log.warning("pattern mentions of the registered chunks were not kept (%s); `retrieval-node precompute` keeps them", exc)
    return added, unchanged


__all__ = [
    "FREE_SPACE_RESERVE",
    "MAX_CONSECUTIVE_WRITE_FAILURES",
    "MAX_LINE_BYTES",
    "IngestReport",
    "Ingestor",
    "Rejection",
    "add_patterns",
    "check_free_space",
    "iter_jsonl_files",
    "load_json_object",
    "parse_chunk_line",
    "read_chunks",
    "read_patterns",
]
