"""Document routing for questions: which documents of a deal a question names (used by :mod:`retrieval_node.question`).

A deal has many documents, and a question often names the one it is about by its title, its parties, its date or
its kind: "in the lender's instructions, ...", "the 2024 reserve fund study", "Consider the Non-Disclosure
Agreement between CopAcc and ToP Mentors; ...". :func:`split_hint` finds such a description; a
:class:`DocumentRouter` scores every document the caller may see against it:

* **name match** (weight 1): each word of the description (and the initials of each run of capitalised words,
  "Boston Consulting Group" -> "bcg", as a whole token of the name) that occurs in the document's *name* — its id (a file name), its role
  ("LENDER_INSTRUCTIONS" -> "lender instructions") and its year — weighted by its IDF over the names. Words of
  four letters or more match by their first six letters anywhere in the name squashed to ``[a-z0-9]``
  ("sqiller" in "ndasqillerbetatesters", "lender's" in "lenderinstructions"); shorter words must be a whole
  token of the name (for a question's words in passing, four-letter words too: "list the charges" does not name
  the "listing" search). Normalised by the total IDF of the description's words that occur in some name.
* **head BM25** (weight ``head_weight``): BM25 of the description against the name plus the opening
  ``head_chars`` characters of the document (its title and parties), divided by the best score.

A description from an explicit form ("Consider X; ...", "In the X, ...") routes (:meth:`DocumentRouter.route`): only
the best document is searched, whenever anything matches. A question without one never routes: a document named in
passing ("does the condo bylaw restrict rentals?", "since the November search") is a guess at where the answer is,
and a wrong or narrow guess would hide the rest of the deal (the answer in the *current* title search, a purchase
agreement titled "new home" beside a new-home warranty). :meth:`DocumentRouter.evidence` gives its words' match of
document names (and its capitalised words', party names and years, of the heads) as soft evidence per document
(0..1), which the ranking adds to each document's chunks: the named document comes first, the rest still follows.
"""

from __future__ import annotations

import math
import re
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath

import numpy as np

_WORD = re.compile(r"[a-z0-9]+")
#: Words that describe any document or any question: never evidence that one document is named.
GENERIC = frozenset(
    "a an and any are as at be by can could do does document documents each for from has have how if in is it its "
    "may of on or shall should that the their them there these this to under was what when where which who will "
    "with would agreement contract file page pages section clause provision term terms question tell me please "
    "about information regarding want know there".split()
)
#: Explicit document descriptions: "Consider X; question" and "In/Under/According to/Per the X, question".
_CONSIDER = re.compile(r"^\s*consider\s+(?P<hint>.+?)\s*;\s*(?P<rest>.+)$", re.IGNORECASE | re.DOTALL)
_IN_THE = re.compile(
    r"^\s*(?:in|under|according to|per|from|within)\s+(?P<hint>(?:the|this|that|our|their|[A-Z0-9])[^,;:?]{2,160}?)\s*[,;:]\s*(?P<rest>.+)$",
    re.IGNORECASE | re.DOTALL,
)


#: Where a description of several documents divides: before "the/this/that/our/their" after "and", "or", "&" or a comma.
_SEVERAL = re.compile(r"\s*(?:,\s*(?:and\s+|or\s+)?|\s(?:and|or|&)\s+)(?=(?:the|this|that|our|their)\s)", re.IGNORECASE)


def split_hint(question: str) -> tuple[str, str]:
    """``(document description, the rest)`` of an explicit form, else ``("", question)``.

    >>> split_hint("Consider the NDA between A and B; Does it allow sharing?")
    ('the NDA between A and B', 'Does it allow sharing?')
    >>> split_hint("In the purchase contract, what is the deposit?")
    ('the purchase contract', 'what is the deposit?')
    >>> split_hint("Is there a right of first refusal?")
    ('', 'Is there a right of first refusal?')
    """
    for pattern in (_CONSIDER, _IN_THE):
        m = pattern.match(question)
        if m and m.group("rest").strip():
            return m.group("hint").strip(), m.group("rest").strip()
    return "", question.strip()


def _squash(s: str) -> str:
    return re.sub(r"[^a-z0-9]", "", s.lower())


def _name_tokens(s: str) -> set[str]:
    s = re.sub(r"([a-z])([A-Z])", r"\1 \2", s)
    return set(_WORD.findall(s.lower()))


def hint_words(hint: str, *, drop_generic: bool = False) -> set[str]:
    """The description's words (``drop_generic``: without :data:`GENERIC` ones)."""
    return {w for w in _WORD.findall(hint.lower()) if not (drop_generic and w in GENERIC)}


def initials(hint: str) -> set[str]:
    """The initials of each run of capitalised words ("Hochschule Furtwangen University" -> "hfu"): matched as a
    whole token of a name only (as an acronym is written), never inside a longer word."""
    out: set[str] = set()
    run: list[str] = []
    for tok in [*re.split(r"[\s\-]+", hint), ""]:
        tok = tok.strip("\"'“”‘’(),.;:?")
        if tok[:1].isupper():
            run.append(tok[0].lower())
            continue
        if len(run) >= 2:
            out.add("".join(run))
        run = []
    return out


def proper_nouns(question: str) -> str:
    """Capitalised words not at a sentence start, and numbers of four digits (years): what names a party or a date."""
    out = []
    for m in re.finditer(r"(?<![.?!]\s)(?<!^)\b([A-Z][A-Za-z0-9&'’\-]+|\d{4})\b", question.strip()):
        if m.group(1).lower() not in GENERIC:
            out.append(m.group(1))
    return " ".join(out)


@dataclass(frozen=True, slots=True)
class DocumentDescription:
    """What a router knows of one document: its id, role, year (may be '') and opening text."""

    document_id: str
    role: str
    year: str
    head: str

    @property
    def name(self) -> str:
        stem = urllib.parse.unquote(PurePosixPath(self.document_id).stem)
        return f"{stem} {self.role.replace('_', ' ').lower()} {self.year}".strip()


class DocumentRouter:
    """Scores the documents of a deal for a document description.

    >>> router = DocumentRouter([DocumentDescription("lender_instructions.pdf", "LENDER_INSTRUCTIONS", "2026", "...")])  # doctest: +SKIP
    >>> router.route("the lender's instructions")                                                                       # doctest: +SKIP
    ['lender_instructions.pdf']
    """

    def __init__(self, docs: Sequence[DocumentDescription], *, head_weight: float = 0.5, head_chars: int = 2000) -> None:
        import bm25s

        self.docs = list(docs)
        self.head_weight = head_weight
        names = [d.name for d in self.docs]
        self._squashed = [_squash(n) for n in names]
        self._tokens = [_name_tokens(n) for n in names]
        reps = [n.replace("_", " ") + " " + d.head[:head_chars] for n, d in zip(names, self.docs, strict=True)]
        self._tok = bm25s.tokenize(reps, stopwords="en", show_progress=False) if reps else None
        self._bm25 = bm25s.BM25()
        if self._tok is not None:
            self._bm25.index(self._tok, show_progress=False)

    def name_scores(self, hint: str, *, in_passing: bool = False) -> np.ndarray:
        """Per document, the IDF-weighted share of the description's words found in its name (``in_passing``: a
        question's words, not a description: without :data:`GENERIC` ones, and a four-letter word must be a whole
        token of the name too: "list the charges" does not name the "listing" search)."""
        n = len(self.docs)
        name = np.zeros(n)
        total = 0.0
        words = hint_words(hint, drop_generic=in_passing)
        whole = 4 if in_passing else 3
        for w in sorted(words | (initials(hint) - words)):
            if len(w) <= whole or w not in words:  # short words and acronyms: a whole token of the name
                hit = np.array([w in t for t in self._tokens])
            else:
                hit = np.array([w[:6] in s for s in self._squashed])
            df = int(hit.sum())
            if df == 0:
                continue
            idf = math.log(n / df)
            total += idf
            name += idf * hit
        return name / total if total > 0 else name

    def head_scores(self, text: str) -> np.ndarray:
        import bm25s

        n = len(self.docs)
        if not text.strip() or self._tok is None:
            return np.zeros(n)
        q = [t for t in bm25s.tokenize(text, stopwords="en", return_ids=False, show_progress=False)[0] if t in self._tok.vocab]
        head = np.asarray(self._bm25.get_scores(q), dtype=np.float64) if q else np.zeros(n)
        return head / head.max() if head.max() > 0 else head

    def scores(self, hint: str) -> np.ndarray:
        """Name match + ``head_weight`` x head BM25 of an explicit description, per document."""
        if not self.docs:
            return np.zeros(0)
        return self.name_scores(hint) + self.head_weight * self.head_scores(hint)

    def evidence(self, text: str) -> np.ndarray:
        """Soft document evidence for a text that routes nowhere, in [0, 1] per document: its words in a document's
        name plus ``head_weight`` x its proper nouns (parties, years) in the document's head, divided by the best."""
        if not self.docs or not text.strip():
            return np.zeros(len(self.docs))
        s = self.name_scores(text, in_passing=True)
        nouns = proper_nouns(text)
        if nouns:
            s = s + self.head_weight * self.head_scores(nouns)
        top = float(s.max())
        return s / top if top > 0 else s

    def route(self, hint: str) -> list[str]:
        """The document ids an explicit description names (the best; ties kept, sorted), or [] when it names none. A
        description of several documents ("the lender's instructions and the purchase contract": each after "and",
        "or" or a comma opens with "the", "this", "that", "our" or "their"; never one that says "between": "the
        agreement between the buyer and the seller" names parties) routes to the best of each."""
        if not self.docs or not hint.strip():
            return []
        out: set[str] = set()
        parts = [hint] if re.search(r"\bbetween\b", hint, re.IGNORECASE) else _SEVERAL.split(hint)  # parties, not documents
        for part in (p for p in parts if p.strip()):
            s = self.scores(part)
            top = float(s.max())
            if top > 0:
                out.update(self.docs[i].document_id for i in range(len(self.docs)) if s[i] >= top - 1e-12)
        return sorted(out)

    def rank(self, hint: str) -> list[tuple[str, float]]:
        s = self.scores(hint)
        order = sorted(range(len(self.docs)), key=lambda i: (-s[i], self.docs[i].document_id))
        return [(self.docs[i].document_id, float(s[i])) for i in order]


__all__ = ["GENERIC", "DocumentDescription", "DocumentRouter", "hint_words", "initials", "proper_nouns", "split_hint"]
