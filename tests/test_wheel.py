"""The wheel works anywhere: built from the checkout, installed into a fresh virtual environment outside it,
``retrieval-node demo --json`` runs there on the configs and sample deal shipped inside the wheel.

One venv, one demo run. ``--system-site-packages`` + ``--no-deps`` keep torch and the other dependencies from
being installed again; no network is used (``--no-index``, ``--no-build-isolation``, ``HF_HUB_OFFLINE``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RETRIEVAL_NODE_", "PYTHON", "VIRTUAL_ENV"))}
    env.update(HF_HUB_OFFLINE="1", **extra)
    return env


def build_wheel(dest: Path) -> Path:
    """Build from a clean copy of the sources (a stale build/ in the checkout must not leak into the wheel)."""
    src = dest / "src"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("retrieval_node", "adapters", "configs"):
        shutil.copytree(REPO / name, src / name, ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, src / name)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q",
                    "-w", str(dest / "dist"), str(src)], check=True, env=_env(), timeout=300)
    (wheel,) = (dest / "dist").glob("retrieval_node-*.whl")
    return wheel


@pytest.mark.slow
def test_wheel_installs_and_runs_the_demo_outside_the_checkout(tmp_path):
    wheel = build_wheel(tmp_path / "build")
    names = set(zipfile.ZipFile(wheel).namelist())
    configs = sorted(p.name for p in (REPO / "configs").glob("*.yaml"))
    assert {f"retrieval_node/configs/{c}" for c in configs} <= names
    assert {"retrieval_node/py.typed", "retrieval_node/sample_data/sample_deal/chunks.jsonl", "retrieval_node/sample_data/patterns.jsonl"} <= names

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)], check=True, timeout=120)
    py = venv / "bin" / "python"
    # pip from the system site-packages installs into the venv it runs in; -I: the checkout's editable install is not
    # this environment's, so install beside it rather than "already satisfied"
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--ignore-installed", str(wheel)],
                   check=True, env=_env(), timeout=300)

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    where = subprocess.run(
        [str(py), "-c", "import json, retrieval_node, adapters; from retrieval_node.config import default_config_dir; "
                        "print(json.dumps([retrieval_node.__file__, adapters.__file__, str(default_config_dir())]))"],
        capture_output=True, text=True, check=True, cwd=elsewhere, env=_env(), timeout=120,
    )
    site = str(venv / "lib")
    assert all(p.startswith(site) for p in json.loads(where.stdout)), where.stdout  # the venv's copy, not the checkout

    exe = venv / "bin" / "retrieval-node"
    version = subprocess.run([str(exe), "--version"], capture_output=True, text=True, check=True, cwd=elsewhere, env=_env(), timeout=60)
    assert version.stdout.startswith("retrieval-node ")

    demo = subprocess.run([str(exe), "demo", "--json", "--store", str(elsewhere / "store")],
                          capture_output=True, text=True, cwd=elsewhere, env=_env(), timeout=900)
    assert demo.returncode == 0, demo.stderr
    doc = json.loads(demo.stdout)
    assert doc["deal_id"] == "2026-ACME-0042" and doc["ingest"]["rejected"] == 0 and doc["ingest"]["ingested"] > 0
    assert [a["agent"] for a in doc["agents"]] == ["investigator", "tax", "condo", "scribe"]
    assert all(a["package"]["ordered_chunks"] for a in doc["agents"])
    assert demo.stderr == ""  # quiet by default

    # an installation without its configs says what to set; $RETRIEVAL_NODE_CONFIG_DIR then wins
    shutil.rmtree(Path(json.loads(where.stdout)[2]))
    bare = subprocess.run([str(exe), "retrieve", "--deal", "D", "--agent", "tax"], capture_output=True, text=True, cwd=elsewhere,
                          env=_env(), timeout=60)
    assert bare.returncode == 2 and "set RETRIEVAL_NODE_CONFIG_DIR to a folder holding agents.yaml" in bare.stderr
    mine = subprocess.run([str(exe), "retrieve", "--deal", "D", "--agent", "nope"], capture_output=True, text=True, cwd=elsewhere,
                          env=_env(RETRIEVAL_NODE_CONFIG_DIR=str(REPO / "configs")), timeout=60)
    assert mine.returncode == 2 and f"agents.yaml in {REPO / 'configs'}" in mine.stderr
