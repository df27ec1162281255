"""The latency benchmark's memory limit (benchmarks/_memlimit.py): a child process measured under a hard limit is held
to it, and the report says what it used; where no cgroup can be made, the run stops and says where it looked."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCH))

from _memlimit import MemoryCgroup, MemoryLimitUnavailable, _own_cgroups, evict  # noqa: E402


def test_own_cgroups_reads_v1_and_v2_lines():
    text = "9:name=systemd:/\n4:memory:/jobs/abc\n3:cpu,cpuacct:/x\n0::/user.slice/session-1.scope\n"
    own = _own_cgroups(text)
    assert own["memory"] == "/jobs/abc"
    assert own["cpu"] == own["cpuacct"] == "/x"
    assert own[""] == "/user.slice/session-1.scope"


def test_no_writable_cgroup_stops_with_where_it_looked(tmp_path):
    # a cgroup file system with no memory hierarchy and a v2 mount whose subtree has no memory controller
    (tmp_path / "unified").mkdir()
    (tmp_path / "unified" / "cgroup.controllers").write_text("cpu memory\n")
    (tmp_path / "unified" / "cgroup.subtree_control").write_text("cpu\n")
    with pytest.raises(MemoryLimitUnavailable) as err:
        with MemoryCgroup(256, root=tmp_path, proc_cgroup="4:memory:/jobs/abc\n0::/\n"):
            pass
    msg = str(err.value)
    assert str(tmp_path / "memory" / "jobs" / "abc") in msg  # the v1 place it tried
    assert "subtree_control" in msg  # and why v2 was not usable


def test_limit_must_be_positive():
    with pytest.raises(ValueError, match="positive"):
        MemoryCgroup(0)


def test_benchmark_refuses_a_limit_it_cannot_honour():
    for extra, word in (([], "--workdir"), (["--workdir", "/tmp/x"], "--skip-naive"), (["--workdir", "/tmp/x", "--skip-naive", "--in-process"], "--in-process")):
        p = subprocess.run([sys.executable, str(BENCH / "retrieval_latency.py"), "--memory-limit-mb", "1536", *extra], capture_output=True, text=True)
        assert p.returncode == 2, p.stderr
        assert word in p.stderr


def test_evict_counts_the_files_under_a_directory(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "one.bin").write_bytes(b"x" * (1 << 20))
    (tmp_path / "two.bin").write_bytes(b"y" * (1 << 20))
    got = evict([tmp_path, tmp_path / "missing"])
    assert got == {"files": 2, "mb": 2.0}
    assert evict([tmp_path / "two.bin"]) == {"files": 1, "mb": 1.0}


def _cgroup_or_skip(limit_mb: float) -> MemoryCgroup:
    try:
        return MemoryCgroup(limit_mb).__enter__()
    except (MemoryLimitUnavailable, OSError) as exc:
        pytest.skip(f"no memory cgroup can be created on this machine: {exc}")


ALLOCATE = "import sys; b = bytearray(int(sys.argv[1]) << 20); b[::4096] = b'x' * len(b[::4096]); print(len(b))"


def _allocate_under(limit_mb: float, allocate_mb: int) -> tuple[subprocess.CompletedProcess, dict]:
    """A child that allocates and touches ``allocate_mb`` MB, run in a cgroup of ``limit_mb``; what the cgroup said."""
    cg = _cgroup_or_skip(limit_mb)
    try:
        p = cg.run([sys.executable, "-c", ALLOCATE, str(allocate_mb)], capture_output=True, text=True)
        return p, cg.usage()
    finally:
        cg.__exit__(None, None, None)


def test_a_child_within_the_limit_runs_and_its_peak_is_reported():
    p, usage = _allocate_under(512, 96)
    assert p.returncode == 0, p.stderr
    assert usage["limit_mb"] == 512.0
    assert usage["oom_kills"] in (0, None)
    assert usage["peak_mb"] is not None and 96 <= usage["peak_mb"] <= 512


def test_a_child_over_the_limit_is_killed_and_the_kill_is_reported():
    p, usage = _allocate_under(128, 400)
    assert p.returncode != 0
    assert usage["oom_kills"] is None or usage["oom_kills"] >= 1
    assert usage["peak_mb"] is not None and usage["peak_mb"] <= 128.5


def test_a_sigterm_to_the_parent_ends_the_child_and_the_cgroup_goes():
    import os
    import signal
    import threading
    import time

    cg = _cgroup_or_skip(256)
    before = signal.getsignal(signal.SIGTERM)
    timer = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGTERM))
    timer.start()
    t0 = time.monotonic()
    try:
        with pytest.raises(SystemExit) as stopped:
            cg.run([sys.executable, "-c", "import time; time.sleep(60)"])
    finally:
        timer.cancel()
        cg.__exit__(None, None, None)
    assert stopped.value.code == 128 + signal.SIGTERM
    assert time.monotonic() - t0 < 30  # the child was ended, not waited for
    assert not cg.path.exists()  # no process left in it: removed
    assert signal.getsignal(signal.SIGTERM) == before
