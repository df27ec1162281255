"""Helpers shared by the benchmark scripts: machine info, result files, tables, percentiles, RSS.

Not part of the package; imported by the scripts next to it (they put this
directory on ``sys.path`` so they run as ``python benchmarks/<script>.py`` from
anywhere).
"""

from __future__ import annotations

import json
import os
import platform
import resource
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
RESULTS_DIR = BENCH_DIR / "results"

#: Distributions whose versions every result file records.
PACKAGES = (
    "retrieval-node",
    "torch",
    "sentence-transformers",
    "transformers",
    "qdrant-client",
    "qdrant-edge-py",
    "mem0ai",
    "tiktoken",
    "bm25s",
    "numpy",
    "pydantic",
)


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def _mem_total_gb() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return None


def _git() -> dict[str, Any]:
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO, capture_output=True, text=True, timeout=10).stdout.strip()
        return {"commit": commit or None, "dirty": bool(dirty)}
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None}


def _loadavg() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def machine_info() -> dict[str, Any]:
    """What the figures depend on: CPU, memory, OS, Python, package versions, torch threads."""
    try:
        affinity = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        affinity = os.cpu_count()
    info: dict[str, Any] = {
        "cpu_count": os.cpu_count(),
        "cpus_usable": affinity,
        "cpu_model": _cpu_model(),
        "memory_gb": _mem_total_gb(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "python": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "packages": {p: _version(p) for p in PACKAGES},
        "git": _git(),
        "load_average_1_5_15": _loadavg(),
    }
    try:
        import torch

        info["torch_threads"] = torch.get_num_threads()
    except Exception:  # torch missing is reported by the versions above
        info["torch_threads"] = None
    return info


def result_path(name: str, out: str | None, smoke: bool) -> Path:
    """``--out`` if given, else ``benchmarks/results/<name>.json`` (``<name>_smoke.json`` for smoke runs)."""
    if out:
        return Path(out)
    return RESULTS_DIR / (f"{name}_smoke.json" if smoke else f"{name}.json")


def write_result(path: Path, payload: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(payload, indent=2, sort_keys=False, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


def run_benchmark(name: str, args: Any, run: Callable[[Any], dict[str, Any]], report: Callable[[dict[str, Any], Any], None],
                  settings: Callable[[dict[str, Any]], dict[str, Any]] | None = None) -> dict[str, Any]:
    """Run ``run(args)`` and write its result file with what every result records (name, date, wall time, command,
    machine, settings: ``args`` but ``out``, and ``settings(results)`` when given); print the machine and
    ``report(results, args)``; return the results. ``args`` needs ``out`` and ``smoke``."""
    machine = machine_info()
    started = now_iso()
    t0 = time.perf_counter()
    results = run(args)
    payload = {
        "benchmark": name,
        "date": started,
        "wall_s": round(time.perf_counter() - t0, 2),
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "machine": machine,
        "settings": {**{k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items() if k != "out"},
                     **(settings(results) if settings is not None else {})},
        "results": results,
    }
    print_machine(machine)
    report(results, args)
    path = write_result(result_path(name, args.out, args.smoke), payload)
    print(f"\nwrote {path}")
    return results


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (numpy's default), ``q`` in [0, 100]; NaN for no values."""
    if not values:
        return float("nan")
    xs = sorted(values)
    if len(xs) == 1:
        return float(xs[0])
    pos = (len(xs) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return float(xs[lo] + (xs[hi] - xs[lo]) * (pos - lo))


def latency_stats(values_ms: Sequence[float]) -> dict[str, float | int]:
    n = len(values_ms)
    return {
        "n": n,
        "p50_ms": round(percentile(values_ms, 50), 3),
        "p95_ms": round(percentile(values_ms, 95), 3),
        "mean_ms": round(sum(values_ms) / n, 3) if n else float("nan"),
        "min_ms": round(min(values_ms), 3) if n else float("nan"),
        "max_ms": round(max(values_ms), 3) if n else float("nan"),
    }


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far (``ru_maxrss``; KiB on Linux, bytes on macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return round(peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024, 1)


def current_rss_mb() -> float | None:
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
        return round(pages * os.sysconf("SC_PAGE_SIZE") / (1024 * 1024), 1)
    except (OSError, ValueError, IndexError):
        return None


def rss_parts_mb() -> dict[str, float] | None:
    """The current RSS split (Linux ``/proc/self/status``): ``anon`` (the process's own heap: what it allocated) and
    ``file`` (mapped files: shared libraries and the store's memory-mapped vector and payload files, clean pages the
    kernel can drop and read again), in MB; with ``pss`` / ``pss_file`` (``/proc/self/smaps_rollup``) where the kernel
    gives them: the same memory with each page counted once however many mappings share it (qdrant-edge maps a
    vector file twice, once for random and once for sequential reads, and RSS counts a page read through both
    twice). None elsewhere."""
    try:
        rows = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines() if line.startswith(("RssAnon", "RssFile")))
        out = {"anon": round(int(rows["RssAnon"].split()[0]) / 1024, 1), "file": round(int(rows["RssFile"].split()[0]) / 1024, 1)}
    except (OSError, ValueError, KeyError, IndexError):
        return None
    try:
        roll = dict(line.split(":", 1) for line in Path("/proc/self/smaps_rollup").read_text().splitlines()[1:] if ":" in line)
        out["pss"] = round(int(roll["Pss"].split()[0]) / 1024, 1)
        out["pss_file"] = round(int(roll["Pss_File"].split()[0]) / 1024, 1)
    except (OSError, ValueError, KeyError, IndexError):
        pass
    return out


def _busy_jiffies() -> int | None:
    """Busy CPU time of the whole machine (user+nice+system+irq+softirq+steal), in clock ticks."""
    try:
        fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    except (OSError, ValueError, IndexError):
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = (fields + [0] * 8)[:8]
    return user + nice + system + irq + softirq + steal


class Phase:
    """Times a block and how many CPU cores *other* processes kept busy meanwhile (noise indicator).

    >>> with Phase() as ph: ...                                # doctest: +SKIP
    >>> ph.seconds, ph.other_cores

    ``pids``: processes of the measured code besides this one (worker processes), counted as its own.
    """

    def __init__(self, pids: Sequence[int] = ()) -> None:
        self.pids = list(pids)

    def _own(self) -> float:
        t = os.times()
        own = t.user + t.system
        for pid in self.pids:
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                own += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
            except (OSError, IndexError, ValueError):
                pass
        return own

    def __enter__(self) -> Phase:
        self._busy0 = _busy_jiffies()
        self._own0 = self._own()
        self._t0 = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self._t0
        own = self._own() - self._own0
        busy1 = _busy_jiffies()
        if self._busy0 is None or busy1 is None or self.seconds <= 0:
            self.other_cores = None
        else:
            machine = (busy1 - self._busy0) / os.sysconf("SC_CLK_TCK")
            self.other_cores = round(max(0.0, machine - own) / self.seconds, 2)
        self.own_cores = round(own / self.seconds, 2) if self.seconds > 0 else None


def fmt(value: Any, digits: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        if value != value:  # NaN
            return "-"
        return f"{value:,.{digits}f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], *, digits: int = 1) -> str:
    """A plain-text table: first column left-aligned, the others right-aligned."""
    cells = [[fmt(c, digits) for c in row] for row in rows]
    widths = [max(len(str(h)), *(len(r[i]) for r in cells)) if cells else len(str(h)) for i, h in enumerate(headers)]

    def line(values: Sequence[str]) -> str:
        return "  ".join(v.ljust(widths[i]) if i == 0 else v.rjust(widths[i]) for i, v in enumerate(values))

    out = [line([str(h) for h in headers]), "  ".join("-" * w for w in widths)]
    out.extend(line(r) for r in cells)
    return "\n".join(out)


def print_machine(info: dict[str, Any]) -> None:
    pk = info["packages"]
    print(
        f"machine: {info['cpu_model']} x{info['cpus_usable']} (torch threads {info.get('torch_threads')}), "
        f"{info['memory_gb']} GB, {info['platform']}, Python {info['python']}"
    )
    print(
        "versions: " + ", ".join(f"{k} {v}" for k, v in pk.items() if v is not None)
        + (f"; git {str(info['git']['commit'])[:10]}{' (dirty)' if info['git']['dirty'] else ''}" if info["git"].get("commit") else "")
    )
