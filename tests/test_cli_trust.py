"""Issue 16, the operator's side: the CLI's clearance (least privilege, recorded), data printed as data (no Rich
markup), malformed snapshots and an edited store.json as one named error, owner-only store files.

A store is built once per test in ``tmp_path`` and closed, so the CLI (run in process with Typer's runner) can open it.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from typer.testing import CliRunner

from retrieval_node import cli, snapshot_files
from retrieval_node.audit import AuditLog
from retrieval_node.errors import ConfigError, IntegrityError
from retrieval_node.ingest import Ingestor
from retrieval_node.store import Store, read_secret
from tests.conftest import write_jsonl

DEAL = "2026-TEST-0001"
MARKUP_DOC = "[bold]x[/] and [/] of [red]"


@pytest.fixture()
def closed_store(tmp_path, embedder, node_config, make_chunk):
    """A closed store of one deal in three tiers; one document id is Rich markup."""
    chunks = [
        make_chunk("Certificate of title. Registered owner: Dana Whitford.", section="TITLE_SUMMARY", page=1,
                   metadata={"sensitivity": "public"}, document_id=MARKUP_DOC),
        make_chunk("252 114 567 2025/11/03 BUILDERS' LIEN by Bow River Drywall Ltd. for $48,260.00.", page=2,
                   metadata={"sensitivity": "confidential"}),
        make_chunk("Privileged solicitor note: client may dispute lien 252 114 567; advice dated 2026/01/09.", page=3,
                   metadata={"sensitivity": "privileged"}),
    ]
    home = tmp_path / "store"
    with Store.open(home, config=node_config, embedder=embedder) as st:
        report = Ingestor(st).ingest([write_jsonl(tmp_path / "t.jsonl", chunks)])
        assert report.rejected == []
    return home


def _invoke(*args: str, env: dict[str, str] | None = None):
    base = {k: None for k in os.environ if k.startswith("RETRIEVAL_NODE_") and k != "RETRIEVAL_NODE_CONFIG_DIR"}
    return CliRunner().invoke(cli.app, list(args), env={**base, "COLUMNS": "200", **(env or {})}, catch_exceptions=False)


def _retrieve_json(home: Path, *extra: str, env: dict[str, str] | None = None) -> dict:
    res = _invoke("retrieve", "--deal", DEAL, "--agent", "investigator", "--store", str(home), "--json", *extra, env=env)
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def _snapshot(home: Path, audit_id: str) -> dict:
    return AuditLog(home / "audit", None, key=read_secret(home)).read_snapshot(audit_id)


# -- the CLI's clearance ------------------------------------------------------------------------------------------

def test_cli_clearance_comes_from_flag_env_store_owner_or_least_privilege(tmp_path, monkeypatch):
    home = tmp_path / "mine"
    home.mkdir()
    monkeypatch.delenv(cli.SENSITIVITY_ENV, raising=False)
    assert cli._clearance(cli.SensitivityName.privileged, home) == (cli.SensitivityName.privileged, "flag")
    assert cli._clearance(None, home) == (cli.SensitivityName.confidential, "store-owner")
    monkeypatch.setenv(cli.SENSITIVITY_ENV, "Public")
    assert cli._clearance(None, home) == (cli.SensitivityName.public, "env")
    assert cli._clearance(cli.SensitivityName.confidential, home) == (cli.SensitivityName.confidential, "flag")
    monkeypatch.setenv(cli.SENSITIVITY_ENV, "secret")
    with pytest.raises(cli.UsageError, match=cli.SENSITIVITY_ENV):
        cli._clearance(None, home)
    monkeypatch.delenv(cli.SENSITIVITY_ENV)
    # FAULT INJECTION: another OS user (os.getuid answers a uid that does not own the directory)
    monkeypatch.setattr(os, "getuid", lambda: home.stat().st_uid + 1)
    assert cli._clearance(None, home) == (cli.SensitivityName.public, "default")
    assert cli._clearance(None, tmp_path / "new", creating=True)[1] == "store-owner"  # a store this command creates
    trust = cli._cli_trust(None, cli.SensitivityName.public, "default")
    assert not trust.authenticated and "least privilege" in trust.actor_id
    flagged = cli._cli_trust("ops:dana", cli.SensitivityName.privileged, "flag")
    assert flagged.authenticated and flagged.actor_id.startswith("ops:dana [clearance privileged from flag")


def test_cli_retrieve_records_the_clearance_and_its_source(closed_store, monkeypatch):
    home = closed_store
    owner = _retrieve_json(home)
    trust = _snapshot(home, owner["summary"]["audit_id"])["trust"]
    assert trust["max_sensitivity"] == "confidential" and "from store-owner" in trust["actor_id"]
    assert not any(r["sensitivity"] == "privileged" and not r["redacted"] for r in owner["package"]["ordered_chunks"])

    flagged = _retrieve_json(home, "--max-sensitivity", "privileged", "--actor", "ops:dana")
    trust = _snapshot(home, flagged["summary"]["audit_id"])["trust"]
    assert trust["max_sensitivity"] == "privileged" and trust["actor_id"].startswith("ops:dana [clearance privileged from flag")

    env = _retrieve_json(home, env={cli.SENSITIVITY_ENV: "public"})
    assert "from env" in _snapshot(home, env["summary"]["audit_id"])["trust"]["actor_id"]

    # FAULT INJECTION: the CLI runs as an OS user who does not own the store (os.getuid answers another uid)
    monkeypatch.setattr(os, "getuid", lambda: home.stat().st_uid + 1)
    other = _retrieve_json(home)
    trust = _snapshot(home, other["summary"]["audit_id"])["trust"]
    assert trust["max_sensitivity"] == "public" and trust["authenticated"] is False and "from default" in trust["actor_id"]
    assert {r["sensitivity"] for r in other["package"]["ordered_chunks"]} <= {"public"}  # nothing listed about the others


@pytest.mark.parametrize("command", ["ask", "explain"])
def test_ask_and_explain_take_their_clearance_as_retrieve_does(closed_store, monkeypatch, command):
    """``ask`` records its clearance and source like ``retrieve``; ``explain`` describes nothing above it. A caller who
    does not own the store and gives no clearance is public and unauthenticated for both."""
    home = closed_store
    if command == "ask":
        def asked(**env: str) -> dict:
            res = _invoke("ask", "--deal", DEAL, "Who holds the builders' lien?", "--store", str(home), "--json", env=env)
            assert res.exit_code == 0, res.output
            return json.loads(res.stdout)

        owner = asked()
        trust = _snapshot(home, owner["summary"]["audit_id"])["trust"]
        assert trust["max_sensitivity"] == "confidential" and "from store-owner" in trust["actor_id"]
        assert "from env" in _snapshot(home, asked(**{cli.SENSITIVITY_ENV: "public"})["summary"]["audit_id"])["trust"]["actor_id"]
        # FAULT INJECTION: another OS user (os.getuid answers a uid that does not own the store)
        monkeypatch.setattr(os, "getuid", lambda: home.stat().st_uid + 1)
        other = asked()
        trust = _snapshot(home, other["summary"]["audit_id"])["trust"]
        assert trust["max_sensitivity"] == "public" and not trust["authenticated"]
        assert {r["sensitivity"] for r in other["package"]["ordered_chunks"]} <= {"public"}
    else:
        audit_id = _retrieve_json(home, "--max-sensitivity", "privileged")["summary"]["audit_id"]
        # FAULT INJECTION: another OS user (os.getuid answers a uid that does not own the store)
        monkeypatch.setattr(os, "getuid", lambda: home.stat().st_uid + 1)
        res = _invoke("explain", audit_id, "--store", str(home), "--json")
        assert res.exit_code == 0, res.output
        doc = json.loads(res.stdout)
        assert doc["not_described"]["count"] >= 2  # the confidential and the privileged chunk are counted, not described
        assert "252 114 567" not in res.stdout


# -- data printed as data -------------------------------------------------------------------------------------------

def test_text_output_prints_markup_in_data_literally(closed_store, capsys, monkeypatch):
    res = _invoke("retrieve", "--deal", DEAL, "--agent", "investigator", "--store", str(closed_store), "--max-sensitivity", "privileged")
    assert res.exit_code == 0, res.output
    assert MARKUP_DOC in res.stdout
    from retrieval_node.models import ContextPackage, RetrievalSummary

    pkg, summary = _retrieve_json(closed_store, "--max-sensitivity", "privileged").values()
    pkg = ContextPackage.model_validate(pkg)
    summary = RetrievalSummary.model_validate(summary)
    hostile = "[/] [bold]x[/] [link=file:///etc/passwd]y[/link] :smile:"
    pkg = pkg.model_copy(update={"risk_summary": hostile, "exclusions_note": "[/]", "agent_id": "[/]"})
    summary = summary.model_copy(update={"fallbacks": [hostile], "missing_zones": ["[/]"], "needs_human_input": True})
    monkeypatch.setenv("COLUMNS", "200")
    capsys.readouterr()
    cli.print_package("[/]", pkg, summary, budget=100)
    text = capsys.readouterr().out
    assert text.count(hostile) == 2 and "Missing zones: [/]" in text and ":smile:" in text


def test_ingest_report_prints_rejected_lines_literally(tmp_path, closed_store):
    """A rejected line is named by its file and its error, which quote the input: Rich markup in them prints as typed
    (Rich would eat '[bold]' and '[/]', and an unbalanced '[/]' would raise)."""
    bad = tmp_path / "[bold]x[red]y.jsonl"
    bad.write_text('{"chunk_id": "[/] nope"}\n', encoding="utf-8")
    res = _invoke("ingest", str(bad), "--store", str(closed_store))
    assert res.exit_code == 1, res.output
    flat = " ".join(res.stdout.split())  # the table wraps long cells
    assert "[bold]x[red]y.jsonl" in flat and "rejected line(s)" in flat


# -- malformed snapshots: one error naming the file -------------------------------------------------------------

def _malformed(good: bytes, audit_id: str, other: str) -> dict[str, bytes]:
    import hashlib

    def wrapped(snapshot: object) -> bytes:
        body = json.dumps(snapshot).encode()
        return json.dumps({"sha256": hashlib.sha256(body).hexdigest(), "snapshot": snapshot}).encode()

    snap = json.loads(good)["snapshot"]
    return {
        "empty file": b"",
        "truncated JSON": good[: len(good) // 2],
        "binary garbage": bytes(range(256)) * 4,
        "a list instead of an object": b"[1, 2, 3]",
        "JSON null": b"null",
        "snapshot is a list": wrapped([snap]),
        "missing keys": wrapped({"audit_id": audit_id}),
        "wrong types": wrapped({**snap, "intent": "x", "package": [], "summary": 3}),
        "package fields of wrong types": wrapped({**snap, "package": {**snap["package"], "total_tokens": "many", "ordered_chunks": {}}}),
        "summary fields of wrong types": wrapped({**snap, "summary": {**snap["summary"], "chunks_selected": [], "fallbacks": 7}}),
        "deeply nested": b'{"sha256": "0", "snapshot": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        "another audit's name inside": wrapped({**snap, "audit_id": other}),
        "sha256 of a wrong type": json.dumps({"sha256": 5, "snapshot": snap}).encode(),
    }


def test_malformed_snapshots_are_one_named_error_never_a_traceback(closed_store):
    home = closed_store
    first = _retrieve_json(home)["summary"]["audit_id"]
    other = _retrieve_json(home)["summary"]["audit_id"]
    (home / "secret.key").unlink()  # a store without a secret: the shapes reach the parser, not just the MAC check
    log = AuditLog(home / "audit", None, key=None)
    path = log.snapshot_path(first)
    cases = _malformed(snapshot_files.read(path), first, other)
    handled = 0
    for name, raw in cases.items():
        snapshot_files.write(path, raw)  # compressed as the node writes: each shape reaches the parser
        with pytest.raises(IntegrityError) as err:
            log.read_snapshot(first, allow_legacy=True)
        assert first in str(err.value), name
        res = _invoke("replay", first, "--store", str(home), "--legacy")
        assert res.exit_code == 2 and "Traceback" not in res.output, (name, res.output)
        assert "error: " in res.stderr and first in res.stderr and len(res.stderr.strip().splitlines()) == 1, (name, res.stderr)
        handled += 1
    path.unlink()
    path.mkdir()  # a directory where the file should be
    res = _invoke("replay", first, "--store", str(home), "--legacy")
    assert res.exit_code == 2 and first in res.stderr and "Traceback" not in res.output
    assert handled == len(cases) == 13


# -- store.json edited or damaged ---------------------------------------------------------------------------------

MANIFESTS = {
    "bad JSON": b'{"format": 1, "vector_backend": "edge",',
    "unknown format version": json.dumps({"format": 99, "mem0_vector_store": "edge", "vector_backend": "edge"}).encode(),
    "format of a wrong type": json.dumps({"format": "1", "mem0_vector_store": "edge", "vector_backend": "edge"}).encode(),
    "engine of a wrong type": json.dumps({"format": 1, "mem0_vector_store": 5, "vector_backend": "edge"}).encode(),
    "engine swapped": json.dumps({"format": 1, "mem0_vector_store": "qdrant", "vector_backend": "edge"}).encode(),
    "missing fields": json.dumps({"format": 1}).encode(),
    "a list": b"[]",
    "empty": b"",
}


@pytest.mark.parametrize("case", sorted(MANIFESTS))
def test_an_edited_store_manifest_is_a_named_error_and_loses_nothing(closed_store, embedder, node_config, case):
    home = closed_store
    manifest = home / "store.json"
    original = manifest.read_bytes()
    manifest.write_bytes(MANIFESTS[case])
    with pytest.raises(ConfigError) as err:
        Store.open(home, config=node_config, embedder=embedder)
    message = str(err.value)
    assert str(manifest) in message and ("restore it" in message or "upgrade retrieval-node" in message), message
    assert "no registered chunks" not in message
    assert manifest.read_bytes() == MANIFESTS[case]  # nothing rewritten
    if "restore it" in message:  # the manifest it proposes opens the store with every chunk
        proposed = message.split("or write ", 1)[1].split(" (what this store", 1)[0]
        assert json.loads(proposed) == json.loads(original)
    manifest.write_bytes(original)
    with Store.open(home, config=node_config, embedder=embedder) as st:
        assert len(st.registry.deal_records(DEAL)) == 3


# -- owner-only files ---------------------------------------------------------------------------------------------

def test_store_files_are_owner_only(closed_store, embedder, node_config):
    home = closed_store
    umask = os.umask(0o022)
    os.umask(umask)
    from retrieval_node.agent import RetrievalAgent
    from tests.conftest import FULL_TRUST
    from tests.test_audit import AuditDownRegistry

    with Store.open(home, config=node_config, embedder=embedder) as st:
        agent = RetrievalAgent(st, trust=FULL_TRUST)
        real = agent.audit.registry
        agent.audit.registry = AuditDownRegistry(real)  # FAULT INJECTION: keeps the entry in the journal
        _, summary = agent.retrieve_sync(agent.intent_for("investigator", deal_id=DEAL))
        agent.audit.registry = real
        journal = agent.audit.journal_path
        assert journal.exists()
        mode = lambda p: stat.S_IMODE(p.stat().st_mode)  # noqa: E731
        assert mode(home) == 0o700
        for part in ("vectors", "mem0_edge", "audit", "audit/snapshots"):
            assert mode(home / part) == 0o700, part
        for f in ("store.json", "secret.key", ".lock", "mem0_history.db", f"audit/snapshots/{summary.audit_id}.json.zst", "audit/journal.jsonl"):
            assert mode(home / f) == 0o600, f
        for f in home.glob("mem0_history.db-*"):
            assert mode(f) == 0o600, f
    assert os.umask(umask) == umask  # the process umask was left alone
    # an older store (0755) is tightened when it is opened
    os.chmod(home, 0o755)
    with Store.open(home, config=node_config, embedder=embedder):
        assert stat.S_IMODE(home.stat().st_mode) == 0o700
