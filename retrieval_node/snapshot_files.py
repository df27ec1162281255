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
#: a frame that says it holds more than this is refused before anything is allocated (a snapshot is ~0.1-2 MB)
MAX_SNAPSHOT_BYTES = 512 * 1024 * 1024


def pack(raw: bytes) -> bytes:
    """``raw`` as one zstd frame that records its size (a compressor per call: zstandard's are not thread-safe)."""
    return zstandard.ZstdCompressor(level=LEVEL, write_content_size=True).compress(raw)


def unpack(data: bytes, *, name: str) -> bytes:
    """The bytes a frame written by :func:`pack` holds; :class:`IntegrityError` naming ``name`` for anything else
    (truncated, edited, another format, a frame claiming more than :data:`MAX_SNAPSHOT_BYTES`)."""
    try:
        size = zstandard.frame_content_size(data)
    except zstandard.ZstdError as exc:
        raise IntegrityError(f"audit snapshot {name} is not a zstd frame ({exc}): it was modified or truncated") from exc
    if size < 0 or size > MAX_SNAPSHOT_BYTES:
        what = "does not record its size" if size < 0 else f"claims {size:,} bytes"
        raise IntegrityError(f"audit snapshot {name} {what}: not a snapshot this node wrote")
    try:
        return zstandard.ZstdDecompressor().decompress(data, max_output_size=size)
    except zstandard.ZstdError as exc:
        raise IntegrityError(f"audit snapshot {name} cannot be decompressed ({exc}): it was modified or truncated") from exc


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
    """Write snapshot bytes ``raw`` to ``path`` (compressed when its name says so), atomically (a temporary file,
    renamed) and owner-only (0600); ``durable``: fsync before the rename."""
    data = pack(raw) if path.name.endswith(SUFFIX) else raw
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
    """Rewrite every uncompressed snapshot file of ``directory`` (``aud_*.json``) as its compressed file, durably,
    and remove the original only once the compressed file reads back to the same bytes. A run stopped half way
    leaves both files of one snapshot (the compressed one is read) and the next run finishes it."""
    files = before = after = 0
    if not directory.is_dir():
        return Compressed(0, 0, 0)
    for legacy in sorted(directory.glob(f"aud_*{LEGACY_SUFFIX}")):
        raw = legacy.read_bytes()
        packed = legacy.with_name(legacy.name[: -len(LEGACY_SUFFIX)] + SUFFIX)
        if not (packed.exists() and _same(packed, raw)):
            write(packed, raw)
            if not _same(packed, raw):  # never reached with a working disk; the original stays
                raise IntegrityError(f"{packed} does not read back as {legacy.name}: the original is kept")
        files += 1
        before += len(raw)
        after += packed.stat().st_size
        legacy.unlink()
    if files:
        dir_fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)  # the removals and renames reach the disk with the files
        finally:
            os.close(dir_fd)
    return Compressed(files, before, after)


def _same(packed: Path, raw: bytes) -> bool:
    try:
        return read(packed) == raw
    except (OSError, IntegrityError):
        return False


__all__ = ["LEGACY_SUFFIX", "SUFFIX", "Compressed", "compress_legacy", "locate", "pack", "read", "unpack", "write"]
