"""Risk detection (spec 3.2, the β term): what a chunk's text says about risk, independent of any query.

* :func:`normalise_ocr` and :func:`term_pattern`: lexicon terms matched on OCR-normalised text,
  tolerant of the usual confusions (1/l/i, 0/o, 5/s) and of hyphenated line breaks.
* :func:`risk_signal`: the configured lexicon read in context. A mention is discounted when a
  benign cue neutralises it ("no caveats registered", "discharged", "paid in full", "caveat
  emptor"), weighed by what its sentence states (:func:`mention_factor`: an instrument number, an
  amount or a date makes it concrete; "may", "shall", "any" make it generic), and numeric
  detectors (:func:`reserve_shortfall`) add risks stated only in numbers.
* :func:`best_risk_span`: the verbatim passage that carries a chunk's strongest risk (what the
  packager quotes when the whole chunk does not fit).

Everything here is a pure function of the text and the lexicon; :mod:`retrieval_node.rank`
turns a :class:`RiskSignal` into the β term of a score.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from .config import RiskLexicon

# --------------------------------------------------------------------------- risk signal

_CONFUSABLE = {
    "l": "[l1i|!]",
    "i": "[i1l|!]",
    "o": "[o0]",
    "s": "[s5$]",
    "e": "[e3]",
    "a": "[a@]",
    "b": "[b8]",
    "g": "[g9]",
}


def normalise_ocr(text: str) -> str:
    """Lower-case, join words hyphenated across line breaks, unify apostrophes, collapse spaces (lines kept)."""
    text = text.replace("\u2019", "'").replace("\u2018", "'").replace("`", "'")
    text = re.sub(r"(\w)-[ \t]*\n\s*(\w)", r"\1\2", text)
    text = re.sub(r"[ \t\r\f\v]+", " ", text)
    text = re.sub(r" ?\n[\s]*", "\n", text)
    return text.lower()


@lru_cache(maxsize=4096)
def term_pattern(term: str) -> re.Pattern[str]:
    """Regex for ``term`` tolerant of OCR confusions (1/l/i, 0/o, 5/s), optional apostrophes, any spacing."""
    parts: list[str] = []
    for ch in term.lower():
        if ch == " ":
            parts.append(r"[\s\-]+")
        elif ch == "'":
            parts.append("'?")
        elif ch in _CONFUSABLE:
            parts.append(_CONFUSABLE[ch])
        else:
            parts.append(re.escape(ch))
    return re.compile(r"(?<![a-z0-9])" + "".join(parts) + r"(?:e?s)?(?![a-z0-9])")


@lru_cache(maxsize=256)
def any_term_pattern(terms: tuple[str, ...]) -> re.Pattern[str] | None:
    """One regex that matches wherever any of ``terms`` (as :func:`term_pattern` spells them) matches:
    a chunk in which it finds nothing cannot carry a lexicon mention, so the per-term scan is skipped."""
    if not terms:
        return None
    bodies = [term_pattern(t).pattern[len(r"(?<![a-z0-9])"):-len(r"(?:e?s)?(?![a-z0-9])")] for t in dict.fromkeys(terms)]
    return re.compile(r"(?<![a-z0-9])(?:" + "|".join(bodies) + r")(?:e?s)?(?![a-z0-9])")


@dataclass(frozen=True, slots=True)
class RiskMatch:
    term: str
    kind: str
    weight: float
    start: int
    end: int
    benign: bool
    cue: str | None = None
    how: str = "concrete"


@dataclass(frozen=True, slots=True)
class RiskSignal:
    """β term of one chunk, with the evidence behind it."""

    score: float
    kinds: tuple[str, ...]
    matches: tuple[RiskMatch, ...] = ()
    numeric: tuple[str, ...] = ()
    #: the material terms and the neutralised ones ("term (cue)"), sorted: what ScoreTerms reports
    risk_terms: tuple[str, ...] = ()
    benign_terms: tuple[str, ...] = ()

    @property
    def material(self) -> bool:
        return bool(self.kinds)


#: A term of at least this weight, not neutralised, makes a chunk carry a material risk of its kind.
MATERIAL_WEIGHT = 0.6

_MONEY = r"\$\s?([0-9][0-9,]*(?:\.[0-9]{2})?)"
_MONEY_RE = re.compile(_MONEY)
_ZERO_AMOUNT = re.compile(r"\$\s?0(?:\.00)?(?![0-9,])|\bnil\b|\bnone\b")


def _money(s: str) -> float:
    return float(s.replace(",", ""))


#: Cues that refer back to the instrument just named, even across a full stop on the same line
#: ("Caveat 212 300 111 re: option. DISCHARGED by 232 001 002").
_BACKWARD_CUES = ("discharged", "discharge of", "withdrawn", "paid in full")


_END_CANDIDATE = re.compile(r"[.;](?=\s)|\n\s*\n")
_ABBREVIATIONS = frozenset({"no", "nos", "inc", "ltd", "corp", "co", "st", "incl", "approx", "vs", "mr", "mrs", "ms", "dr", "ave", "sq", "ft", "jr", "sr", "e.g", "i.e", "etc"})


@lru_cache(maxsize=512)
def sentence_ends(text: str) -> tuple[int, ...]:
    """Positions where sentences end: '.' or ';' before whitespace, or a blank line.

    A full stop closing an abbreviation ("Instrument No. 262 018 441", "Ltd.") or a
    list number at the start of a line ("5. The plaintiff") is not an end; a colon
    never is ("Arrears: $4,626.43"), and hard-wrapped lines do not split a sentence.
    """
    ends = []
    for m in _END_CANDIDATE.finditer(text):
        if text[m.start()] == ".":
            word = re.search(r"([a-z.]+|[0-9]+)$", text[max(0, m.start() - 12):m.start()])
            if word:
                w = word.group(1)
                if w in _ABBREVIATIONS:
                    continue
                if w.isdigit() and len(w) <= 2 and text[max(0, m.start() - len(w) - 1):m.start() - len(w)] in ("", "\n", "("):
                    continue
        ends.append(m.end())
    return tuple(ends)


def _sentence_bounds(text: str, pos: int) -> tuple[int, int]:
    ends = sentence_ends(text)
    i = bisect.bisect_right(ends, pos)
    start = ends[i - 1] if i > 0 else 0
    end = ends[i] if i < len(ends) else len(text)
    return start, end


def _line_bounds(text: str, pos: int) -> tuple[int, int]:
    end = text.find("\n", pos)
    return text.rfind("\n", 0, pos) + 1, (end if end != -1 else len(text))


def _heading_lines(original: str) -> set[str]:
    """Upper-case lines that list categories ("ENCUMBRANCES, LIENS & INTERESTS"), with no amount or instrument number."""
    out = set()
    for line in original.splitlines():
        stripped = line.strip(" -=*#\t")
        if not stripped.isupper():  # fast exit: a lower-case letter, or no cased letter at all, is never a heading
            continue
        letters = [c for c in stripped if c.isalpha()]
        if (letters and all(c.isupper() for c in letters) and re.search(r",|&", stripped)
                and "$" not in stripped and not _REGISTRATION.search(stripped)):
            out.add(normalise_ocr(stripped).strip())
    return out


def _is_heading(text: str, start: int, end: int, headings: set[str] = frozenset()) -> bool:  # type: ignore[assignment]
    """A term standing alone as a line's heading ("CAVEATS:") or in a category heading names a section, not a registration."""
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    if text[line_start:(line_end if line_end != -1 else len(text))].strip(" -=*#") in headings:
        return True
    if re.sub(r"[\s\-#*0-9.)(]", "", text[line_start:start]):  # only list numbering may precede a heading
        return False
    rest = text[end:end + 1]
    return rest in ("", ":", ".", "\n")


#: Negation before a term in its clause: "no builders' liens, writs or lis pendens are registered",
#: "free and clear of all caveats", "not on the tax arrears list". "No." before a number is an abbreviation.
_NEGATION = re.compile(r"\b(?:no(?!\.?\s*\d)(?!\.)|not|nil|none|without|neither|nor|never|free (?:and clear )?of)\b")
_CLAUSE_BREAK = re.compile(r"\b(?:but|however|except|save|other than)\b|[;:]")


def _negated(text: str, start: int, window: int) -> str | None:
    lo, _ = _sentence_bounds(text, start)
    llo, _ = _line_bounds(text, start)
    lo = max(lo, start - 2 * window)
    before = text[lo:start]
    breaks = list(_CLAUSE_BREAK.finditer(before))
    if breaks:
        before = before[breaks[-1].end():]
    negations = list(_NEGATION.finditer(before))
    return negations[-1].group(0) if negations else None


_STATUS_NEGATED = re.compile(r"^[^.;\n]{0,12}:[^.;:]{0,30}?\b(not|nil|none|no)\b(?!\.)")


def _benign_subject(text: str, end: int, subjects: Sequence[str], window: int) -> str | None:
    """The instrument's subject right after the term ("caveat re: restrictive covenant") makes it routine;
    so does a status line that answers in the negative ("tax recovery status: not on the list")."""
    after = text[end:end + window]
    status = _STATUS_NEGATED.search(after)
    if status:
        return status.group(1)
    for subject in subjects:
        if term_pattern(subject).search(after):
            return subject
    return None


def _benign_cue(text: str, start: int, end: int, cues: Sequence[str], window: int) -> str | None:
    negation = _negated(text, start, window)
    if negation:
        return negation
    lo, hi = _sentence_bounds(text, start)
    lo = max(lo, start - window)
    hi = min(hi, end + window)
    span = text[lo:hi]
    for cue in cues:
        if term_pattern(cue).search(span):
            return cue
    line_end = text.find("\n", end)
    after = text[end:min(line_end if line_end != -1 else len(text), end + 2 * window)]
    for cue in _BACKWARD_CUES:
        if term_pattern(cue).search(after):
            return cue
    if _ZERO_AMOUNT.search(text[end:min(len(text), end + 40)]):
        return "$0.00"
    return None


def reserve_shortfall(text: str) -> float | None:
    """Funded ratio of a reserve fund when the text states a balance and a recommended/required level.

    Looks for a dollar amount near "balance"/"closing"/"actual" and one near
    "recommended"/"required"/"benchmark"/"target"; returns balance / recommended.
    """
    low = normalise_ocr(text)
    if "reserve" not in low:
        return None
    pct = _PERCENT_FUNDED.search(low)
    if pct:
        value = next(g for g in pct.groups() if g is not None)
        return float(value) / 100.0
    balance = _amount_near(low, ("reserve fund balance", "balance", "actual", "on hand"))
    target = _amount_near(low, ("fully funded balance", "recommended balance", "recommended", "required", "benchmark", "target", "should be"))
    if balance is None or target is None or target <= 0 or target == balance:
        return None
    return balance / target


_PERCENT_FUNDED = re.compile(
    r"percent(?:age)? funded[^0-9\n]{0,40}(\d{1,3}(?:\.\d+)?) ?%|funded (?:at|to) (?:only )?(\d{1,3}(?:\.\d+)?) ?%|(\d{1,3}(?:\.\d+)?) ?% funded"
)


def _amount_near(low: str, words: Iterable[str], reach: int = 120) -> float | None:
    """The first dollar amount after the first phrase of ``words`` that has one (phrases in priority order)."""
    for w in words:
        for m in re.finditer(re.escape(w), low):
            seg = low[m.end():m.end() + reach]
            mm = _MONEY_RE.search(seg)
            if mm:
                val = _money(mm.group(1))
                if val > 0:
                    return val
    return None


_REGISTRATION = re.compile(r"\b\d{3} ?\d{3} ?\d{3}\b")
_AMOUNT = re.compile(r"\$\s?\d|\b\d[\d,]*\.\d{2}\b|\b\d+(?:\.\d+)? ?%")
_DATE = re.compile(
    r"\b(?:19|20)\d{2}[/\-]\d{1,2}(?:[/\-]\d{1,2})?\b|\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.? \d{1,2},? (?:19|20)\d{2}\b"
)
_MODAL = re.compile(r"\b(?:may(?!,?\s*\d)|shall|if|any|such|in the event|from time to time|unless|whether|provided that)\b")

#: Effective weight of a mention: concrete (its sentence names an instrument number, amount or date),
#: plain (no such detail, stated as fact), generic (no detail, in normative or conditional wording), benign.
FACTOR_CONCRETE = 1.0
FACTOR_PLAIN = 0.55
FACTOR_GENERIC = 0.35
FACTOR_BENIGN = 0.1


#: The term is followed by its own amount: "of $...", "of up to $...", "totalling $...", ": $..." (amount above zero).
_OWN_AMOUNT = re.compile(r"\s*(?:\(|:|,)?\s*(?:of|for|in the amount of|totalling|totaling)?\s*(?:up to|not exceeding)?\s*\$\s?[1-9]")
#: Normative wording ("may", "shall"): terms of a bylaw or contract even when an amount follows.
_NORMATIVE = re.compile(r"\b(?:may(?!,?\s*\d)|shall|from time to time)\b")
#: Conditional wording ("if", "unless", "in the event", "exceeding"): the amount is a threshold, not a fact.
_CONDITIONAL = re.compile(r"\b(?:if|unless|in the event|whether|provided that|exceed(?:s|ing)?|over|more than|greater than|threshold)\b")


def _states_money(span: str) -> bool:
    return any(_money(m.group(1)) > 0 for m in _MONEY_RE.finditer(span))


def mention_factor(text: str, start: int, end: int, *, needs_amount: bool = False) -> tuple[float, str]:
    """How much one mention says about this deal, from the sentence and line around it.

    An instrument number makes it concrete; otherwise normative or conditional
    wording ("may", "shall", "any", "if") makes it generic; otherwise an amount,
    percentage or date makes it concrete; otherwise it is plain.

    With ``needs_amount`` (a term that is routine until money is named: "special resolution",
    "deductible", "holdback") only a money amount above zero makes the mention concrete; normative
    wording still makes it generic, and anything else (a date, a registration number) leaves it plain.
    """
    lo, hi = _sentence_bounds(text, start)
    llo, lhi = _line_bounds(text, start)
    sentence = text[lo:hi]
    line = text[llo:lhi]
    spans = (sentence, line)  # a table row is a line; a hard-wrapped statement is a sentence
    if _OWN_AMOUNT.match(text, end, min(hi, end + 40)) and not _CONDITIONAL.search(sentence) and not _NORMATIVE.search(sentence):
        return FACTOR_CONCRETE, "concrete"  # "a credit facility of up to $1,000,000": the instrument names its own amount
    if needs_amount:
        if _MODAL.search(sentence):
            return FACTOR_GENERIC, "generic"
        if any(_states_money(s) for s in spans):
            return FACTOR_CONCRETE, "concrete"
        return FACTOR_PLAIN, "plain"
    if any(_REGISTRATION.search(s) for s in spans):
        return FACTOR_CONCRETE, "concrete"
    if _MODAL.search(sentence):  # "the board may levy...", "the seller shall discharge any...": terms, not events
        return FACTOR_GENERIC, "generic"
    if any(_AMOUNT.search(s) or _DATE.search(s) for s in spans):
        return FACTOR_CONCRETE, "concrete"
    return FACTOR_PLAIN, "plain"


def risk_signal(text: str, lexicon: RiskLexicon, domains: Sequence[str], *, shortfall_ratio: float = 0.5) -> RiskSignal:
    """β term: the strongest risk indicator of the chunk, plus a little for each further concrete kind.

    Each mention's effective weight is ``w · factor`` (:func:`mention_factor`): 1 for
    a concrete mention (an instrument number, or an amount or date stated as fact),
    0.55 for a plain one (not material on its own), 0.35 for generic wording ("may", "shall", "any": bylaws and
    standard terms) and 0.1 when a benign cue neutralises it.
    ``score = min(1, max_i(w_i·f_i) + 0.05·(number of other material kinds))``.
    Numeric detectors contribute 0.9 (a reserve fund below ``shortfall_ratio``
    of its recommended or fully funded balance). A kind is *material* when one
    of its mentions reaches :data:`MATERIAL_WEIGHT`.
    """
    low = normalise_ocr(text)
    matches: list[RiskMatch] = []
    seen_terms: set[str] = set()
    specs = [lexicon.domains[d] for d in domains if d in lexicon.domains]
    union = any_term_pattern(tuple(t.term for spec in specs for t in spec.terms))
    if union is None or union.search(low) is None:
        specs = []  # no term of the lexicon occurs: nothing to scan (most chunks of a deal)
    headings = _heading_lines(text) if specs else set()
    for spec in specs:
        for t in spec.terms:
            if t.term in seen_terms:
                continue
            for m in term_pattern(t.term).finditer(low):
                if _is_heading(low, m.start(), m.end(), headings):
                    continue
                cue = _benign_cue(low, m.start(), m.end(), lexicon.benign_cues, lexicon.benign_window_chars)
                if cue is None:
                    cue = _benign_subject(low, m.end(), lexicon.benign_subjects, lexicon.benign_window_chars)
                factor, how = (FACTOR_BENIGN, "benign") if cue is not None else mention_factor(low, m.start(), m.end(), needs_amount=t.needs_amount)
                matches.append(RiskMatch(t.term, t.kind, round(t.weight * factor, 6), m.start(), m.end(), cue is not None, cue, how))
            seen_terms.add(t.term)
    # a term inside a longer match ("lien" in "builders' lien") is the same mention, not a second one
    matches = [m for m in matches if not any(o is not m and o.start <= m.start and m.end <= o.end and (o.end - o.start) > (m.end - m.start) for o in matches)]
    numeric: list[str] = []
    best = 0.0
    kinds: set[str] = set()
    for m in matches:
        best = max(best, m.weight)
        if not m.benign and m.weight >= MATERIAL_WEIGHT:
            kinds.add(m.kind)
    if "condo" in domains and lexicon.reserve_shortfall_detector:
        ratio = reserve_shortfall(text)
        if ratio is not None and ratio < shortfall_ratio:
            numeric.append(f"reserve fund at {ratio:.0%} of the recommended balance")
            best = max(best, 0.9)
            kinds.add("reserve_shortfall")
    score = min(1.0, best + 0.05 * max(0, len(kinds) - 1))
    return RiskSignal(
        score=round(score, 6),
        kinds=tuple(sorted(kinds)),
        matches=tuple(sorted(matches, key=lambda m: (m.start, m.term))),
        numeric=tuple(numeric),
        risk_terms=tuple(sorted({m.term for m in matches if not m.benign and m.weight >= MATERIAL_WEIGHT})),
        benign_terms=tuple(sorted({f"{m.term} ({m.cue})" for m in matches if m.benign})),
    )


# --------------------------------------------------------------------------- excerpts

#: Longest verbatim excerpt the packager cuts from a chunk that does not fit whole (characters).
EXCERPT_MAX_CHARS = 700


def best_risk_span(text: str, lexicon: RiskLexicon, domains: Sequence[str], *, max_chars: int = EXCERPT_MAX_CHARS,
                   shortfall_ratio: float = 0.5) -> tuple[int, int] | None:
    """The contiguous run of whole lines (at most ``max_chars``) that carries the chunk's strongest risk.

    Every run of consecutive lines that fits in ``max_chars`` is scored with :func:`risk_signal`; the best is
    the one with a material kind, then the highest score, then the most material kinds, then the earliest.
    Returns ``(start, end)`` character offsets into ``text`` (trailing line break excluded), or None when
    no run carries a material risk or the best run is the whole text. A single line longer than
    ``max_chars`` is cut at the last space before the limit.
    """
    lines = [(m.start(), m.end()) for m in re.finditer(r"[^\n]*(?:\n|$)", text) if m.end() > m.start()]
    # runs start at a line that names a lexicon term, or the line before it (its context); with no such
    # line (a risk only in numbers, or a term broken across lines) every line is a start
    union = any_term_pattern(tuple(t.term for d in domains if d in lexicon.domains for t in lexicon.domains[d].terms))
    marked = [i for i, (a, b) in enumerate(lines) if union is not None and union.search(normalise_ocr(text[a:b]))]
    starts = sorted({j for i in marked for j in (i - 1, i) if j >= 0}) if marked else list(range(len(lines)))
    best: tuple[tuple[bool, float, int, int], tuple[int, int]] | None = None
    for i in starts:
        start = lines[i][0]
        end = lines[i][1]
        if end - start > max_chars:
            cut = text.rfind(" ", start, start + max_chars)
            end = cut if cut > start else start + max_chars
        else:
            j = i
            while j + 1 < len(lines) and lines[j + 1][1] - start <= max_chars:
                j += 1
            end = lines[j][1]
        while end > start and text[end - 1] in "\n\r \t":
            end -= 1
        if end <= start:
            continue
        sig = risk_signal(text[start:end], lexicon, domains, shortfall_ratio=shortfall_ratio)
        key = (bool(sig.kinds), sig.score, len(sig.kinds), -start)
        if best is None or key > best[0]:
            best = (key, (start, end))
    if best is None or not best[0][0]:
        return None
    span = best[1]
    if span[0] == 0 and span[1] >= len(text.rstrip()):
        return None
    return span


__all__ = [
    "EXCERPT_MAX_CHARS",
    "MATERIAL_WEIGHT",
    "RiskMatch",
    "RiskSignal",
    "any_term_pattern",
    "best_risk_span",
    "mention_factor",
    "normalise_ocr",
    "reserve_shortfall",
    "risk_signal",
    "sentence_ends",
    "term_pattern",
]
