"""Issue 16 item 9: faults at store open and around ingest end in a named error, never a raw traceback or a
signal. Real store, real files; the small filesystems are real tmpfs mounts (skipped where mounting is not
allowed)."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from retrieval_node.errors import NoInputFiles, StorageFullError, StoreLockedError, StorePathError, UsageError
from retrieval_node.ingest import Ingestor, check_free_space, iter_jsonl_files
from retrieval_node.store import HISTORY_DB, Store
from tests.conftest import REPO, write_jsonl


@contextmanager
def tmpfs(path: Path, *, size: str, read_only: bool = False) -> Iterator[Path]:
    """A real, small filesystem at ``path`` (root only); skips the test where it cannot be mounted."""
    path.mkdir(parents=True, exist_ok=True)
    opts = f"size={size}" + (",ro" if read_only else "")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(path)], capture_output=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode(errors='replace').strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def test_store_path_that_is_a_file(tmp_path, embedder, node_config):
    f = tmp_path / "store"
    f.write_text("not a store")
    with pytest.raises(StorePathError, match="is a file"):  # was FileExistsError with a traceback
        Store.open(f, config=node_config, embedder=embedder)


def test_store_under_a_file(tmp_path, embedder, node_config):
    (tmp_path / "plain").write_text("x")
    with pytest.raises(StorePathError, match="parent"):
        Store.open(tmp_path / "plain" / "store", config=node_config, embedder=embedder)


def test_read_only_store(tmp_path, embedder, node_config):
    home = tmp_path / "ro"
    if os.geteuid() != 0:
        home.mkdir()
        home.chmod(0o555)
        with pytest.raises(StorePathError, match="not writable"):
            Store.open(home, config=node_config, embedder=embedder)
        return
    with tmpfs(home, size="1m", read_only=True), pytest.raises(StorePathError, match="writ"):
        Store.open(home, config=node_config, embedder=embedder)  # was PermissionError / OSError with a traceback


def test_deleted_lock_file_still_reports_the_store_locked(tmp_path, embedder, node_config):
    home = tmp_path / "store"
    with Store.open(home, config=node_config, embedder=embedder):
        (home / ".lock").unlink()  # the holder's lock file is gone; qdrant-edge's WAL lock remains
        with pytest.raises(StoreLockedError, match="open in another process"):  # was BackendError ... WouldBlock
            Store.open(home, config=node_config, embedder=embedder)


def test_missing_history_db_is_said_at_open(tmp_path, embedder, node_config, caplog):
    home = tmp_path / "store"
    Store.open(home, config=node_config, embedder=embedder).close()
    for suffix in ("", "-wal", "-shm"):
        Path(str(home / HISTORY_DB) + suffix).unlink(missing_ok=True)
    with caplog.at_level(logging.WARNING, logger="retrieval_node.store"):
        Store.open(home, config=node_config, embedder=embedder).close()
    assert any(HISTORY_DB in r.getMessage() and "missing" in r.getMessage() for r in caplog.records)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="retrieval_node.store"):
        Store.open(home, config=node_config, embedder=embedder).close()  # present again: nothing to say
    assert not any(HISTORY_DB in r.getMessage() for r in caplog.records)


def test_new_store_does_not_warn_about_history(tmp_path, embedder, node_config, caplog):
    with caplog.at_level(logging.WARNING, logger="retrieval_node.store"):
        Store.open(tmp_path / "fresh", config=node_config, embedder=embedder).close()
    assert not any(HISTORY_DB in r.getMessage() for r in caplog.records)


def test_ingest_folder_without_jsonl_is_an_error_naming_it(tmp_path):
    empty = tmp_path / "deal-folder"
    empty.mkdir()
    (empty / "notes.txt").write_text("not chunks")
    with pytest.raises(NoInputFiles, match="deal-folder") as info:  # was: exit 0, nothing ingested
        iter_jsonl_files([empty])
    assert isinstance(info.value, UsageError)


def test_cli_ingest_of_an_empty_folder_exits_2(tmp_path, store):
    from typer.testing import CliRunner

    from retrieval_node.cli import app

    empty = tmp_path / "empty"
    empty.mkdir()
    store.close()  # the CLI opens the store itself
    result = CliRunner().invoke(app, ["ingest", str(empty), "--store", str(store.home), "--json"])
    assert result.exit_code == 2
    assert json.loads(result.stdout.splitlines()[0])["error"]["type"] == "NoInputFiles"


def test_free_space_check_refuses_what_the_disk_cannot_hold(tmp_path):
    free = os.statvfs(tmp_path).f_bavail * os.statvfs(tmp_path).f_frsize
    with pytest.raises(StorageFullError, match="not enough disk space"):
        check_free_space(tmp_path, free + 1, what="a test write")
    check_free_space(tmp_path, 1024, what="a small write")


def test_full_disk_is_an_error_not_sigbus(tmp_path, make_chunk):
    """On a 40 MiB filesystem the old ingest filled qdrant-edge's sparse mmap'd files and died of SIGBUS
    (exit 135); now it stops with StorageFullError before writing. Run in a child: a SIGBUS would kill pytest."""
    chunks = [make_chunk(f"Page {i}: instrument 25{i} 114 567 builders' lien " + "detail " * 200, page=i) for i in range(1, 60)]
    src = write_jsonl(tmp_path / "deal.jsonl", chunks)
    with tmpfs(tmp_path / "small", size="40m") as small:
        env = dict(os.environ, PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1")
        done = subprocess.run([sys.executable, "-m", "retrieval_node.cli", "ingest", str(src), "--store", str(small / "store"), "--json"],
                              capture_output=True, env=env, timeout=600, check=False)
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
    assert json.loads(done.stdout)["error"]["type"] == "StorageFullError"


def test_ingest_reports_chunks_already_stored_when_space_runs_out(store, make_chunk, tmp_path, monkeypatch):
    """Fault injection: the free-space reading drops to zero after the first batch (as when another process
    fills the disk); the batch already written stays complete and the error says what is left."""
    import retrieval_node.ingest as ingest_mod

    chunks = [make_chunk(f"Caveat {i} re: right of first refusal", page=i) for i in range(1, 200)]
    real = ingest_mod.shutil.disk_usage
    calls = []

    def disk_usage_that_runs_out(path):  # noqa: ANN001, ANN202
        calls.append(path)
        usage = real(path)
        return usage if len(calls) == 1 else usage._replace(free=0)

    monkeypatch.setattr(ingest_mod.shutil, "disk_usage", disk_usage_that_runs_out)
    with pytest.raises(StorageFullError, match="still to store"):
        Ingestor(store).ingest([write_jsonl(tmp_path / "c.jsonl", chunks)])
    monkeypatch.setattr(ingest_mod.shutil, "disk_usage", real)
    stored = len(store.registry.deal_records("2026-TEST-0001"))
    assert 0 < stored < len(chunks)
    again = Ingestor(store).ingest([tmp_path / "c.jsonl"])
    assert (again.ingested, again.unchanged) == (len(chunks) - stored, stored)
