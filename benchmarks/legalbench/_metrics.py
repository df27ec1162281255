"""Character-span metrics of LegalBench-RAG, as small pure functions.

The paper's protocol (README of the benchmark data): for the top-k retrieved ranges of
a query, merge overlapping retrieved ranges first, then

* precision@k = |retrieved ∩ gold| / |retrieved|   (characters; 0 when nothing was retrieved)
* recall@k    = |retrieved ∩ gold| / |gold|

Gold spans of one query are merged too (two annotated spans that overlap count their
shared characters once). Ranges are per file: a range of another file never overlaps.
Recall at a token budget packs the ranked ranges in order while the running cl100k
token total stays within the budget (the first range that does not fit ends the
package) and reports the share of gold characters inside.

:func:`self_check` compares every function with a brute-force character-set version.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Iterable, Sequence

Span = tuple[str, int, int]  # (file_path, start, end), end exclusive

KS: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64)
BUDGETS: tuple[int, ...] = (512, 1024, 2048, 4096, 8192)


def merge(intervals: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sorted, disjoint union of half-open intervals (touching intervals are joined; empty ones dropped)."""
    out: list[list[int]] = []
    for s, e in sorted(i for i in intervals if i[1] > i[0]):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def by_file(spans: Iterable[Span]) -> dict[str, list[tuple[int, int]]]:
    """Merged intervals per file."""
    raw: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for f, s, e in spans:
        raw[f].append((s, e))
    return {f: merge(v) for f, v in raw.items()}


def length(merged: dict[str, list[tuple[int, int]]]) -> int:
    return sum(e - s for v in merged.values() for s, e in v)


def _overlap_sorted(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> int:
    """Characters shared by two sorted disjoint interval lists (two pointers)."""
    i = j = total = 0
    while i < len(a) and j < len(b):
        lo = max(a[i][0], b[j][0])
        hi = min(a[i][1], b[j][1])
        if hi > lo:
            total += hi - lo
        if a[i][1] <= b[j][1]:
            i += 1
        else:
            j += 1
    return total


def overlap(a: dict[str, list[tuple[int, int]]], b: dict[str, list[tuple[int, int]]]) -> int:
    return sum(_overlap_sorted(v, b[f]) for f, v in a.items() if f in b)


def precision_recall(retrieved: Sequence[Span], gold: Sequence[Span]) -> tuple[float, float]:
    """Character precision and recall of a set of retrieved ranges against the gold spans."""
    r = by_file(retrieved)
    g = by_file(gold)
    inter = overlap(r, g)
    rl, gl = length(r), length(g)
    return (inter / rl if rl else 0.0), (inter / gl if gl else 0.0)


def at_k(ranked: Sequence[Span], gold: Sequence[Span], ks: Sequence[int] = KS) -> dict[int, tuple[float, float]]:
    """``{k: (precision@k, recall@k)}`` over the first k ranked ranges."""
    return {k: precision_recall(ranked[:k], gold) for k in ks}


def pack(ranked: Sequence[Span], tokens: Sequence[int], budget: int) -> list[Span]:
    """Ranked ranges in order while their token total stays within ``budget``."""
    out: list[Span] = []
    used = 0
    for span, n in zip(ranked, tokens, strict=True):
        if used + n > budget:
            break
        out.append(span)
        used += n
    return out


def recall_at_budgets(ranked: Sequence[Span], tokens: Sequence[int], gold: Sequence[Span], budgets: Sequence[int] = BUDGETS) -> dict[int, float]:
    return {b: precision_recall(pack(ranked, tokens, b), gold)[1] for b in budgets}


# --------------------------------------------------------------------------- brute force


def _chars(spans: Iterable[Span]) -> set[tuple[str, int]]:
    return {(f, i) for f, s, e in spans for i in range(s, e)}


def _brute(retrieved: Sequence[Span], gold: Sequence[Span]) -> tuple[float, float]:
    r, g = _chars(retrieved), _chars(gold)
    return (len(r & g) / len(r) if r else 0.0), (len(r & g) / len(g) if g else 0.0)


def self_check(trials: int = 2000, seed: int = 7) -> int:
    """Random interval sets, two files: the fast functions must equal the character-set version."""
    rng = random.Random(seed)
    files = ("a.txt", "b.txt")

    def spans(n: int) -> list[Span]:
        out = []
        for _ in range(n):
            s = rng.randrange(0, 300)
            out.append((rng.choice(files), s, s + rng.randrange(0, 60)))
        return out

    assert merge([(5, 10), (0, 3), (3, 4), (8, 12), (20, 20)]) == [(0, 4), (5, 12)]
    assert precision_recall([], [("a", 0, 5)]) == (0.0, 0.0)
    assert precision_recall([("a", 0, 10), ("a", 5, 10)], [("a", 5, 15)]) == (0.5, 0.5)
    assert precision_recall([("b", 0, 10)], [("a", 0, 10)]) == (0.0, 0.0)
    for _ in range(trials):
        ranked = spans(rng.randrange(0, 12))
        gold = spans(rng.randrange(1, 4))
        for k, (p, r) in at_k(ranked, gold, (1, 2, 4, 8, 64)).items():
            bp, br = _brute(ranked[:k], gold)
            assert abs(p - bp) < 1e-12 and abs(r - br) < 1e-12, (ranked, gold, k, p, r, bp, br)
        tokens = [rng.randrange(1, 50) for _ in ranked]
        for b, r in recall_at_budgets(ranked, tokens, gold, (10, 60, 200)).items():
            n = 0
            used = 0
            while n < len(ranked) and used + tokens[n] <= b:
                used += tokens[n]
                n += 1
            assert abs(r - _brute(ranked[:n], gold)[1]) < 1e-12
    return trials


__all__ = ["BUDGETS", "KS", "Span", "at_k", "by_file", "merge", "overlap", "pack", "precision_recall", "recall_at_budgets", "self_check"]
