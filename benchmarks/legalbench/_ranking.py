"""Lexical scoring and score fusion for ranking one document's chunks.

* :class:`LexicalIndex` — BM25 (bm25s, Lucene variant, English stop words, a light
  suffix-stripping stemmer) over the chunks of one document, so IDF is the
  document's own ("confidential" is everywhere in an NDA and says nothing there).
* :func:`fuse` — dense and lexical evidence combined per chunk:
  ``rrf``: sum of ``w / (k + rank)`` (reciprocal rank fusion), or
  ``norm``: ``(1 - w)·minmax(dense) + w·minmax(bm25)``.
* :func:`neighbour_smooth` — a chunk next to a strong chunk gains: answers to
  legal questions run over consecutive chunks (a definition with its provisos, a
  clause with its sub-items), so ``s_i + λ·max(s_{i-1}, s_{i+1})`` on min-max
  normalised scores in reading order.
* :func:`section_headings` — the heading of the section a chunk sits in
  ("Section 6.03. Go-Shop; No Solicitation."), added to the chunk's BM25 text only
  (the stored content, and so the dense vector and the scored range, stay verbatim).
* :func:`toc_like` — table-of-contents chunks list every heading and match every
  heading-shaped question; they are ranked last.
* :func:`defines_term` — when the question quotes a term ('Definition of
  "Knowledge"'), chunks that define it (“Knowledge” means ...) are boosted: contracts
  introduce defined terms in quotes.
* :func:`clean_question` — generic question lead-ins ("What is the", "Information
  about the", "Where is the") are dropped before dense and BM25 scoring.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence

import numpy as np

_SUFFIXES = (("sses", "ss"), ("ies", "y"), ("ing", ""), ("ed", ""), ("s", ""))


def light_stem(words: list[str]) -> list[str]:
    """Plural and -ing/-ed stripping (no dependency): 'obligations' -> 'obligation', 'disclosed' -> 'disclos'."""
    out = []
    for w in words:
        for suf, rep in _SUFFIXES:
            if w.endswith(suf) and len(w) - len(suf) >= 3 and not (suf == "s" and w.endswith(("ss", "us", "is"))):
                w = w[: len(w) - len(suf)] + rep
                break
        out.append(w)
    return out


def tokenize(texts: list[str] | str, *, stem: bool = True, return_ids: bool = True):  # type: ignore[no-untyped-def]
    import bm25s

    return bm25s.tokenize(texts, stopwords="en", stemmer=light_stem if stem else None, return_ids=return_ids, show_progress=False)


class LexicalIndex:
    """BM25 over a fixed list of texts (one document's chunks)."""

    def __init__(self, texts: Sequence[str], *, stem: bool = True, k1: float = 1.2, b: float = 0.75) -> None:
        import bm25s

        self.stem = stem
        self.n = len(texts)
        self._tok = tokenize(list(texts), stem=stem)
        self._model = bm25s.BM25(k1=k1, b=b)
        self._model.index(self._tok, show_progress=False)

    def scores(self, query: str) -> np.ndarray:
        q = [t for t in tokenize(query, stem=self.stem, return_ids=False)[0] if t in self._tok.vocab]
        if not q or not self.n:
            return np.zeros(self.n)
        return np.asarray(self._model.get_scores(q), dtype=np.float64)


def minmax(x: np.ndarray) -> np.ndarray:
    if x.size == 0:
        return x
    lo, hi = float(x.min()), float(x.max())
    return (x - lo) / (hi - lo) if hi > lo else np.zeros_like(x)


def _ranks(x: np.ndarray) -> np.ndarray:
    """1-based rank of each entry by descending score (ties by position)."""
    order = np.lexsort((np.arange(x.size), -x))
    r = np.empty(x.size)
    r[order] = np.arange(1, x.size + 1)
    return r


def fuse(dense: np.ndarray, lexical: np.ndarray, *, method: str = "rrf", weight: float = 0.5, k: float = 60.0) -> np.ndarray:
    """Fused score per chunk (higher is better). ``weight`` is the lexical share."""
    dense = np.asarray(dense, dtype=np.float64)
    lexical = np.asarray(lexical, dtype=np.float64)
    if method == "dense":
        return dense
    if method == "bm25":
        return lexical + 1e-9 * dense
    if method == "rrf":
        return (1 - weight) / (k + _ranks(dense)) + weight / (k + _ranks(lexical))
    if method == "norm":
        return (1 - weight) * minmax(dense) + weight * minmax(lexical)
    raise ValueError(f"unknown fusion method {method!r}")


def neighbour_smooth(scores: np.ndarray, lam: float) -> np.ndarray:
    """``s_i + lam·max(s_{i-1}, s_{i+1})`` on min-max normalised scores (reading order; edges see 0)."""
    s = minmax(np.asarray(scores, dtype=np.float64))
    if lam == 0 or s.size < 2:
        return s
    left = np.r_[0.0, s[:-1]]
    right = np.r_[s[1:], 0.0]
    return s + lam * np.maximum(left, right)


_HEADING = re.compile(r"(?:Section|SECTION|ARTICLE|Article)\s+[\dIVX]+(?:\.\d+)*\.?\s+([A-Z“\"][^\n]{2,120}?)(?:\.\s|\n|\s{3,})")


def section_headings(text: str, starts: Sequence[int]) -> list[str]:
    """For each chunk start, the title of the last "Section/Article <number> <Title>" heading at or before it."""
    found = [(m.start(), m.group(1)) for m in _HEADING.finditer(text)]
    pos = [p for p, _t in found]
    out = []
    for s in starts:
        i = bisect.bisect_right(pos, s) - 1
        out.append(found[i][1] if i >= 0 else "")
    return out


_ARTICLE = re.compile(
    r"(?:(?:ARTICLE|Article)\s+[\dIVX]+\.?\s+|(?:^|\n)[ \t]*\d{1,2}\.[ \t]+)([A-Z“\"][^\n]{2,120}?)(?:\.\s|\n|\s{3,})"
)
_SECTION = re.compile(
    r"(?:(?:Section|SECTION)\s+|(?:^|\n|[ \t]{3,})[ \t]*)(\d{1,2}\.\d{1,2}[a-z]?)\.?[ \t]+([A-Z“\"][^\n.]{2,100}?)(?:\.\s|\n|[ \t]{3,})"
)
_SMALL_WORDS = {"a", "an", "and", "as", "at", "by", "for", "from", "in", "of", "on", "or", "the", "to", "with", "upon", "under", "pending", "prior"}


def _title_like(title: str) -> bool:
    """Headings are title case ("Conduct of Business Pending the Merger"); running text is not."""
    if re.search(r"\d|\bmeans?\b|\bshall\b|\bmeaning\b", title):
        return False
    words = [w for w in re.findall(r"[A-Za-z][A-Za-z’'\-]*", title) if w.lower() not in _SMALL_WORDS]
    return bool(words) and len(words) <= 12 and sum(w[0].isupper() for w in words) >= 0.75 * len(words)


def heading_paths(text: str, starts: Sequence[int]) -> list[str]:
    """For each chunk start, "<article title> / <section title>" of the headings at or before it.

    Sections are "Section 6.2 No Solicitation." or a bare "6.2   Solicitation of
    Transactions." at a line start or after a paragraph gap, title case only (so a
    sentence that starts after a cross-reference is not taken for a title). A
    section heading before the current article's heading is dropped.
    """
    arts = [(m.start(), m.group(1).strip()) for m in _ARTICLE.finditer(text) if _title_like(m.group(1))]
    secs = [(m.start(2) if m.group(2) else m.start(), m.group(2).strip()) for m in _SECTION.finditer(text) if _title_like(m.group(2))]
    apos = [p for p, _t in arts]
    spos = [p for p, _t in secs]
    out = []
    for s in starts:
        i = bisect.bisect_right(apos, s) - 1
        j = bisect.bisect_right(spos, s) - 1
        art = arts[i] if i >= 0 else (-1, "")
        sec = secs[j] if j >= 0 and secs[j][0] >= art[0] else (-1, "")
        out.append(f"{art[1]} / {sec[1]}" if art[1] or sec[1] else "")
    return out


_TOC_REF = re.compile(r"(?:Section|SECTION|ARTICLE|Article)\s+[\dIVX]+(?:\.\d+)*")
_PAGE_NO = re.compile(r"\s\d{1,3}\s")


def toc_like(content: str) -> bool:
    """Four or more section references and three or more bare page numbers: a table of contents."""
    return len(_TOC_REF.findall(content)) >= 4 and len(_PAGE_NO.findall(content)) >= 3


_LEAD_IN = re.compile(
    r"^\s*(?:i want information about|information about|what (?:is|are)|where is|what happens during|is there|what about)\s+(?:the|a|an)?\s*",
    re.IGNORECASE,
)


def clean_question(question: str) -> str:
    """The question without a generic lead-in; unchanged when nothing would remain."""
    out = _LEAD_IN.sub("", question).strip()
    return out or question


_QUOTED = re.compile(r"[\"“”]([^\"“”]{2,80})[\"“”]")
_DEFINES = re.compile(
    r"[“\"]([^\"“”]{2,100})[”\"][^.;:“\"]{0,80}?\b(?:means|mean|shall mean|has the meaning|shall have the meaning|have the meanings?|is defined|refers to)\b",
    re.IGNORECASE,
)


def quoted_terms(question: str) -> list[str]:
    """Terms the question puts in quotes: 'What is the Definition of "Knowledge"' -> ['knowledge']."""
    return [" ".join(t.lower().split()) for t in _QUOTED.findall(question)]


def _same_term(defined: str, asked: str) -> bool:
    import difflib

    defined = " ".join(defined.lower().split())
    if defined == asked or defined.endswith(" " + asked):  # "company material adverse effect" defines "material adverse effect"
        return True
    return difflib.SequenceMatcher(None, defined, asked).ratio() >= 0.85  # a misspelt question ("interveining")


def defines_term(content: str, terms: Sequence[str]) -> bool:
    """True when the chunk defines one of ``terms`` ("“Knowledge” means ...", "“knowledge” of any Person ... means")."""
    if not terms:
        return False
    return any(_same_term(m.group(1), t) for m in _DEFINES.finditer(content) for t in terms)


def order(scores: np.ndarray) -> list[int]:
    """Indices by descending score; ties keep document order."""
    return [int(i) for i in np.lexsort((np.arange(len(scores)), -np.asarray(scores)))]


__all__ = ["LexicalIndex", "clean_question", "defines_term", "fuse", "heading_paths", "light_stem", "minmax", "neighbour_smooth", "order", "quoted_terms", "section_headings", "toc_like", "tokenize"]
