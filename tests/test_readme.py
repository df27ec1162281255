"""The README's code runs as written: every ```python block on its own (a fresh namespace; nothing carried over from
the block before), and the commands of its ```bash blocks that are safe to run here.

The blocks share one working directory, as a reader's would: the first fills ./.retrieval-node, the next ingest of
the same file changes nothing, which keeps the file cheap."""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
README = (REPO / "README.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"^```(\w+)\n(.*?)^```$", README, flags=re.MULTILINE | re.DOTALL)
PYTHON_BLOCKS = [code for lang, code in BLOCKS if lang == "python"]
#: commands of the README not run here, and why; any other command must be runnable (or listed here)
NOT_RUN = {
    "bash scripts/setup.sh": "installs packages (CI runs it before the suite)",
    "python3 -m pytest -q": "the test suite itself",
}


def readme_commands() -> list[str]:
    commands: list[str] = []
    for lang, code in BLOCKS:
        if lang not in ("bash", "sh", "console"):
            continue
        for line in code.splitlines():
            line = line.split(" #", 1)[0].strip()
            commands += [c.strip() for c in line.split("&&") if c.strip() and c.strip() not in commands]
    return commands


def test_readme_has_the_blocks_this_file_runs():
    assert len(PYTHON_BLOCKS) >= 2
    assert "retrieval-node demo" in readme_commands()


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("readme")


@pytest.mark.parametrize("code", PYTHON_BLOCKS, ids=[f"python-block-{i + 1}" for i in range(len(PYTHON_BLOCKS))])
def test_python_block_runs_as_written(code, workdir, monkeypatch):
    monkeypatch.chdir(workdir)
    monkeypatch.delenv("RETRIEVAL_NODE_HOME", raising=False)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), {"__name__": "__readme__"})
    assert out.getvalue().strip()  # each block prints what it found


@pytest.mark.slow
@pytest.mark.parametrize("command", readme_commands())
def test_bash_command_runs(command, workdir):
    if command in NOT_RUN:
        pytest.skip(NOT_RUN[command])
    argv = shlex.split(command)
    assert argv[0] == "retrieval-node", f"README command {command!r} is neither run here nor listed in NOT_RUN"
    env = {k: v for k, v in os.environ.items() if not k.startswith("RETRIEVAL_NODE_")}
    env.update(PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1")
    done = subprocess.run([sys.executable, "-m", "retrieval_node.cli", *argv[1:]], capture_output=True, text=True,
                          cwd=workdir, env=env, timeout=900)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() and done.stderr == ""
