"""Read an embedded store's index files into the OS page cache after it opens, and hand back the pages of its
write-ahead logs, in the background.

qdrant-edge drops its segment files from the OS page cache when a shard closes (measured with ``fincore``: every
segment file of a 10k-chunk store held 0 bytes in the cache after ``Store.close()``, ~320 MB before). The next
process to open the store reads what a call needs from disk, page by page through its memory maps: the first call
on a deal took ~800 page faults that went to disk for the deal's Mem0 listing and 100-170 for its vector search. With
the files read back right after open, the first call on each deal of a 100k-chunk store went from p50 323 to 214 ms
(README, *Performance*, "The page cache after open"). The kernel reads them (``posix_fadvise(POSIX_FADV_WILLNEED)``),
not this process: nothing is copied into Python. The process does map more of the cached files as calls touch them
(+115 MB of mapped files in RSS at 100k chunks: clean pages the kernel can take back, but counted).

The kernel reads at most a few MiB per advice (8 MiB here), so the files' data extents (``SEEK_DATA`` /
``SEEK_HOLE``: qdrant preallocates 32 MiB pages that are mostly holes) are advised in windows of
:data:`WINDOW` bytes. Platforms without ``posix_fadvise`` (macOS, Windows) skip it.

Opening a shard reads its write-ahead log through memory maps, every entry of the retained closed segment and the
used part of the open ones (112 MB of a 100k-chunk store's RSS), and nothing reads those pages again until the
next open: a write appends to the open segment, touching only the pages it writes. :func:`page_out_mapped` asks
the kernel to reclaim this process's mapped pages of the files under the ``page_out`` directories
(``madvise(MADV_PAGEOUT)``, Linux 5.4 and later; elsewhere nothing is done). The advice never changes what a page
holds: a clean page is dropped and read again from the file if it is touched, a dirty shared one is written back
first, and a private or anonymous page (if the address were reused between reading ``/proc/self/maps`` and the
advice) could only be swapped out. ``MADV_DONTNEED`` would be quicker to take effect and is not used: on a private
or anonymous mapping it discards the memory.

>>> warmer = PageCacheWarmer([home / "mem0_edge", home / "vectors"], page_out=[home / "vectors" / "wal"]).start()  # doctest: +SKIP
>>> warmer.wait(30); warmer.advised_bytes, warmer.paged_out_bytes                                                 # doctest: +SKIP
"""

from __future__ import annotations

import ctypes
import logging
import os
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

#: Bytes per advice: the kernel's read-ahead of one ``POSIX_FADV_WILLNEED`` call stops near this.
WINDOW = 8 << 20
#: Directories whose files are read at open anyway (qdrant-edge's write-ahead log): not advised.
SKIPPED_DIRS = frozenset({"wal"})

SUPPORTED = hasattr(os, "posix_fadvise") and hasattr(os, "POSIX_FADV_WILLNEED")

#: ``MADV_PAGEOUT`` of the Linux ABI (``asm-generic/mman-common.h``; Python's :mod:`mmap` names it only when built
#: against headers that have it). A kernel before 5.4 refuses it (``EINVAL``) and nothing happens.
MADV_PAGEOUT = 21
#: Where this process's memory maps are listed (Linux).
PROC_MAPS = "/proc/self/maps"


def _madvise() -> Any:
    """libc's ``madvise``, or None where there is none to call (not Linux)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        fn = ctypes.CDLL(None, use_errno=True).madvise
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    fn.restype = ctypes.c_int
    return fn


def mapped_ranges(directories: Sequence[Path], maps: str | None = None) -> list[tuple[int, int, str]]:
    """(start, end, path) of this process's memory maps of files under ``directories`` (``maps``: the text of
    ``/proc/self/maps``, read when not given; an unreadable one lists nothing)."""
    prefixes = tuple(os.path.join(os.path.realpath(d), "") for d in directories)
    if maps is None:
        try:
            with open(PROC_MAPS, encoding="utf-8", errors="replace") as fh:
                maps = fh.read()
        except OSError:
            return []
    out: list[tuple[int, int, str]] = []
    for line in maps.splitlines():
        fields = line.split(maxsplit=5)  # address perms offset dev inode path (the path may hold spaces)
        if len(fields) < 6 or not fields[5].startswith(prefixes):
            continue
        start, _, end = fields[0].partition("-")
        try:
            out.append((int(start, 16), int(end, 16), fields[5]))
        except ValueError:
            continue
    return out


def page_out_mapped(directories: Sequence[Path]) -> int:
    """Ask the kernel to reclaim this process's mapped pages of the files under ``directories``
    (``madvise(MADV_PAGEOUT)``; module docstring); the bytes of the mappings it accepted the advice for, 0 where the
    platform or kernel has no such advice. What the files hold, on disk or through the mappings, does not change."""
    madvise = _madvise()
    if madvise is None or not directories:
        return 0
    done = 0
    for start, end, _path in mapped_ranges(directories):
        if madvise(start, end - start, MADV_PAGEOUT) == 0:  # an advice refused (EINVAL: an older kernel) changes nothing
            done += end - start
    return done


def data_extents(fd: int, size: int) -> Iterator[tuple[int, int]]:
    """(offset, length) of the parts of an open file that hold data; the whole file where the file system cannot
    tell holes apart."""
    seek_data, seek_hole = getattr(os, "SEEK_DATA", None), getattr(os, "SEEK_HOLE", None)
    if seek_data is None or seek_hole is None:
        if size:
            yield 0, size
        return
    pos = 0
    while pos < size:
        try:
            start = os.lseek(fd, pos, seek_data)
        except OSError:  # ENXIO: no data after pos; EINVAL: not supported here
            if pos == 0:
                yield 0, size
            return
        end = os.lseek(fd, start, seek_hole)
        if end > start:
            yield start, end - start
        pos = end


def store_files(roots: Sequence[Path]) -> list[Path]:
    """The files under ``roots`` (directories or files) worth warming, in the order given, each root's sorted."""
    out: list[Path] = []
    for root in roots:
        if root.is_file():
            out.append(root)
        elif root.is_dir():
            out.extend(sorted(p for p in root.rglob("*") if p.is_file() and not SKIPPED_DIRS.intersection(p.relative_to(root).parts)))
    return out


class PageCacheWarmer:
    """From one daemon thread: hands back this process's mapped pages of the files under ``page_out``
    (:func:`page_out_mapped`), then advises the kernel to read ``roots``' files into the page cache.

    ``paged_out_bytes``, ``advised_bytes`` and ``seconds`` say what it did; a file that disappears or cannot be read
    on the way (a compaction replaced it) is skipped. :meth:`close` stops it between two advices and waits for the
    thread.
    """

    def __init__(self, roots: Sequence[Path], *, page_out: Sequence[Path] = ()) -> None:
        self.roots = [Path(r) for r in roots]
        self.page_out = [Path(d) for d in page_out]
        self.paged_out_bytes = 0
        self.advised_bytes = 0
        self.files = 0
        self.skipped = 0
        self.seconds: float | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> PageCacheWarmer:
        if SUPPORTED and self._thread is None:
            self._thread = threading.Thread(target=self._run, name="retrieval-node-page-cache", daemon=True)
            self._thread.start()
        return self

    def run(self) -> int:
        """Warm in the calling thread; returns the bytes advised."""
        if SUPPORTED:
            self._run()
        return self.advised_bytes

    def _run(self) -> None:
        t0 = time.perf_counter()
        try:
            self.paged_out_bytes = page_out_mapped(self.page_out)
            for path in store_files(self.roots):
                if self._stop.is_set():
                    return
                try:
                    self._advise(path)
                    self.files += 1
                except OSError:
                    self.skipped += 1
        finally:
            self.seconds = time.perf_counter() - t0
            log.debug("page cache: %.0f MiB of mapped write-ahead log paged out; %d file(s), %.0f MiB advised in %.2f s (%d skipped)",
                      self.paged_out_bytes / 2**20, self.files, self.advised_bytes / 2**20, self.seconds, self.skipped)

    def _advise(self, path: Path) -> None:
        fd = os.open(path, os.O_RDONLY)
        try:
            size = os.fstat(fd).st_size
            for offset, length in data_extents(fd, size):
                for start in range(offset, offset + length, WINDOW):
                    if self._stop.is_set():
                        return
                    n = min(WINDOW, offset + length - start)
                    os.posix_fadvise(fd, start, n, os.POSIX_FADV_WILLNEED)
                    self.advised_bytes += n
        finally:
            os.close(fd)

    @property
    def done(self) -> bool:
        return self.seconds is not None or not SUPPORTED

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the warming to finish; whether it did within ``timeout``."""
        if self._thread is not None:
            self._thread.join(timeout)
        return self.done

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


__all__ = ["MADV_PAGEOUT", "SUPPORTED", "WINDOW", "PageCacheWarmer", "data_extents", "mapped_ranges", "page_out_mapped", "store_files"]
