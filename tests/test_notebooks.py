"""The notebooks in ``notebooks/`` run on the embedded store and their saved outputs are current.

The notebooks carry their own ``assert`` cells (builders' lien in the sample deal's investigator
package, no material risk on the clean deal, ...), so a regression makes execution fail here. Then the
fresh outputs (text, tables, the numbers behind the figures) are compared with the saved ones, cell by
cell, with what changes from run to run masked (:func:`mask`: timings, temporary paths, audit ids,
store-keyed hashes; every number of a cell tagged ``volatile``, e.g. the latency table). A difference fails
with a diff: the code changed what the notebook shows and the notebook was not re-saved.

Refresh the saved outputs after changing a notebook or the library::

    python tests/test_notebooks.py            # executes both notebooks and saves them in place
"""

from __future__ import annotations

import difflib
import re
import sys
from pathlib import Path

import nbclient
import nbformat
import pytest

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
NAMES = ["quickstart", "evaluation"]


def execute(path: Path, workdir: Path):
    """Run every cell of the notebook in a fresh python3 kernel with ``workdir`` as its working directory."""
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(workdir)}}, record_timing=False
    )
    client.execute()
    return nb


def outputs_text(nb) -> str:
    """Text of every stream, plain-text and Markdown output, concatenated."""
    parts = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if out.get("output_type") == "stream":
                parts.append(out.get("text", ""))
            for mime in ("text/plain", "text/markdown"):
                if mime in out.get("data", {}):
                    parts.append(out["data"][mime])
    return "\n".join(parts)


#: What differs between two runs of the same code: (pattern, replacement), applied in order.
VOLATILE = [
    (re.compile(r"aud_[0-9a-f]+"), "aud_<id>"),                       # audit ids
    (re.compile(r"\b[0-9a-f]{12,64}\b"), "<hex>"),                   # package hashes and evidence codes (keyed by the store's secret)
    (re.compile(r"(/tmp|/var/folders)/\S+"), "<path>"),               # temporary directories
    (re.compile(r"\S+\.py:\d+"), "<file:line>"),                      # a warning's origin (differs per checkout)
    (re.compile(r"rn-[\w-]+"), "<dir>"),
    (re.compile(r"\b\d+(?:\.\d+)? ?(?:s|ms)\b"), "<time>"),          # "filled in 21 s", "16.5 s"
]
NUMBER = re.compile(r"\d+(?:\.\d+)?")


def mask(text: str, *, volatile_cell: bool = False) -> str:
    for pattern, repl in VOLATILE:
        text = pattern.sub(repl, text)
    return NUMBER.sub("<n>", text) if volatile_cell else text


def cell_outputs(nb) -> list[tuple[int, str, str]]:
    """(cell index, first source line, masked text of its outputs) of every code cell: streams, Markdown, HTML and
    plain text (figures are compared through the numbers the notebook prints next to them, not their pixels)."""
    out = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        volatile = "volatile" in cell.get("metadata", {}).get("tags", [])
        parts = []
        for o in cell.get("outputs", []):
            if o.get("output_type") == "stream":
                parts.append(o.get("text", ""))
            data = o.get("data", {})
            for mime in ("text/markdown", "text/html", "text/plain"):
                if mime in data and "image/png" not in data:
                    parts.append(data[mime] if isinstance(data[mime], str) else "".join(data[mime]))
                    break
        head = (cell.source.strip().splitlines() or [""])[0][:60]
        out.append((i, head, mask("".join(parts), volatile_cell=volatile)))
    return out


def output_diff(saved, fresh, name: str) -> str:
    """A readable diff of the cells whose masked outputs differ ('' when none does)."""
    report = []
    for (i, head, old), (_, _, new) in zip(cell_outputs(saved), cell_outputs(fresh)):
        if old != new:
            diff = difflib.unified_diff(old.splitlines(), new.splitlines(), "saved", "fresh", lineterm="", n=1)
            report.append(f"{name}.ipynb cell {i} ({head}):\n" + "\n".join(diff))
    if len(saved.cells) != len(fresh.cells):
        report.append(f"{name}.ipynb: {len(saved.cells)} cells saved, {len(fresh.cells)} executed")
    return "\n\n".join(report)


def has_png(nb) -> bool:
    return any("image/png" in out.get("data", {}) for cell in nb.cells for out in cell.get("outputs", []))


@pytest.mark.parametrize("name", NAMES)
def test_saved_notebook_is_executed(name):
    """Cheap: the committed notebook was run top to bottom in one kernel, without errors."""
    nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code, f"{name}.ipynb has no code cells"
    counts = [c.execution_count for c in code]
    assert None not in counts, f"{name}.ipynb has unexecuted cells; refresh with `python tests/test_notebooks.py`"
    assert counts == list(range(1, len(code) + 1)), f"{name}.ipynb was not executed top to bottom in one run: {counts}"
    errors = [o for c in code for o in c.outputs if o.output_type == "error"]
    assert not errors, f"{name}.ipynb was saved with an error output: {errors[0].get('ename')}"
    assert nb.metadata.get("kernelspec", {}).get("name") == "python3"


def test_a_changed_output_fails_with_a_diff_and_a_volatile_one_does_not():
    saved = nbformat.read(NOTEBOOKS / "evaluation.ipynb", as_version=4)
    fresh = nbformat.read(NOTEBOOKS / "evaluation.ipynb", as_version=4)
    table = next(c for c in fresh.cells if c.cell_type == "code" and "BUDGETS = [" in c.source)
    md = next(o for o in table.outputs if "text/markdown" in o.get("data", {}))
    assert output_diff(saved, fresh, "evaluation") == ""
    # a run's timing, a latency cell's numbers: masked
    stream = next(o for o in table.outputs if o.get("output_type") == "stream")
    stream["text"] = re.sub(r"in [0-9.]+ s", "in 99.9 s", stream["text"])
    latency = next(c for c in fresh.cells if "volatile" in c.get("metadata", {}).get("tags", []))
    lat = next(o for o in latency.outputs if "text/markdown" in o.get("data", {}))
    lat["data"]["text/markdown"] = NUMBER.sub("7", lat["data"]["text/markdown"])
    assert output_diff(saved, fresh, "evaluation") == ""
    # a recall in a table: reported, with the cell and the line
    md["data"]["text/markdown"] = md["data"]["text/markdown"].replace("1.00", "0.50", 1)
    diff = output_diff(saved, fresh, "evaluation")
    assert "evaluation.ipynb cell" in diff and "-|" in diff and "+|" in diff and "0.50" in diff


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_notebook_executes_and_its_saved_outputs_are_current(name, tmp_path):
    saved = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    nb = execute(NOTEBOOKS / f"{name}.ipynb", tmp_path)
    text = outputs_text(nb)
    assert "checks passed" in text
    if name == "quickstart":
        assert "builders_lien" in text
        assert "replay equals the package: True" in text
        assert "missing_zones: []" in text
    else:
        assert has_png(nb), "the recall-vs-budget plot is missing"
        assert "clean deal: no material risk of a kind its gold does not list, for any agent" in text
        assert "cells: node / dense / bm25 / ensemble recall" in text
    # nothing was written into the working directory: the stores live in their own temp dirs
    assert list(tmp_path.iterdir()) == []
    diff = output_diff(saved, nb, name)
    assert not diff, ("the notebook's saved outputs are not what the current code shows; re-save with "
                      f"`python tests/test_notebooks.py {name}` and commit:\n{diff}")


def refresh(names: list[str]) -> None:
    """Execute the notebooks and save them with their outputs (what ``test_saved_notebook_is_executed`` checks)."""
    import tempfile
    import time

    for name in names:
        path = NOTEBOOKS / f"{name}.ipynb"
        t = time.perf_counter()
        with tempfile.TemporaryDirectory() as workdir:
            nb = execute(path, Path(workdir))
        nbformat.write(nb, path)
        print(f"{path}: executed and saved in {time.perf_counter() - t:.0f} s")


if __name__ == "__main__":
    refresh(sys.argv[1:] or NAMES)
