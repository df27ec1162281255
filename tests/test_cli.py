"""The command line in fresh processes: argument mistakes are answered before torch, Qdrant or Mem0 are imported;
a normal run is quiet on standard error; ``-v`` shows the libraries' lines."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from retrieval_node import __version__, cli
from retrieval_node.models import MAX_TOKENS_BUDGET, Sensitivity, Stage
from retrieval_node.store import DEFAULT_HOME, HOME_ENV
from tests.conftest import SAMPLE_DATA

REPO = Path(__file__).resolve().parent.parent
HEAVY = ("torch", "sentence_transformers", "transformers", "mem0", "qdrant_client", "qdrant_edge", "langgraph", "bm25s", "tiktoken")
# Runs the CLI as the console script does, then reports which heavy modules the call imported.
PROBE = f"""
import sys
from retrieval_node.cli import app
try:
    app(sys.argv[1:], prog_name="retrieval-node")
    code = 0
except SystemExit as exc:
    code = exc.code or 0
print("HEAVY=" + ",".join(m for m in {HEAVY!r} if m in sys.modules), file=sys.stderr)
sys.exit(code)
"""


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RETRIEVAL_NODE_")}
    env.update(PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1", COLUMNS="100", **extra)
    return env


def probe(*args: str, cwd: Path, **env: str) -> tuple[int, str, str, list[str]]:
    p = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, cwd=cwd, env=_env(**env), timeout=120)
    err, _, heavy = p.stderr.rpartition("HEAVY=")
    return p.returncode, p.stdout, err, [m for m in heavy.strip().split(",") if m]


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "retrieval_node.cli", *args], capture_output=True, text=True, cwd=cwd, env=_env(), timeout=600)


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["retrieve", "--deal", "D", "--agent", "nope", "--store", "."], ["--agent 'nope'", "condo, investigator, scribe, tax"]),
        (["retrieve", "--deal", "D", "--agent", "tax", "--stage", "closed"], ["--stage 'CLOSED'", "INTAKE, DILIGENCE, DRAFTING, CLOSING"]),
        (["retrieve", "--deal", "D", "--agent", "tax", "--max-sensitivity", "secret"], ["public, confidential, privileged"]),
        (["retrieve", "--deal", "D", "--agent", "tax", "--budget", "0"], ["--budget", "greater than or equal to 1"]),
        (["retrieve", "--deal", "D", "--agent", "tax", "--store", "typo-store"], ["no store at typo-store (from --store)", "retrieval-node ingest"]),
        (["retrieve", "--deal", "D", "--agent", "tax"], ["no store at .retrieval-node (from the default ./.retrieval-node)"]),
        (["replay", "aud_0123", "--store", "typo-store"], ["no store at typo-store"]),
        (["compact", "--store", "typo-store"], ["no store at typo-store"]),
        (["convert", "--store", "typo-store"], ["no store at typo-store"]),
        (["convert", "--vector-datatype", "int8", "--store", "typo-store"], ["--vector-datatype 'int8'", "float32, float16"]),
        (["precompute", "--store", "typo-store"], ["no store at typo-store"]),
        (["demo", "--deal", "2026-ACME-0042", "--store", "typo-store"], ["no store at typo-store"]),
        (["ingest", "missing.jsonl"], ["'missing.jsonl' does not exist"]),
        (["patterns", "add", "missing.jsonl"], ["'missing.jsonl' does not exist"]),
        (["retrieve", "--deal", "D"], ["Missing option '--agent'"]),
        (["frobnicate"], ["No such command 'frobnicate'"]),
    ],
)
def test_argument_mistakes_are_answered_before_heavy_imports(tmp_path, args, needles):
    code, out, err, heavy = probe(*args, cwd=tmp_path)
    assert code == 2, err
    for needle in needles:
        assert needle in err
    assert heavy == []
    assert not (tmp_path / "typo-store").exists() and not (tmp_path / ".retrieval-node").exists()  # nothing created


def test_a_missing_config_dir_names_the_variable_to_fix(tmp_path):
    code, out, err, heavy = probe("retrieve", "--deal", "D", "--agent", "tax", cwd=tmp_path, RETRIEVAL_NODE_CONFIG_DIR=str(tmp_path / "nope"))
    assert code == 2 and heavy == []
    assert f"RETRIEVAL_NODE_CONFIG_DIR={tmp_path / 'nope'}: no such directory" in err and "agents.yaml" in err


def test_usage_error_with_json_prints_one_error_document(tmp_path):
    code, out, err, heavy = probe("retrieve", "--deal", "D", "--agent", "tax", "--store", "typo-store", "--json", cwd=tmp_path)
    assert code == 2 and heavy == []
    assert json.loads(out)["error"] == {"type": "UsageError", "message": err.split("usage error: ", 1)[1].strip()}


@pytest.mark.parametrize("args", [["--help"], ["retrieve", "--help"], ["ingest", "--help"], ["patterns", "add", "--help"], ["--version"]])
def test_help_and_version_import_nothing_heavy(tmp_path, args):
    code, out, err, heavy = probe(*args, cwd=tmp_path)
    assert code == 0 and heavy == []
    if args == ["--version"]:
        assert out == f"retrieval-node {__version__}\n"
    else:
        assert "Usage: retrieval-node" in out and "[default: $" not in out and "<bool>" not in out


def test_help_strings_name_values_and_defaults(tmp_path):
    out = probe("retrieve", "--help", cwd=tmp_path)[1]
    for text in ("--deal ID", "--agent NAME", "--stage STAGE", "INTAKE, DILIGENCE, DRAFTING or CLOSING", "--budget TOKENS",
                 "--store DIR", "$RETRIEVAL_NODE_HOME", "--max-sensitivity LEVEL"):
        assert text in out


def test_cli_enums_match_the_models():
    """The CLI repeats a few names so that argument checks need not import the models; they must agree."""
    assert [s.value for s in cli.StageName] == [s.value for s in Stage]
    assert [s.value for s in cli.SensitivityName] == [s.value for s in Sensitivity]
    assert cli.MAX_BUDGET == MAX_TOKENS_BUDGET
    assert (cli.HOME_ENV, cli.DEFAULT_HOME) == (HOME_ENV, DEFAULT_HOME)


def test_normal_run_is_quiet_and_verbose_shows_library_lines(tmp_path):
    store = tmp_path / "store"
    ingest = run_cli("ingest", str(SAMPLE_DATA / "sample_deal" / "chunks.jsonl"), "--store", str(store), "--json", cwd=tmp_path)
    assert ingest.returncode == 0, ingest.stderr
    assert json.loads(ingest.stdout)["ingested"] == 41
    assert ingest.stderr == ""  # no Mem0 spaCy warning, no bm25s DEBUG line, no progress bar off a terminal
    loud = run_cli("-v", "retrieve", "--deal", "2026-ACME-0042", "--agent", "tax", "--stage", "closing", "--store", str(store), "--json", cwd=tmp_path)
    assert loud.returncode == 0, loud.stderr
    assert json.loads(loud.stdout)["package"]["deal_id"] == "2026-ACME-0042"
    assert "DEBUG" not in loud.stderr  # -vv for debug
    # a profile intent loads no model (its query vectors are kept in the store); an ingest does, and -v shows its lines
    assert "INFO sentence_transformers" not in loud.stderr
    loud = run_cli("-v", "ingest", str(SAMPLE_DATA / "clean_deal" / "chunks.jsonl"), "--store", str(store), "--json", cwd=tmp_path)
    assert loud.returncode == 0, loud.stderr
    assert "INFO sentence_transformers" in loud.stderr and "DEBUG" not in loud.stderr
    unknown = run_cli("retrieve", "--deal", "2026-NOPE-0001", "--agent", "tax", "--store", str(store), cwd=tmp_path)
    assert unknown.returncode == 2 and "2026-NOPE-0001" in unknown.stderr
    assert unknown.stderr.count("\n") == 1  # one line: the error, nothing from the libraries
