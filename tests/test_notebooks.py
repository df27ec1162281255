"""The notebooks in ``notebooks/`` run on the embedded store and their saved outputs are current.

The notebooks carry their own ``assert`` cells (builders' lien in the sample deal's investigator
package, no material risk on the clean deal, ...), so a regression makes execution fail here.

Refresh the saved outputs after changing a notebook or the library::

    python tests/test_notebooks.py            # executes both notebooks and saves them in place
"""

from __future__ import annotations

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


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_notebook_executes(name, tmp_path):
    nb = execute(NOTEBOOKS / f"{name}.ipynb", tmp_path)
    text = outputs_text(nb)
    assert "checks passed" in text
    if name == "quickstart":
        assert "builders_lien" in text
        assert "replay equals the package: True" in text
        assert "missing_zones: []" in text
    else:
        assert has_png(nb), "the recall-vs-budget plot is missing"
        assert "clean deal: no false material risk for any agent" in text
        assert "node recall / dense baseline recall" in text
    # nothing was written into the working directory: the stores live in their own temp dirs
    assert list(tmp_path.iterdir()) == []


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
