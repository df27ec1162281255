"""Audit: snapshots on disk and audit entries written back to Mem0 (spec 4.2, 6.2).

Each retrieval journals its :class:`~retrieval_node.models.RetrievalAuditEntry` (with the snapshot's
sha256) in ``<store>/audit/journal.jsonl``, then writes the snapshot (the package exactly as given, the
summary, the intent and every candidate with its score terms) to ``<store>/audit/snapshots/<audit_id>.json.zst``
atomically (zstd-compressed; one written before snapshots were compressed, ``<audit_id>.json``, is read as it is:
:mod:`retrieval_node.snapshot_files`), then writes the entry to Mem0 and takes it off the journal. A crash between the snapshot and the
Mem0 write leaves the entry journaled; it is written on the next open (a journaled entry whose snapshot was
never written belongs to a retrieval that never returned, and is dropped). When Mem0 cannot take the entry
it stays journaled and is written on a later call; it is never lost, and the summary says so.

Replay checks a snapshot against its sha256, the MAC under the store's secret, the ``audit_id`` inside
(must be the file's) and, when the registry is available, the independent Mem0 entry (or its journal
record): same audit id, same ``snapshot_sha256``. Every file is created owner-only (0600, directories 0700).
"""

from __future__ import annotations

import atexit
import hashlib
import logging
import hmac
import json
import os
import threading
import time
import uuid
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import orjson

from collections.abc import Sequence
from datetime import UTC, datetime

from .backends.mem0_registry import Mem0Registry
from .cache import BoundedCache
from .contracts import ContractPlan
from .errors import BackendError, IntegrityError
from .models import ChunkReference, ContextPackage, MaterialRisk, RetrievalAuditEntry, RetrievalIntent, RetrievalSummary, TrustContext, sha256_hex
from .ports import AuditSink
from . import snapshot_files
from .values import CoverageReport, Scored, Selection


#: Sorted keys, str keys for others, datetimes through ``default=str`` as the stdlib encoder did.
_ORJSON_CANONICAL = orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS | orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_SUBCLASS


def canonical_json(obj: Any) -> bytes:
    """The canonical bytes of a snapshot or a part of one: sorted keys, compact, UTF-8 (orjson)."""
    return orjson.dumps(obj, option=_ORJSON_CANONICAL, default=str)
_SNAPSHOT_HEAD = b'{"sha256":"'
_MAC_HEAD = b'{"mac":"'
_SNAPSHOT_MID = b'","snapshot":'


def _mac(key: bytes, body: bytes) -> str:
    return hmac.new(key, b"retrieval-node snapshot\x00" + body, hashlib.sha256).hexdigest()


def _split_snapshot(raw: bytes) -> tuple[str | None, str | None, bytes | None]:
    """(mac, sha256, body) of a snapshot file exactly as written (``{"mac":..,"sha256":..,"snapshot":..}``, or
    without the mac as older files were), or (None, None, None) when it is not laid out that way."""
    sep = b'","sha256":"'
    if raw.startswith(_MAC_HEAD):
        mac_end = len(_MAC_HEAD) + 64
        if raw[mac_end:mac_end + len(sep)] != sep:
            return None, None, None
        mac: bytes | None = raw[len(_MAC_HEAD):mac_end]
        sha_start = mac_end + len(sep)
    elif raw.startswith(_SNAPSHOT_HEAD):
        mac, sha_start = None, len(_SNAPSHOT_HEAD)
    else:
        return None, None, None
    sha_end = sha_start + 64
    if raw[sha_end:sha_end + len(_SNAPSHOT_MID)] != _SNAPSHOT_MID or not raw.endswith(b"}"):
        return None, None, None
    return (mac.decode("ascii", "replace") if mac is not None else None), raw[sha_start:sha_end].decode("ascii", "replace"), raw[sha_end + len(_SNAPSHOT_MID):-1]


log = logging.getLogger(__name__)

#: Mem0 metadata key of the fallback note a retrieval's summary got because its entry was journaled (the note
#: is known only after the snapshot is written; replay appends it so it returns the summary as given).
SUMMARY_NOTE = "summary_note"


def _check_shape(snap: dict[str, Any], audit_id: str, path: Path) -> None:
    """Refuse a snapshot whose parts replay reads are not the objects it wrote (an IntegrityError naming the file,
    never a traceback further on)."""
    problems = []
    for key in ("intent", "package", "summary"):
        if not isinstance(snap.get(key), dict):
            problems.append(f"{key} is {'missing' if key not in snap else type(snap[key]).__name__}")
    if not problems:
        if not isinstance(snap["intent"].get("deal_id"), str):
            problems.append("intent.deal_id is not a string")
        for key, model in (("package", ContextPackage), ("summary", RetrievalSummary)):
            try:
                model.model_validate(snap[key])
            except ValueError as exc:  # pydantic's ValidationError is a ValueError
                problems.append(f"{key}: {str(exc).splitlines()[0]}")
    if problems:
        raise IntegrityError(f"audit snapshot {audit_id} ({path}) is not a snapshot this node wrote: {'; '.join(problems)}")


def _checked_id(audit_id: str) -> str:
    """``audit_id`` when it is one (``aud_`` and letters and digits: a file name that cannot leave the snapshot
    directory), else ValueError."""
    if not audit_id.startswith("aud_") or not audit_id[4:].isalnum():
        raise ValueError(f"not an audit id: {audit_id!r}")
    return audit_id


def new_audit_id() -> str:
    return f"aud_{uuid.uuid4().hex}"


def private_dir(path: Path) -> None:
    """Create ``path`` (and missing parents) owner-only: 0700 (an existing directory of ours is tightened)."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        if path.stat().st_uid == os.getuid() and path.stat().st_mode & 0o077:
            os.chmod(path, 0o700)
    except OSError:
        pass


def _atomic_write(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Write ``data`` to ``path`` atomically, owner-only, its directory made owner-only first
    (:func:`~retrieval_node.snapshot_files.atomic_write`)."""
    private_dir(path.parent)
    snapshot_files.atomic_write(path, data, durable=durable)


_SHARED_LOCK = threading.Lock()
#: Per journal file: (journal lock, flush lock, audit ids journaled and not yet snapshotted) shared by every
#: AuditLog of the process on that store, so one instance never drops another's entry in flight.
_SHARED: dict[str, tuple[threading.Lock, threading.RLock, set[str]]] = {}


def _shared(path: Path) -> tuple[threading.Lock, threading.RLock, set[str]]:
    key = os.path.abspath(path)
    with _SHARED_LOCK:
        got = _SHARED.get(key)
        if got is None:
            got = _SHARED[key] = (threading.Lock(), threading.RLock(), set())
        return got


class AuditLog:
    """Writes snapshots and Mem0 audit entries for one store.

    >>> log = AuditLog(store.home / "audit", store.registry)     # doctest: +SKIP
    >>> log.record(entry, snapshot, audit_id="aud_...")          # doctest: +SKIP
    """

    def __init__(self, directory: Path, registry: Mem0Registry | None, *, background: bool = False, key: bytes | None = None) -> None:
        """``registry`` may be None to only read snapshots (replay needs no backend).

        With ``background=True`` the Mem0 entry is appended to the journal and written by a
        writer thread, off the retrieval's path; the journal (in the OS page cache before the
        call returns) survives a crash of the process and is written on the next start.
        """
        self.directory = directory
        self.registry = registry
        self.background = background
        self.key = key  # the store's secret: snapshots are MACed with it and checked against it
        self._journal_lock, self._flush_lock, self._inflight = _shared(directory / "journal.jsonl")
        self._fresh: set[str] = set()  # journaled by this instance, never tried: no need to ask Mem0 whether written
        self._wake = threading.Event()
        self._idle = threading.Event()
        self._idle.set()
        self._writer: threading.Thread | None = None
        self._closed = False
        self._atexit = False
        self.last_error: str | None = None
        if registry is not None and self.journal_path.exists():
            self._recover()

    def _recover(self) -> None:
        """On open: entries a previous process journaled and did not write (Mem0 down, or a crash between the
        snapshot and the Mem0 write) go to Mem0 now (``background``: the writer starts on them)."""
        if self.background:
            self._kick()
            return
        try:
            self.flush_journal()
        except Exception as exc:  # the entries stay journaled; the next write tries again
            self.last_error = repr(exc)

    @property
    def journal_path(self) -> Path:
        return self.directory / "journal.jsonl"

    def snapshot_path(self, audit_id: str) -> Path:
        """The file of ``audit_id``'s snapshot (:func:`~retrieval_node.snapshot_files.locate`): compressed, or
        uncompressed when it was written before snapshots were compressed; read it with :meth:`snapshot_bytes`."""
        return snapshot_files.locate(self.directory / "snapshots", _checked_id(audit_id))

    def snapshot_bytes(self, audit_id: str) -> bytes:
        """The bytes of ``audit_id``'s snapshot file as written (``{"mac":..,"sha256":..,"snapshot":..}``),
        decompressed; unchecked (:meth:`read_snapshot` checks them)."""
        return snapshot_files.read(self.snapshot_path(audit_id))

    def write_snapshot(self, audit_id: str, snapshot: dict[str, Any]) -> str:
        """Store the snapshot; returns the sha256 of its canonical JSON (kept in the Mem0 entry).

        The canonical body (sorted keys, no whitespace, UTF-8) is serialised once with orjson (the
        stdlib encoder took ~10 ms of a call, all of it holding the GIL) and embedded as is, so
        :meth:`read_snapshot` checks the hash on the stored bytes themselves. With the store's secret
        ``key``, the file also carries ``mac``: HMAC-SHA256 of the body under the key, which no one
        without the key can recompute for an edited body.
        """
        body = canonical_json(snapshot)
        digest = hashlib.sha256(body).hexdigest()
        self._write_body(audit_id, body, digest)
        return digest

    def _write_body(self, audit_id: str, body: bytes, digest: str) -> None:
        head = _SNAPSHOT_HEAD
        if self.key is not None:
            head = _MAC_HEAD + _mac(self.key, body).encode() + b'","sha256":"'
        path = self.directory / "snapshots" / f"{_checked_id(audit_id)}{snapshot_files.SUFFIX}"
        private_dir(path.parent)
        snapshot_files.write(path, head + digest.encode() + _SNAPSHOT_MID + body + b"}")

    def write_journaled(self, audit_id: str, snapshot: dict[str, Any], entry: RetrievalAuditEntry, *,
                        vector: np.ndarray | None) -> tuple[str, str | None]:
        """The audit stage of a store with a registry: journal the Mem0 entry (with the snapshot's sha256), write
        the snapshot, then write the entry to Mem0 (``background``: the writer thread does). Returns the digest and
        the fallback note when the entry stayed journaled (None when it reached Mem0 or is the writer's to write).

        A crash after the journal write and before the Mem0 write leaves the entry journaled: the next open writes
        it (:meth:`flush_journal`). Should the snapshot write fail, the entry is taken off the journal again.
        """
        if self.registry is None:
            raise ValueError("this AuditLog was opened read-only (no registry)")
        rendered = render_audit(audit_id, snapshot, entry, vector=vector)
        return rendered.digest, self.write_rendered(rendered)

    def write_rendered(self, rendered: RenderedAudit) -> str | None:
        """:meth:`write_journaled` for a snapshot and entry already rendered (:func:`render_audit`; a pool worker
        renders them, the process that owns the store writes them): journal, snapshot, Mem0, in that order.
        Returns the ``audit_journaled`` note when Mem0 did not take the entry, else None."""
        if self.registry is None:
            raise ValueError("this AuditLog was opened read-only (no registry)")
        audit_id = rendered.audit_id
        self._inflight.add(audit_id)
        try:
            self._journal(self._item(rendered.deal_id, rendered.text, rendered.metadata, rendered.vector), durable=not self.background)
            try:
                self._write_body(audit_id, rendered.body, rendered.digest)
            except BaseException:
                self._remove_journaled({audit_id})
                raise
        finally:
            self._inflight.discard(audit_id)
        return self._deliver(audit_id)

    @staticmethod
    def _item(deal_id: str, text: str, metadata: dict[str, Any], vector: np.ndarray | None) -> dict[str, Any]:
        item: dict[str, Any] = {"deal_id": deal_id, "text": text, "metadata": metadata}
        if vector is not None:  # the query vector travels with the entry, so whoever writes it never runs the model
            item["vector"] = [round(float(x), 7) for x in vector]
        return item

    def _deliver(self, audit_id: str) -> str | None:
        """Write the journaled entry ``audit_id`` to Mem0 (sync) or wake the writer (background)."""
        if self.background:
            self._kick()
            return None
        with self._flush_lock:
            self.flush_journal()
            pending = self.journaled(audit_id)
            if pending is None:
                return None
            note = (f"audit_journaled: Mem0 did not take audit entry {audit_id} ({self.last_error}); "
                    f"kept in {self.journal_path} for a later write")
            # the note is part of the summary returned; it goes with the entry so replay returns that summary
            self._rewrite_journaled(audit_id, lambda item: {**item, "metadata": {**item["metadata"], SUMMARY_NOTE: note}})
            return note

    def read_snapshot(self, audit_id: str, *, allow_legacy: bool = False) -> dict[str, Any]:
        """The stored snapshot of ``audit_id``, after checking it: its sha256, its MAC under the store's secret, that
        the file holds that audit (a snapshot copied or linked under another audit's name is refused) and, with a
        registry, that the independent Mem0 entry of that audit (or its journal record) names the same audit and
        the same ``snapshot_sha256``. The summary comes back as it was returned (with the ``audit_journaled`` note
        the Mem0 entry keeps, when the entry had to be journaled).

        A snapshot without a MAC (written before snapshots carried one, or stripped of it) is refused in a store
        that has a secret unless ``allow_legacy``: its hash alone proves nothing against someone who can write
        the file. Any failure raises :class:`IntegrityError`.
        """
        path = self.snapshot_path(audit_id)
        if not path.exists():
            raise FileNotFoundError(f"no audit snapshot {audit_id} in {self.directory}")
        try:
            try:
                raw = snapshot_files.read(path)
            except FileNotFoundError:
                if path.name.endswith(snapshot_files.SUFFIX):
                    raise
                path = self.snapshot_path(audit_id)  # ``compact`` replaced the uncompressed file by its compressed one
                raw = snapshot_files.read(path)
        except OSError as exc:
            raise IntegrityError(f"audit snapshot {audit_id} ({path}) cannot be read: {exc.strerror or exc}") from exc
        mac, sha, body = _split_snapshot(raw)
        if body is None:  # not byte-for-byte as written (re-formatted, or modified): re-derive the canonical body
            try:
                wrapper = json.loads(raw.decode("utf-8"))
                snap_obj = wrapper["snapshot"]
                if not isinstance(snap_obj, dict):
                    raise TypeError(f"its snapshot is a {type(snap_obj).__name__}, not an object")
            except (ValueError, KeyError, TypeError, RecursionError) as exc:
                what = "empty" if not raw else f"{exc.__class__.__name__}: {exc}"
                raise IntegrityError(f"audit snapshot {audit_id} ({path}) is not a snapshot file ({what})") from exc
            std = json.dumps(snap_obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str).encode()
            body = canonical_json(snap_obj)
            sha = wrapper.get("sha256")
            mac = wrapper.get("mac")
            if sha not in (hashlib.sha256(std).hexdigest(), hashlib.sha256(body).hexdigest()):
                raise IntegrityError(f"audit snapshot {audit_id} does not match its hash: it was modified after it was written")
            if sha == hashlib.sha256(std).hexdigest():
                body = std
        elif hashlib.sha256(body).hexdigest() != sha:
            raise IntegrityError(f"audit snapshot {audit_id} does not match its hash: it was modified after it was written")
        if mac is not None:
            if self.key is None:
                raise IntegrityError(f"audit snapshot {audit_id} carries a MAC but the store's secret (secret.key) is missing: it cannot be verified")
            if not isinstance(mac, str) or not mac.isascii() or not hmac.compare_digest(mac, _mac(self.key, body)):
                raise IntegrityError(f"audit snapshot {audit_id} fails its MAC: it was modified (or written) by someone without the store's secret")
        elif not allow_legacy:  # with or without a key: a snapshot without a MAC is trusted only when the caller says so
            raise IntegrityError(f"audit snapshot {audit_id} has no MAC: written before snapshots carried one, or stripped of it; "
                                 "replay it with allow_legacy=True (retrieval-node replay --legacy) only if you trust the file")
        try:
            snap = json.loads(body)
        except (ValueError, RecursionError) as exc:
            raise IntegrityError(f"audit snapshot {audit_id} ({path}) is not a snapshot file ({exc.__class__.__name__}: {exc})") from exc
        if not isinstance(snap, dict):
            raise IntegrityError(f"audit snapshot {audit_id} ({path}) is not a snapshot file (its snapshot is a {type(snap).__name__})")
        if snap.get("audit_id") != audit_id:
            raise IntegrityError(f"the snapshot file of {audit_id} holds audit {snap.get('audit_id')!r}: it was copied or linked under another name")
        _check_shape(snap, audit_id, path)
        if self.registry is not None:
            self._check_entry(snap, audit_id, str(sha))
        return snap

    def _check_entry(self, snap: dict[str, Any], audit_id: str, sha: str) -> None:
        """The snapshot against the independent record of its audit: the Mem0 entry, or its journal record while
        it waits there. Both must name ``audit_id`` and the snapshot's sha256; neither existing is a forgery (a
        snapshot no retrieval of this store wrote). Mem0 unreachable: only the journal is checked, said in the log."""
        deal_id = snap["intent"]["deal_id"]
        records: list[dict[str, Any]] = []
        pending = self.journaled(audit_id)
        if pending is not None:
            records.append(pending["metadata"])
        reached = True
        try:
            records.extend(self.registry.audit_entries(deal_id, audit_id=audit_id))  # type: ignore[union-attr]
        except BackendError as exc:
            reached = False
            log.warning("replay of %s: Mem0 unreachable (%s); the snapshot was checked against its hash, MAC and id only", audit_id, exc)
        if not records:
            if not reached:
                return
            raise IntegrityError(f"audit snapshot {audit_id} has no audit entry in Mem0 (deal {deal_id}) nor in the journal: "
                                 "no retrieval of this store recorded it")
        for rec in records:
            if rec.get("audit_id") != audit_id:
                raise IntegrityError(f"the Mem0 audit entry found for {audit_id} names audit {rec.get('audit_id')!r}")
            if rec.get("snapshot_sha256") != sha:
                raise IntegrityError(f"audit snapshot {audit_id} is not the one its Mem0 audit entry recorded (sha256 "
                                     f"{str(rec.get('snapshot_sha256'))[:16]}…, the file has {sha[:16]}…): it was replaced")
        note = next((rec[SUMMARY_NOTE] for rec in records if rec.get(SUMMARY_NOTE)), None)
        if note:
            snap["summary"]["fallbacks"] = [*snap["summary"].get("fallbacks", []), note]

    def record(self, entry: RetrievalAuditEntry, *, audit_id: str, snapshot_sha256: str, vector: np.ndarray | None) -> str | None:
        """Write the Mem0 audit entry; on failure journal it. Returns a fallback note, or None."""
        if self.registry is None:
            raise ValueError("this AuditLog was opened read-only (no registry)")
        text, metadata = self._memory(entry, audit_id, snapshot_sha256)
        self._journal(self._item(entry.deal_id, text, metadata, vector), durable=not self.background)
        return self._deliver(audit_id)

    def flush_journal(self) -> int:
        """Write journaled entries to Mem0 in order; an entry that fails stays journaled with all after it.

        An entry whose snapshot is still being written (by this process) waits for the next flush; one whose
        snapshot does not exist and is not being written belongs to a retrieval that crashed before it
        returned a package: it is dropped (logged). Entries appended while this runs are kept for the next
        flush. Returns how many were written.
        """
        with self._flush_lock:
            if self.registry is None:
                return 0
            with self._journal_lock:
                if not self.journal_path.exists():
                    return 0
                lines = [ln for ln in self.journal_path.read_text(encoding="utf-8").splitlines() if ln.strip()]
            written = 0
            done: set[str] = set()
            failed = False
            for ln in lines:
                try:
                    item = json.loads(ln)
                    audit_id = str(item["metadata"]["audit_id"])
                except (ValueError, KeyError, TypeError) as exc:
                    log.warning("audit journal %s: an unreadable line was skipped (%s): %.80s", self.journal_path, exc, ln)
                    done.add(ln)
                    continue
                if audit_id in self._inflight:
                    continue  # its snapshot is being written: the writer of that retrieval delivers it
                if not self._snapshot_exists(audit_id):
                    log.warning("audit journal %s: entry %s dropped: its snapshot was never written (the retrieval "
                                "stopped before it returned a package)", self.journal_path, audit_id)
                    done.add(ln)
                    continue
                vec = item.get("vector")
                try:
                    # idempotent: an add that failed late (Mem0 stored the memory, then its history write
                    # failed) must not be written twice
                    if audit_id not in self._fresh and self._already_written(item):
                        written += 1
                        done.add(ln)
                        continue
                    self._fresh.discard(audit_id)
                    self.registry.add_audit(item["deal_id"], item["text"], item["metadata"],
                                            vector=np.asarray(vec, dtype=np.float32) if vec is not None else None)
                except BackendError as exc:
                    self.last_error = str(exc)
                    failed = True
                    break
                written += 1
                done.add(ln)
            if not failed:
                self.last_error = None
            if done:
                with self._journal_lock:
                    now = [ln for ln in self.journal_path.read_text(encoding="utf-8").splitlines() if ln.strip()]
                    self._write_journal([ln for ln in now if ln not in done])
            return written

    def journaled(self, audit_id: str) -> dict[str, Any] | None:
        """The journal record of ``audit_id`` while it waits for Mem0, else None."""
        with self._journal_lock:
            if not self.journal_path.exists():
                return None
            text = self.journal_path.read_text(encoding="utf-8")
        if audit_id not in text:
            return None
        for ln in text.splitlines():
            if audit_id in ln:
                try:
                    item = json.loads(ln)
                except ValueError:
                    continue
                if (item.get("metadata") or {}).get("audit_id") == audit_id:
                    return item
        return None

    def _snapshot_exists(self, audit_id: str) -> bool:
        try:
            return self.snapshot_path(audit_id).exists()
        except ValueError:
            return False

    def _write_journal(self, lines: list[str]) -> None:
        """Replace the journal by ``lines`` (caller holds the journal lock)."""
        if lines:
            _atomic_write(self.journal_path, ("\n".join(lines) + "\n").encode())
        else:
            self.journal_path.unlink(missing_ok=True)

    def _edit_journal(self, audit_ids: set[str], edit: Any) -> None:
        """Apply ``edit`` (entry -> entry, or None to drop it) to the journal entries of ``audit_ids``; other lines,
        unreadable ones included, are kept as they are."""
        with self._journal_lock:
            if not self.journal_path.exists():
                return
            out = []
            for ln in self.journal_path.read_text(encoding="utf-8").splitlines():
                if not ln.strip():
                    continue
                if any(a in ln for a in audit_ids):
                    try:
                        item = json.loads(ln)
                    except ValueError:
                        item = None
                    if item is not None and (item.get("metadata") or {}).get("audit_id") in audit_ids:
                        changed = edit(item)
                        if changed is None:
                            continue
                        ln = json.dumps(changed, sort_keys=True, default=str)
                out.append(ln)
            self._write_journal(out)

    def _rewrite_journaled(self, audit_id: str, change: Any) -> None:
        self._edit_journal({audit_id}, change)

    def _remove_journaled(self, audit_ids: set[str]) -> None:
        self._edit_journal(audit_ids, lambda item: None)
        self._fresh -= audit_ids

    def _already_written(self, item: dict[str, Any]) -> bool:
        audit_id = (item.get("metadata") or {}).get("audit_id")
        if not audit_id or self.registry is None:
            return False
        return bool(self.registry.audit_entries(item["deal_id"], audit_id=audit_id))

    def wait(self, timeout: float = 30.0) -> bool:
        """Block until the background writer has nothing left to write (True) or the timeout passes."""
        if not self.background:
            return self.pending() == 0
        self._kick()
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self._idle.wait(0.05) and self.pending() == 0:
                return True
            if self.last_error and self.pending():
                return False
        return self.pending() == 0

    def close(self) -> None:
        """Stop the writer after one last flush (what fails stays journaled for the next start)."""
        self._closed = True
        self._wake.set()
        if self._writer is not None:
            self._writer.join(timeout=30)

    def _kick(self) -> None:
        self._idle.clear()
        if self._writer is None or not self._writer.is_alive():
            self._closed = False
            self._writer = threading.Thread(target=self._run_writer, name="retrieval-node-audit-writer", daemon=True)
            self._writer.start()
            if not self._atexit:
                atexit.register(self.close)  # the interpreter waits for pending entries instead of dropping them
                self._atexit = True
        self._wake.set()

    def _run_writer(self) -> None:
        while True:
            self._wake.wait(1.0)
            self._wake.clear()
            try:
                self.flush_journal()
            except Exception as exc:  # never let the writer die silently: the entry stays journaled
                self.last_error = repr(exc)
            if self.pending() == 0 or self.last_error:
                self._idle.set()
            if self._closed:
                return

    def pending(self) -> int:
        if not self.journal_path.exists():
            return 0
        return sum(1 for ln in self.journal_path.read_text(encoding="utf-8").splitlines() if ln.strip())

    def _journal(self, item: dict[str, Any], *, durable: bool = True) -> None:
        with self._journal_lock:
            private_dir(self.journal_path.parent)
            fd = os.open(self.journal_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            with os.fdopen(fd, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(item, sort_keys=True, default=str) + "\n")
                fh.flush()
                if durable:
                    os.fsync(fh.fileno())
            self._fresh.add(str((item.get("metadata") or {}).get("audit_id")))

    @staticmethod
    def _memory(entry: RetrievalAuditEntry, audit_id: str, snapshot_sha256: str) -> tuple[str, dict[str, Any]]:
        text = (
            f"Retrieval {audit_id} for {entry.agent_id} ({entry.intent_id}) on deal {entry.deal_id}: "
            f"{entry.final_chunks} of {entry.candidates_found} candidate chunks selected, "
            f"risk flags {', '.join(entry.risk_flags) or 'none'}, coverage {entry.coverage_completeness:.2f}, "
            f"package {entry.context_package_hash[:16]}"
        )
        # one JSON string, not a nested object: Mem0 deep-copies metadata three times per add and qdrant converts it
        # field by field, and an entry lists every excluded candidate (hundreds on a large deal); read back as a dict
        # by Mem0Registry.audit_entries
        data = canonical_json(entry.model_dump(mode="json")).decode()
        metadata = {
            "audit_id": audit_id,
            "intent_id": entry.intent_id,
            # Mem0 reserves agent_id for its scope; the requesting agent is kept under another key.
            "requesting_agent_id": entry.agent_id,
            "chunks_inspected": entry.candidates_found,
            "chunks_selected": entry.final_chunks,
            "risk_distribution": {k: entry.risk_flags.count(k) for k in sorted(set(entry.risk_flags))},
            "context_package_hash": entry.context_package_hash,
            "snapshot_sha256": snapshot_sha256,
            "audit_entry": data,
        }
        return text, metadata


class RenderedAudit(NamedTuple):
    """A retrieval's audit, rendered and not yet written: the snapshot's canonical bytes and sha256, the Mem0 entry's
    text and metadata (which name that sha256) and the query vector that goes with the entry. Plain data: it
    crosses a process pipe (a pool worker renders, the process owning the store writes: :meth:`AuditLog.write_rendered`)."""

    audit_id: str
    body: bytes
    digest: str
    deal_id: str
    text: str
    metadata: dict[str, Any]
    vector: np.ndarray | None


def render_audit(audit_id: str, snapshot: dict[str, Any], entry: RetrievalAuditEntry, *, vector: np.ndarray | None) -> RenderedAudit:
    """The snapshot's canonical bytes and the Mem0 entry pointing at them (the GIL-bound part of the audit stage)."""
    body = canonical_json(snapshot)
    digest = hashlib.sha256(body).hexdigest()
    text, metadata = AuditLog._memory(entry, audit_id, digest)
    return RenderedAudit(audit_id, body, digest, entry.deal_id, text, metadata, vector)


def _kept(body: bytes) -> bytes:
    """An exact-size copy of orjson's output: orjson's bytes keep the buffer it wrote into (about 4 KB for a
    350-byte row), which a cache of 50,000 rows turned into ~200 MB of RSS."""
    return bytes(memoryview(body))


class SnapshotRows:
    """The snapshot's ``candidates`` and ``rejected`` lists as pre-serialised JSON (orjson fragments).

    A row is a pure function of its key (chunk id and fields, origin, every score term), so its canonical
    bytes are kept and reused: building hundreds of dicts per call and serialising them held the GIL
    for about a quarter of a call. The snapshot's bytes are the same as serialising the dicts.
    """

    #: rows kept: those of the recent calls on the deals a deal cache holds (12 deals x 3 agents x a few hundred
    #: candidates), not more: a row costs ~350 bytes and its key ~500 more (50,000 rows held ~43 MB)
    LIMIT = 16_384

    def __init__(self) -> None:
        self._rows: BoundedCache[tuple[object, ...], bytes] = BoundedCache(self.LIMIT)

    def candidates(self, items: Sequence[tuple[str, Scored]]) -> orjson.Fragment:
        out = []
        for cid, s in items:
            c = s.chunk
            key = ("c", cid, c.section_type, c.page_range, c.document_id, s.origin, s.terms.key())
            body = self._rows.get(key)
            if body is None:
                body = self._rows.put(key, _kept(canonical_json({"chunk_id": cid, "section_type": c.section_type, "page_range": c.page_range,
                                                                 "document_id": c.document_id, "origin": s.origin, "terms": s.terms.as_dict()})))
            out.append(body)
        return orjson.Fragment(b"[" + b",".join(out) + b"]")

    def rejected(self, items: Sequence[tuple[str, str]]) -> orjson.Fragment:
        out = []
        for cid, why in items:
            key = ("r", cid, why)
            body = self._rows.get(key)
            if body is None:
                body = self._rows.put(key, _kept(canonical_json({"chunk_id": cid, "reason": why})))
            out.append(body)
        return orjson.Fragment(b"[" + b",".join(out) + b"]")


def record_retrieval(
    sink: AuditSink,
    rows: SnapshotRows,
    *,
    intent: RetrievalIntent,
    plan: ContractPlan,
    trust: TrustContext,
    package: ContextPackage,
    refs: Sequence[ChunkReference],
    sel: Selection,
    scored: dict[str, Scored],
    report: CoverageReport,
    visible_text: str,
    risk_distribution: dict[str, int],
    material_risks: Sequence[MaterialRisk] = (),
    confidence: float,
    needs_human: bool,
    fallbacks: Sequence[str],
    timings: dict[str, float],
    vector: np.ndarray | None,
) -> tuple[RetrievalSummary, str | None]:
    """The audit stage: the summary, the snapshot of exactly what the model saw, the audit entry pointing at it
    (journaled before the snapshot is written). Returns the summary to give the caller (the one in the snapshot,
    plus the ``audit_journaled`` note when Mem0 did not take the entry; replay returns the same) and that note.
    ``timings`` are the stages before this one: the summary holds no audit or total time (those are in
    :class:`~retrieval_node.models.RetrievalMetrics`), so the summary given and the one replayed are the same."""
    audit_id = new_audit_id()
    selected_ids = [r.chunk_id for r in refs if not r.redacted]
    entry = RetrievalAuditEntry(
        timestamp=datetime.now(UTC), deal_id=intent.deal_id, intent_id=intent.intent_id, agent_id=intent.agent_id,
        query_text=intent.query_text, target_sections=plan.sections, risk_profile=intent.risk_profile.value,
        max_tokens=intent.max_tokens_budget, candidates_found=len(scored), candidates_filtered=len(scored) - len(refs),
        final_chunks=len(refs), context_package_hash=package.package_hash,
        exclusions=sorted(f"{cid}: {why}" for cid, why in sel.excluded.items()),
        risk_flags=sorted(k for k, n in risk_distribution.items() for _ in range(n)),
        confidence_score=min(1.0, confidence), coverage_completeness=report.score, human_review_required=needs_human,
    )
    summary = RetrievalSummary(
        audit_id=audit_id,
        chunks_inspected=len(scored),
        chunks_selected=len(refs),
        tokens_selected=package.total_tokens,
        risk_distribution=risk_distribution,
        structural_coverage_score=report.score,
        missing_zones=report.missing,
        needs_human_input=needs_human,
        fallbacks=list(fallbacks),
        latency_ms={k: round(v, 3) for k, v in timings.items()},
        material_risks=list(material_risks),
    )
    snapshot = {
        "audit_id": audit_id,
        "intent": intent.model_dump(mode="json"),
        "contract": plan.model_dump(mode="json"),
        "trust": trust.model_dump(mode="json"),
        "package": package.model_dump(mode="json"),
        "summary": summary.model_dump(mode="json"),
        "selected": [{"chunk_id": cid, "reason": sel.reasons.get(cid, ""), "origin": sel.chosen[cid].origin, "terms": sel.chosen[cid].terms.as_dict(),
                      "excerpt": list(sel.chosen[cid].span) if sel.chosen[cid].span is not None else None} for cid in selected_ids],
        "rejected": rows.rejected(sorted(sel.excluded.items())),
        "candidates": rows.candidates(sorted(scored.items())),
        "coverage": {"required": report.required, "covered": report.covered, "partial": {k: list(v) for k, v in report.partial.items()},
                     "absent": report.absent, "unfit": report.unfit},
        "visible_text_sha256": sha256_hex(visible_text),
        "citations": {f"E{i}": r.chunk_id for i, r in enumerate(refs, start=1)},
        "audit_entry": entry.model_dump(mode="json"),
    }
    if isinstance(sink, AuditLog):
        # journal, snapshot, Mem0: a crash anywhere leaves nothing unrecorded (a pool worker's sink renders both and
        # the process that owns the store writes them in that order, AuditLog.write_rendered)
        _, note = sink.write_journaled(audit_id, snapshot, entry, vector=vector)
    else:  # another AuditSink: snapshot, then entry
        digest = sink.write_snapshot(audit_id, snapshot)
        note = sink.record(entry, audit_id=audit_id, snapshot_sha256=digest, vector=vector)
    if note:  # the entry stayed journaled: the summary says so (and replay adds the same note, kept with the entry)
        summary = summary.model_copy(update={"fallbacks": [*summary.fallbacks, note]})
    return summary, note


__all__ = ["AuditLog", "RenderedAudit", "SnapshotRows", "new_audit_id", "record_retrieval", "render_audit"]
