"""Read an embedded store's index files into the OS page cache after it opens, in the background.

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

>>> warmer = PageCacheWarmer([home / "mem0_edge", home / "vectors"]).start()    # doctest: +SKIP
>>> warmer.wait(30); warmer.advised_bytes                                         # doctest: +SKIP
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

log = logging.getLogger(__name__)

#: Bytes per advice: the kernel's read-ahead of one ``POSIX_FADV_WILLNEED`` call stops near this.
WINDOW = 8 << 20
#: Directories whose files are read at open anyway (qdrant-edge's write-ahead log): not advised.
SKIPPED_DIRS = frozenset({"wal"})

SUPPORTED = hasattr(os, "posix_fadvise") and hasattr(os, "POSIX_FADV_WILLNEED")


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
    """Advises the kernel to read ``roots``' files into the page cache, from one daemon thread.

    ``advised_bytes`` and ``seconds`` say what it did; a file that disappears or cannot be read on the way (a
    compaction replaced it) is skipped. :meth:`close` stops it between two advices and waits for the thread.
    """

    def __init__(self, roots: Sequence[Path]) -> None:
        self.roots = [Path(r) for r in roots]
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
            log.debug("page cache: %d file(s), %.0f MiB advised in %.2f s (%d skipped)", self.files, self.advised_bytes / 2**20,
                      self.seconds, self.skipped)

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


__all__ = ["SUPPORTED", "WINDOW", "PageCacheWarmer", "data_extents", "store_files"]
