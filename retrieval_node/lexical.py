"""Per-deal BM25 indexes built at ingest and kept in the store, so a deal's first call does not tokenise the deal.

:func:`build` is what :meth:`~retrieval_node.deals.DealView.bm25_scores` has always built (bm25s over the deal's
chunks in chunk-id order, English stop words); :func:`save` writes it under ``<store>/lexical/<deal key>/`` with the
chunk ids it covers and :func:`load` reads it back only when those ids are exactly the view's (any other set of
chunks, a damaged or partial directory, another bm25s version: None, and the view builds its own as before). The
saved arrays are bm25s's own ``save`` format (float32 scores, exact), so the scores are identical.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

LEXICAL_DIR = "lexical"
_META = "rn_lexical.json"


def build(contents: Sequence[str]) -> tuple[Any, dict[str, int]]:
    """(bm25s model, vocabulary) over ``contents`` (one per chunk, in chunk-id order)."""
    import bm25s

    tokens = bm25s.tokenize(list(contents), stopwords="en", show_progress=False) if contents else None
    model = bm25s.BM25()
    if tokens is not None:
        model.index(tokens, show_progress=False)
    return model, (tokens.vocab if tokens is not None else {})


def _dir(home: Path, deal_id: str) -> Path:
    return Path(home) / LEXICAL_DIR / hashlib.sha256(deal_id.encode()).hexdigest()[:32]


def _ids_digest(ids: Sequence[str]) -> str:
    return hashlib.sha256("\n".join(ids).encode()).hexdigest()


def _version() -> str:
    from importlib import metadata

    return metadata.version("bm25s")


def save(home: Path, deal_id: str, ids: Sequence[str], contents: Sequence[str]) -> None:
    """Build the deal's index over ``ids`` (sorted chunk ids) and ``contents``, and replace the stored one atomically."""
    if not ids:
        return
    model, vocab = build(contents)
    final = _dir(home, deal_id)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.with_name(f".{final.name}.{os.getpid()}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save(str(tmp), show_progress=False)
    (tmp / "rn_vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
    (tmp / _META).write_text(json.dumps({"deal_id": deal_id, "ids": _ids_digest(ids), "n": len(ids), "bm25s": _version()}), encoding="utf-8")
    # owner-only like the store's other files (the vocabulary is the deal's words)
    os.chmod(final.parent, 0o700)
    os.chmod(tmp, 0o700)
    for f in tmp.iterdir():
        os.chmod(f, 0o600)
    old = final.with_name(f".{final.name}.{os.getpid()}.old")
    if final.exists():
        os.replace(final, old)
    os.replace(tmp, final)
    shutil.rmtree(old, ignore_errors=True)


def load(home: Path, deal_id: str, ids: Sequence[str]) -> tuple[Any, dict[str, int]] | None:
    """The stored index of the deal if it covers exactly ``ids`` (sorted chunk ids), else None."""
    d = _dir(home, deal_id)
    try:
        meta = json.loads((d / _META).read_text(encoding="utf-8"))
        if meta.get("deal_id") != deal_id or meta.get("n") != len(ids) or meta.get("ids") != _ids_digest(ids) or meta.get("bm25s") != _version():
            return None
        import bm25s

        model = bm25s.BM25.load(str(d), show_progress=False, verbosity=0)
        vocab = json.loads((d / "rn_vocab.json").read_text(encoding="utf-8"))
        return model, vocab
    except Exception:  # missing, partial or damaged: the view builds its own
        return None


__all__ = ["LEXICAL_DIR", "build", "load", "save"]
