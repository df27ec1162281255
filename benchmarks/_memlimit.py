"""Run a benchmark's child process under a hard memory limit (a Linux memory cgroup), and say what it used.

A process's RSS counts the clean pages of the files it has mapped (the store's segment files, shared libraries)
for as long as the kernel has memory to spare: they are page cache, dropped and read again under memory pressure.
So a peak RSS measured on an idle machine with free memory says how much the process *touched*, not how much it
*needs*. Running the same measurement inside a memory cgroup with a limit answers the second question as a
container would: the process's own heap must fit, and the page cache it reads is charged to the cgroup and taken
back by the kernel when the limit is reached. If it does not fit, the kernel kills it (counted in ``oom_kills``).

Pages already in the page cache stay charged to whoever read them first, so :func:`evict` drops the files the child
will read from the page cache beforehand (``posix_fadvise(POSIX_FADV_DONTNEED)``; pages another process has mapped
stay). Creating a cgroup needs write access to the cgroup file system (root in a container, or a delegated
subtree); :class:`MemoryCgroup` says which directory it tried when it cannot.

>>> with MemoryCgroup(1536) as cg:                                              # doctest: +SKIP
...     cg.run(cmd)
>>> cg.usage()                                                                 # doctest: +SKIP
{'limit_mb': 1536.0, 'peak_mb': 1535.9, 'limit_hits': 1597853, 'oom_kills': 0, ...}
"""

from __future__ import annotations

import os
import signal
import subprocess
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

MB = 1 << 20


class MemoryLimitUnavailable(RuntimeError):
    """No memory cgroup can be created here."""


def _own_cgroups(proc_cgroup: str) -> dict[str, str]:
    """``/proc/self/cgroup`` as {controller: path}; the cgroup v2 entry (``0::/path``) under the key ``""``."""
    out: dict[str, str] = {}
    for line in proc_cgroup.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if controllers == "":
            out[""] = path
        for c in controllers.split(","):
            if c:
                out[c] = path
    return out


class MemoryCgroup:
    """A fresh memory cgroup with ``limit_mb``, removed on exit. ``root``: the cgroup file system (``/sys/fs/cgroup``).

    cgroup v1 (a ``memory`` hierarchy) is used where this process has one, else cgroup v2 (the process's own
    cgroup must have the ``memory`` controller in ``cgroup.subtree_control``)."""

    def __init__(self, limit_mb: float, *, root: str | Path = "/sys/fs/cgroup", proc_cgroup: str | None = None) -> None:
        if limit_mb <= 0:
            raise ValueError(f"memory limit must be positive, got {limit_mb} MB")
        self.limit_bytes = int(limit_mb * MB)
        self.root = Path(root)
        self._proc = proc_cgroup
        self.path: Path | None = None
        self.version: int | None = None

    # -- lifecycle ---------------------------------------------------------------------
    def __enter__(self) -> MemoryCgroup:
        own = _own_cgroups(self._proc if self._proc is not None else Path("/proc/self/cgroup").read_text())
        name = f"rn-bench-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        tried: list[str] = []
        candidates: list[tuple[int, Path]] = []
        if "memory" in own:
            candidates.append((1, self.root / "memory" / own["memory"].lstrip("/")))
        if "" in own:
            for mount in (self.root / "unified", self.root):
                if (mount / "cgroup.controllers").exists():
                    candidates.append((2, mount / own[""].lstrip("/")))
                    break
        for version, parent in candidates:
            path = parent / name
            try:
                if version == 2 and "memory" not in (parent / "cgroup.subtree_control").read_text().split():
                    tried.append(f"{parent} (cgroup v2: no 'memory' in cgroup.subtree_control)")
                    continue
                path.mkdir()
            except OSError as exc:
                tried.append(f"{parent} ({exc.strerror or exc})")
                continue
            try:
                (path / ("memory.limit_in_bytes" if version == 1 else "memory.max")).write_text(str(self.limit_bytes))
            except OSError as exc:
                path.rmdir()
                tried.append(f"{path} (cannot set the limit: {exc.strerror or exc})")
                continue
            self.path, self.version = path, version
            return self
        raise MemoryLimitUnavailable("no memory cgroup can be created here (tried: " + ("; ".join(tried) or f"no memory controller under {self.root}")
                                     + "); run as root in a container, or inside a delegated cgroup such as `systemd-run --user --scope -p MemoryMax=...`")

    def __exit__(self, *exc: Any) -> None:
        if self.path is not None:
            try:
                self.path.rmdir()  # the child has exited; its page cache charges move to the parent
            except OSError:
                pass

    def enter(self) -> None:
        """Move the calling process into the cgroup (a ``preexec_fn``: runs in the child between fork and exec)."""
        if self.path is None:
            raise RuntimeError("MemoryCgroup.enter outside its with-block")
        (self.path / "cgroup.procs").write_text(str(os.getpid()))

    def run(self, cmd: list[str], **kwargs: Any) -> subprocess.CompletedProcess[Any]:
        """``subprocess.run(cmd)`` in the cgroup. A SIGTERM to this process while the child runs ends the child too
        (``subprocess.run`` kills it on the way out), so the with-block can remove the cgroup; the handler before
        is restored afterwards."""
        def stop(signum: int, _frame: Any) -> None:
            raise SystemExit(128 + signum)

        previous = signal.signal(signal.SIGTERM, stop)
        try:
            return subprocess.run(cmd, preexec_fn=self.enter, **kwargs)
        finally:
            signal.signal(signal.SIGTERM, previous)

    # -- figures -----------------------------------------------------------------------
    def _read(self, name: str) -> str | None:
        try:
            return (self.path / name).read_text() if self.path is not None else None
        except OSError:
            return None

    def _keyed(self, name: str) -> dict[str, int]:
        out: dict[str, int] = {}
        for line in (self._read(name) or "").splitlines():
            k, _, v = line.partition(" ")
            if v.strip().isdigit():
                out[k] = int(v)
        return out

    def usage(self) -> dict[str, Any]:
        """What the cgroup's processes used: the limit, the peak charge (heap and page cache together), how often the
        charge reached the limit (the kernel reclaimed page cache each time), OOM kills, and the charge split at the
        time of reading (``anon`` / ``file``) where the kernel gives it."""
        def mb(raw: str | None) -> float | None:
            return round(int(raw) / MB, 1) if raw and raw.strip().isdigit() else None

        out: dict[str, Any] = {"cgroup_version": self.version, "limit_mb": round(self.limit_bytes / MB, 1)}
        stat = self._keyed("memory.stat")
        if self.version == 1:
            out["peak_mb"] = mb(self._read("memory.max_usage_in_bytes"))
            hits = self._read("memory.failcnt")
            out["limit_hits"] = int(hits) if hits and hits.strip().isdigit() else None
            out["oom_kills"] = self._keyed("memory.oom_control").get("oom_kill")
            out["now_anon_mb"], out["now_file_mb"] = mb(str(stat.get("total_rss", ""))), mb(str(stat.get("total_cache", "")))
        else:
            out["peak_mb"] = mb(self._read("memory.peak"))
            events = self._keyed("memory.events")
            out["limit_hits"], out["oom_kills"] = events.get("max"), events.get("oom_kill")
            out["now_anon_mb"], out["now_file_mb"] = mb(str(stat.get("anon", ""))), mb(str(stat.get("file", "")))
        return out


def evict(paths: Iterable[str | Path]) -> dict[str, float]:
    """Drop the page-cache pages of every file under ``paths`` (files or directories) that no process has mapped, so
    the next process to read them is charged for them. Returns how many files and MB were advised."""
    files = n_bytes = 0
    for root in paths:
        root = Path(root)
        walk = [(str(root.parent), [], [root.name])] if root.is_file() else os.walk(root)
        for d, _, names in walk:
            for name in names:
                try:
                    fd = os.open(os.path.join(d, name), os.O_RDONLY)
                except OSError:
                    continue
                try:
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                    files += 1
                    n_bytes += os.fstat(fd).st_size
                except OSError:
                    pass
                finally:
                    os.close(fd)
    return {"files": files, "mb": round(n_bytes / MB, 1)}
