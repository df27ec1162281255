"""Route a query to a document from its "Consider <document>;" part.

The hint names the agreement by its parties ("the Non-Disclosure Agreement between
CopAcc and ToP Mentors", 'Parent "Gainwell Acquisition Corp." and Target "HMS
Holdings Corp."'); file names and first lines carry the same names in other
spellings ("CopAcc_NDA-and-ToP-Mentors_2.0_2017.txt", "NDA-SqillerBetaTesters").
Two scores, summed:

* **name match** (weight 1): each word of the hint (and the initials of each run of
  capitalised words, "Boston Consulting Group" -> "bcg") that occurs in the file
  name, weighted by its IDF over the file names. Words of four letters or more
  match by their first six letters anywhere in the file name squashed to
  ``[a-z0-9]`` ("sqiller" in "ndasqillerbetatesters", "employ" in "employee");
  shorter words must be a whole token of the name (camelCase split). Normalised by
  the total IDF of the hint words that occur in some name.
* **head BM25** (weight ``head_weight``): BM25 (bm25s, English stop words) of the
  hint against the file name plus the first ``head_chars`` characters of the
  document (title, parties), divided by the best score.

The router sees every document of the subset's corpus folder, indexed or not.
"""

from __future__ import annotations

import math
import re
import urllib.parse
from collections.abc import Sequence
from pathlib import PurePosixPath

import numpy as np

_WORD = re.compile(r"[a-z0-9]+")


def _squash(s: str) -> str:
    return re.sub(r"[^a-z0-9]", "", s.lower())


def _name_tokens(s: str) -> set[str]:
    s = re.sub(r"([a-z])([A-Z])", r"\1 \2", s)
    return set(_WORD.findall(s.lower()))


def _hint_words(hint: str) -> set[str]:
    words = set(_WORD.findall(hint.lower()))
    # initials of runs of capitalised words: "Hochschule Furtwangen University" -> "hfu"
    run: list[str] = []
    for tok in re.split(r"[\s\-]+", hint) + [""]:
        tok = tok.strip("\"'“”‘’(),.;")
        if tok[:1].isupper():
            run.append(tok[0].lower())
            continue
        if len(run) >= 2:
            words.add("".join(run))
        run = []
    return words


class DocumentRouter:
    """Scores every document of a subset for a "Consider ..." hint.

    >>> router = DocumentRouter(["contractnli/BT_NDA.txt"], ["NON-DISCLOSURE AGREEMENT ..."])  # doctest: +SKIP
    >>> router.rank("Consider BT's Non-Disclosure Agreement")[0]                                # doctest: +SKIP
    ('contractnli/BT_NDA.txt', 1.5)
    """

    def __init__(self, files: Sequence[str], heads: Sequence[str], *, head_weight: float = 0.5) -> None:
        import bm25s

        self.files = list(files)
        self.head_weight = head_weight
        raw = [urllib.parse.unquote(PurePosixPath(f).stem) for f in self.files]
        self._squashed = [_squash(r) for r in raw]
        self._tokens = [_name_tokens(r) for r in raw]
        reps = [r.replace("_", " ") + " " + h for r, h in zip(raw, heads, strict=True)]
        self._tok = bm25s.tokenize(reps, stopwords="en", show_progress=False)
        self._bm25 = bm25s.BM25()
        self._bm25.index(self._tok, show_progress=False)

    def scores(self, hint: str) -> np.ndarray:
        import bm25s

        n = len(self.files)
        name = np.zeros(n)
        total = 0.0
        for w in _hint_words(hint):
            if len(w) <= 3:
                hit = np.array([w in t for t in self._tokens])
            else:
                hit = np.array([w[:6] in s for s in self._squashed])
            df = int(hit.sum())
            if df == 0:
                continue
            idf = math.log(n / df)
            total += idf
            name += idf * hit
        if total > 0:
            name /= total
        q = [t for t in bm25s.tokenize(hint, stopwords="en", return_ids=False, show_progress=False)[0] if t in self._tok.vocab]
        head = self._bm25.get_scores(q) if q else np.zeros(n)
        if head.max() > 0:
            head = head / head.max()
        return name + self.head_weight * head

    def rank(self, hint: str) -> list[tuple[str, float]]:
        s = self.scores(hint)
        order = sorted(range(len(self.files)), key=lambda i: (-s[i], self.files[i]))
        return [(self.files[i], float(s[i])) for i in order]


__all__ = ["DocumentRouter"]
