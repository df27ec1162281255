"""LegalBench-RAG query files and corpus documents.

Query file format (the benchmark's): ``{"tests": [{"query": "Consider ...; <question>",
"snippets": [{"file_path": "<subset>/X.txt", "span": [start, end], "answer": "..."}]}]}``.
Spans are Python string offsets into the UTF-8 text of ``corpus/<file_path>``.
"""

from __future__ import annotations

import json
import os
import random
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

#: Where the benchmark data lives by default: ``$LEGALBENCH_RAG_DIR`` or ``shared/bench/legalbench-rag``
#: beside the repository (the layout of a fresh clone with shared/ next to it).
_REPO = Path(__file__).resolve().parents[2]
DEFAULT_DATA = Path(os.environ.get("LEGALBENCH_RAG_DIR") or (_REPO.parent / "shared" / "bench" / "legalbench-rag"))


@dataclass(frozen=True, slots=True)
class Query:
    index: int                              # position in the query file
    text: str                               # the full query
    document_hint: str                      # the "Consider ...;" part ('' when absent)
    question: str                           # the rest
    gold: tuple[tuple[str, int, int], ...]  # (file_path, start, end)

    @property
    def gold_files(self) -> tuple[str, ...]:
        return tuple(OrderedDict.fromkeys(f for f, _s, _e in self.gold))


def split_query(text: str) -> tuple[str, str]:
    """``("Consider the NDA between A and B", "Does the document ...?")``; no hint when there is no ';'."""
    head, sep, tail = text.partition(";")
    if sep and head.strip().lower().startswith("consider"):
        return head.strip(), tail.strip()
    return "", text.strip()


def load_queries(path: str | Path) -> list[Query]:
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    tests = data["tests"] if isinstance(data, dict) else data
    out = []
    for i, t in enumerate(tests):
        hint, question = split_query(t["query"])
        gold = tuple((sn["file_path"], int(sn["span"][0]), int(sn["span"][1])) for sn in t["snippets"])
        out.append(Query(i, t["query"], hint, question, gold))
    return out


def subset_name(queries: list[Query], path: str | Path) -> str:
    """The subset folder the gold files live in (``contractnli``), else the query file's stem."""
    tops = {f.split("/", 1)[0] for q in queries for f in q.gold_files if "/" in f}
    if len(tops) == 1:
        return tops.pop()
    return Path(path).stem


def sample_by_document(queries: list[Query], limit: int | None, seed: int) -> list[Query]:
    """At most ``limit`` queries, taken whole documents at a time in a seeded random order.

    Sampling documents rather than queries keeps the index small (every query of a
    sampled document is kept, so the per-document mix of questions is preserved).
    A document is added while the total stays within ``limit``.
    """
    if limit is None or limit >= len(queries):
        return list(queries)
    groups: OrderedDict[str, list[Query]] = OrderedDict()
    for q in queries:
        groups.setdefault(q.gold_files[0], []).append(q)
    docs = list(groups)
    random.Random(seed).shuffle(docs)
    chosen: list[Query] = []
    for d in docs:
        if len(chosen) + len(groups[d]) > limit:
            if not chosen:
                chosen.extend(groups[d][:limit])
            continue
        chosen.extend(groups[d])
    return sorted(chosen, key=lambda q: q.index)


def read_document(corpus: Path, file_path: str) -> str:
    """Text of one corpus file exactly as the spans index it (UTF-8, newlines untouched, BOM kept)."""
    with open(corpus / file_path, encoding="utf-8", newline="") as fh:
        return fh.read()


def corpus_files(corpus: Path, subset: str) -> list[str]:
    """``<subset>/<name>.txt`` of every document of a subset, sorted."""
    return sorted(f"{subset}/{p.name}" for p in (corpus / subset).glob("*.txt"))


__all__ = ["DEFAULT_DATA", "Query", "corpus_files", "load_queries", "read_document", "sample_by_document", "split_query", "subset_name"]
