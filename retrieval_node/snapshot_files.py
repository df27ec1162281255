"""Audit snapshot files: kept zstd-compressed, read either way.

A snapshot file holds ``{"mac":..,"sha256":..,"snapshot":..}`` (:mod:`retrieval_node.audit`). Since 0.1 (issue 18's
session 25) it is written as ``<audit_id>.json.zst``: a zstd frame of exactly those bytes, level 3 (a 1 MB snapshot
takes about 2 ms and ~100 KB; the candidates' score rows repeat their field names, so they compress about tenfold).
Nothing is read differently: the hash and the MAC are checked on the decompressed bytes, which are the bytes the
uncompressed file would have held. A snapshot written before (``<audit_id>.json``) is read as it is;
:func:`compress_legacy` (``retrieval-node compact``) rewrites those compressed, each checked before its original is
removed.

A leaf module: the standard library and ``zstandard`` (installed with langsmith, a dependency of langchain-core; a
well-kept binding of the reference C library).
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path

import zstandard

from .errors import IntegrityError

#: the name of a snapshot file written now, after its audit id
SUFFIX = ".json.zst"
#: the name of a snapshot file written before snapshots were compressed
LEGACY_SUFFIX = ".json"
#: zstd level: 3 is zstd's default, ~10x on snapshots at ~500 MB/s; higher levels gain little on these rows
LEVEL = 3
#: a frame whose header says it holds more than this is refused before it is decompressed (a snapshot is ~0.1-2 MB)
MAX_SNAPSHOT_BYTES = 64 * 1024 * 1024


def pack(raw: bytes) -> bytes:
    """``raw`` as one zstd frame that records its size (a compressor per call: zstandard's are not thread-safe)."""
    return zstandard.ZstdCompressor(level=LEVEL, write_content_size=True).compress(raw)


def unpack(data: bytes, *, name: str) -> bytes:
    """The bytes of the one frame :func:`pack` wrote; :class:`IntegrityError` naming ``name`` for anything else:
    truncated or damaged, another format, a frame without its recorded size or claiming more than
    :data:`MAX_SNAPSHOT_BYTES` (refused before it is decompressed), bytes after the frame. (The decompressed bytes are
    then checked against their sha256 and MAC by the reader.)"""
    try:
        size = zstandard.frame_content_size(data)
    except zstandard.ZstdError as exc:
        raise IntegrityError(f"audit snapshot {name} is not a zstd frame ({exc}): it was modified or truncated") from exc
    if size < 0 or size > MAX_SNAPSHOT_BYTES:
        what = "does not record its size" if size < 0 else f"claims {size:,} bytes"
        raise IntegrityError(f"audit snapshot {name} {what}: not a snapshot this node wrote")
    reader = zstandard.ZstdDecompressor().decompressobj()
    try:
        out = reader.decompress(data)
    except zstandard.ZstdError as exc:
        raise IntegrityError(f"audit snapshot {name} cannot be decompressed ({exc}): it was modified or truncated") from exc
    if not reader.eof or reader.unused_data or len(out) != size:
        what = "ends before its frame does" if not reader.eof else "has bytes after its frame" if reader.unused_data else "is not the size it records"
        raise IntegrityError(f"audit snapshot {name} {what}: it was modified or truncated")
    return out


def locate(directory: Path, audit_id: str) -> Path:
    """The file of ``audit_id``'s snapshot under ``directory``: its compressed file, or the uncompressed one of a
    snapshot written before compression when only that one exists; for a snapshot not written yet, the compressed
    file's name."""
    packed = directory / f"{audit_id}{SUFFIX}"
    if not packed.exists():
        legacy = directory / f"{audit_id}{LEGACY_SUFFIX}"
        if legacy.exists():
            return legacy
    return packed


def read(path: Path) -> bytes:
    """The snapshot bytes of ``path`` (decompressed when it is a compressed file)."""
    data = path.read_bytes()
    return unpack(data, name=path.name) if path.name.endswith(SUFFIX) else data


def write(path: Path, raw: bytes, *, durable: bool = True) -> None:
    """Write snapshot bytes ``raw`` to ``path``, compressed when its name says so (:func:`atomic_write`)."""
    atomic_write(path, pack(raw) if path.name.endswith(SUFFIX) else raw, durable=durable)


def atomic_write(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Write ``data`` to ``path`` atomically (a temporary file beside it, renamed; removed if the write fails) and
    owner-only (0600); ``durable``: fsync before the rename. The audit journal is written this way too."""
    tmp = path.with_name(path.name + f".tmp{os.getpid()}_{threading.get_ident()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            if durable:
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


@dataclass(frozen=True)
class Compressed:
    """What :func:`compress_legacy` did: files rewritten, their bytes before and after."""

    files: int
    bytes_before: int
    bytes_after: int


def compress_legacy(directory: Path) -> Compressed:
    """Rewrite every uncompressed snapshot file of ``directory`` (``aud_*.json``) as its compressed file and remove
    the original only once the compressed file reads back to the same bytes and its rename has reached the disk.

    A snapshot that has both files (a run stopped half way) is finished: a compressed file that cannot be read (a
    torn write) is written again from the original. A compressed file that reads as a frame but holds other bytes
    than the original is never overwritten (it is the one replay reads): both files are kept, and after the other
    snapshots are done an :class:`IntegrityError` names them."""
    if not directory.is_dir():
        return Compressed(0, 0, 0)
    done: list[tuple[Path, int, int]] = []
    differ: list[str] = []
    for legacy in sorted(directory.glob(f"aud_*{LEGACY_SUFFIX}")):
        raw = legacy.read_bytes()
        packed = legacy.with_name(legacy.name[: -len(LEGACY_SUFFIX)] + SUFFIX)
        held = _readable(packed)
        if held is not None and held != raw:
            differ.append(legacy.name[: -len(LEGACY_SUFFIX)])
            continue
        if held is None:
            write(packed, raw)
            if _readable(packed) != raw:  # never reached with a working disk; the original stays
                raise IntegrityError(f"{packed} does not read back as {legacy.name}: the original is kept")
        done.append((legacy, len(raw), packed.stat().st_size))
    if done:
        _fsync_dir(directory)  # every compressed file's rename is on disk before any original goes
        for legacy, _, _ in done:
            legacy.unlink()
        _fsync_dir(directory)
    if differ:
        raise IntegrityError(f"audit snapshot(s) {', '.join(differ)} in {directory}: the compressed file and the uncompressed "
                             "one hold different snapshots; both are kept (replay reads the compressed one). Compare them and "
                             "remove the one that is not genuine")
    return Compressed(len(done), sum(b for _, b, _ in done), sum(a for _, _, a in done))


def _readable(packed: Path) -> bytes | None:
    """The bytes of compressed file ``packed``, or None when it is missing or cannot be read as one frame."""
    try:
        return read(packed)
    except (OSError, IntegrityError):
        return None


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


__all__ = ["LEGACY_SUFFIX", "SUFFIX", "Compressed", "atomic_write", "compress_legacy", "locate", "pack", "read", "unpack", "write"]
