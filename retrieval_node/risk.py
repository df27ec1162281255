"""Risk detection (spec 3.2, the β term): what a chunk's text says about risk, independent of any query.

* :func:`normalise_ocr` and :func:`term_pattern`: lexicon terms matched on OCR-normalised text,
  tolerant of the usual confusions (1/l/i, 0/o, 5/s) and of hyphenated line breaks.
* :func:`parse_amounts`: dollar amounts read as amounts, after OCR digits are repaired ("$1,86O.42",
  "$l,250.00"), negative in parentheses; :func:`row_value` and :func:`column_value` read the cell a
  term labels in a table or form ("Arrears ...... NIL", "| Penalty | - |": nothing owing).
* :func:`clause_polarity`: what the clause decided about the thing named ("approved", "carried" vs
  "rejected", "defeated", "fully collected", "hereby discharges"), the nearest verdict governing.
* :func:`risk_signal`: the configured lexicon read in context. A mention is discounted when a
  benign cue neutralises it ("no caveats registered", "discharged", "paid in full", "caveat
  emptor"), when its row or column says nothing is owing, when its clause is closed, when a
  ``this_unit_only`` term reports several units in aggregate, or when a stale-only registration is
  recent; it is weighed by what its sentence states (:func:`mention_factor`: an instrument number,
  an amount, a date or a decision makes it concrete; "may", "shall", "any" make it generic). A copy
  of an instrument is read by its body. Numeric detectors add risks stated without the usual words:
  :func:`reserve_shortfall` and :func:`negative_reserve_balance` (a reserve below its benchmark or
  projected below zero) and :func:`owner_assessments` (an amount charged to every owner is a levy).
* :func:`best_risk_span`: the verbatim passage that carries a chunk's strongest risk (what the
  packager quotes when the whole chunk does not fit).

Everything here is a pure function of the text and the lexicon; :mod:`retrieval_node.rank`
turns a :class:`RiskSignal` into the β term of a score.
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache

from .cache import BoundedCache
from .config import RiskLexicon, RiskTerm

# --------------------------------------------------------------------------- risk signal

#: letters OCR reads as other characters: 1/l/i, 0/o, 5/s, 3/e, e/c ("clcared"), g/q ("includinq")
_CONFUSABLE = {
    "l": "[l1i|!]",
    "i": "[i1l|!]",
    "o": "[o0]",
    "s": "[s5$]",
    "e": "[e3c]",
    "c": "[ce]",
    "a": "[a@]",
    "b": "[b8]",
    "g": "[g9q]",
    "q": "[qg]",
}
#: the verdict words (closed, decided, pending, motion) also read rn as m ("rnoved"); lexicon terms do not (the
#: alternation slows the one regex that screens every chunk for any term)
_CONFUSABLE_VERDICT = {**_CONFUSABLE, "m": "(?:m|rn)"}


#: OCR letters read inside a run of digits: O/o for 0, l/I/| for 1, S for 5 ("$1,86O.42", "$l,250.00", "2O24").
_DIGIT_FIX = str.maketrans({"o": "0", "l": "1", "i": "1", "s": "5"})
#: a "|" is a table's rule, never read as a 1 ("|0.00|" is a zero cell, not 10.001)
_DIGIT_RUN = re.compile(r"(?<![a-z0-9])(?:[0-9oli]|s(?=[0-9]))(?:[0-9oli]|s(?=[0-9oli])|[,.](?=[0-9oli]))*(?![a-z0-9])")


#: a zero amount read as letters after "$" ("$O.OO", "$O")
_ZERO_AMOUNT = re.compile(r"o+(?:[.,]o{2,3})*")
#: a percentage after a number ("4O%", "2O percent"): the number is read as digits, as after "$"
_PERCENT_AFTER = re.compile(r" ?(?:%|percent\b|per cent\b)")


def _repair_digits(low: str) -> str:
    def fix(m: re.Match[str]) -> str:
        tok = m.group(0)
        digits = sum(c.isdigit() for c in tok)
        if digits == len(tok.replace(",", "").replace(".", "")):
            return tok
        after_dollar = low[max(0, m.start() - 8):m.start()].rstrip(" ").endswith("$")  # "$ O.OO", a column's "$     O.OO"
        if digits >= 2 or (digits >= 1 and (after_dollar or _PERCENT_AFTER.match(low, m.end()))):
            return tok.translate(_DIGIT_FIX)
        if digits == 1 and len(tok) >= 2 and not re.search(r"[s,.|]", tok):
            return tok.translate(_DIGIT_FIX)  # "l8", "2l", "1O": one digit and an OCR letter are a number ("Apr. l8, 2O24")
        if digits == 0 and after_dollar and _ZERO_AMOUNT.fullmatch(tok):
            return tok.translate(_DIGIT_FIX)  # "$O.OO", "$O": a zero read as letters
        return tok
    return _DIGIT_RUN.sub(fix, low)


#: a line break as Stage 0 may write one: ``\r\n`` (Windows), a lone ``\r`` (old Mac), a vertical tab (a word processor's
#: line break), a form feed (a page break from pdftotext), NEL, the Unicode line and paragraph separators. These are the
#: boundaries ``str.splitlines`` breaks at; every reading of a line reads any of them as a ``\n``.
LINE_BREAK_CHARS = "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"
#: a line break written otherwise than ``\n``: ``\r\n`` (first: one break), or one of the other :data:`LINE_BREAK_CHARS`
_LINE_BREAK = re.compile("\r\n|[" + re.escape(LINE_BREAK_CHARS.replace("\n", "")) + "]")
#: a word hyphenated across a line break ("com-" / "missioned"), as :func:`normalise_ocr` joins it
_HYPHEN_BREAK = re.compile(r"(\w)-[ \t]*\n\s*(\w)")


#: a word hyphenated across a line break that a layout joined with a space ("com- missioned"): a letter, the hyphen, one
#: space, a lower-case letter; not a hyphen that stands for a word's repeated part ("pre- and post-closing", "short- or
#: long-term")
_HYPHEN_JOINED = re.compile(r"([a-zA-Z])- (?!(?:and|or|to|nor|und)\b)([a-z])")


def _unix_lines(text: str) -> str:
    """``text`` with each line break (:data:`LINE_BREAK_CHARS`, ``\\r\\n`` as one) written as ``\\n``."""
    return _LINE_BREAK.sub("\n", text)


#: specks a scan leaves between words ("Court of \u00b0 King's Bench"): read as spaces. Table rules (|, -), dotted leaders,
#: currency and brackets are not specks.
_OCR_SPECKS = str.maketrans({c: " " for c in "\u00b0\u00b7\u2022\u00ac\u00a6\u00a4\u00a8\u00b4\u02dc\u00ab\u00bb~^"})


def _plain_lines(text: str) -> str:
    """:func:`normalise_ocr`'s first step: line breaks written as ``\\n``, apostrophes unified, scan specks read as spaces
    (the same length but for ``\\r\\n``; :func:`_low_line_map` follows the line breaks from here)."""
    return _unix_lines(text).replace("\u2019", "'").replace("\u2018", "'").replace("`", "'").translate(_OCR_SPECKS)


@lru_cache(maxsize=64)  # a chunk is read under each risk setting of the profiles in turn (precompute, rankers)
def normalise_ocr(text: str) -> str:
    """Write every line break as ``\\n`` (:data:`LINE_BREAK_CHARS`: ``\\r\\n``, a lone ``\\r``, a form feed ...), lower-case,
    join words hyphenated across line breaks, unify apostrophes, read scan specks as spaces, repair OCR
    letters inside numbers and digits inside words, and read "nll" / "nli" (a scan's "NlL") as nil where a value stands.

    A run of spaces becomes one space, or two where there were several (the column gap of a table row
    stays visible); a blank line stays one blank line (the end of a paragraph or a table); other line
    breaks are kept without their indentation.
    """
    text = _HYPHEN_BREAK.sub(r"\1\2", _plain_lines(text))
    text = _HYPHEN_JOINED.sub(r"\1\2", text)
    text = text.replace("\t", "  ")
    text = re.sub(r" {2,}", "  ", text)
    text = re.sub(r" *\n *(?:\n[ \n]*)+", "\n\n", text)
    text = re.sub(r" *\n *", "\n", text)
    return _repair_letters(_repair_digits(text.lower()))


#: OCR digits read inside a word: 1 for l, 0 for o, 5 for s ("c1eared", "disch0rged" -> "cleared"); only a digit with
#: letters on both sides, so amounts, years, registration numbers and ids ("t5k 2j1") keep theirs. Same length: offsets hold.
_IN_WORD_DIGIT = re.compile(r"(?<=[a-z])[015]+(?=[a-z])")
_LETTER_FIX = {"0": "o", "1": "l", "5": "s"}
#: a zero at the edge of a word otherwise of letters ("N0 TAX N0TIFICATI0N 0N REC0RD": "n0", "0n", "0f"); a postal code's
#: "1a0", an id's "a10" or an amount's "$5.0m" has another digit and stays
_ZERO_BY_LETTER = re.compile(r"[a-z]0|0[a-z]")
_EDGE_ZERO = re.compile(r"(?<![a-z0-9'.,$-])0(?=[a-z]+(?![a-z0-9.,]))|(?<![a-z0-9'.,$-])([a-z]+)0(?![a-z0-9.,])")


#: "nil" read with an l or an I for its letters ("NlL", "N1L" lower-cased), where a value stands: after a colon, leaders,
#: a column gap or a pipe, and ending its cell ("Tax notification: NlL", "Arrears ...... N1L"); not a name ("NLL Holdings
#: Ltd.", "Penalty: NLI Collections Inc.") nor a postal code ("N1L 3G5")
_OCR_NIL = re.compile(r"(?:(?<=:)|(?<=: )|(?<=\.)|(?<=\. )|(?<=  )|(?<=\|)|(?<=\| )|^)nl[il](?= *(?:$|  |\||[.,;)]))", re.M)


def _repair_letters(low: str) -> str:
    low = _IN_WORD_DIGIT.sub(lambda m: "".join(_LETTER_FIX[c] for c in m.group(0)), low)
    if "nl" in low:  # "nll", "nli"
        low = _OCR_NIL.sub("nil", low)
    if _ZERO_BY_LETTER.search(low) is None:  # most texts: no zero touches a letter
        return low
    return _EDGE_ZERO.sub(lambda m: m.group(1) + "o" if m.group(1) else "o", low)


def entity_mentioned(entity_id: str, text_low: str) -> bool:
    """True when the entity's name (``type:some-name`` -> "some name") appears in lower-cased text."""
    name = entity_id.split(":", 1)[1].replace("-", " ").replace("_", " ").strip()
    return bool(name) and term_pattern(name).search(text_low) is not None


def mentioned_entities(content: str, entities: Iterable[str]) -> frozenset[str]:
    """Which of ``entities`` (pattern entity ids) a chunk's text names, read through OCR damage (:func:`normalise_ocr`)."""
    wanted = list(entities)
    if not wanted:
        return frozenset()
    low = normalise_ocr(content)
    return frozenset(e for e in wanted if entity_mentioned(e, low))


def _ocr_tolerant(source: str) -> str:
    """A regex source whose literal letters match their OCR confusions as :func:`term_pattern`'s do ("pa1d" ->
    "pald" still reads as "paid", "clcared" as "cleared"). Escapes, character classes and group prefixes
    (``(?:``, ``(?<!``) are copied as they are."""
    out: list[str] = []
    i = 0
    while i < len(source):
        ch = source[i]
        if ch == "\\":
            out.append(source[i:i + 2])
            i += 2
        elif ch == "[":
            j = source.index("]", i + 2)
            out.append(source[i:j + 1])
            i = j + 1
        elif ch == "(" and source.startswith("(?", i):
            j = i + 2
            while j < len(source) and source[j] in ":<!=":
                j += 1
            out.append(source[i:j])
            i = j
        else:
            out.append(_CONFUSABLE_VERDICT.get(ch, ch))
            i += 1
    return "".join(out)


def _merged_classes() -> dict[str, str]:
    """Each character of a :data:`_CONFUSABLE` class (and its letter) -> one representative of its merged class:
    classes that share a character merge (e/3/c with c/e, g/9/q with q/g, l/1/i/|/! with i/1/l/|/!)."""
    groups: list[set[str]] = []
    for letter, cls in _CONFUSABLE.items():
        assert cls.startswith("[") and cls.endswith("]") and "\\" not in cls and "-" not in cls, cls  # plain sets only
        members = {letter, *cls[1:-1]}
        for g in [g for g in groups if g & members]:
            members |= g
            groups.remove(g)
        groups.append(members)
    return {x: min(g) for g in groups for x in g}


#: :func:`canonical`'s table (same length in and out)
_CANON = str.maketrans(_merged_classes())


def canonical(low: str) -> str:
    """``low`` (a :func:`normalise_ocr` text) with each OCR-confusable character replaced by its class's
    representative: wherever :func:`term_pattern` matches, every run of the term's characters between its spaces
    and apostrophes (:func:`term_runs`) stands in this text as it is."""
    return low.translate(_CANON)


@lru_cache(maxsize=4096)
def term_runs(term: str) -> tuple[str, ...]:
    """The runs of ``term`` between its spaces and apostrophes, in :func:`canonical` spelling: a text whose
    canonical form lacks one of them cannot match :func:`term_pattern` (each character of a run matches only
    characters of its own class, and the run's characters stand next to each other in any match)."""
    return tuple(r for r in re.split(r"[ ']+", term.lower().translate(_CANON)) if r)


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
    """One mention :func:`risk_signal` read (its weight already multiplied by the mention's factor). The signal keeps
    what the ranker and the reports use (score, kinds, numbers, terms), not the mentions: a deal's view holds a
    signal per chunk, and every object it keeps is one more for each of Python's full garbage collections to visit."""

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
    numeric: tuple[str, ...] = ()
    #: the material terms and the neutralised ones ("term (cue)"), sorted: what ScoreTerms reports
    risk_terms: tuple[str, ...] = ()
    benign_terms: tuple[str, ...] = ()

    @property
    def material(self) -> bool:
        return bool(self.kinds)


#: A term of at least this weight, not neutralised, makes a chunk carry a material risk of its kind.
MATERIAL_WEIGHT = 0.6

_MONEY = r"\$\s*([0-9][0-9,]*(?:\.[0-9]{2})?)"
_MONEY_RE = re.compile(_MONEY)


def _money(s: str) -> float:
    return float(s.replace(",", ""))


#: the scale word after a figure ("$1.2 million", "$2.9 M", "$850k"), read by :func:`_scaled`
_SCALE = r"(?:\s*(million|mil\b|m\b|k\b|thousand))?"


def _scaled(figure: str, scale: str | None) -> float:
    """A figure ("1,250", "1.2") times its :data:`_SCALE` word."""
    value = float(figure.replace(",", "") or 0)
    return value * (1_000_000 if scale in ("million", "mil", "m") else 1_000 if scale in ("k", "thousand") else 1)


# --------------------------------------------------------------------------- amounts

#: A dollar amount, negative when in parentheses or signed: "$1,250.00", "($1,021,314)", "-$4,000", "$ 0".
_SIGNED_MONEY = re.compile(r"(\(\s?)?(-\s?)?\$\s*(-\s?)?(\d[\d,]*(?:\.\d+)?)(?=(\s?\))?)")
#: A bare table figure and no dollar sign: with cents ("3,604.55", "0.00") or thousands separators ("(1,299,797)");
#: not a percentage.
_BARE_AMOUNT = re.compile(r"(?<![\d.,$])(\(?)(-?)(?:(\d{1,3}(?:,\d{3})*|\d+)\.(\d{2})|(\d{1,3}(?:,\d{3})+))(?![\d%,])(?!\.\d)")


#: the words before a spaced dash that make it a separator, not a minus: a comparative year ("(2023 - $1,311,450)") or
#: a label ("Amount in reserve fund - $627,150.22"); after a verb or a preposition it is a minus ("the closing balance
#: in 2031 is - $151,792")
_SEPARATOR_BEFORE = re.compile(r"(?:\b(?:19|20)\d{2}"
                               r"|\b(?!(?:is|was|be|been|of|at|to|reaches|reach|reached|falls|fall|fell|drops|drop|dropped|down|minus|by)\b)"
                               r"[a-z][a-z']*\)?)\s$")


def _separating_dash(before: str) -> bool:
    """Whether a spaced dash after ``before`` (the text up to the dash) separates a label or a year from its amount."""
    return _SEPARATOR_BEFORE.search(before) is not None


def parse_amounts(span: str, *, bare: bool = False) -> list[float]:
    """Signed dollar amounts in normalised text (:func:`normalise_ocr` has already repaired OCR digits).

    ``($1,021,314)`` and ``-$4,000`` are negative. With ``bare``, figures with cents and no dollar
    sign count too (a flattened table: "3,604.55  0.00").
    """
    out: list[float] = []
    for m in _SIGNED_MONEY.finditer(span):
        try:
            value = _money(m.group(4).rstrip(",."))
        except ValueError:
            continue
        minus = m.group(2)
        if minus and not m.group(1) and minus.endswith(" ") and _separating_dash(span[max(0, m.start() - 24):m.start()]):
            minus = None
        negative = bool(minus or m.group(3) or (m.group(1) and m.group(5)))
        out.append(-value if negative else value)
    if bare:
        for m in _BARE_AMOUNT.finditer(span):
            if span[max(0, m.start() - 4):m.start()].replace(" ", "").rstrip("-").endswith("$"):
                continue  # the figure of a "$..." or "$-..." amount, read above already
            if m.group(5) is not None:
                value = float(m.group(5).replace(",", ""))
            else:
                value = float(m.group(3).replace(",", "") + "." + m.group(4))
            out.append(-value if (m.group(2) or m.group(1)) else value)
    return out


#: What a table cell or a status says when there is nothing: "$0.00", "0.00", "-", "nil", "none", "n/a", "not enrolled".
_ZERO_CELL = re.compile(
    r"(?:\(?-?\$ *0(?:[.,]0+)?\)?|0(?:\.0+)?|[-\u2013\u2014_]+|nil|none|n/?a|no|nothing|not (?:yet )?(?:enrolled|applicable|registered|levied))"
    r"(?: (?:on (?:the )?roll|registered|recorded|owing|outstanding|due|to report))?"
    r"(?: (?:as (?:at|of)|at) [a-z0-9 ,/-]{4,20})?"   # "NIL as at 2025-10-01", "$0.00 as of Oct. 1, 2025"
)
_ROW_SEPARATOR = re.compile(r"(?:\s*\.{2,}\s*|\s*:\s*|  +| (?=[$\-\u2013\u2014]|\(\$|\(\d|\d[\d,]*\.\d{2}(?![\d%])))")


def _cell_verdict(cell: str) -> str | None:
    """``"zero"`` for a cell that states nothing is owing, ``"positive"`` for one with an amount above zero, else None."""
    cell = cell.strip(" .,'\\\"*:")
    if not cell:
        return None
    if _ZERO_CELL.fullmatch(cell):
        return "zero"
    amounts = parse_amounts(cell, bare=True)
    if any(a > 0 for a in amounts):
        return "positive"
    if amounts and all(a == 0 for a in amounts) and not re.search(r"[a-z]{3,}", cell):
        return "zero"
    return None


def _combine(verdicts: Sequence[str | None]) -> str | None:
    present = [v for v in verdicts if v is not None]
    if "positive" in present:
        return "positive"
    if present and len(present) == len(verdicts):
        return "zero"
    return None


#: a dollar sign and a gap before the row's last figure ("Arrears ......  $     0.00"); with more after it, the row is
#: read as before (a "$" cell: no verdict)
_DOLLAR_GAP = re.compile(r"\$ +(?=\(?-?[\d.,]+\)?\s*$)")
#: a cell that is only an amount: "$3,118.20", "(412.00)", "0.00", "1,250", "-" (not a year: "2025")
_FIGURE_CELL = re.compile(r"\(?-?\$\s*\d[\d,]*(?:\.\d{2})?\)?|\(?-?\d[\d,]*\.\d{2}\)?|\(?\d{1,3}(?:,\d{3})+\)?|[-\u2013\u2014]|nil")


#: The label of an instrument's party in a register line ("BUILDERS' LIEN - LIENOR: ...", "WRIT - CREDITOR: ...").
_PARTY_LABEL = re.compile(r"\s*(?:lienors?|creditors?|caveators?|plaintiffs?|claimants?|grantees?|mortgagees?|debtors?|holders?|chargees?"
                          r"|applicants?|re)\s*:")


#: where a row's value ends: a column gap, a clause break, a pipe, or the next label of a flattened row ("arrears: 0.00
#: penalties: 0.00"); after a figure or nil, also a longer label, with its colon or its leaders ("... none utility charges
#: added to the roll (s. 553): -", "... none utility charges ..... -"): a dash that joins words is no value
#: ("Special assessment - elevator modernization (approved ...): ...")
#: the next row's label where a layout joined a form's rows: its words, then its colon or its leaders
_NEXT_ROW_LABEL = r"[a-z][a-z0-9' ()/.-]{0,60}?(?::(?:\s|$)|\s*\.{3,})"
_ROW_CELL_BREAK = re.compile(r"  +|;|\.\s|,\s(?=[a-z])|\||\s(?=[a-z][a-z' ]{0,40}:(?:\s|$))"
                             r"|(?:(?<=\d)|(?<=\bnil)|(?<=\bnone))\s(?=" + _NEXT_ROW_LABEL + ")")


#: a dash cell, then the next row's label with its leaders or colon: a layout joined the rows of a form ("Arrears .....
#: - Penalty ..... -"); read only after leaders or a colon (a dash after one space joins words: "(Jul - Oct 2024) ....")
_DASH_THEN_ROW = re.compile(r"[-\u2013\u2014]\s+(?=" + _NEXT_ROW_LABEL + ")")


class _LazySplit:
    """``pattern.split(text)`` cut only as far as it is read (``pattern``: no groups, no empty match)."""

    __slots__ = ("_at", "_cuts", "_done", "_parts", "_text")

    def __init__(self, pattern: re.Pattern[str], text: str) -> None:
        self._text, self._cuts, self._done = text, pattern.finditer(text), False
        self._parts: list[str] = []
        self._at = 0  # where the part after the last cut starts

    def _more(self) -> bool:
        if self._done:
            return False
        m = next(self._cuts, None)
        if m is None:
            self._parts.append(self._text[self._at:])
            self._done = True
        else:
            self._parts.append(self._text[self._at:m.start()])
            self._at = m.end()
        return True

    def __getitem__(self, i: int) -> str:
        self.longer_than(i)
        return self._parts[i]

    def longer_than(self, n: int) -> bool:
        while len(self._parts) <= n and self._more():
            pass
        return len(self._parts) > n

    def after_first(self) -> Iterator[str]:
        """The parts after the first, cut as they are read."""
        i = 1
        while self.longer_than(i):
            yield self._parts[i]
            i += 1


def row_value(text: str, end: int) -> str | None:
    """What the table row or ``label: value`` line of a term says after it: ``"zero"``, ``"positive"`` or None.

    Dotted leaders ("Arrears ........ NIL"), colons ("Penalties: $0.00"), column gaps, a pipe row
    ("| Arrears | - | - | none |": every cell after the label) and an amount right after a short
    qualifier ("Arrears 2025 and prior $3,012.11") are read; prose is not a row and gives None.
    """
    eol = text.find("\n", end)
    if eol == -1:
        eol = len(text)
    pipe = text.find("|", end, eol)
    if pipe != -1:  # the cell the term is in, from the term on, and every cell after it (:func:`_pipe_cells_after`)
        first = text[end:pipe].strip()
        pipes, after = _pipe_cells_after(text, eol)
        return _tally_verdict(_tallies([(bool(first), _cell_verdict(first) if first else None)], after[bisect.bisect_left(pipes, pipe)])[0])
    rest = text[end:eol]
    m = re.match(r"([^:|$\n]{0,60}?)" + _ROW_SEPARATOR.pattern, rest)
    if m is None:
        return None
    # a sentence that ends before the separator ("arrears with the manager. The roof ... $210,000", or with a typist's two
    # spaces after its full stop) has no row; an abbreviation's full stop ("Tax notification (s. 412): NIL") ends none
    if _sentence_ends_in(text, end, end + m.end(1)):
        return None
    # the value ends at a column gap, a clause break, or the next "label:" of a flattened row ("arrears: 0.00 penalties: 0.00")
    tail = rest[m.end():]
    gap = _DOLLAR_GAP.match(tail)
    if gap is not None:  # a column's "$     0.00" that ends the row: the gap after the dollar sign is not the cell's end
        tail = "$" + tail[gap.end():]
    if rest[m.end(1):m.end()].strip(" ") and _DASH_THEN_ROW.match(tail) and not _PARTY_LABEL.match(tail, 1):
        return _cell_verdict(tail[0])  # "Arrears ...... - Penalty ...... -": a dash after leaders or a colon, then the next row
    cells = _LazySplit(_ROW_CELL_BREAK, tail)  # cut as far as read: a text without line breaks is one long row
    if cells.longer_than(1) and re.fullmatch(r"\s*[-\u2013\u2014]\s*", cells[0]) and _PARTY_LABEL.match(cells[1]):
        return None  # "BUILDERS' LIEN - LIENOR: KODIAK ROOFING": the dash joins the term to its party; it is not a nil cell
    # the figures of the row's other columns, up to the next word ("Arrears:  $0.00    $3,118.20": this year and the years
    # before): one that is above zero is what the row says
    figures = [cells[0]] + list(itertools.takewhile(lambda c: _FIGURE_CELL.fullmatch(c.strip()) is not None, cells.after_first()))
    return _combine([_cell_verdict(c) for c in figures]) if len(figures) > 1 else _cell_verdict(cells[0])


_PIPE = re.compile(r"\|")


#: (a cell is positive, every cell has a verdict, how many cells): the tally of no cells
_NO_CELLS = (False, True, 0)


def _tallies(cells: Sequence[tuple[bool, str | None] | None], last: tuple[bool, bool, int] = _NO_CELLS) -> list[tuple[bool, bool, int]]:
    """For each place in ``cells`` (each ``(counted, verdict)``, or None for a break), the tally of the counted cells from
    there up to the next break (or to the end, then ``last``): whether one is positive, whether every one has a verdict
    (:func:`_cell_verdict`), and how many there are. :func:`_tally_verdict` reads a tally as :func:`_combine` reads the
    verdicts."""
    out = [_NO_CELLS] * len(cells) + [last]
    for i in range(len(cells) - 1, -1, -1):
        cell = cells[i]
        if cell is None:
            continue  # a break: nothing after it counts from before it
        positive, complete, count = out[i + 1]
        counted, verdict = cell
        out[i] = (positive or verdict == "positive", complete and verdict is not None, count + 1) if counted else out[i + 1]
    return out


def _tally_verdict(tally: tuple[bool, bool, int]) -> str | None:
    positive, complete, count = tally
    if not count:
        return None
    return "positive" if positive else ("zero" if complete else None)


_PIPE = re.compile(r"\|")


@lru_cache(maxsize=4)  # every mention of a long pipe line (a table without line breaks) reads the cells after it
def _pipe_cells_after(text: str, eol: int) -> tuple[tuple[int, ...], list[tuple[bool, bool, int]]]:
    """Of the line of ``text`` that ends at ``eol``: the positions of its pipes and the :func:`_tallies` of the cells
    after each (from that pipe to the end of the line, empty cells left out, as :func:`row_value` reads them)."""
    lo = text.rfind("\n", 0, eol) + 1
    pipes = [m.start() for m in _PIPE.finditer(text, lo, eol)]
    cells = [text[a + 1:b].strip() for a, b in zip(pipes, [*pipes[1:], eol], strict=True)]
    return tuple(pipes), _tallies([(bool(c), _cell_verdict(c) if c else None) for c in cells])


def _cells(line: str) -> list[str]:
    return [c for _, _, c in _cell_spans(line)]


# asked for each mention on the line (a text without line breaks is one long line); few kept: a key may be long, and a
# table line's cells take many times its size
@lru_cache(maxsize=4)
def _cell_spans(line: str) -> tuple[tuple[int, int, str], ...]:
    """``(start, end, text)`` of a table line's cells: between pipes (an empty cell kept, the pipes at either end not
    making one), else between gaps of two spaces or more."""
    lo, hi = len(line) - len(line.lstrip()), len(line.rstrip())
    if "|" in line:
        while lo < hi and line[lo] == "|":
            lo += 1
        while hi > lo and line[hi - 1] == "|":
            hi -= 1
    out = []
    for m in (_PIPE_CELL if "|" in line else _GAP_CELL).finditer(line, lo, hi):
        if m.start() > lo and m.start() == m.end() and line[m.start() - 1] != "|":
            continue  # the empty match finditer gives after a cell's text, not a cell
        cell = m.group().strip()
        start = m.start() + (len(m.group()) - len(m.group().lstrip()))
        out.append((start, start + len(cell), cell))
    return tuple(out) or ((lo, lo, ""),)


#: A cell's text: up to the next pipe, or up to the next gap of two spaces or more.
_PIPE_CELL = re.compile(r"[^|]*")
_GAP_CELL = re.compile(r"[^ ](?:[^ ]| (?=[^ ]))*")


#: A status column's header: a state that clears an instrument or a debt, as a word or a question ("Discharged?",
#: "Withdrawn (Y/N)", "Paid in full?").
_STATUS_WORDS = _ocr_tolerant(r"(?:discharged|withdrawn|paid(?: in full| off| out)?|satisfied|released|removed|cleared|settled"
                              r"|lapsed|expired|cancell?ed|vacated)")
_STATUS_HEADER = re.compile(r"(?:" + _STATUS_WORDS + _ocr_tolerant(r"|discharge registered)")
                            + r"\s*(?:\?|\((?:y/n|yes/no)\)|\?\s*\((?:y/n|yes/no)\))?")
#: A status cell's answer: not done ("no", "pending", "requested", an unticked box) or done ("yes", "received", a tick, the
#: status word itself with its date or instrument: "paid 2024-02-15", "discharged by 241 332 009").
_STATUS_NOT_DONE = re.compile(r"(?:no|n|not yet(?: \w+)?|pending|outstanding|requested|open|awaiting(?: \w+)?|o/s|not received"
                              r"|\[ \](?: [\w ]{0,20})?)")
_STATUS_DONE = re.compile(r"(?:yes|y|done|received|completed?|\[[x\u2713\u2714]\](?: [\w ]{0,20})?|[\u2713\u2714]"
                          r"|" + _STATUS_WORDS + r"(?:,? (?:on |by )?[\w/,. -]{0,24})?)")
#: A header over a column of such answers that names no status of its own ("Status", "Done").
_STATUS_GENERIC = re.compile(r"(?:status|done|complete|completed)\s*\??")


def status_cell(text: str, start: int) -> str | None:
    """For a term in a table row under a status column ("Instrument | ... | Discharged?"), what the row answers in that
    column: ``"no"`` (the status does not hold: the instrument stands), ``"yes"``, or None (no such column, or another
    answer). The header is the nearest line above, within the table (no blank line between), whose cell is a status."""
    lo, hi = _line_bounds(text, start)
    row = _cell_spans(text[lo:hi])
    if len(row) < 2:
        return None
    for line in _lines_above(text, lo, 8):  # the nearest first, a blank one kept: it ends the table
        if not line.strip():
            return None
        head = _cell_spans(line)
        cols = [i for i, (_, _, c) in enumerate(head) if _STATUS_HEADER.fullmatch(c) or _STATUS_GENERIC.fullmatch(c)]
        if cols:
            break
    else:
        return None
    a, b, _ = head[cols[0]]
    if len(row) == len(head):
        cell = row[cols[0]][2]
    else:  # cells split unlike the header's: the row's cell under the header's
        under = [c for x, y, c in row if x < b + 2 and y > a - 2]
        if len(under) != 1:
            return None
        cell = under[0]
    return status_answer(cell)


def _lines_above(text: str, lo: int, n: int) -> list[str]:
    """The ``n`` lines above the line that starts at ``lo`` (fewer at the top of the text), the nearest first:
    ``reversed(text[:lo - 1].rsplit("\\n", n)[-n:])`` without copying the text above."""
    out: list[str] = []
    end = lo - 1
    while lo and len(out) < n:
        nl = text.rfind("\n", 0, end)
        out.append(text[nl + 1:end])
        if nl == -1:
            break
        end = nl
    return out


def status_answer(cell: str) -> str | None:
    """``"no"`` for a status cell that says not done, ``"yes"`` for one that says done, else None."""
    cell = cell.strip(" .*").lower()
    if _STATUS_NOT_DONE.fullmatch(cell):
        return "no"
    return "yes" if _STATUS_DONE.fullmatch(cell) else None


@lru_cache(maxsize=4)  # asked for each mention on the line, as _cell_spans
def _has_amount(line: str) -> bool:
    """Whether ``line`` states an amount (:func:`parse_amounts`, bare figures included)."""
    return bool(parse_amounts(line, bare=True))


def column_value(text: str, start: int) -> str | None:
    """For a term that heads a column of a table (a pipe row or a row of column gaps without amounts),
    the verdict over that column's cells in the rows below, up to a blank line."""
    lo, hi = _line_bounds(text, start)
    header = _cells(text[lo:hi])
    if len(header) < 3 or _has_amount(text[lo:hi]):
        return None
    offset = start - lo
    col, pos = None, 0
    line = text[lo:hi]
    for i, cell in enumerate(header):
        at = line.find(cell, pos)
        if at <= offset < at + len(cell) + 1:
            col = i
            break
        pos = at + len(cell)
    if col is None:
        return None
    # the rows below up to a blank line, those with the header's number of cells: their cell in the column
    line_of, tallies = _column_below(text, len(header), col)
    return _tally_verdict(tallies[line_of[hi] + 1])


@lru_cache(maxsize=8)  # each column header of a table asks it (a long table without blank lines: every header-like line)
def _column_below(text: str, ncols: int, col: int) -> tuple[dict[int, int], list[tuple[bool, bool, int]]]:
    """The index of the line ending at each offset of ``text``, and from each line down to the next blank line, the
    :func:`_tallies` of cell ``col`` of the rows with ``ncols`` cells (:func:`column_value`)."""
    lines = text.split("\n")
    line_of, at = {}, 0
    for i, line in enumerate(lines):
        at += len(line)
        line_of[at] = i
        at += 1
    rows = [None if not line.strip() else _cells(line) for line in lines]  # a blank line ends the table
    return line_of, _tallies([None if r is None else (len(r) == ncols, _cell_verdict(r[col]) if len(r) == ncols else None) for r in rows])


# --------------------------------------------------------------------------- clauses

#: Cues that refer back to the instrument just named, even across a full stop on the same line
#: ("Caveat 212 300 111 re: option. DISCHARGED by 232 001 002").
_BACKWARD_CUES = ("discharged", "discharge of", "withdrawn", "paid in full")


_END_CANDIDATE = re.compile(r"[.;](?=\s)|\n\s*\n")
_ABBREVIATIONS = frozenset({"no", "nos", "reg", "regn", "instr", "inc", "ltd", "corp", "co", "st", "incl", "approx", "vs", "mr", "mrs", "ms", "dr", "ave", "sq", "ft", "jr", "sr", "e.g", "i.e", "etc", "s", "ss", "min", "max"})
#: a month's abbreviation ends no sentence when a day follows ("Apr. 18, 2024"); "paid in full in Dec. Arrears ..." does
_MONTHS = frozenset({"jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec"})


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
                if w in _ABBREVIATIONS or (w in _MONTHS and re.match(r"\s{1,2}[0-9oli]{1,2}\b", text[m.end():m.end() + 5])):
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


#: A line is read as one row of a table or form (below); prose lines are read by their sentence only.
_TABULAR_LINE = re.compile(r"\.{3,}|\||\b\d{3} ?\d{3} ?\d{3}\b")
#: two spaces or more between two words: a column gap, unless a sentence ends before it (:func:`_has_column_gap`)
_GAP = re.compile(r"\S  +\S")
#: a form's row: dotted leaders or table pipes (a column gap alone may be justified prose)
_FORM_ROW = re.compile(r"\.{3,}|\|")


def _is_row(line: str, offset: int | None = None) -> bool:
    """A table row (leaders, pipe, column gap, registration number), or a ``label: value`` line whose label holds
    the term at ``offset`` ("Local improvement charges: ... . Annual charge $1,116.00"): its value is the term's. With
    ``offset``, a column gap counts in the term's own sentence of the line only: a page whose lines a layout joined is one
    line, and a gap between two other paragraphs makes no row of "touch-ups outstanding." """
    stripped = line.strip()
    own = stripped if offset is None else line[slice(*_sentence_bounds(line, offset))].strip()
    if _found(_TABULAR_LINE, stripped) or _has_column_gap(own):
        return True
    label = re.match(r"\s*([^.:\n]{1,40}):", line)
    return label is not None and (offset is None or offset < label.end())


def _has_column_gap(line: str) -> bool:
    """Two spaces or more between two words of ``line`` that are not the space after a sentence's end
    (:func:`sentence_ends`): a typist's two spaces after a full stop ("... touch-ups outstanding.  Lobby door closer
    replaced ($835.00).") join two sentences of prose, not a row's cells. After an abbreviation ("Apex Framing Inc.  $48,210")
    they are a gap still."""
    return any(line[m.start()] not in ".;" or not _ends_sentence(line, m.start() + 1) for m in _GAP.finditer(line))


def _ends_sentence(text: str, pos: int) -> bool:
    """A sentence of ``text`` ends at ``pos`` (:func:`sentence_ends`)."""
    return _sentence_ends_in(text, pos - 1, pos)


def _sentence_ends_in(text: str, lo: int, hi: int) -> bool:
    """A sentence of ``text`` ends after ``lo`` and at or before ``hi`` (:func:`sentence_ends`)."""
    ends = sentence_ends(text)
    i = bisect.bisect_right(ends, lo)
    return i < len(ends) and ends[i] <= hi


_OCR_LOWER_L = re.compile(r"(?<=[A-Z])l|l(?=[A-Z]{2})")


#: a register entry, not a category heading: an instrument and its party ("BUILDERS' LIEN - APEX FRAMING LTD, CALGARY",
#: "WRIT OF ENFORCEMENT - KOWALSKI, JOHN"), its subject ("CAVEAT RE: AGREEMENT CHARGING LAND, BOW LENDING") or a number
_PARTY = re.compile(r"\b(?:LTD|INC|CORP|LIMITED|LLP|ULC)\b|\s[-\u2013\u2014]\s|\d|:\s*\S", re.IGNORECASE)


#: a rule across the page: a run of dashes, equals signs, underscores, stars or box-drawing lines. A rule stands on a line
#: of its own in every layout, so where a layout joins the lines (a text layer without line breaks) what stands between
#: two rules is still a line of its own: "------ ENCUMBRANCES, LIENS & INTERESTS ------" is the register's heading.
_RULE = re.compile("[-=_*\u2013\u2014\u2500\u2550]{4,}")
#: how far from a mention a rule around it is looked for (:func:`_banner`): a heading is short
_BANNER_REACH = 80


def _heading_lines(original: str) -> set[str]:
    """Upper-case lines that list categories ("ENCUMBRANCES, LIENS & INTERESTS"): short items (at most four words each),
    no amount, instrument number, party or subject ("CAVEAT RE OPTION TO PURCHASE, NORTHGATE HOLDINGS" is a register's
    entry). What stands between two rules inside a line (:data:`_RULE`) is read as a line of its own."""
    out = set()
    joined = _HYPHEN_BREAK.sub(r"\1\2", _unix_lines(original))  # a heading hyphenated across lines, as normalise_ocr joins it
    for line in joined.splitlines():
        between = _RULE.split(line)[1:-1] if _RULE.search(line) else []  # what stands between two rules inside the line
        out.update(normalise_ocr(piece.strip(" -=*#\t")).strip() for piece in (*between, line) if _lists_categories(piece))
    return out


#: kinds of things joined by AND, each named in the plural ("CAVEATS AND LIENS", "LIENS AND ENCUMBRANCES:"): a category
#: heading as one joined by commas is; an instrument named in the singular ("THE LIEN AND CAVEAT REMAIN ON TITLE") or a
#: sentence ("LIENS AND WRITS DISCHARGED") is not one
_PLURALS_JOINED = re.compile(r"(?:[A-Z'\- ]*S AND )+[A-Z'\- ]*S:?")


def _lists_categories(line: str) -> bool:
    """``line`` (as written) is a category heading (:func:`_heading_lines`)."""
    stripped = line.strip(" -=*#\t")
    stripped = _OCR_LOWER_L.sub("L", stripped)  # "ENCUMBRANCES, LlENS & INTERESTS": OCR's l for I in a capital word
    if not stripped.isupper():  # fast exit: a lower-case letter, or no cased letter at all, is never a heading
        return False
    letters = [c for c in stripped if c.isalpha()]
    return bool(letters and all(c.isupper() for c in letters) and (re.search(r",|&", stripped) or _PLURALS_JOINED.fullmatch(stripped))
                and "$" not in stripped and not _REGISTRATION.search(stripped) and not _PARTY.search(stripped)
                and all(len(item.split()) <= 4 for item in re.split(r",|&|\bAND\b", stripped)))


def _banner(text: str, start: int, end: int, line_start: int, line_end: int) -> str | None:
    """What stands between the rules on either side of ``text[start:end]`` inside its line (each within
    :data:`_BANNER_REACH` characters of it), stripped; None without a rule on both sides."""
    after = _RULE.search(text, end, min(line_end, end + _BANNER_REACH))
    if after is None:
        return None
    before = None
    for before in _RULE.finditer(text, max(line_start, start - _BANNER_REACH), start):
        pass
    return None if before is None else text[before.end():after.start()].strip(" -=*#")


#: a character that is not part of a list's numbering ("3.", "(b)", "- ", "#")
_NOT_NUMBERING = re.compile(r"[^\s\-#*0-9.)(]")


#: the end of a line that runs on into the next: a word no heading ends with ("ARTICLE 7 - LEVIES AND INTEREST ON" /
#: "ARREARS", "... owes $4,300 in" / "arrears.") or a joining mark
_RUNS_ON = re.compile(r"(?:\b(?:on|of|and|or|nor|the|to|for|in|into|with|by|at|from|a|an|any|its|their|per|re|under|against|than)"
                      r"|[,&\-\u2013\u2014])\s*$")


@lru_cache(maxsize=16)  # read once per chunk, asked only for a term alone on its line
def _prose_lines(original: str) -> frozenset[str]:
    """The lines of running prose, as :func:`normalise_ocr` spells them: those that end, as written, in a lower-case
    letter or a comma (case the normalised text no longer shows)."""
    return frozenset(normalise_ocr(line).strip() for line in original.splitlines() if _LOWER_END.search(line))


_LOWER_END = re.compile(r"[a-z,]\s*$")


class _Lines:
    """What a text's lines say as written that its normalised form no longer shows: its category headings
    (:func:`_heading_lines`) and its lines of running prose (:func:`_prose_lines`, worked out when first asked)."""

    __slots__ = ("headings", "original")

    def __init__(self, original: str) -> None:
        self.original = original
        self.headings = _heading_lines(original)

    def prose(self, line: str) -> bool:
        return line.strip() in _prose_lines(self.original)


def _run_on_from(text: str, line_start: int, lines: _Lines | None) -> str | None:
    """The line before ``line_start`` when it runs on into it (not blank, and ends in a word no heading ends with, or is
    running prose), else None."""
    if line_start == 0:
        return None
    prev = text[text.rfind("\n", 0, line_start - 1) + 1:line_start - 1]
    if not prev.strip():
        return None
    return prev if _RUNS_ON.search(prev) is not None or (lines is not None and lines.prose(prev)) else None


def _is_heading(text: str, start: int, end: int, lines: _Lines | None = None) -> bool:
    """A term standing alone as a line's heading ("CAVEATS:") or in a category heading names a section, not a registration.
    A line the line above runs on into is not one ("... owes $4,300 in" / "arrears."): the term is part of a sentence or
    of a longer heading wrapped at the page's width."""
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    if lines is not None and lines.headings:
        hi = line_end if line_end != -1 else len(text)
        if text[line_start:hi].strip(" -=*#") in lines.headings or _banner(text, start, end, line_start, hi) in lines.headings:
            return True
    if _NOT_NUMBERING.search(text, line_start, start):  # only list numbering may precede a heading
        return False
    rest = text[end:line_end if line_end != -1 else len(text)]
    if rest.strip() not in ("", ":", "."):
        return False
    prev = _run_on_from(text, line_start, lines) if not text[line_start:start].strip() else None
    # the rest of a category heading wrapped ("ENCUMBRANCES, LIENS," / "CAVEATS") is that heading still
    return prev is None or (lines is not None and prev.strip(" -=*#") in lines.headings)


#: what only a copy of an instrument says (not a letter or a contract that names the registrar or Land Titles): its form's
#: number, its district's registrar, its "take notice", its lienor or caveator, its court file
_COPY_OWN_WORDS = r"\bform \d+\b|registration district|\btake notice\b|\blienor\b|\bcaveator\b|registered instrument|court file"
_COPY_OF_INSTRUMENT = re.compile(_COPY_OWN_WORDS)
#: A copy of a registered instrument or court document says so somewhere: its own words, or the registrar, Land Titles.
_INSTRUMENT_COPY = re.compile(_COPY_OWN_WORDS + r"|registrar|land titles|certificate of title")


_TITLE_WORD = re.compile(r"[a-z0-9]+")


def _is_title(text: str, start: int, end: int, term: str, lines: _Lines | None = None) -> bool:
    """The term, singular, in a short title line among the first lines of a copy of an instrument
    ("CERTIFICATE OF LIS PENDENS", "STATEMENT OF LIEN", "CAVEAT FORBIDDING REGISTRATION"): the document it opens
    is read by its body, not as a section heading. A line the line above runs on into is read with it ("CERTIFICATE OF" /
    "LIS PENDENS"; "... LEVIES AND INTEREST ON" / "ARREARS" is no title)."""
    if text[start:end].endswith("s") and not term.endswith("s"):
        return False  # a plural names a kind of instrument ("CAVEATS"), not the one this copy is
    lo, hi = _line_bounds(text, start)
    if sum(1 for _ in itertools.islice(_TITLE_WORD.finditer(text, lo, hi), 7)) > 6:
        # the term's line alone has too many words (read up to the seventh: a line may be a whole chunk): a title only
        # where its line joins it to what follows it
        return _opening_title(text, start, end, lines)
    prev = _run_on_from(text, lo, lines)
    line = (text[lo:hi] if prev is None else f"{prev} {text[lo:hi]}").strip(" -=*#")
    if ":" in line or "," in line or len(re.findall(r"[a-z0-9]+", line)) > 6:  # a dash is not a word
        return False
    if re.search(r"\b\d+\b", re.sub(r"^form \d+\s*-?\s*", "", line)):
        return False
    return text[:lo].count("\n") <= 8 and _INSTRUMENT_COPY.search(text[:3000]) is not None


#: what may stand before a title that opens a copy: a form's number, then at most three words ("FORM 3 STATEMENT OF")
_BEFORE_OPENING_TITLE = re.compile(r"\s*(?:form \d+[a-z]?\s*[-.:]?\s*)?(?:[a-z']+\s+){0,3}")


def _opening_title(text: str, start: int, end: int, lines: _Lines | None) -> bool:
    """The term in the capitals that open a copy of an instrument, where the title shares its line with what follows it (a
    layout that joins lines: "FORM 3 STATEMENT OF LIEN Prompt Payment ...", "CAVEAT FORBIDDING REGISTRATION TO THE
    REGISTRAR ..."): among the chunk's first words (a form's number and at most three words before it) and, as written, in
    capitals up to the term's last word, not a label ("CAVEAT:"), in a text that is a copy by what only a copy says
    (:data:`_COPY_OF_INSTRUMENT`: a letter "RE CAVEAT FOR THE SMITH PURCHASE" that names Land Titles is none)."""
    if lines is None or start > 80 or _BEFORE_OPENING_TITLE.fullmatch(text, 0, start) is None:
        return False
    if text[end:end + 3].lstrip(" ").startswith(":"):
        return False  # "CAVEAT: The Buyer may register ...": a label, not a title
    words = len(_TITLE_WORD.findall(text, 0, end))  # the opening's words, up to the term's last one
    written = _WRITTEN_WORD.findall(lines.original, 0, end + 200)[:words]
    return len(written) == words and " ".join(written).isupper() and _COPY_OF_INSTRUMENT.search(text[:3000]) is not None



#: a word as written: a run of non-space characters with a letter or a digit (a dash alone is not one)
_WRITTEN_WORD = re.compile(r"\S*[^\W_]\S*")


#: Negation before a term in its clause: "no builders' liens, writs or lis pendens are registered",
#: "free and clear of all caveats", "not on the tax arrears list". "No." before a number is an abbreviation.
_NO = r"no(?!\.?\s*\d)(?!\.)"
_OTHER_NEGATIONS = r"|not|none of|without|neither|nor|never|free (?:and clear )?of)\b"
_NEGATION = re.compile(r"\b(?:" + _NO + _OTHER_NEGATIONS)
#: Words before a "no" that abbreviates "number" in a column's label ("Reg No", "Doc No", "File No").
_NUMBER_LABELS = ("reg", "reg.", "regn", "registration", "doc", "doc.", "document", "instrument", "instr", "instr.", "job", "file",
                  "ref", "item", "serial", "roll", "cert", "certificate", "unit", "lot", "plan", "account", "acct", "case", "action",
                  "court file", "title", "parcel", "folio")
#: :data:`_NEGATION` in the lines above a term's own: a header's column label is not one ("Reg No | Holder", "Doc No    Type",
#: "On title (Yes/No)": a lien in the row below is not negated by its table's header). On the term's own line "no" is read as written ("no
#: builders' liens", "No | Builders' lien", "no longer shows").
_NEGATION_ABOVE = re.compile(r"\b(?:" + "".join(rf"(?<!\b{w} )" for w in _NUMBER_LABELS) + r"(?<!/)" + _NO + r"(?!\s*[|#/])(?! {2,}\S)"
                             + _OTHER_NEGATIONS)
#: Where a negation before a term stops reaching it: a contrast ("but", "except"), a semicolon or colon, or "and" before a
#: definite subject ("was not paid within 30 days and, as the Act permits, the amount has been added to the tax roll"; "no
#: caveat and the lien remains"): what follows is a thing said to exist, not one more thing denied ("no liens or caveats"
#: and "no liens and no caveats" are still denied, the second by its own "no").
_CLAUSE_BREAK = re.compile(r"\b(?:but|however|except|save|other than)\b|[;:]"
                           r"|\band(?:\s+|,[^,;.]{1,80},\s*)(?=(?:the|this|that|these|those|its|their|our|your|his|her)\b)")


def _negated(text: str, start: int, window: int) -> str | None:
    lo, _ = _sentence_bounds(text, start)
    lo = max(lo, start - 2 * window)
    breaks = list(_CLAUSE_BREAK.finditer(text, lo, start))
    if breaks:
        lo = breaks[-1].end()
    own_line = text.rfind("\n", lo, start) + 1 or lo
    # the lines above are read in the whole text: a checklist's "seller: no hits" keeps its colon, which ends a clause
    above = [n for n in _NEGATION_ABOVE.finditer(text, lo, own_line) if not _answers_its_line(text, n.start())]
    negations = [n for n in (*above, *_NEGATION.finditer(text, own_line, start)) if _NEGATES_A_CLEARING.match(text, n.end()) is None]
    return negations[-1].group(0) if negations else None


#: A negation of the clearing itself ("NOT YET DISCHARGED", "no withdrawal of the caveat has been registered", "never
#: released", "no release or discharge of"): it says the instrument stands, it does not deny it. Not a negation whose list
#: goes on past the clearing words ("no payment or instalment plan" denies the plan too).
_CLEARING_WORD = "(?:" + _STATUS_WORDS + _ocr_tolerant(r"|discharge|discharges|withdrawal|release|cancell?ation|payment)")
_NEGATES_A_CLEARING = re.compile(r"(?:\s+(?:yet|been|fully|a|any))*\s+" + _CLEARING_WORD + r"(?:\s*(?:,|\bor\b|\band\b|\bnor\b)\s*"
                                 + _CLEARING_WORD + r")*\b(?!\s*(?:,|&|or\b|and\b|nor\b))")


#: The end of a form line's label or question, right before its value ("Seller: no hits", "Arrears?   No", "Liens .... NIL").
_LABEL_END = re.compile(r"(?:[?:]|\.{3,})[\s.]*$")
#: A line that carries on the one above it ("no liens\nor caveats on title").
_CONTINUES = re.compile(r"\s*(?:or|and|nor|,)\b")


def _answers_its_line(text: str, at: int) -> bool:
    """Whether the negation at ``at`` is its line's own value: the first word after a label's colon or a question's mark
    ("Writ search - seller: no hits", "Contributions in arrears?   No"), with no continuation of it on the next line. The
    items of a checklist or a form do not deny the ones below them."""
    line_start = text.rfind("\n", 0, at) + 1
    if _LABEL_END.search(text, line_start, at) is None:
        return False
    next_line = text.find("\n", at) + 1
    return not _CONTINUES.match(text, next_line) if next_line else True


_STATUS_NEGATED = re.compile(r"^[^.;\n]{0,40}:[^.;:\n]{0,30}?\b(not|nil|none|no)\b(?!\.)")


def _instrument_window(text: str, end: int, window: int) -> str:
    """Text after a term up to ``window`` characters, stopping at the next registration number (the next instrument)."""
    after = text[end:end + window]
    for nxt in _REGISTRATION.finditer(after):
        if nxt.start() > 12:  # a number right after the term is the term's own ("lien no. 091 332 108")
            return after[:nxt.start()]
    return after


def _benign_subject(text: str, end: int, subjects: Sequence[str], window: int) -> str | None:
    """The instrument's subject after the term in its sentence ("caveat re: restrictive covenant", "claims an interest
    in the lands ... under a restrictive covenant") makes it routine; so does a status line that answers in the
    negative ("tax recovery status: not on the list"). The next instrument's number ends the search."""
    after = _instrument_window(text, end, window)
    status = _STATUS_NEGATED.search(after)
    if status:
        return status.group(1)
    if _any_occurs(subjects, after):
        for subject in subjects:
            if term_pattern(subject).search(after):
                return subject
    _, hi = _sentence_bounds(text, end)
    return _introduced_subject(_instrument_window(text, end, min(max(hi - end, 0), 3 * window)), subjects)


#: Words that introduce what an instrument is about: "... claims an interest in the lands ... under a restrictive covenant".
_SUBJECT_INTRO = r"(?:re|under|pursuant to|in respect of|regarding|by virtue of|arising from)\s*:?\s*(?:an?|the)?\s*"


def _introduced_subject(span: str, subjects: Sequence[str]) -> str | None:
    if not _any_occurs(subjects, span):  # the subject itself must stand in the span
        return None
    for subject in subjects:
        if re.search(r"\b" + _SUBJECT_INTRO + term_pattern(subject).pattern, span):
            return subject
    return None


#: A cue that follows a future or an obligation ("must be discharged on closing", "to be paid in full") says what has not
#: happened yet: it does not neutralise the term (nor, with a deadline after it, "must have discharged before ...":
#: :func:`_awaited`).
_PENDING = re.compile(_ocr_tolerant(r"(?:\bto|must|shall|will|should|would|be|is to|are to|required to|needs? to)\s*$"))
#: "must have", "is to have" before a cue: an obligation only with what it must be done before ("which your client must
#: have discharged before we can release funds"); without it, a guess at what happened ("the lienholder must have
#: discharged the lien some time after our search") or a reproach ("ought to have cancelled")
_MODAL_HAVE = re.compile(_ocr_tolerant(r"(?:\bto|must|shall|will|should|would|is to|are to|required to|needs? to) have\s*$"))
_OBLIGED_BY = re.compile(r"[^.;\n]{0,40}?\b(?:before|prior to|by closing|on closing|at closing|so that|in order to|as a condition)\b")


def _awaited(before: str, text: str, after: int) -> bool:
    """A cue whose words before it (``before``, stripped) make it still to come (:data:`_PENDING`), or an obligation
    with a deadline after it (``text[after:]``: :data:`_MODAL_HAVE`, :data:`_OBLIGED_BY`)."""
    return _PENDING.search(before) is not None or (_MODAL_HAVE.search(before) is not None and _OBLIGED_BY.match(text, after) is not None)


#: A cue that is negated or awaited ("not paid in full", "until paid in full", "has not been discharged", "no discharge
#: of", "no release or discharge of"; not a column's "Reg No") says the opposite of the cue.
_CUE_NEGATED = re.compile(r"\b(?:not|unless|until|never|partial|partially)(?:\s+(?:yet|been|be|fully|was|were|is|are))*\s*$"
                          r"|" + "".join(rf"(?<!\b{w} )" for w in _NUMBER_LABELS) + r"\bno(?:\s+[a-z]+\s+(?:or|nor|and))?\s*$")


#: A cue inside a condition says what would clear the thing, not that it was cleared: "the parcel will be offered for sale
#: unless the arrears and costs are paid in full", "if the lien is discharged before closing"
_CONDITION = re.compile(r"\b(?:unless|if|provided that|in the event|on condition that)\b")
#: where the clause of a cue starts, looking back from it: a comma, colon or stop before a space (not the separators of
#: an amount: "$6,210.44"), a bracket or a line break
_CLAUSE_OPENER = re.compile(r"[,;:.](?=\s)|[(\n]")


def _conditional(text: str, pos: int) -> bool:
    """Whether the clause up to ``pos`` (at most 80 characters back, from its last comma, colon, stop or line break) opens
    with a condition ("unless ...", "if ...")."""
    before = text[max(0, pos - 80):pos]
    openers = [m.end() for m in _CLAUSE_OPENER.finditer(before)]
    return _CONDITION.search(before[openers[-1]:] if openers else before) is not None


def _asked(text: str, end: int) -> bool:
    """Whether the words ending at ``end`` are asked ("discharged?", "withdrawn ?"): a question is not its answer, unless
    the line answers it yes ("Discharged?  YES")."""
    mark = text.find("?", end, end + 2)
    return mark != -1 and not text[end:mark].strip(" ") and _ANSWERED_YES.match(text, mark) is None


def _cue_in(span: str, cue: str, own: str | None = None, lead: str = "", other_entry: int = -1, tail: str = "") -> bool:
    """The cue occurs in ``span``, neither asked, awaited, negated nor conditional (``lead``: the text just before the span,
    where the condition may open), and, when the mention's instrument number ``own`` is known, not followed by another
    instrument's number ("DISCHARGE OF 199 120 455" on the next row clears that one). A cue that ends before
    ``other_entry`` (where the line of a register's entry starts: a mention with its own number on its line, not run on
    from the line above) is not the entry's: it is the row above's ("201 004 311  CAVEAT  WITHDRAWN") or a heading's
    ("DISCHARGED INSTRUMENTS", not read as the status of the entries under it). ``tail``: the text right after the span,
    where a clearing may go on to say it is of part of the land only."""
    led, tailed = lead + span, span + tail  # the span with what stands before it, and with what follows it
    for m in term_pattern(cue).finditer(span):
        at = len(lead) + m.start()  # what stands before the cue is read across the window's edge ("NOT YET | DISCHARGED")
        if m.end() <= other_entry and not _entry_status_above(led, at):
            continue  # said on a line above the entry's own: another entry's status, or a heading's
        if _AS_TO_PART.match(tailed, m.end()):
            continue  # "discharged as to Lot 7": a partial discharge leaves the instrument on the rest of the land
        if _asked(span, m.end()):
            continue  # a question, or a column headed by one ("Discharged?"), is not its answer
        if "\n" in m.group(0) and _answers_its_line(span, m.start()):
            continue  # "arrears?  no\nspecial levy approved?": one line's answer, then the next line's item
        before = led[max(0, at - 24):at].rstrip()
        if _awaited(before, tailed, m.end()) or _CUE_NEGATED.search(before) or _conditional(led, at):
            continue
        if own is not None:
            named = _NAMED_NUMBER.match(span, m.end())
            if named and _digits(named.group(1)) != own and not _BY_INSTRUMENT.search(span, m.end(), named.start(1)):
                continue
        return True
    return False


#: where an entry of a register or a list starts on its line: its registration number, or a list's number or bullet
_ENTRY_START = re.compile(r"[ \t]*(?:\d{3} ?\d{3} ?\d{3}\b|\(?\d{1,2}[.)][ \t]|\(?[a-h][.)][ \t]|[-*\u2022][ \t])")


def _entry_status_above(text: str, at: int) -> bool:
    """Whether the cue at ``at``, on a line above the entry it may clear, states that entry's status: its line states the
    clearing's date (:data:`_DATE`) or instrument number, and no registration number stands before it in its own entry (from the line
    that entry starts on: a registration number or a list's number or bullet at the line's start, back to a blank line).
    "3. Discharged on 2024-02-28 by 242 080 115" over "232 554 018 Builders' Lien" is; a heading ("DISCHARGED
    INSTRUMENTS"), the row above's own status ("201 004 311 CAVEAT ... WITHDRAWN") or that row's "Status: discharged by
    211 300 472" line is not."""
    lo = text.rfind("\n", 0, at) + 1
    hi = text.find("\n", at)
    hi = len(text) if hi == -1 else hi
    if _REGISTRATION.search(text, at, hi) is None and _DATE.search(text, lo, hi) is None:
        return False
    start = lo
    while start > 0 and _ENTRY_START.match(text, start) is None:
        prev = text.rfind("\n", 0, start - 1) + 1
        if not text[prev:start - 1].strip():
            break
        start = prev
    return _REGISTRATION.search(text, start, at) is None


#: A clearing said of part of the land only ("DISCHARGED AS TO LOT 7", "withdrawn as against Unit 5", "released in
#: respect of Parcel A"): the instrument stays on the rest (as to the whole of the lands is no part).
_PART_OF_LAND = (r"(?:as (?:to|against|regards)|in respect of|with respect to)[ \t]+(?:the[ \t]+)?"
                 r"(?:lots?|units?|parcels?|blocks?|suites?|portions?|part)\b")
_AS_TO_PART = re.compile(r"[ \t]*(?:only[ \t]+)?" + _PART_OF_LAND)


#: "discharged by 232 001 002", "under discharge no. ...": the number after the cue is the discharging instrument's.
_BY_INSTRUMENT = re.compile(r"\b(?:by|under|per|vide|pursuant to)\b")
#: The registration number a cue names right after it ("discharge of 199 120 455", "discharged: 201 334 560").
_NAMED_NUMBER = re.compile(r"[^.;\n\d]{0,30}?(\d{3} ?\d{3} ?\d{3})\b")


def _benign_cue(text: str, start: int, end: int, cues: Sequence[str], window: int) -> str | None:
    negation = _negated(text, start, window)
    if negation:
        return negation
    lo, hi = _sentence_bounds(text, start)
    lo = max(lo, start - window)
    hi = min(hi, end + window)
    span = text[lo:hi]
    own = own_registration(text, start, end)
    if _any_occurs(cues, span):
        # a register's entry: the mention's own number on its line, not run on from the line above; what the lines
        # above it say is theirs
        line_lo = text.rfind("\n", 0, start) + 1
        row = own is not None and line_lo > lo and _run_on_from(text, line_lo, None) is None
        lead = text[max(0, lo - 240):lo]
        tail = text[hi:hi + 40]
        for cue in cues:
            if _cue_in(span, cue, own, lead, line_lo - lo if row else -1, tail):
                return cue
    line_end = text.find("\n", end)
    stop = min(line_end if line_end != -1 else len(text), end + 2 * window)
    after = text[end:stop]
    if _any_occurs(_BACKWARD_CUES, after):
        for cue in _BACKWARD_CUES:
            if _cue_in(after, cue, own, text[max(0, end - 80):end], tail=text[stop:stop + 40]):
                return cue
    return None


def _any_occurs(phrases: Sequence[str], span: str) -> bool:
    """Whether any of ``phrases`` matches in ``span`` as :func:`term_pattern` spells it: one search of their union, so a
    span in which none occurs (most) is not searched once per phrase."""
    union = any_term_pattern(tuple(phrases))
    return union is not None and union.search(span) is not None


#: What the clause decided about the thing the term names. Closed: considered and turned down, or over and done
#: ("rejected", "decided not to proceed", "fully collected", "hereby discharges", "cleared"). Decided: approved,
#: carried, levied, registered, filed, planned ("intends to call a meeting"), or owing ("remains unpaid").
_CLOSED = re.compile(_ocr_tolerant(
    r"\b(?:rejected|defeated|declined|voted down|not (?:approved|adopted|carried|passed|proceed(?:ed|ing)?|to proceed)"
    r"|decided (?:not to|against)|did not (?:proceed|pass|carry)|(?:motion|resolution) (?:failed|lost|was lost)"
    r"|withdrawn|cancell?ed|rescinded|fully (?:collected|paid|repaid)|(?:re)?paid (?:in full|out|off)|repaid|cleared"
    r"|no (?:balance|amount)s? (?:remains?|is|are) (?:owing|outstanding|receivable|payable|due)|(?<!be )discharged|discharges"
    r"|(?:was|were|has been|had been) redeemed|closed out|(?:was|were|has been|have been) complied with"
    r"|dismissed|discontinued|concluded by settlement|settled out of court|(?:action|claim|lawsuit|suit) (?:was |has been )?settled"
    r"|removed from(?= (?:the )?(?:title|register|[a-z ]{0,20}list))|satisfied in full|(?:has|have|had) satisfied"
    r"|(?:judgment|debt|claim|lien|writ|arrears)(?: was| has been| were| have been)? satisfied)\b"
))
_ACTS = (r"(?:approved|passed|adopted|resolved|levied|imposed|issued|filed|commenced|served|commissioned|sued|placed|added|charged|applied"
         r"|measured|found|observed|identified|detected|enrolled)")
_DECIDED = re.compile(_ocr_tolerant(
    r"\b(?:was|were|has|have|had|has been|have been|had been)\s+" + _ACTS + r"\b|\b(?:is|are|remains) enrolled\b"
    r"|\b(?:board|owners|corporation|council|meeting|court|plaintiff|lienor|claimant|owner of unit [0-9a-z]+)\s+" + _ACTS + r"\b"
    r"|\b(?:motion|resolution)\s+(?:was\s+)?carried\b|\bcarried\b(?= ?[.(])"
))


def clause_polarity(text: str, start: int, end: int) -> str | None:
    """``"closed"`` or ``"decided"`` from the verdict word of the term's sentence nearest to the term, else None.

    "The Board considered a special levy of $850 per unit and decided not to proceed" is closed;
    "a special levy of $9,800 was approved" is decided; with both, the nearer one governs the term.
    """
    lo, hi = _instrument_block(text, start, end, *_sentence_bounds(text, start))
    verdict = _nearest_verdict(text, start, end, max(lo, start - 300), min(hi, end + 300))
    if verdict is None and hi < len(text) and _motion_in(text, lo, hi):
        # a motion, then its outcome: "... levy $1,200 per unit. The motion was DEFEATED.", also after the vote count
        # ("A ballot was held: / In favour: 31 units / Opposed: 46 units / The resolution was defeated."), up to the next
        # numbered item of the minutes
        stop = min(len(text), hi + _MOTION_REACH)
        for ender in (_NEXT_ITEM, _NEXT_HEADING, _DEFERRED):
            found = ender.search(text, hi, stop)
            if found:
                stop = found.start()
        verdict = _first_verdict(text, hi, stop)
    return verdict


@lru_cache(maxsize=16)  # every mention of a sentence asks of the same sentence
def _motion_in(text: str, lo: int, hi: int) -> bool:
    return _MOTION.search(text, lo, hi) is not None


#: How far after a motion its outcome is looked for (characters), and what ends the search: the next numbered item.
_MOTION_REACH = 600
_NEXT_ITEM = re.compile(r"\n\s*(?:\d{1,2}(?:\.\d{1,2})?[.)]|\(?[a-h]\))\s+\S")
#: a blank line, then a short line without a full stop: the minutes' next heading ("PET BYLAW", "Parking")
_NEXT_HEADING = re.compile(r"\n\s*\n[^\n.:]{2,40}\n")
#: the motion was put off: its outcome is not in this text
_DEFERRED = re.compile(r"\b(?:deferred|tabled|postponed|adjourned)\b")


def _verdicts(text: str, lo: int, hi: int) -> Iterator[tuple[re.Match[str], str]]:
    """Every verdict word in ``[lo, hi)`` with its verdict; a closed one that is awaited, negated or asked ("to be
    discharged", "not paid in full", "discharged?") is none."""
    for pattern, verdict in ((_CLOSED, "closed"), (_DECIDED, "decided")):
        for m in pattern.finditer(text, lo, hi):
            before = text[max(0, m.start() - 24):m.start()].rstrip()
            if verdict == "closed" and (_awaited(before, text, m.end()) or _CUE_NEGATED.search(before) or _conditional(text, m.start())
                                        or _asked(text, m.end()) or _awaited_discharges(text, m) or _AS_TO_PART.match(text, m.end())):
                continue  # ... or asked: "Has the lien been discharged? No."
            yield m, verdict


#: "discharges" as a noun, then its verb or its object ("Discharges for the following were requested", "discharges of
#: the lien and writ are pending"): the discharges are what the clause says of them
_DISCHARGES_NOUN = re.compile(r"\s*(?:for|of|were|are|have|has|:)\b")
_DISCHARGES_WORD = re.compile(_ocr_tolerant("discharges"))


def _awaited_discharges(text: str, m: re.Match[str]) -> bool:
    """A verdict word that is the noun "discharges" whose clause says they are still awaited (:data:`_AWAITED_AFTER`):
    not a verdict ("Discharges for the following were requested but not yet received")."""
    return (_DISCHARGES_WORD.fullmatch(m.group(0)) is not None and _DISCHARGES_NOUN.match(text, m.end()) is not None
            and _AWAITED_AFTER.search(text[m.end():m.end() + 60]) is not None)


def _first_verdict(text: str, lo: int, hi: int) -> str | None:
    """The verdict ("closed" or "decided") that comes first in ``[lo, hi)``."""
    first = min(_verdicts(text, lo, hi), key=lambda mv: mv[0].start(), default=None)
    return None if first is None else first[1]


_MOTION = re.compile(_ocr_tolerant(r"\b(?:moved|motion|proposed|proposal|considered)\b"))


def _instrument_block(text: str, start: int, end: int, lo: int, hi: int) -> tuple[int, int]:
    """``[lo, hi)`` narrowed to the term's own instrument in a register: from the last registration number before
    the term (or its own, just after it) to the next instrument's number."""
    _, starts, ends = _matches_in(_REGISTRATION, text, lo, hi)
    i = bisect.bisect_right(ends, start)  # the numbers before the term: those that end by its start
    j = max(i, bisect.bisect_right(starts, end + 12))  # the first number after it, more than 12 characters on
    return (starts[i - 1] if i else lo), (starts[j] if j < len(starts) else hi)


def _nearest_verdict(text: str, start: int, end: int, lo: int, hi: int) -> str | None:
    best: tuple[int, str] | None = None
    for m, verdict in _verdicts(text, lo, hi):
        if m.start() < end and m.end() > start:
            continue
        distance = start - m.end() if m.end() <= start else m.start() - end
        if best is None or distance < best[0] or (distance == best[0] and verdict == "closed"):
            best = (distance, verdict)
    return None if best is None else best[1]


#: Several units, owners or accounts reported together: the corporation's collections, not this unit's debt.
_AGGREGATE = re.compile(
    r"\b(?:\d+|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|[a-z]+teen|twenty|several|many|some|a number of"
    r"|all|other|various) (?:units|owners|accounts|suites|lots|titles|homes)\b|\bowners in arrears\b|\ba total of\b|\bin total\b"
    r"|\bin (?:the )?aggregate\b"
)
_THIS_UNIT = re.compile(r"\b(?:this|the subject|the said|subject|the seller'?s'?|vendor'?s'?) (?:unit|suite|lot|property|home)\b|\bthe unit\b")


@lru_cache(maxsize=16)  # every mention of a sentence asks of the same sentence (:func:`_span_of`)
def _aggregate(sentence: str) -> bool:
    return _AGGREGATE.search(sentence) is not None and _THIS_UNIT.search(sentence) is None


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
        return _prose_reserve_ratio(low)
    return balance / target


#: What an amount stated in prose is, read from the words between it and the amount or clause before it. Strong cues:
#: what the fund should hold (a study's recommendation, a requirement, a target), what it holds (present or past
#: tense), a flow or a cost (a contribution, money received or spent, a project), which is neither; the last strong
#: cue before the amount decides. Weak cues ("a balance of", "is only", "in reserve", a "Reserve fund:" label) say
#: "held" only where no strong cue does.
_TARGET_CUE = re.compile(r"\b(?:recommend\w*|requir\w*|benchmark|target\w*|should\s+(?:hold|have|be|reach|stand)|calls?\s+for|advis\w*"
                         r"|fully\s+funded|ideal|minimum|needed|(?:proper|appropriate|adequate|prudent)\s+(?:level|balance)"
                         r"|(?:increased|raised|brought|built\s+up|grow|grown)\s+to)\b")
_HELD_NOW = re.compile(r"\b(?:holds|holding|holdings|has|have|stands|sits|totals?|totall?ing|contains|amounts?\s+to|comes\s+to|currently|now|today"
                       r"|at\s+present|presently"
                       r"|on\s+(?:hand|deposit)|actual)\b")
_HELD_THEN = re.compile(r"\b(?:held|had|stood|sat|totall?ed|contained|amounted\s+to|came\s+to)\b")
_FLOW_CUE = re.compile(r"\b(?:contribut\w*|instal\w*|monthly|annual\w*|yearly|per\s+(?:month|year|annum)|levy|levies|fees?"
                       r"|costs?|costing|replac\w*|repair\w*|projects?|expens\w*|expendit\w*|spend\w*|spent|budget\w*|interest"
                       r"|insurance|deductible|increase[sd]?|increasing|rais(?:e|es|ing)|loan|borrow\w*|transfer\w*|deposits|withdraw\w*"
                       r"|draws?|received|receives|collected|paid|earned|allocated|set\s+aside|surplus|deficit)\b")
_WEAK_HELD = re.compile(r"\b(?:balances?|position|in\s+(?:the\s+)?reserves?(?:\s+fund)?|(?:is|was|stands\s+at|stood\s+at)\s+(?:only|just|now|currently|down\s+to)"
                        r"|(?:reserves?|fund|balance|it)\s+(?:is|was|stands\s+at|sits\s+at)(?:\s+(?:now|currently|only))?(?:\s+at)?"
                        r"|reserve(?:\s+fund)?(?:\s+balance)?\s*(?::|at|of)?\s*(?:approx\.?|approximately|about|around|roughly|some|~)"
                        r"|reserve(?:\s+fund)?(?:\s+balance)?\s*(?::|-|\u2013|at|of))(?=\W|$)")
#: a cue just after an amount with none before it ("$600,000 recommended in the study", "$74,300 held")
_TARGET_AFTER = re.compile(r"\s*(?:is\s+|was\s+)?(?:recommended|required|targeted|advised|needed)\b"
                           r"|\s+(?:that\s+|which\s+)?(?:the\s+|its\s+|our\s+|their\s+)?(?:[a-z0-9']+\s+){0,3}(?:recommends|requires|calls\s+for|advises)\b"
                           r"|\s+(?:the\s+|its\s+|a\s+)?(?:[a-z0-9']+\s+){0,2}(?:fully\s+funded|recommended|required|target|benchmark)\s+(?:balance|level)\b"
                           r"|\s+(?:that\s+|which\s+)?(?:the\s+|its\s+)?(?:[a-z0-9']+\s+){0,4}says\s+(?:the\s+fund|it)\s+should\s+(?:hold|have|be)\b")
_HELD_AFTER = re.compile(r"\s*(?:is\s+|was\s+)?(?:held|on\s+hand|on\s+deposit|in\s+(?:the\s+)?(?:reserves?|fund|account))\b")
_FLOW_AFTER = re.compile(r"\s*(?:per\s+(?:month|year|annum)|a\s+(?:month|year)|monthly|annually|each\s+(?:month|year)"
                         r"|in\s+(?:\w+\s+)?contributions|(?:be\s+|is\s+|was\s+)?set\s+aside)\b")
#: a target for a date years away under a long-range plan ("under the 30-year plan ... should reach $900,000 by 2044"),
#: or to be built up over years ("$700,000 be set aside over ten years"): not what the fund should hold now
_HORIZON_AFTER = re.compile(r"\s*(?:\S+\s+){0,4}?(?:over|within)\s+(?:the\s+next\s+)?\w+\s+years\b")
_HORIZON_PLAN = re.compile(r"\b(?:\d+|twenty|thirty|twenty-five)[- ]year\b|\blong[- ]range\b|\blong[- ]term\b")
_BY_YEAR = re.compile(r"\bby\s+(?:the\s+end\s+of\s+)?(?:19|20)\d\d\b")
#: a difference, not a balance ("has $35,000 more than last year")
_DELTA_AFTER = re.compile(r"\s*(?:more|less|higher|lower|above|below|up|down)\s+(?:than|from|on|over)\b")
#: a holding whose words after it name the reserve ("$40,000 in reserves", "$52,000 held in the reserve fund")
_RESERVE_AFTER = re.compile(r"\s*(?:is\s+|was\s+)?(?:held\s+|on\s+hand\s+|on\s+deposit\s+)?in\s+(?:the\s+|its\s+)?(?:reserves?|reserve\s+fund)\b")
#: a part of the fund ("of which $60,000 is held in a GIC"), not the fund
_PART = re.compile(r"\b(?:of\s+which|including|includes|of\s+(?:this|that)\s+(?:amount|sum|balance))\s*(?:\S+\s+)?$")
#: a projection or an estimate is not what the fund holds now, nor a target
_FUTURE = re.compile(r"\b(?:projected|projection|forecast\w*|estimated|anticipated|expected)\b")
#: an amount per unit or per owner before it in its clause on its line ("Per unit (212 units)  balance $1,945  benchmark
#: $8,712"), or right after it ("$8,712 per unit"), is not the fund's total, whatever else its words say
_PER_UNIT = re.compile(r"\bper(?:\s+|-)(?:unit|door|suite|owner|lot)\b|\beach\s+(?:unit|owner|suite)\b|\bunit'?s\s+share\b")
#: the subject of a holding, in the words before it: the reserve, or the fund (not another fund: "the insurance
#: deductible fund", "the operating fund"); "it" when the clause before names the reserve or the fund and not the
#: operating fund ("... should hold $640,000. At year end it held $122,000.")
_RESERVE_SUBJECT = re.compile(r"\breserves?\b|\b(?:the|this|its|our)\s+fund\b")
_IT_HOLDS = re.compile(r"\bit\s+(?:now\s+|currently\s+)?(?:holds|held|has|had|stands|stood|sits|sat|totals|totall?ed|contains|contained"
                       r"|(?:is|was)\s+(?:now\s+|currently\s+|only\s+)?(?:at|only))\b")
_OTHER_FUND = re.compile(r"\b(?:operating|general|contingency|insurance|deductible|capital\s+improvement|social)\s+(?:fund|account)\b"
                         r"|\b(?:operating|general|insurance|deductible|social)\s+reserve\b")
#: "contingency reserve (fund)" is the reserve fund's name in some documents; beside a capital (replacement) reserve it
#: is another fund
_CONTINGENCY_RESERVE = re.compile(r"\bcontingency\s+reserve\b")
_CAPITAL_RESERVE = re.compile(r"\bcapital\s+(?:replacement\s+)?reserve\b")
#: what a target's clause is about: the reserve, a fund, its study or plan, a balance or level
_TARGET_SUBJECT = re.compile(r"\breserve|\bfund|\bstud(?:y|ies)\b|\breport\b|\bplan\w*|\bbalance\b|\blevel\b|\bdepreciation\b|\bupdate\b"
                             r"|\bassessment\b|\bengineer|\bconsultant|\bprovider\b")
#: a dollar amount in prose, with its scale: "$1.2 million", "$1.45M", "$850k", "$96,500"
_PROSE_MONEY = re.compile(r"\$\s*(\d(?:[\d,]*\d)?(?:\.\d+)?)" + _SCALE)


def _prose_amount(m: re.Match[str]) -> float:
    return _scaled(m.group(1), m.group(2))


def _amount_kind(before: str, after: str) -> tuple[str, bool] | None:
    """``(kind, now)`` of an amount from its words (:data:`_TARGET_CUE` and the rest): kind "target", "held" or
    "flow"; ``now``: a holding stated in the present tense (or with no tense); None when its words say nothing."""
    strong = [(c.end(), kind) for kind, rx in (("target", _TARGET_CUE), ("now", _HELD_NOW), ("then", _HELD_THEN), ("flow", _FLOW_CUE))
              for c in rx.finditer(before)]
    if strong:
        kind = max(strong)[1]
        return ("held", kind == "now") if kind in ("now", "then") else (kind, True)
    if _WEAK_HELD.search(before):
        return "held", True
    if _FLOW_AFTER.match(after):
        return "flow", True
    if _TARGET_AFTER.match(after):
        return "target", True
    if _HELD_AFTER.match(after):
        return "held", True
    return None


def _prose_reserve_ratio(low: str) -> float | None:
    """Funded ratio of a reserve stated in prose, each amount qualified by its own words: "the study recommends
    $410,000; the fund holds $96,500", "our reserve stands at $61,200 against a study target of $250,000", "$88,000,
    well short of the $600,000 recommended".

    An amount is what the fund holds, or what it should hold, from the words between it and the amount (or clause
    start) before it, the last cue deciding (:func:`_amount_kind`): "the property manager advises that the fund
    currently holds" is a holding, "recommends a balance of" a target, "recommends annual contributions of" neither.
    None of these: a negative amount, a projected or estimated one, a part of the fund ("of which"), an amount per
    unit, a target years away under a long-range plan or built up over years. A holding counts when its words name
    the reserve or the fund (or "it", after a clause that does), not another fund; a target, in a clause about the
    reserve, a fund, its study or plan. The holding compared is one stated in the present tense when there is one
    (a page may also say what the fund held years ago), the one nearest the target; returns it over the first
    target, or None without both."""
    ends = sentence_ends(low)
    held: list[tuple[bool, int, float]] = []
    target: tuple[int, float] | None = None
    prev_end = 0
    for m in _PROSE_MONEY.finditer(low):
        i = bisect.bisect_right(ends, m.start())
        lo = ends[i - 1] if i > 0 else 0
        hi = ends[i] if i < len(ends) else len(low)
        before = low[max(lo, prev_end):m.start()]
        prev_end = m.end()
        after = low[m.end():hi]
        value = _prose_amount(m)
        line_in_clause = low[max(lo, low.rfind("\n", 0, m.start()) + 1):m.start()]
        if (value <= 0 or _negative_sign(low[max(0, m.start() - 24):m.start()])  # a negative: another detector's
                or _PER_UNIT.search(line_in_clause) or _PER_UNIT.search(before) or _PER_UNIT.match(after.lstrip())
                or _FUTURE.search(before) or _PART.search(before) or _DELTA_AFTER.match(after)):
            continue
        found = _amount_kind(before, after)
        if found is None:
            continue
        kind, now = found
        clause = low[lo:hi]
        if kind == "held" and _holder_is_reserve(low, before, after, low[lo:m.start()], lo, ends, i):
            held.append((now, m.start(), value))
        elif kind == "target" and target is None and _TARGET_SUBJECT.search(clause) and not _horizon(clause, after):
            target = (m.start(), value)
    if not held or target is None:
        return None
    at, goal = target
    present = [h for h in held if h[0]] or held
    holding = min(present, key=lambda h: (abs(h[1] - at), h[1]))[2]
    return None if holding == goal else holding / goal


def _other_fund(words: str, low: str) -> bool:
    """Whether ``words`` name a fund other than the reserve (:data:`_OTHER_FUND`; a contingency reserve where the text
    also names a capital reserve)."""
    return _OTHER_FUND.search(words) is not None or (
        _CONTINGENCY_RESERVE.search(words) is not None and _CAPITAL_RESERVE.search(low) is not None)


def _negative_sign(before: str) -> bool:
    """Whether the words right before a dollar amount make it negative, as :func:`parse_amounts` reads a sign: "(" or
    an attached minus ("-$"), or a spaced minus that is no separator (:func:`_separating_dash`)."""
    tail = before.rstrip(" ")
    if tail.endswith("(") or before.endswith("-"):
        return True
    return tail.endswith("-") and not _separating_dash(tail[:-1])


def _holder_is_reserve(low: str, before: str, after: str, clause_before: str, lo: int, ends: Sequence[int], i: int) -> bool:
    """Whether a holding is the reserve's: the words before it (``before``, from the amount or clause start before
    it) name no other fund and name the reserve or the fund, or the words after it do ("$40,000 in reserves"), or the
    clause up to it does ("the reserve, which held $50,000 in 2015, now holds ..."; ``clause_before``); or they say
    "it" after a clause that names the reserve or the fund and not another fund."""
    if _other_fund(before, low):
        return False
    if _RESERVE_SUBJECT.search(before) or _RESERVE_AFTER.match(after):
        return True
    if _RESERVE_SUBJECT.search(clause_before) and not _other_fund(clause_before, low):
        return True
    if _IT_HOLDS.search(before) and i > 0:
        prev = low[(ends[i - 2] if i > 1 else 0):lo]
        return _RESERVE_SUBJECT.search(prev) is not None and not _other_fund(prev, low)
    return False


def _horizon(clause: str, after: str) -> bool:
    """A target years away: built up over years ("over ten years" after it), or by a year under a long-range plan."""
    return _HORIZON_AFTER.match(after) is not None or (_BY_YEAR.search(clause) is not None and _HORIZON_PLAN.search(clause) is not None)


#: a percentage as the documents write it: "21%", "21 %", "21 per cent", "21 percent"
_PCT = r" ?(?:%|per ?cent\b|percent\b)"
_PERCENT_FUNDED = re.compile(
    r"percent(?:age)? funded[^0-9\n]{0,40}(\d{1,3}(?:\.\d+)?)" + _PCT + r"|funded (?:at|to) (?:only )?(\d{1,3}(?:\.\d+)?)" + _PCT
    + r"|(\d{1,3}(?:\.\d+)?)" + _PCT + r" funded"
    + r"|(\d{1,3}(?:\.\d+)?)" + _PCT + r"\s+of\s+(?:the\s+|its\s+|their\s+)?(?:[a-z']+\s+){0,2}?"
      r"(?:(?:recommended|required|target|benchmark|fully\s+funded)\s+(?:level|balance|amount|funding(?:\s+level)?|reserve(?:\s+fund)?(?:\s+balance)?)"
      r"|recommendation|requirement|benchmark|target)\b"
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


#: The header of a fund's cash-flow table, named or not: opening balance, money in, money out, closing balance
#: ("Year Opening Contributions Interest Expenditures Closing" over a table continued from the page before).
_CASH_FLOW_HEADER = re.compile(r"\bopening\b.{0,80}\bcontrib\w*.{0,80}\b(?:expend\w*|spending|withdrawals?).{0,80}\b(?:closing|ending)\b")
#: A year followed by four or five signed amounts: a row of a projection, in a column or flattened onto one line.
_PROJECTION_ROW = re.compile(r"(?<![\d$,.])((?:19|20)\d{2})((?:[ \t]+\(?-?\$?[ ]?-?[\d,]+(?:\.\d{2})?\)?){4,5})(?=\s|$)")


def projected_balances(low: str) -> list[float]:
    """Closing balances of the rows of ``low`` (normalised text) that add up as a fund's cash flow does:
    ``opening + contributions (+ interest) - expenditures = closing``, within a dollar per figure (rounding), with
    expenditures printed positive or in parentheses. Such rows are a fund's projection whatever the page calls
    it (a table continued from the page before has no title; OCR garbles the column names, not the sums)."""
    out: list[float] = []
    for m in _PROJECTION_ROW.finditer(low):
        amounts = parse_amounts(m.group(2), bare=True) or []
        cells = m.group(2).split()
        if len(cells) != len(amounts):  # parse each figure on its own: "$1,180,000" and bare "790,308" alike
            amounts = [a for cell in cells for a in (parse_amounts(cell, bare=True) or _plain_figure(cell))]
        if len(amounts) not in (4, 5):
            continue
        opening, *flows, closing = amounts
        *inflows, outflow = flows
        tolerance = 1.0 * len(amounts)
        if abs(opening + sum(inflows) - abs(outflow) - closing) <= tolerance:
            out.append(closing)
    return out


def _plain_figure(cell: str) -> list[float]:
    """A bare integer figure of a table cell ("790308", "(48,000)", "0"); nothing when the cell is not one."""
    mm = re.fullmatch(r"\(?(-?)\$?\s?(-?)([\d,]+)\)?", cell)
    if mm is None:
        return []
    value = float(mm.group(3).replace(",", "") or 0)
    return [-value if (mm.group(1) or mm.group(2) or cell.startswith("(")) else value]


#: An amount in parentheses that its sentence calls enough is an aside in prose ("the reserve balance ($910,000) is
#: enough"), not an accounting negative ("Lowest projected balance ($1,021,314)", "... ($412,300) is reached in 2029").
_ASIDE = re.compile(r"\(\s?\$?\s?\d[\d,]*(?:\.\d{2})?\s?\)(?=\s+(?:is|was|are|were|remains)\s+(?:enough|sufficient|adequate|ample|healthy)\b)")
#: A row of a reserve or cash-flow table that names a balance ("closing", "projected", "lowest"...).
_BALANCE_ROW = re.compile(r"\b(?:closing|projected|ending|balance|lowest|fund)\b")
#: A negative amount on such a row: parenthesised, or signed before or after the dollar sign.
_NEGATIVE_AMOUNT = re.compile(r"\(\s?\$?\s?\d[\d,]*(?:\.\d+)?\s?\)|-\s?\$\s?\d[\d,]*(?:\.\d+)?|\$\s?-\s?\d[\d,]*(?:\.\d+)?")
#: what a negative amount must follow closely to be a balance: "lowest projected balance ($412,300)", "the closing
#: balance in 2031 is - $151,792", "Projected reserve balance at the end of 2027: ($18,400)"
_BALANCE_NEAR = re.compile(r"\b(?:closing|projected|ending|balance|lowest|deficit|shortfall|position|overdrawn)\b")


def _balance_negatives(line: str) -> str:
    """``line`` with the negative amounts that are no balance's written as positive: a negative amount with no balance
    word in the 48 characters before it on its line (a cost in parentheses in a sentence about the fund: "Roof
    replacement ($380,000) was completed ...")."""
    out = []
    last = 0
    for m in _NEGATIVE_AMOUNT.finditer(line):
        if _BALANCE_NEAR.search(line, max(0, m.start() - 48), m.start()) is None:
            out.append(line[last:m.start()] + re.sub(r"[()\-]", " ", m.group(0)))
            last = m.end()
    return "".join(out) + line[last:]


def negative_reserve_balance(text: str) -> float | None:
    """The most negative balance stated in a reserve fund or cash-flow table, or None: a reserve that runs out of
    money is a shortfall whatever its funded ratio. Read from a row that names a balance ("Lowest projected balance
    ($1,021,314)") or from the balance column of a table ("FY  Opening ... Closing" over "2029 ... (1,299,797)")."""
    low = normalise_ocr(text)
    balances = projected_balances(low)
    if "reserve" not in low and "fund" not in low and _CASH_FLOW_HEADER.search(low) is None and len(balances) < 2:
        return None
    found: list[float] = [b for b in balances if b < 0] if len(balances) >= 2 else []
    lines = _ASIDE.sub(" ", low).split("\n")
    for i, line in enumerate(lines):
        if _BALANCE_ROW.search(line) and parse_amounts(line, bare=True):
            found += [a for a in parse_amounts(_balance_negatives(line), bare=True) if a < 0]
            continue
        header = _cells(line)
        cols = [j for j, c in enumerate(header) if re.fullmatch(r"(?:projected )?(?:closing|ending)(?: balance)?|balance", c)]
        if len(header) < 3 or not cols or parse_amounts(line, bare=True):
            continue
        for row in lines[i + 1:]:
            cells = _cells(row)
            if not row.strip() or len(cells) != len(header):
                break
            found += [a for j in cols for a in parse_amounts(cells[j], bare=True) if a < 0]
    return min(found) if found else None


#: An amount each owner pays, read from the clause around it: "$14,500 per unit", "unit share ... $15,984.80",
#: "from owners by unit factor", "$22,000 per door, payable in two instalments".
#: Both read through OCR's letter confusions (:func:`_ocr_tolerant`: "recovcr", "by unit fact0r").
_PER_OWNER = re.compile(_ocr_tolerant(
    r"\bper (?:unit|door|suite|owner|home|lot|titled unit)\b(?! per\b| ?/ ?(?:month|year))(?!,? (?:per|a|each) (?:month|year))"
    r"|\bunit(?:'s)? share\b|\bby unit factor\b|\bin proportion to (?:the |their |its )?unit factors?\b|\bfrom (?:the |all |each )?owners\b"
    r"|\bcharged to (?:the |all |each )?owners\b"
))
_LEVY_ACT = re.compile(_ocr_tolerant(
    r"\b(?:assessment|assessed|levy|levied|recover(?:ed|y)?|instal+ments?|funding proposal|special contribution|capital contribution"
    r"|one-time (?:contribution|amount|payment|charge)|owner-funded)\b"
))
_NOT_A_LEVY = re.compile(r"\bfines?\b|\bmonthly\b|\bper month\b|/month\b|\bfee increase\b")


def owner_assessments(text: str) -> list[tuple[int, int]]:
    """Sentences of normalised ``text`` that charge the owners money: an amount above zero, a per-owner share
    (per unit, by unit factor, recovered from owners) and a levying word (assessment, levy, instalments), not
    closed ("rejected", "fully collected"), not normative ("may levy") and not a monthly fee or a fine."""
    out: list[tuple[int, int]] = []
    starts = (0, *sentence_ends(text))
    for lo, hi in zip(starts, (*starts[1:], len(text))):
        sentence = text[lo:hi]
        if not _PER_OWNER.search(sentence) or not _LEVY_ACT.search(sentence):
            continue
        if not any(a > 0 for a in parse_amounts(sentence)) or _NOT_A_LEVY.search(sentence) or _NORMATIVE.search(sentence):
            continue
        acts = list(_LEVY_ACT.finditer(sentence))
        if all(_negated(text, lo + a.start(), 60) for a in acts):  # "no special contribution from owners is anticipated"
            continue
        anchor = _PER_OWNER.search(sentence)
        assert anchor is not None
        if clause_polarity(text, lo + anchor.start(), lo + anchor.end()) == "closed":
            continue
        out.append((lo, hi))
    return out


_REGISTRATION = re.compile(r"\b\d{3} ?\d{3} ?\d{3}\b")
#: A court file number named as such ("Action No. 2403 08826", "Court File 2201-04471"): the suit's own number.
_COURT_FILE = re.compile(_ocr_tolerant(r"\b(?:action|court file|claim)(?: no\.?| number)?:?\s*\d{4}[ -]\d{5}\b"))
#: The land itself by its legal description ("PLAN 0515770 BLOCK 12 LOT 41", "Plan 1522KS, Block 8, Lot 14"): a clause that
#: names it is about this parcel, not a standard term.
_LEGAL_DESCRIPTION = re.compile(r"\bplan\s+\d{3,7}[a-z]{0,3}\s*,?\s+block\s+\d+[a-z]?\s*,?\s+lot\s+\d+")
_AMOUNT = re.compile(r"\$\s*\d|\b\d[\d,]*\.\d{2}\b(?! ?%)|\b\d+(?:\.\d+)? ?%")
#: A percentage that is a rate ("2% per month", "interest at 18%", "5% of the amount owing") or a voting threshold
#: ("75% of the unit factors") is a term of a bylaw or contract, not a measurement of this deal: it does not make a
#: mention concrete. A measurement ("section loss of up to 40%", "the fund is 38% funded") does.
_RATE_AFTER = re.compile(
    r"\s*(?:(?:per|a|each|every)\s+(?:month|annum|year|day|week|quarter)\b|p\.a\.|annually\b|monthly\b|daily\b|compounded\b"
    r"|of (?:the |all |any |such )?(?:unit factors?|owners|votes cast|votes|voting|eligible voters)\b"
    r"|of (?:the|any|such) (?:amounts?|balances?|sums?)\b)")
_RATE_BEFORE = re.compile(r"\b(?:interest|rate|late charge|penalty|penalties)\s+(?:rate\s+)?(?:of|at|equal to)\s*$")


@lru_cache(maxsize=8)  # a row's line is read for each mention on it, as _cell_spans
def _states_figure(span: str) -> bool:
    """An amount or a date in the span, or a percentage that is neither a rate nor a threshold."""
    if _DATE.search(span):
        return True
    for m in _AMOUNT.finditer(span):
        if m.group().endswith("%") and (_RATE_AFTER.match(span, m.end())
                                        or _RATE_BEFORE.search(span, max(0, m.start() - 30), m.start())):
            continue
        return True
    return False


#: A date stated: "2024-08-06", "Aug. 6, 2024", the court forms' "6th day of August, 2024", "6 August 2024", and a month
#: of a year ("registered June 2024", "first payment January 2025"); a month and day without the year ("due June 30")
#: is a bylaw's or a notice's standing term as often as an event, and is not one.
_MONTH = (r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|oct(?:ober)?"
          r"|nov(?:ember)?|dec(?:ember)?)\.?")
_DATE = re.compile(  # its parts apart by any whitespace: a date broken at a line's end is a date ("October 15," / "2025")
    r"\b(?:19|20)\d{2}[/\-]\d{1,2}(?:[/\-]\d{1,2})?\b"
    r"|\b" + _MONTH + r"\s+(?:\d{1,2},?\s+)?(?:19|20)\d{2}\b"
    r"|\b\d{1,2}(?:st|nd|rd|th)?\s+(?:day\s+of\s+)?" + _MONTH + r",?\s+(?:19|20)\d{2}\b"
)
#: "may" the modal, not the month: "May 2, 2026", "for May to July", "since May"
_MAY = (r"(?<!\bin )(?<!\bof )(?<!\bfor )(?<!\bfrom )(?<!\bsince )(?<!\buntil )(?<!\bto )(?<!\bthrough )"
        r"(?<!\bearly )(?<!\blate )(?<!\bmid-)(?<!april and )(?<!march and )may(?!,?\s*\d)")
#: wording that makes a term generic: a modal, a condition, a penalty to avoid ("pay by the due date to avoid a 7% penalty"
#: is what would happen; "a levy approved to avoid depleting the fund" is not a penalty)
_MODAL = re.compile(r"\b(?:" + _MAY + r"|shall|would|if|any|such|where|in the event|from time to time|unless|whether|provided that"
                    r"|(?:to )?avoid(?:s|ing)? (?:a |any |the )?(?:\d+ ?% )?(?:late )?(?:payment )?(?:penalty|penalties|interest|late charges?))\b")

#: Effective weight of a mention: concrete (its sentence names an instrument number, amount or date),
#: plain (no such detail, stated as fact), generic (no detail, in normative or conditional wording), benign.
FACTOR_CONCRETE = 1.0
FACTOR_PLAIN = 0.55
FACTOR_GENERIC = 0.35
FACTOR_BENIGN = 0.1


#: The term is followed by its own amount: "of $...", "of up to $...", "totalling $...", ": $..." (amount above zero).
_OWN_AMOUNT = re.compile(r"\s*(?:\(|:|,)?\s*(?:of|for|in the amount of|totalling|totaling)?\s*(?:up to|not exceeding)?\s*\$\s*[1-9]")
#: Normative wording ("may", "shall"): terms of a bylaw or contract even when an amount follows.
_NORMATIVE = re.compile(r"\b(?:" + _MAY + r"|shall|from time to time)\b")
#: "any" in a sentence: permissive wording about any amount, not one stated
_ANY = re.compile(r"\bany\b")
#: Conditional wording ("if", "unless", "in the event", "exceeding"): the amount is a threshold, not a fact.
_CONDITIONAL = re.compile(r"\b(?:if|unless|in the event|whether|provided that|exceed(?:s|ing)?|over|more than|greater than|threshold"
                          r"|or more|or greater|at least)\b")
#: an amount to the cent ("$14,022.80"), read from its first digit
_CENTS = re.compile(r"[1-9][\d,]*\.\d{2}\b")
#: Perils whose deductible is the building's, never charged back to the owner of the unit where a loss began.
_CATASTROPHE = re.compile(r"\b(?:flood|earthquake|hail|windstorm|overland|named storm|wildfire)\b")


@lru_cache(maxsize=8)  # as _states_figure
def _states_money(span: str) -> bool:
    return any(a > 0 for a in parse_amounts(span))


def _amounts_beyond(spans: tuple[str, ...], floor: float) -> bool:
    """An amount above ``floor`` in the spans that is not a catastrophe peril's. Each item of a list is read alone: the
    parts between semicolons, lines, a comma before a word and an "and" before a verb ("a water damage deductible of
    $150,000 and excluded flood": the flood is not the $150,000's; "flood and storm surge $250,000" is one item), and the
    cells of an inline "|" list ("Deductibles: Water damage $100,000 | Earthquake 10%"), a cell that is only an amount
    read with the cell before it; a table's row ("| Earthquake | 10% | $150,000 minimum |") is one item. An item that
    names a peril is the peril's, whatever amounts it has ("Flood deductible $250,000 per occurrence, $500,000 in the
    high-risk zone")."""
    return any(_part_beyond(part, floor) for span in spans for part in _LIST_PART.split(span))


#: where one item of a list ends and the next begins (:func:`_amounts_beyond`): not at a comma before the item's own floor or
#: cap ("Earthquake 15% of loss, min. $200,000", ", subject to a minimum of $100,000"); also a table's row end where the layout
#: joined its rows: a figure, one space, then the next row's label and its figure across a column gap ("water damage
#: $100,000 earthquake  10% of loss" is two rows, the water damage's and the peril's)
_LIST_PART = re.compile(r"[;\n]|,\s(?=[a-z])(?!(?:subject to |to )?(?:an? |the )?(?:min|max)(?:imum|\.|\b))|\band\b(?=\s+[a-z]+ed\b)|(?<=[0-9%]) (?=[a-z][a-z ()'/-]{0,40}  +\(?\$?[0-9])")


def _part_beyond(part: str, floor: float) -> bool:
    """:func:`_amounts_beyond` of one part of a list."""
    items: list[str] = []
    for cell in ([part] if part.lstrip().startswith("|") else part.split("|")):
        if items and not re.search(r"[a-z]", cell):
            items[-1] += " " + cell
        else:
            items.append(cell)
    return any(not _CATASTROPHE.search(item) and any(a > floor for a in parse_amounts(item)) for item in items)


def _clause_beyond(text: str, start: int, end: int, floor: float) -> bool:
    """:func:`_amounts_beyond` of the term's clause (:func:`_full_stop_bounds`).

    The clause runs from the term's line (or sentence) to the next full stop, which in a long text without full stops is
    the rest of the text, for each line's mention. A clause that starts after its sentence's start starts at a line,
    where a part of the sentence's list starts too: its parts are the last parts of the sentence's, whose verdicts are
    read once for the sentence (:func:`_parts_beyond`)."""
    clause_lo, clause_hi = _full_stop_bounds(text, start, end)
    if clause_hi - clause_lo <= 2048:
        return _amounts_beyond((text[clause_lo:clause_hi],), floor)
    sentence_lo = _sentence_bounds(text, start)[0]
    starts, beyond = _parts_beyond(text, sentence_lo, clause_hi, floor)
    k = bisect.bisect_left(starts, clause_lo)
    if k == len(starts) or starts[k] != clause_lo:  # not a part's start (never seen): read the clause itself
        return _amounts_beyond((text[clause_lo:clause_hi],), floor)
    return beyond[k]


@lru_cache(maxsize=16)
def _parts_beyond(text: str, lo: int, hi: int, floor: float) -> tuple[tuple[int, ...], tuple[bool, ...]]:
    """Where each part of ``text[lo:hi]`` (:data:`_LIST_PART`) starts, and whether that part or one after it holds an
    amount beyond ``floor`` (:func:`_part_beyond`)."""
    span = text[lo:hi]
    bounds, at = [], 0
    for m in _LIST_PART.finditer(span):  # the parts re.split gives
        bounds.append((at, m.start()))
        at = m.end()
    bounds.append((at, len(span)))
    beyond = [False] * (len(bounds) + 1)
    for k in range(len(bounds) - 1, -1, -1):
        beyond[k] = beyond[k + 1] or _part_beyond(span[bounds[k][0]:bounds[k][1]], floor)
    return tuple(lo + a for a, _ in bounds), tuple(beyond[:-1])


def _full_stop_bounds(text: str, start: int, end: int) -> tuple[int, int]:
    """Where the term's clause of amounts starts and ends: from its sentence's start (not before its own line: the line
    above is another label's, "Property: ... $28,400,000" above "Deductibles: ...") to the next full stop or blank line
    (a list joined by ';' stays one clause)."""
    lo = max(_sentence_bounds(text, start)[0], _line_bounds(text, start)[0])
    stop = _FULL_STOP.search(text, end)
    hi = stop.start() if stop else len(text)
    eol = text.find("\n", end, hi)
    if eol != -1 and _states_money(text[end:eol]):
        hi = eol  # the term's line states its amounts ("Deductibles: all perils $5,000; ..."): the lines below are other labels'
    return lo, hi


_FULL_STOP = re.compile(r"\.(?=\s)|\n\s*\n")


#: A row that names another line of an insurance certificate (a limit, a liability cover, the policy's particulars):
#: the list under a "Deductibles" heading has ended.
_OTHER_COVER = re.compile(r"\b(?:liability|limit|fidelity|directors|replacement cost|premium|insurer|appraisal|property \()")


def _table_below(text: str, end: int, max_lines: int = 10) -> str:
    """The rows under a heading, up to a blank line or a row that names another cover."""
    eol = text.find("\n", end)
    if eol == -1:
        return ""
    rows = text[eol + 1:].split("\n\n", 1)[0].split("\n")[:max_lines]
    for i, row in enumerate(rows):
        if _OTHER_COVER.search(row):
            return "\n".join(rows[:i])
    return "\n".join(rows)


#: A form's question line with its answer ("Litigation pending?   YES - ...", "Any amounts owing by the unit?  No"): a
#: row of its own, like a "label: value" line.
_FORM_QUESTION = re.compile(r"\s*[^.:?\n]{1,60}\?")
#: The question of the term's form line answered yes: the form states it as a fact.
_ANSWERED_YES = re.compile(r"\?\s*(?:yes|y)\b(?!\s*/)")
#: The rest of a question the term is in, answered no ("arrears?  n", "liens registered against this unit?  no"); a
#: question about a status ("lien discharged?  no") is not one about the term (:data:`_STATUS_HEADER`).
_QUESTION_NO = re.compile(r"([^?\n]{0,60})\?\s*(?:no|n)(?![\w/])")
#: ... and a status asked on the term's line answered not done ("lien discharged?  [ ] pending"): see :data:`_STATUS_NOT_DONE`.
_STATUS_ASKED_NOT_DONE = re.compile(r"([^?\n]{0,60})\?\s*(?:" + _STATUS_NOT_DONE.pattern + r")(?![\w/])")


#: a figure with thousands separators ("1,250", "(412,000)"): a table row's amount needs no "$"
_THOUSANDS = re.compile(r"\(?\b\d{1,3}(?:,\d{3})+\b\)?")


def _found(pattern: re.Pattern[str], span: str) -> bool:
    """Whether ``pattern`` occurs in ``span`` (:func:`_first`)."""
    return _first(pattern, span) is not None


@lru_cache(maxsize=64)  # a mention reads its whole line or sentence: each mention on a long one asks the same
def _first(pattern: re.Pattern[str], span: str) -> re.Match[str] | None:
    """``pattern.search(span)``."""
    return pattern.search(span)


@lru_cache(maxsize=16)
def _span_of(text: str, lo: int, hi: int) -> str:
    """``text[lo:hi]``, the same string object each time it is asked: every mention of a sentence or a line reads the
    same span, and the caches keyed by a span (:func:`_found`, :func:`_first`) then hash it once, not once per mention
    (in a long text without full stops or line breaks the span is the whole text, and each mention hashed it again)."""
    return text[lo:hi]


def mention_factor(text: str, start: int, end: int, *, needs_amount: bool = False, min_amount: float | None = None,
                   context: Sequence[str] = (), unless: Sequence[str] = ()) -> tuple[float, str]:
    """How much one mention says about this deal, from the sentence (and, for a table row, the line) around it.

    An instrument number makes it concrete; otherwise normative or conditional
    wording ("may", "shall", "any", "if") before the term or just after it makes it generic; otherwise an
    amount, percentage or date, an amount in its row, or a decision in its clause ("approved", "registered",
    "remains unpaid") makes it concrete; otherwise it is plain.

    With ``needs_amount`` (a term that is routine until money is named: "special resolution",
    "deductible", "holdback") only a money amount above zero makes the mention concrete; with ``min_amount``,
    only one above that (not counting catastrophe perils); normative wording still makes it generic, and
    anything else (a date, a registration number) leaves it plain. With ``context``, the clause must also
    hold one of those words, and with ``unless``, none of those.
    """
    lo, hi = _sentence_bounds(text, start)
    llo, lhi = _line_bounds(text, start)
    line = _span_of(text, llo, lhi)
    row = _is_row(line, start - llo)
    whole = _span_of(text, lo, hi)
    spans = (whole, line) if row else (whole,)
    # the wording that can make the mention generic: its sentence, but a form's row ("Arrears (2023 and prior): $3,905.12")
    # is a clause of its own: "amounts paid after the date of issue may not be reflected" at the foot of the form does
    # not make its rows hypothetical
    form_row = row and (_found(_FORM_ROW, line) or re.match(r"\s*[^.:\n]{1,40}:", line) is not None
                        or _FORM_QUESTION.match(line) is not None)
    s_lo, s_hi = (llo, lhi) if form_row and lhi - llo < hi - lo else (lo, hi)
    sentence = _span_of(text, s_lo, s_hi)
    if (context and not any(_found(term_pattern(c), s) for c in context for s in spans)) or any(
            _found(term_pattern(u), s) for u in unless for s in spans):
        return (FACTOR_GENERIC, "generic") if _found(_NORMATIVE, sentence) else (FACTOR_PLAIN, "plain")
    if min_amount is not None:  # the amounts of its list, up to the full stop ("a; b; c."), not of the line's other sentences
        # normative wording up to the list's end: a note after it ("... Flood $250,000 Note: the owner may be charged the
        # deductible", a full stop lost with the line breaks or taken for an abbreviation's) is a statement of its own
        if _found(_MODAL, _span_of(text, s_lo, min(s_hi, _full_stop_bounds(text, start, end)[1]))):
            return FACTOR_GENERIC, "generic"
        return (FACTOR_CONCRETE, "concrete") if _clause_beyond(text, start, end, min_amount) else (FACTOR_PLAIN, "plain")
    own = _OWN_AMOUNT.match(text, end, min(hi, end + 40))
    modal = _first(_NORMATIVE, sentence)
    if own and not _found(_CONDITIONAL, sentence) and (
            not modal or (_CENTS.match(text, own.end() - 1) and lo + modal.start() < start and not _found(_ANY, sentence))):
        # "a credit facility of up to $1,000,000": the instrument names its own amount; an amount to the cent is a fact
        # even in permissive wording ("the owner may redeem the parcel by paying all tax arrears of $14,022.80")
        return FACTOR_CONCRETE, "concrete"
    if needs_amount:
        if _found(_MODAL, sentence):
            return FACTOR_GENERIC, "generic"
        if any(_states_money(s) for s in spans) or row_value(text, end) == "positive":
            return FACTOR_CONCRETE, "concrete"
        return FACTOR_PLAIN, "plain"
    if any(_found(_REGISTRATION, s) or _found(_COURT_FILE, s) for s in spans):
        return FACTOR_CONCRETE, "concrete"
    if _found(_MODAL, sentence):  # "the board may levy...", "the seller shall discharge any...": terms, not events
        return FACTOR_GENERIC, "generic"
    if any(_found(_LEGAL_DESCRIPTION, s) for s in spans):  # a standard term names the parcel too: after the modal check
        return FACTOR_CONCRETE, "concrete"
    if any(_states_figure(s) for s in spans) or row_value(text, end) == "positive" or (
            len(spans) > 1 and _found(_THOUSANDS, line)):  # a table row's figure needs no "$"
        return FACTOR_CONCRETE, "concrete"
    if clause_polarity(text, start, end) == "decided" or (form_row and _ANSWERED_YES.search(line, start - llo) is not None):
        return FACTOR_CONCRETE, "concrete"
    return FACTOR_PLAIN, "plain"


def _title_factor(text: str, end: int) -> tuple[float, str]:
    """A document titled by the term is concrete when its body names a registration, a court file, an amount or a date."""
    body = text[end:end + 1500]
    if _REGISTRATION.search(body) or _COURT_FILE.search(body) or _states_figure(body):
        return FACTOR_CONCRETE, "concrete"
    return FACTOR_PLAIN, "plain"


_YEAR_IN_DATE = re.compile(
    r"\b\d{1,2}/\d{1,2}/((?:19|20)\d{2})\b|\b((?:19|20)\d{2})-\d{2}-\d{2}\b"
    r"|\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.? \d{1,2},? ((?:19|20)\d{2})\b|\bday of [a-z]+,? ((?:19|20)\d{2})\b"
)


def _years(span: str) -> list[int]:
    return [int(next(g for g in m.groups() if g)) for m in _YEAR_IN_DATE.finditer(span)]


@lru_cache(maxsize=16)  # read once per chunk, asked once per mention
def _newest_year(text: str) -> int | None:
    """The newest year of a date in ``text`` (:func:`_years`), or None."""
    return max(_years(text), default=None)


def _digits(number: str) -> str:
    return number.replace(" ", "")


def own_registration(text: str, start: int, end: int) -> str | None:
    """The registration number of the instrument a term names: its own number just after it ("writ 232 288 901",
    "lien no. 091 332 108"), else the number before it on its line and in its sentence (a register's row:
    "211 099 672  22/04/2021  TAX NOTIFICATION", "Instrument 222 118 417 - CERTIFICATE OF LIS PENDENS")."""
    after = _REGISTRATION.search(text, end, min(len(text), end + 16))
    if after and "\n" not in text[end:after.start()]:
        return _digits(after.group(0))
    (line_lo, line_hi), (lo, hi) = _line_bounds(text, start), _sentence_bounds(text, start)
    before = _last_match(_REGISTRATION, _NOT_IN_REGISTRATION, text, max(line_lo, lo), min(line_hi, hi), start)
    return _digits(before.group(0)) if before is not None else None


#: A discharge, withdrawal or cancellation naming the instrument it clears, in either order ("Discharges: 222 118 417 in
#: full", "discharge of caveat 182 ...", "writ 232 288 901 ... was removed by discharge"); not one still awaited ("a
#: discharge of mortgage 202 318 774 will be registered on closing") nor a partial one.
_CLEARS_NUMBER = re.compile(
    r"\b(?:discharges?|discharge of|withdrawal of|withdraws|cancell?ation of|cancels|discharging)\b([^.;\n]{0,40}?)"
    r"(\d{3} ?\d{3} ?\d{3})\b")
_NUMBER_CLEARED = re.compile(
    r"(\d{3} ?\d{3} ?\d{3})\b(?:(?!\b(?:although|though|while|but|and|after|when|because|since|once|if|until)\b)[^.;\n]){0,40}?"
    r"\b(?:was|were|has been|have been)\s+(?:fully\s+)?(?:discharged|withdrawn|cancell?ed|removed (?:by|from))\b")
#: before a discharge word: it is still to come, wanted or missing ("undertakes to register a discharge of", "No discharge
#: of ... has been registered", "has not obtained a discharge of", "Requisition: discharge of ... required")
_AWAITED = re.compile(r"\b(?:to|will|shall|must|undertak\w*|request\w*|requisition\w*|pending|awaiting|obtain\w*|provide|deliver"
                      r"|no|not|never|without|missing|outstanding|require\w*)\b[^.;\n]{0,30}$")
#: after the discharge and its number: still to come or wanted ("... required prior to closing", "... will be registered")
_AWAITED_AFTER = re.compile(r"^[^.;\n]{0,40}?\b(?:will|is to|to be|shall|required|requested|needed|pending|outstanding|on closing"
                            r"|after closing|prior to closing|before closing|has not|have not|is not|not yet|must)\b")
_PARTIAL = re.compile(r"\bpartial\b|\bin part\b|\bportion\b|\b" + _PART_OF_LAND)  # "as to part", "as to Lot 4" (:data:`_AS_TO_PART`)


@lru_cache(maxsize=16)  # read once per chunk, asked once per mention
def cleared_registrations(text: str) -> frozenset[str]:
    """Registration numbers the text says a discharge, withdrawal or cancellation has cleared (digits only)."""
    out: set[str] = set()
    for m in _CLEARS_NUMBER.finditer(text):
        around = text[max(0, m.start() - 40):m.start()] + m.group(1) + text[m.end():m.end() + 40]
        line_start = text.rfind("\n", 0, m.start()) + 1
        if (_AWAITED.search(text[max(line_start, m.start() - 40):m.start()]) or _PARTIAL.search(around)
                or _AWAITED_AFTER.search(text[m.end():m.end() + 60]) or re.search(r"\b(?:pending|required|requested)\b", m.group(1))):
            continue
        out.add(_digits(m.group(2)))
    for m in _NUMBER_CLEARED.finditer(text):
        if not _PARTIAL.search(m.group(0)):
            out.add(_digits(m.group(1)))
    return frozenset(out)


#: The title of an instrument that clears another: "DISCHARGE OF LIEN", "WITHDRAWAL OF CAVEAT", "ORDER - DISCHARGE OF
#: LIEN UPON PAYMENT INTO COURT" (not a partial discharge).
_CLEARING_TITLE = re.compile(
    r"^(?:(?:order|form \d+|copy of)\s*[-:\u2013]?\s*)?(?:discharge|withdrawal|cancellation) of (?:the |said )?(?:[a-z']+ ){0,2}?"
    r"(?:lien|caveat|writ|mortgage|lis pendens|tax notification|notification|judgment)s?\b")
#: What ends the clearing instrument's copy in a chunk: another document appended ("[current title search ...]", a
#: certificate of title, a register's section).
_NEXT_DOCUMENT = re.compile(r"\n[ \t]*\n[ \t]*(?:\[|certificate|land title|encumbrances|registered owner|current title|estoppel|tax |notice"
                            r"|minutes|statement|report|search|information|schedule|page \d)")


@lru_cache(maxsize=16)  # read once per chunk, asked once per mention
def clearing_instrument(text: str) -> tuple[int, int] | None:
    """``[lo, hi)`` of a copy of a discharge or withdrawal that opens the text (its title among the first three lines):
    every mention in it is of the instrument it clears."""
    pos = 0
    for _ in range(3):
        while pos < len(text) and text[pos] == "\n":
            pos += 1
        eol = text.find("\n", pos)
        eol = len(text) if eol == -1 else eol
        if _CLEARING_TITLE.match(text[pos:eol].strip()):
            nxt = _NEXT_DOCUMENT.search(text, eol)  # a new document opens after a blank line (hard-wrapped prose may not)
            return pos, nxt.start() if nxt else len(text)
        pos = eol + 1
    return None


#: What undoes a clearing, said after it: the instrument reinstated, re-registered or restored, or the clearing itself
#: set aside, stayed, reversed, refused or cancelled ("DISCHARGE 232 110 086 CANCELLED BY REGISTRAR'S CORRECTION", "the
#: order discharging it was stayed by the Court of Appeal", "discharge rejected by Land Titles").
_REVIVED = re.compile(_ocr_tolerant(
    r"\b(?:reinstated|re-?registered|revived|restored to (?:the )?(?:title|register))\b"
    r"|\b(?:discharge|withdrawal|cancell?ation|release|order)\b[^.;\n]{0,60}?\b(?:stayed|set aside|reversed|rejected|refused"
    r"|cancell?ed|rescinded|void|in error|not accepted)\b"))
#: how far after the mention an undoing of its clearing is looked for (characters; its paragraph at most)
_REVIVAL_REACH = 300


#: a sentence about something else ("Separately, in the vendor's unrelated dispute, the costs order was stayed")
_ELSEWHERE = re.compile(r"\b(?:separately|unrelated|another matter|a different matter|other matters?|no connection)\b")
#: the clearing done again after it was undone ("Discharge registered as 242 147 330", "the writ removed from title")
_CLEARED_AGAIN = re.compile(r"\b(?:discharge|withdrawal|cancell?ation)(?: of [a-z' ]{1,30}?)?(?: (?:was|has been|now))? registered\b"
                            r"|\bremoved from (?:the )?(?:title|register)\b|\bshows (?:the [a-z' ]{1,30} )?(?:removed|discharged|withdrawn)\b")


def _revived(text: str, end: int) -> bool:
    """Whether the mention's sentence after it, or the next sentence (not one about something else: :data:`_ELSEWHERE`),
    says its instrument's clearing was undone (:data:`_REVIVED`; up to :data:`_REVIVAL_REACH` characters, in its
    paragraph), and nothing later in the paragraph clears it again (:data:`_CLEARED_AGAIN`): the instrument stands
    again."""
    para = text.find("\n\n", end)
    para = len(text) if para == -1 else para
    _, hi = _sentence_bounds(text, end)
    stop = hi
    if hi < para:
        _, hi2 = _sentence_bounds(text, min(hi + 1, len(text) - 1))
        if _ELSEWHERE.search(text, hi, hi2) is None:
            stop = hi2
    found = _REVIVED.search(text, end, min(stop, para, end + _REVIVAL_REACH))
    return found is not None and _CLEARED_AGAIN.search(text, found.end(), para) is None


#: A unit, suite, lot or tax roll named by its number ("Unit 108", "roll 2208 3317", "LOT 14", "Suite #6").
_ID = r"(?:no\.?\s*|number\s*|#\s*)?(\d[\da-z-]*(?: \d{3,5}\b)?)"
_DESIGNATOR = re.compile(r"\b(unit|suite|lot|roll)s?\s*" + _ID)
#: How a text names the property being bought: "purchase of Unit 305", "Unit 22 (subject unit)", "your roll, 2208
#: 3315", "our purchase is LOT 13", "our file is Roll 2044110", "the lot you are buying is Lot 14".
_SUBJECT = re.compile(
    r"\b(?:subject|our|your|this|purchased)\s+(unit|suite|lot|roll)\b[\s,:]*" + _ID
    + r"|\b(?:purchase|sale|acquisition) of (?:the )?(unit|suite|lot|roll)\s*" + _ID
    + r"|\b(?:our|the|this) (?:purchase|sale|transaction|file|property) is (?:for )?(?:the )?(unit|suite|lot|roll)\s*" + _ID
    + r"|\b(unit|suite|lot|roll)\s*" + _ID + r"\s*\((?:the )?subject\b"
    + r"|\b(?:unit|suite|lot|roll|property|home) (?:you are|you're|your clients? (?:is|are)|our clients? (?:is|are)|being) "
      r"(?:buying|purchasing|acquiring|bought|purchased) is (?:the )?(unit|suite|lot|roll)\s*" + _ID)
#: Further properties bought together ("purchase of Unit 305 and parking Unit 88").
_ALSO = re.compile(r"\s*(?:,|and|&)\s*(?:(?:titled |parking |storage )?(unit|suite|lot|roll)\s*)?" + _ID)
#: A designator labelled as not the one being bought: "Roll 3028815 (adjacent Lot 8 - NOT included in this sale)",
#: "Lot 22, next door", "roll 2208 3317 ..., which is not the property in your transaction".
_EXCLUDED_AFTER = re.compile(
    r"(?:[^.;:\n]|\n(?![ \t]*\n)){0,60}?(?:\bnot (?:included in|part of|the property in|the subject of|the property being (?:sold|bought|purchased)) "
    r"(?:this|the|your|our) (?:sale|transaction|purchase|deal|file)\b|\bnext door\b|\((?:the )?(?:adjacent|adjoining|neighbou?ring)\b)")
_EXCLUDED_BEFORE = re.compile(r"\b(?:adjacent|adjoining|neighbou?ring|next-door)\s+$")
#: After the term, the clause's own property is its object: "is on LOT 14", "belongs to roll 2208 3317", "(Reg. No. 231
#: 556 420) is registered against Lot 13" (a hard-wrapped line break is no clause end).
_OBJECT_DESIGNATOR = re.compile(r"(?:[^.;\n]|\n(?![ \t]*\n)|(?<=\d)\.(?=\d)|(?<=\breg)\.|(?<=\bno)\.){0,60}?\b(?:on|to|against|of|for|under)\s+(?:the\s+)?(?=(?:unit|suite|lot|roll)s?\b)")


def _id(kind: str, number: str) -> tuple[str, str]:
    return kind, re.sub(r"[\s-]", "", number).lstrip("0")


@lru_cache(maxsize=16)  # read once per chunk, asked once per mention
def subject_properties(text: str) -> frozenset[tuple[str, str]]:
    """The units, suites, lots and rolls the text names as the property being bought."""
    out: set[tuple[str, str]] = set()
    for m in _SUBJECT.finditer(text):
        groups = [g for g in m.groups() if g is not None]
        kind = groups[0]
        out.add(_id(kind, groups[1]))
        pos = m.end()
        while (also := _ALSO.match(text, pos)) is not None:
            out.add(_id(also.group(1) or kind, also.group(2)))
            pos = also.end()
    return frozenset(out)


@lru_cache(maxsize=16)
def _excluded_properties(text: str) -> frozenset[tuple[str, str]]:
    out: set[tuple[str, str]] = set()
    for d in _DESIGNATOR.finditer(text):
        if _EXCLUDED_AFTER.match(text, d.end()) or _EXCLUDED_BEFORE.search(text, max(0, d.start() - 20), d.start()):
            out.add(_id(d.group(1), d.group(2)))
    return frozenset(out)


#: a character no :data:`_DESIGNATOR` match holds and at which every attempt to match one stops
_NOT_IN_DESIGNATOR = re.compile(r"[^a-z\d.#\s-]")
#: a character no :data:`_REGISTRATION` match holds and at which every attempt to match one stops
_NOT_IN_REGISTRATION = re.compile(r"[^\d ]")


def _last_match(pattern: re.Pattern[str], stop: re.Pattern[str], text: str, lo: int, hi: int, start: int) -> re.Match[str] | None:
    """The last match of ``pattern.finditer(text, lo, start)`` (``lo <= start <= hi``), or None. ``stop`` matches a character that no match of ``pattern`` holds and no attempt
    to match reads past.

    Each mention asked this of its whole sentence, which in a long text without full stops is most of the text. Before
    the last such character ``b`` before ``start``, every attempt reads only characters before ``start``, so it goes as
    it goes in a search of ``[lo, hi)``: the matches there are read once per sentence (:func:`_matches_in`), and only
    ``[b, start)`` is searched again (the same matches as one search of ``[lo, start)``; a test checks it on random
    texts)."""
    if start - lo > 256:
        b = _last_stop(stop, text, lo, start)
        if b is not None:
            found, starts, _ = _matches_in(pattern, text, lo, hi)
            tail = None
            for tail in pattern.finditer(text, b, start):
                pass
            if tail is None:
                i = bisect.bisect_left(starts, b)
                tail = found[i - 1] if i else None
            return tail
    last = None
    for last in pattern.finditer(text, lo, start):
        pass
    return last


def _last_stop(stop: re.Pattern[str], text: str, lo: int, start: int) -> int | None:
    """The position of the last ``stop`` character in ``text[lo:start]``, or None."""
    places = _stops(stop, text)
    i = bisect.bisect_left(places, start)
    return places[i - 1] if i and places[i - 1] >= lo else None


@lru_cache(maxsize=8)
def _stops(stop: re.Pattern[str], text: str) -> tuple[int, ...]:
    return tuple(m.start() for m in stop.finditer(text))


@lru_cache(maxsize=16)  # every mention of a sentence asks of the same sentence
def _matches_in(pattern: re.Pattern[str], text: str, lo: int, hi: int) -> tuple[tuple[re.Match[str], ...], tuple[int, ...], tuple[int, ...]]:
    """The matches of ``pattern`` in ``text[lo:hi]`` (searched in ``text``), in order, with their starts and ends."""
    found = tuple(pattern.finditer(text, lo, hi))
    return found, tuple(m.start() for m in found), tuple(m.end() for m in found)


@lru_cache(maxsize=8)
def _blank_lines(text: str) -> tuple[int, ...]:
    """Every position of ``"\\n\\n"`` in ``text`` (overlapping ones too)."""
    return tuple(m.start() for m in _DOUBLE_NEWLINE.finditer(text))


_DOUBLE_NEWLINE = re.compile(r"(?=\n\n)")


def other_property(text: str, start: int, end: int) -> str | None:
    """``"another property"`` when the mention's clause is about a unit, suite, lot or roll that the text labels as not
    the one being bought ("adjacent Lot 8 - not included in this sale"), or other than the one the text names as
    bought ("Unit 108 is five months in arrears" in minutes sent for the sale of Unit 304); else None.

    The clause's property: the last one named before the term in its sentence, within its paragraph, else the one the
    clause is about after the term ("... is on LOT 14"). A suite number is not a legal unit number: each kind is
    compared with its own."""
    lo, hi = _sentence_bounds(text, start)
    blanks = _blank_lines(text)  # text.rfind("\n\n", 0, start) and text.find("\n\n", end), without reading the text again
    i = bisect.bisect_right(blanks, start - 2)
    para_lo = blanks[i - 1] if i else -1
    j = bisect.bisect_left(blanks, end)
    para_hi = blanks[j] if j < len(blanks) else -1
    lo = max(lo, para_lo + 2 if para_lo != -1 else 0)
    hi = min(hi, para_hi if para_hi != -1 else len(text))
    named = _last_match(_DESIGNATOR, _NOT_IN_DESIGNATOR, text, lo, hi, start)
    if named is None:
        obj = _OBJECT_DESIGNATOR.match(text, end, hi)
        named = _DESIGNATOR.match(text, obj.end()) if obj else None
    if named is None:
        return None
    ident = _id(named.group(1), named.group(2))
    if ident in _excluded_properties(text):
        return "another property"
    same_kind = {n for k, n in subject_properties(text) if k == ident[0]}
    if same_kind and ident[1] not in same_kind:
        return "another property"
    return None


#: The text says the caveat is the buyer's own, registered to protect this purchase ("caveators are our purchaser
#: clients", "registered by our office ... on behalf of our clients"): it falls away on the transfer.
_OWN_CAVEAT = re.compile(_ocr_tolerant(
    r"\bcaveators? (?:are|is) our (?:purchaser |buyer )?clients?\b"
    r"|\b(?:registered|filed|lodged) by (?:our office|us|this office|our firm)\b[^.;]{0,60}?\bon behalf of (?:our|the) (?:purchaser |buyer )?"
    r"(?:clients?|purchasers?|buyers?)\b"))


def _own_caveat(low: str, start: int, end: int) -> bool:
    """The purchaser's own caveat, said of this caveat: in its clause (from the start of its line or sentence, whichever is
    later) or in the lines of its instrument after it, up to the next registration number (a register without full stops
    is one "sentence" holding every caveat); and in a sentence that is not about a loan (a lender's solicitor files "on behalf of our client" too: "... our client, Bow River Mortgage
    Investment Corp., to secure a loan of $180,000")."""
    lo = max(_line_bounds(low, start)[0], _sentence_bounds(low, start)[0])
    for m in _OWN_CAVEAT.finditer(low, lo, end + len(_instrument_window(low, end, 400))):
        slo, shi = _sentence_bounds(low, m.start())
        if not _LENDING.search(low, slo, shi):
            return True
    return False


#: a caveat filed by a lender's solicitor "on behalf of our client" secures a loan: it is not the purchaser's
_LENDING = re.compile(r"\b(?:mortgage\w*|loan|lend\w*|secure[sd]?|bank|credit|investment|financ\w*)\b")


#: What a search or a letter says is not on the title being bought: "This writ is not on the subject title", "the writ
#: does not appear on the current title and does not attach to these lands", a search's "Registered against land: NOT
#: REGISTERED AGAINST ANY TITLE" (a similar name, a former owner, another lot).
_NOT_ON_TITLE = re.compile(_ocr_tolerant(
    r"\b(?:(?:is|are|was|were|does|do|did|has|have)\s+not\s+(?:been\s+)?(?:registered\s+|shown\s+|appear(?:ing)?\s+|attach(?:ed)?\s+|show\s+)?"
    r"|not\s+registered\s+)(?:on|against|to)\s+(?:the|this|our|your|its|these|any)\s+(?:subject\s+|current\s+|vendor'?s\s+|seller'?s\s+)?(?:title|lands?|property|parcel)\b"))
#: An instrument said to be on the title: what a "not on the title" statement elsewhere in the text must not clear.
_ON_TITLE = re.compile(r"\b(?:registered (?:against|on)|remains? on|is (?:still )?on|appears? on|shown on) (?:the|this|our|your|its|these) "
                       r"(?:subject |current )?(?:title|lands?)\b")
#: A registration still to come: "has not been registered against the title yet but will be filed".
_AWAITED_REGISTRATION = re.compile(r"\b(?:yet|will be|to be|about to|intends?|pending|threaten\w*)\b")
#: Kinds of instrument a title can carry (what a "not on the title" statement can clear).
_REGISTRABLE = frozenset({"builders_lien", "lien", "judgment", "caveat", "litigation", "tax_lien", "foreclosure"})


@lru_cache(maxsize=16)  # read once per chunk, asked once per mention
def _disowning_sentences(text: str) -> tuple[str, ...]:
    return tuple(text[slice(*_sentence_bounds(text, m.start()))] for m in _NOT_ON_TITLE.finditer(text))


def _disowned(text: str, kind: str, lexicon: RiskLexicon) -> bool:
    """The text says the instrument of ``kind`` is not on the title being bought: a sentence of :data:`_NOT_ON_TITLE` that
    names a term of that kind ("This writ is not on the subject title" clears the writ and its judgment). Only where the
    text speaks of one instrument: not with two registration numbers, nor where it says another is on the title
    ("... registered against the title", "remains on the title"), nor of a registration still to come ("not registered
    yet", "will be filed")."""
    sentences = _disowning_sentences(text)
    if not sentences or len({_digits(n.group(0)) for n in _REGISTRATION.finditer(text)}) > 1:
        return False
    if any(_AWAITED_REGISTRATION.search(s) for s in sentences) or any(
            not re.search(r"\bnot\s+(?:been\s+)?$", text[max(0, m.start() - 12):m.start()]) for m in _ON_TITLE.finditer(text)):
        return False
    terms = {x.term for spec in lexicon.domains.values() for x in spec.terms if x.kind == kind}
    return any(term_pattern(term).search(s) for s in sentences for term in terms)


def _named_in_body(text: str, span: tuple[int, int]) -> frozenset[str]:
    """Registration numbers a discharge copy names as what it clears: in its body's first sentences (not rows below)."""
    lo, hi = span
    return frozenset(_digits(n.group(0)) for n in _REGISTRATION.finditer(text, lo, min(hi, lo + 600)))


def registration_age(text: str, start: int) -> int | None:
    """Years between the registration on the term's line (its date, or else the year that opens an Alberta
    registration number: "982 114 556" is 1998) and the newest date anywhere in the text; None when either is missing."""
    lo, hi = _line_bounds(text, start)
    line = text[lo:hi]
    years = _years(line)
    if years:
        year = min(years)
    else:
        number = _REGISTRATION.search(line)
        if number is None:
            return None
        yy = int(number.group(0)[:2])
        year = 1900 + yy if yy > 50 else 2000 + yy
    newest = _newest_year(text)
    return None if newest is None or newest < year else newest - year


#: A loan said to be repaid, in the past: "it was paid off around 2006", "the loan has since been repaid", "repaid many
#: years ago", "LOAN PAID OUT IN 2013", "retired Aug 2016", "is fully paid", "repaid the mortgage in 2012" (not "will be paid
#: out from the proceeds", "to be repaid", "paid down", "paid off in full on closing": :func:`repaid_undischarged` reads the
#: clause before it and what follows). ``[il]``: OCR's l for i, as the text is normalised.
_REPAID = re.compile(
    r"\b(?:(?:was|were|has\s+(?:since\s+)?been|have\s+(?:since\s+)?been|had\s+(?:since\s+)?been|is\s+now)\s+(?:fully\s+|long\s+|all\s+)?"
    r"(?:repa[il]d|pa[il]d\s+off|pa[il]d\s+out|pa[il]d\s+in\s+full|ret[il]red|sat[il]sf[il]ed)\b"
    r"|\bis\s+(?:now\s+)?fully\s+pa[il]d\b"
    r"|\b(?:repa[il]d(?:\s+(?:it|them|(?:the|this|that)\s+(?:loan|mortgage)))?|pa[il]d\s+(?:it\s+|them\s+|(?:the|this|that)\s+(?:loan|mortgage)\s+)?off"
    r"|pa[il]d\s+out|pa[il]d\s+in\s+full|ret[il]red|sat[il]sf[il]ed)\s+(?:around|about|back\s+in|years\s+ago|many\s+years\s+ago|long\s+ago|but"
    r"|(?:in\s+)?(?:(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\s+)?(?:19|20)\d\d)\b)")
#: The discharge is missing, said outright (anywhere in the passage): "no discharge was ever registered", "never
#: discharged", "hasn't been discharged", "discharge outstanding", "never removed from title".
_NO_DISCHARGE = re.compile(
    r"\b(?:no\s+d[il]scharge|no\s+release|never\s+(?:been\s+)?d[il]scharged|not\s+(?:yet\s+)?(?:been\s+)?d[il]scharged"
    r"|(?:has|have)n't\s+(?:yet\s+)?been\s+d[il]scharged|without\s+(?:a\s+)?d[il]scharge|und[il]scharged"
    r"|d[il]scharge\s+(?:was\s+|has\s+)?(?:never|not)\s+(?:yet\s+)?(?:been\s+)?(?:reg[il]stered|f[il]led)|d[il]scharge\s+(?:has|have)n't\s+been\s+(?:reg[il]stered|f[il]led)"
    r"|d[il]scharge\s+(?:is\s+)?outstand[il]ng|never\s+removed\s+from\s+(?:the\s+)?title|not\s+(?:yet\s+)?received\s+(?:a\s+|the\s+|any\s+)?d[il]scharge"
    r"|(?:cannot|can't|unable\s+to|will\s+not|won't|refuses?\s+to)\s+(?:obta[il]n|get|produce|locate|sign|provide|give)\s+(?:a\s+|the\s+|any\s+)?d[il]scharge)\b")
#: The title still carries it: read only in the sentence that says it was repaid ("paid out but still registered") or in
#: the next one when that one says "it" ("...retired years ago; the title still lists it"): a "still on title" elsewhere is
#: as likely the current mortgage's.
_STILL_ON_TITLE = re.compile(
    r"\b(?:(?:still|remains?|continues\s+to)\s+(?:be\s+)?(?:shown\s+|reg[il]stered\s+|appear[il]ng\s+|appears?\s+|s[il]ts?\s+)?(?:on|against)\s+"
    r"(?:the\s+)?(?:said\s+)?(?:title|lands?|reg[il]ster)|title\s+still\s+(?:shows|lists|discloses)|still\s+(?:shows|reg[il]stered)|remains?\s+reg[il]stered)\b")
#: The discharge is in hand, registered, on its way or promised: a paid-out mortgage whose discharge the seller's lawyer
#: undertakes to register, one the lender has signed, or one submitted for registration is routine (an undertaking asked
#: for, "please provide ... an undertaking", is not one given; "no signed discharge has been received" is not one in hand).
_DISCHARGE_IN_HAND = re.compile(
    r"\b(?:(?:we|i)\s+(?:hereby\s+)?undertake|(?:has|have|had)\s+(?:been\s+)?undertaken|undertakes)\s+to\s+(?:[a-z]+\s+){0,3}?"
    r"(?:d[il]scharge|reg[il]ster|pay|obta[il]n|del[il]ver|provide|forward|send)"
    r"|\b(?:provided|given|delivered)\s+(?:their|its|his|her|an|our|a)\s+(?:written\s+)?undertaking\b"
    r"|\bundertaking\s+(?:is\s+|was\s+|has\s+been\s+)?(?:given|provided|received|enclosed|attached)\b"
    r"|\bd[il]scharge\s+(?:of\s+mortgage\s+)?(?:has\s+been\s+|was\s+|is\s+)?(?:provided|delivered|received|signed|executed|obtained|enclosed|attached"
    r"|reg[il]stered|submitted|in\s+process|expected|(?:now\s+)?being\s+(?:prepared|processed|reg[il]stered))\b|\bd[il]scharge\s+(?:will|to)\s+follow\b"
    r"|\b(?:enclosed|attached|received|obtained|hold|holding|have)\s+(?:a\s+|the\s+)?(?:lender'?s\s+|executed\s+|signed\s+)?d[il]scharge\b"
    r"|\b(?:executed|signed)\s+d[il]scharge\b|\bd[il]scharge\s+in\s+hand\b|\benclosed\s+(?:please\s+find\s+)?(?:the\s+|a\s+)?d[il]scharge\b")
#: A negation, a condition or a request before a phrase of :data:`_DISCHARGE_IN_HAND` in its clause: "no signed discharge
#: has been received", "we have not received a discharge", "until a discharge is registered", "we asked for the discharge".
_NOT_IN_HAND = re.compile(r"\b(?:no|not|never|without|unable|refus\w*|yet\s+to|cannot|can't|despite|until|unless|if|once|before|pending"
                          r"|await\w*|waiting|ask\w*|request\w*|seek\w*|sought|require\w*|need\w*)\b[^,;:.\n]*$")
#: Another instrument ("the lien was paid in full"): a repayment whose subject it is is not the mortgage's.
_ANOTHER_DEBT = re.compile(r"\b(?:lien|caveat|writ|judgment|levy|lis\s+pendens|taxes|tax\s+arrears)\b")
#: Not a charge on this land, or not all of it repaid: a loan that was never a mortgage, another property or owner, a
#: part payment, a balance still owing.
_NOT_THIS_CHARGE = re.compile(
    r"\b(?:unsecured|never\s+(?:a\s+mortgage|secured|registered)|not\s+secured|no\s+mortgage|(?:car|auto|vehicle|student|personal|payday|business)\s+loan"
    r"|credit\s+card|(?:previous|former|prior|other|another|that|their\s+old)\s+(?:home|house|property|lot|unit|title|condo|owner|parcel)"
    r"|cottage|cabin|separate\s+parcel|rental\s+property|not\s+part\s+of\s+th[il]s\s+(?:sale|purchase)|in\s+part|partial\w*|part\s+payment"
    r"|remaining\s+balance|balance\s+(?:of|owing|remaining)|(?:still|remains?)\s+(?:owing|outstanding|due))\b")
#: Discharged in the same breath ("paid out in 2020; it was discharged that month").
_DISCHARGED_TOO = re.compile(r"(?<!never )(?<!not )(?<!been )(?<!n't )\bd[il]scharged\b")
#: A payout at this closing, said right after the repayment ("paid out this morning", "from our trust account"; "on closing"
#: anywhere in its sentence is :data:`_CLOSING_NOW`): its discharge follows as usual.
_AT_CLOSING = re.compile(r"[^.;]{0,40}?\b(?:from\s+the\s+(?:sale\s+)?proceeds(?!\s+of\s+(?:his|her|their|a|an|another)\b)"
                         r"|from\s+(?:our|the|my|their)\s+trust\s+account|this\s+morning|today|yesterday)\b")
#: A repayment still to come, or only believed: "will be paid off", "to be repaid", "once it has been repaid", "thought".
_TO_COME = re.compile(r"\b(?:will|shall|would|to\s+be|expects?|expected|intends?|plans?|going\s+to|once|until|upon|as\s+soon\s+as|thought)\b[^,;:.\n]*$")
#: The mortgage named, by its word or its registration number; the loan, also by a word that stands for it.
_THE_MORTGAGE = re.compile(r"\b(?:mortgage|mortgagee|charge)\b|" + _REGISTRATION.pattern)
_THE_LOAN = re.compile(_THE_MORTGAGE.pattern + r"|\b(?:loan|it|line\s+of\s+credit|facility|account)\b")
#: The sentence after the repayment speaks of the same loan ("...retired years ago; the title still lists it").
_IT = re.compile(r"\b(?:it|(?:this|that|the\s+said)\s+mortgage)\b")
#: The repayment's sentence is this closing's ("Further to closing on June 3, the mortgage has been paid out").
_CLOSING_NOW = re.compile(r"\b(?:further\s+to|following|after|upon|on|at)\s+(?:the\s+|today'?s\s+)?closing\b")
_BLANK_LINE = re.compile(r"\n[ \t]*\n")


def repaid_undischarged(text: str, pos: int) -> bool:
    """Whether the text says the mortgage at ``pos`` was repaid while the title still carries it, with no discharge in
    hand, registered or undertaken: "My client says it was repaid around 2012 but he has no discharge". A current
    mortgage is routine financing; one the owner says is paid off and that no one can discharge is a defect in title.

    Read in the mention's paragraph, or in the whole text when every mention of a mortgage is in one paragraph (a
    register row and the note about it below). The repayment is read in a sentence whose subject is the loan (not
    another instrument, another property or an unsecured loan), in the past, whole, not at this closing and not with
    its discharge in the same breath; the missing discharge is said outright, or the repayment's own sentence says the
    title still carries it."""
    paragraphs, several = _mortgage_paragraphs(text)
    if several:
        k = bisect.bisect_right(paragraphs, pos)
        text = text[paragraphs[k - 1]:paragraphs[k]]
    return _repaid_undischarged_in(text)


@lru_cache(maxsize=16)  # read once per chunk, asked once per mention
def _mortgage_paragraphs(text: str) -> tuple[tuple[int, ...], bool]:
    """Where the paragraphs of ``text`` start (and its end + 1), and whether its mentions of a mortgage lie in more than
    one of them."""
    paragraphs = (0, *(m.end() for m in _BLANK_LINE.finditer(text)), len(text) + 1)
    which = {bisect.bisect_right(paragraphs, q.start()) for q in re.finditer(r"\bmortgage", text)}
    return paragraphs, len(which) > 1


@lru_cache(maxsize=64)  # each mention of a paragraph asks the same
def _repaid_undischarged_in(text: str) -> bool:
    """:func:`repaid_undischarged` read in the passage ``text``."""
    said_missing = _NO_DISCHARGE.search(text) is not None
    if not said_missing and not _STILL_ON_TITLE.search(text):
        return False
    for m in _DISCHARGE_IN_HAND.finditer(text):
        a, _b = _sentence_bounds(text, m.start())
        if _ANOTHER_DEBT.search(text, max(a, m.start() - 30), m.start()):
            continue  # a lien's discharge is not the mortgage's
        if not _NOT_IN_HAND.search(text[max(a, m.start() - 60):m.start()]):
            return False
    ends = sentence_ends(text)
    for m in _REPAID.finditer(text):
        a, b = _sentence_bounds(text, m.start())
        sentence = text[a:b]
        k = bisect.bisect_right(ends, b)
        after = ends[k] if k < len(ends) else len(text)
        if not said_missing and not _STILL_ON_TITLE.search(sentence) and not (_STILL_ON_TITLE.search(text, b, after) and _IT.search(text, b, after)):
            continue  # "still on title" said of this loan: in its sentence, or the next one's "it"
        before = text[a:m.start()]
        if not _THE_LOAN.search(sentence) or (_ANOTHER_DEBT.search(before) and not _THE_MORTGAGE.search(before)):
            continue  # the subject repaid is another instrument's ("the caveat securing the loan was satisfied")
        if _CLOSING_NOW.search(sentence):
            continue
        if _NOT_THIS_CHARGE.search(text, a, after) or _DISCHARGED_TOO.search(text, a, after) or _AT_CLOSING.match(text, m.end()):
            continue
        if _conditional(text, m.start()) or _TO_COME.search(text[max(a, m.start() - 80):m.start()]):
            continue
        return True
    return False


#: The price of a remedy stated in the text: an engineer's or contractor's cost opinion ("Opinion of probable cost:
#: $585,000", "Budget estimate: $1.6 to $1.9 million", "estimated cost of the repairs is $2.9 M", "Order-of-magnitude cost:
#: $4.2M", "Contractor quotes received ($610K - $690K)"); not a reserve study's replacement cost or allowance.
_REMEDY_PRICE = re.compile(
    r"\b(?:opinion of probable cost|probable cost|budget estimate|cost estimate|class [a-d] estimate|order[- ]of[- ]magnitude (?:cost|estimate)"
    r"|(?:contractor|tender)'?s? (?:quotes?|quotations?|bids?)(?: received)?|estimated (?:repair )?cost of "
    r"(?:the )?(?:repairs?|remediation|rehabilitation|remedial work|recladding|reconstruction)|(?:repair|remediation|remedial) "
    r"(?:cost|estimate|budget)s?|cost to (?:repair|remediate))\b[^.\n]{0,60}?\$\s*\d")


#: Dollars: a remedy priced at less is upkeep ("repair estimate for the lobby carpet: $8,500"), not a deficiency's cost.
PRICED_FLOOR = 50_000.0


@lru_cache(maxsize=16)  # read once per chunk, asked once per mention
def remedy_price(text: str) -> float:
    """The largest price of a remedy the text states (0 when none): "Budget estimate: $1.6 to $1.9 million" is 1.9 M."""
    best = 0.0
    for m in _REMEDY_PRICE.finditer(text):
        tail = text[m.end() - 1:m.end() + 40]
        for a in re.finditer(r"(\d[\d,]*(?:\.\d+)?)" + _SCALE, tail):
            best = max(best, _scaled(a.group(1), a.group(2)))
    return best


#: Benign cues that only say a debt was paid: they do not clear a registration that outlived it (:func:`repaid_undischarged`).
_REPAYMENT_CUES = frozenset({"paid in full", "paid off", "fully paid", "repaid"})
#: The mention's sentence speaks of a discharge: a negation in it is about the discharge, not the mortgage.
_OF_A_DISCHARGE = re.compile(r"\bd[il]scharge")
#: An empty box before the term ("[ ] arrears  [ ] penalties", "☐ special levy"): a form's choice, not a finding (a ticked
#: box is the form's answer and is read as any other row).
_FORM_OPTION = re.compile(r"(?:\[ ?\]|☐)\s*$")
#: A zero stated right before the term, one space apart, with no amount after the term on its line: "$0 arrears",
#: "$0.00 in arrears", "nil penalties" (a column's "$0.00" across a gap, "$0 of arrears totalling $6,140.22" and a row's
#: "$0.00" at the end of the line above are other values).
_ZERO_BEFORE = re.compile(r"(?:\$ ?0(?:[.,]00?)?|\bnil|\bzero) (?:in )?$")


def _read_mention(low: str, m: re.Match[str], t: RiskTerm, lexicon: RiskLexicon, lines: _Lines) -> tuple[str | None, float, str] | None:
    """``(cue, factor, how)`` of one mention, or None when it only names a section."""
    window = lexicon.benign_window_chars
    if t.on_register:
        lo, hi = _line_bounds(low, m.start())
        if not _found(_REGISTRATION, _span_of(low, lo, hi)):
            return None
    title = not (t.needs_amount or t.min_amount is not None or t.context or t.unless) and _is_title(low, m.start(), m.end(), t.term, lines)
    heading = not title and _is_heading(low, m.start(), m.end(), lines)
    if heading and t.min_amount is None:
        return None
    # a loan said to be repaid while the title still carries it: its repayment ("paid in full", "closed") clears the debt,
    # not the registration, and a negation near it is about the discharge
    undischarged = t.stale_after_years is not None and repaid_undischarged(low, m.start())
    status = status_cell(low, m.start())
    asked = _STATUS_ASKED_NOT_DONE.match(low, m.end())
    if asked is not None and _STATUS_HEADER.search(asked.group(1)) is not None:
        status = "no"  # "lien discharged?  no": a status asked on the term's own line and answered
    # a row answering "no" under a status column ("Discharged?  NO"): the header's word is the question, not a cue, and
    # the row's "no" is the answer, not a nil amount; what else the row itself says is read as usual
    lo_row, read = 0, low
    if status == "no":
        lo_row, hi_row = _line_bounds(low, m.start())
        read = low[lo_row:hi_row]
    cue = _benign_cue(read, m.start() - lo_row, m.end() - lo_row, lexicon.benign_cues, window)
    if status == "no" and cue is not None and (_STATUS_HEADER.search(cue) or "discharge" in cue):
        cue = None  # "discharge of builders' lien 242 166 390 ... requested": the discharge is what the row still waits for
    if cue is None and status == "yes":
        cue = "status column: yes"
    if cue is None and status != "no" and _QUESTION_NO.match(low, m.end()) is not None:
        cue = "answered no"  # "Arrears?  N", "Any liens registered?  No": the form says there is none
    if undischarged and cue is not None and (cue in _REPAYMENT_CUES or (_NEGATION.fullmatch(cue) and _OF_A_DISCHARGE.search(low, *_sentence_bounds(low, m.start())))):
        cue = None  # "paid in full" is the repayment; "not received a discharge", "never discharged" say what is missing
    if cue is None and _FORM_OPTION.search(low, max(0, m.start() - 8), m.start()):
        cue = "form option"
    if cue is None and _ZERO_BEFORE.search(low, max(0, m.start() - 16), m.start()) and not _states_money(low[m.end():_line_bounds(low, m.start())[1]]):
        cue = "nothing owing"
    if cue is None and status != "no":
        value = row_value(low, m.end())
        if value is None and not heading:
            value = column_value(low, m.start())
        if value == "zero":
            cue = "nothing owing"
    if cue is None:
        cue = _benign_subject(low, m.end(), lexicon.benign_subjects, window)
    if cue is None and title:
        cue = _introduced_subject(_instrument_window(low, m.end(), 8 * window), lexicon.benign_subjects)
    if cue is None and not heading and not undischarged and clause_polarity(read, m.start() - lo_row, m.end() - lo_row) == "closed":
        cue = "closed"
    if cue is None and status != "no":  # a row saying its discharge is still awaited is not cleared by the words naming it
        cleared = clearing_instrument(low)
        if cleared is not None and cleared[0] <= m.start() < cleared[1]:
            own = own_registration(low, m.start(), m.end())  # a row of another instrument below the copy's body is not cleared
            if own is None or own in _named_in_body(low, cleared):
                cue = "discharge instrument"
    if cue is None and not heading and status != "no" and _found(_REGISTRATION, low):
        number = own_registration(low, m.start(), m.end())
        if number is not None and number in cleared_registrations(low):
            cue = "discharged by number"
    if cue is None and t.stale_after_years is not None:
        age = registration_age(low, m.start())
        if (age is None or age <= t.stale_after_years) and not undischarged:
            cue = "current registration"
    if cue is None and t.this_unit_only:
        lo, hi = _sentence_bounds(low, m.start())
        if _aggregate(_span_of(low, lo, hi)):
            cue = "several units in aggregate"
    if cue is None:
        cue = other_property(low, m.start(), m.end())
    if cue is None and t.kind == "caveat" and _own_caveat(low, m.start(), m.end()):
        cue = "the purchaser's own caveat"
    if cue is None and t.kind in _REGISTRABLE and _disowned(low, t.kind, lexicon):
        cue = "not on this title"
    if cue is not None and t.kind in _REGISTRABLE and _revived(low, m.end()):
        cue = None  # cleared, then reinstated: "cancelled 14/03/2023 ... the CLP was reinstated and re-registered"
    if cue is not None:
        return cue, FACTOR_BENIGN, "benign"
    if undischarged:  # the text states the defect: repaid, and still on title with no discharge
        return None, FACTOR_CONCRETE, "concrete"
    if heading:  # a heading term with a floor ("DEDUCTIBLES") reads the table under it
        below = _table_below(low, m.end())
        return (None, FACTOR_CONCRETE, "concrete") if _amounts_beyond((below,), t.min_amount or 0.0) else None
    if title:
        return (None, *_title_factor(low, m.end()))
    factor, how = mention_factor(low, m.start(), m.end(), needs_amount=t.needs_amount, min_amount=t.min_amount, context=t.context,
                                   unless=t.unless)
    if how == "plain" and t.priced and remedy_price(low) >= PRICED_FLOOR:
        return None, FACTOR_CONCRETE, "concrete"  # the report prices the remedy of what it found
    return None, factor, how


#: What a numeric detector's finding weighs (a reserve fund below its ratio, a negative projected balance, an amount
#: charged to every owner): material on its own.
NUMERIC_WEIGHT = 0.9


#: (id of a lexicon, domains) -> (that lexicon, its terms with their runs, the union pattern, the terms by key run): a
#: lexicon is frozen; the entry keeps it alive so its id is not reused while the entry stands
_DOMAIN_TERMS: BoundedCache[tuple[int, tuple[str, ...]], tuple[RiskLexicon, tuple[tuple[RiskTerm, tuple[str, ...]], ...], re.Pattern[str] | None,
                                                                dict[str, tuple[int, ...]]]] = BoundedCache(64)


def _combined_score(best: float, kinds: int) -> float:
    """A chunk's risk score from its strongest weight and its number of material kinds (:func:`risk_signal`)."""
    return round(min(1.0, best + 0.05 * max(0, kinds - 1)), 6)


def _domain_entry(lexicon: RiskLexicon, domains: Sequence[str]) -> tuple[RiskLexicon, tuple[tuple[RiskTerm, tuple[str, ...]], ...], re.Pattern[str] | None,
                                                                         dict[str, tuple[int, ...]]]:
    key = (id(lexicon), tuple(domains))
    hit = _DOMAIN_TERMS.get(key)
    if hit is None or hit[0] is not lexicon:
        seen: dict[str, RiskTerm] = {}
        for d in domains:
            for t in lexicon.domains[d].terms if d in lexicon.domains else ():
                seen.setdefault(t.term, t)
        terms = tuple((t, term_runs(t.term)) for t in seen.values())
        # each term under its longest run (the most telling): a text lacking that run cannot hold the term
        by_key: dict[str, list[int]] = {}
        for i, (_, runs) in enumerate(terms):
            by_key.setdefault(max(runs, key=len, default=""), []).append(i)
        hit = _DOMAIN_TERMS.put(key, (lexicon, terms, any_term_pattern(tuple(seen)), {k: tuple(v) for k, v in by_key.items()}))
    return hit


def _domain_terms(lexicon: RiskLexicon, domains: Sequence[str]) -> tuple[tuple[tuple[RiskTerm, tuple[str, ...]], ...], re.Pattern[str] | None]:
    """The terms of ``domains``, each once, as the first of ``domains`` that lists it defines it, with its
    :func:`term_runs`; and :func:`any_term_pattern` of them."""
    hit = _domain_entry(lexicon, domains)
    return hit[1], hit[2]


def _occurring_terms(low: str, lexicon: RiskLexicon, domains: Sequence[str], canon: str | None = None) -> list[RiskTerm]:
    """The lexicon terms of ``domains`` that may occur in ``low`` (a :func:`normalise_ocr` text; ``canon``: its
    :func:`canonical` form, when known), each once, as the first of ``domains`` that lists it defines it, in that order;
    a term left out cannot match :func:`term_pattern` there."""
    _, terms, union, by_key = _domain_entry(lexicon, domains)
    if union is None or union.search(low) is None:
        return []  # no term of the lexicon occurs: nothing to scan (most chunks of a deal)
    if canon is None:
        canon = canonical(low)
    # a term whose letters between spaces and apostrophes do not all stand in the text cannot match (term_runs): its
    # longest run first, then the others
    has = canon.__contains__
    maybe = sorted(i for run in filter(has, by_key) for i in by_key[run])
    return [terms[i][0] for i in maybe if all(map(has, terms[i][1]))]


def _numeric_findings(text: str, low: str, lexicon: RiskLexicon, domains: Sequence[str], shortfall_ratio: float) -> list[tuple[str, str]]:
    """``(kind, what)`` of each numeric detector that fires on ``text`` (``low``: its :func:`normalise_ocr` form);
    each weighs :data:`NUMERIC_WEIGHT`."""
    found: list[tuple[str, str]] = []
    if "condo" in domains and lexicon.reserve_shortfall_detector:
        ratio = reserve_shortfall(text)
        if ratio is not None and ratio < shortfall_ratio:
            found.append(("reserve_shortfall", f"reserve fund at {ratio:.0%} of the recommended balance"))
        negative = negative_reserve_balance(text)
        if negative is not None:
            found.append(("reserve_shortfall", f"projected reserve balance below zero (${negative:,.0f})"))
    if "condo" in domains and lexicon.owner_assessment_detector:
        levies = owner_assessments(low)
        if levies:
            lo, hi = levies[0]
            found.append(("special_levy", f"amount charged to the owners: {' '.join(low[lo:hi].split())[:90]}"))
    return found


def _numeric_key(lexicon: RiskLexicon, domains: Sequence[str], shortfall_ratio: float) -> tuple[bool, bool, bool, float]:
    """What :func:`_numeric_findings` reads of a setting: two settings with the same key find the same on a text."""
    return "condo" in domains, lexicon.reserve_shortfall_detector, lexicon.owner_assessment_detector, shortfall_ratio


class _TextReads:
    """One text read under one or more risk settings: its :func:`normalise_ocr` form, its heading lines, each mention
    read (keyed by term, place and :func:`_reading`) and the numeric detectors' findings (keyed by
    :func:`_numeric_key`) are worked out once and shared by the settings that agree on them."""

    __slots__ = ("_canon", "_found", "_lines", "_matches", "_numeric", "low", "reads", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self.low = normalise_ocr(text)
        self._lines: _Lines | None = None
        self.reads: dict[tuple[int, int, int, object], tuple[str | None, float, str] | None] = {}
        self._numeric: dict[tuple[bool, bool, bool, float], list[tuple[str, str]]] = {}
        self._matches: dict[tuple[int, tuple[str, ...]], tuple[RiskLexicon, list[RiskMatch]]] = {}
        self._canon: str | None = None
        self._found: dict[str, list[re.Match[str]]] = {}  # term -> its matches in low (terms the settings share)

    def lines(self) -> _Lines:
        if self._lines is None:
            self._lines = _Lines(self.text)
        return self._lines

    def numeric(self, lexicon: RiskLexicon, domains: Sequence[str], shortfall_ratio: float) -> list[tuple[str, str]]:
        key = _numeric_key(lexicon, domains, shortfall_ratio)
        hit = self._numeric.get(key)
        if hit is None:
            hit = self._numeric[key] = _numeric_findings(self.text, self.low, lexicon, domains, shortfall_ratio)
        return hit

    def matches(self, lexicon: RiskLexicon, domains: Sequence[str]) -> list[RiskMatch]:
        """The mentions of the text read under ``(lexicon, domains)``, a term inside a longer match left out (offsets
        into :attr:`low`)."""
        key = (id(lexicon), tuple(domains))
        hit = self._matches.get(key)
        if hit is not None and hit[0] is lexicon:
            return hit[1]
        low = self.low
        matches: list[RiskMatch] = []
        if self._canon is None:
            self._canon = canonical(low)
        found = self._found
        for t in _occurring_terms(low, lexicon, domains, self._canon):
            reading = _reading(lexicon, t.kind)
            hits = found.get(t.term)
            if hits is None:
                hits = found[t.term] = list(term_pattern(t.term).finditer(low))
            for m in hits:
                read_key = (id(t), m.start(), m.end(), reading)
                if read_key in self.reads:
                    read = self.reads[read_key]
                else:
                    read = self.reads[read_key] = _read_mention(low, m, t, lexicon, self.lines())
                if read is None:
                    continue
                cue, factor, how = read
                matches.append(RiskMatch(t.term, t.kind, round(t.weight * factor, 6), m.start(), m.end(), cue is not None, cue, how))
        # a term inside a longer match ("lien" in "builders' lien") is the same mention, not a second one
        inside = _inside_others({(m.start, m.end) for m in matches})
        matches = [m for m in matches if (m.start, m.end) not in inside]
        self._matches[key] = (lexicon, matches)  # the entry keeps the lexicon alive so its id is not reused
        return matches

    def signal(self, lexicon: RiskLexicon, domains: Sequence[str], shortfall_ratio: float) -> RiskSignal:
        """:func:`risk_signal` of the text under ``(lexicon, domains)``."""
        return _signal_of(self.matches(lexicon, domains), self.numeric(lexicon, domains, shortfall_ratio))


def risk_signal(text: str, lexicon: RiskLexicon, domains: Sequence[str], *, shortfall_ratio: float = 0.5) -> RiskSignal:
    """β term: the strongest risk indicator of the chunk, plus a little for each further concrete kind.

    Each mention's effective weight is ``w · factor`` (:func:`mention_factor`): 1 for
    a concrete mention (an instrument number, an amount or date stated as fact, an amount in its row, a decision),
    0.55 for a plain one (not material on its own), 0.35 for generic wording ("may", "shall", "any": bylaws and
    standard terms) and 0.1 when the clause neutralises it: a negation or benign cue, a zero in its row or
    column ("Arrears ..... NIL", "| Penalty | - |"), a routine subject ("caveat re: development agreement"), a
    closed verdict ("considered and rejected", "fully collected", "hereby discharges"), or several units in
    aggregate for a ``this_unit_only`` term.
    ``score = min(1, max_i(w_i·f_i) + 0.05·(number of other material kinds))``.
    Numeric detectors contribute 0.9: a reserve fund below ``shortfall_ratio`` of its recommended or fully
    funded balance, or a negative projected balance; an amount charged to every owner (:func:`owner_assessments`)
    is a special levy however it is worded. A kind is *material* when one of its mentions reaches
    :data:`MATERIAL_WEIGHT`.
    """
    return risk_signals(text, ((lexicon, domains),), shortfall_ratio=shortfall_ratio)[0]


def risk_signals(text: str, settings: Sequence[tuple[RiskLexicon, Sequence[str]]], *, shortfall_ratio: float = 0.5) -> list[RiskSignal]:
    """:func:`risk_signal` of ``text`` under each ``(lexicon, domains)`` of ``settings``, in order: each is what
    :func:`risk_signal` returns, and a mention the settings share (the same term at the same place, read under the same
    benign cues and subjects) is read once. Ingest reads every chunk under each profile's setting this way."""
    reads = _TextReads(text.rstrip())  # whitespace after the last line is not read
    return [reads.signal(lexicon, domains, shortfall_ratio) for lexicon, domains in settings]


def risk_findings(text: str, settings: Sequence[tuple[RiskLexicon, Sequence[str], Sequence[int]]], *,
                  shortfall_ratio: float = 0.5) -> list[tuple[RiskSignal, dict[int, tuple[int, int] | None] | None]]:
    """What ingest keeps of a chunk under each ``(lexicon, domains, excerpt sizes)`` of ``settings``, in order: the
    :func:`risk_signal` and, when it is material, the :func:`best_risk_span` of each size (None when not material).

    The same answers as those functions give one by one, worked out once for all settings: the text is read as
    :func:`risk_signals` reads it, and a run of lines the excerpt search reads that is the whole text (a chunk
    shorter than the excerpt size, from its first line) is not read again."""
    body = text.rstrip()
    whole = _TextReads(body)
    signals = [whole.signal(lexicon, domains, shortfall_ratio) for lexicon, domains, _ in settings]
    asks = [(lexicon, domains, n) for (lexicon, domains, sizes), sig in zip(settings, signals, strict=True) if sig.material for n in sizes]
    spans = iter(_best_spans(text, asks, shortfall_ratio, whole))
    return [(sig, {n: next(spans) for n in sizes} if sig.material else None) for (_, _, sizes), sig in zip(settings, signals, strict=True)]


def _reading(lexicon: RiskLexicon, kind: str) -> object:
    """What reading a mention of ``kind`` takes from ``lexicon`` (:func:`_read_mention`): the benign window, cues and
    subjects, and the terms of that kind (:func:`_disowned`). Two lexicons that agree on it read such a mention alike (a
    profile's lexicon restricted to some kinds keeps all terms of those kinds)."""
    hit = _READINGS.get(id(lexicon))
    if hit is None or hit[0] is not lexicon:
        common = (lexicon.benign_window_chars, tuple(lexicon.benign_cues), tuple(lexicon.benign_subjects))
        by_kind: dict[str, set[str]] = {}
        for spec in lexicon.domains.values():
            for x in spec.terms:
                by_kind.setdefault(x.kind, set()).add(x.term)
        hit = _READINGS.put(id(lexicon), (lexicon, {k: (common, frozenset(v)) for k, v in by_kind.items()}))
    return hit[1].get(kind)


#: id of a lexicon -> (that lexicon, kind -> its :func:`_reading`): the entry keeps the lexicon alive so its id is not reused
_READINGS: BoundedCache[int, tuple[RiskLexicon, dict[str, object]]] = BoundedCache(64)


def _signal_of(matches: Sequence[RiskMatch], numeric: list[tuple[str, str]]) -> RiskSignal:
    """The signal of a text's read mentions (none inside another: :meth:`_TextReads.matches`) and of its numeric
    detectors' findings (:func:`risk_signal`)."""
    best = 0.0
    kinds: set[str] = set()
    for m in matches:
        best = max(best, m.weight)
        if not m.benign and m.weight >= MATERIAL_WEIGHT:
            kinds.add(m.kind)
    if numeric:
        best = max(best, NUMERIC_WEIGHT)
        kinds.update(kind for kind, _ in numeric)
    return RiskSignal(
        score=_combined_score(best, len(kinds)),
        kinds=tuple(sorted(kinds)),
        numeric=tuple(what for _, what in numeric),
        risk_terms=tuple(sorted({m.term for m in matches if not m.benign and m.weight >= MATERIAL_WEIGHT})),
        benign_terms=tuple(sorted({f"{m.term} ({m.cue})" for m in matches if m.benign})),
    )


def _inside_others(spans: set[tuple[int, int]]) -> set[tuple[int, int]]:
    """The spans that lie inside another, longer one of ``spans`` (one sweep: a span is inside a longer one exactly when
    a span that starts before it, or at its start and ends after it, reaches its end)."""
    inside = set()
    reach = -1  # the furthest end of the spans swept so far
    for a, b in sorted(spans, key=lambda ab: (ab[0], -ab[1])):
        if reach >= b:
            inside.add((a, b))
        reach = max(reach, b)
    return inside


# --------------------------------------------------------------------------- excerpts

#: Longest verbatim excerpt the packager cuts from a chunk that does not fit whole (characters).
EXCERPT_MAX_CHARS = 700


#: a line with its line break (any of :data:`LINE_BREAK_CHARS`, ``\\r\\n`` as one), or the last line without one
_LINE_WITH_BREAK = re.compile("[^" + re.escape(LINE_BREAK_CHARS) + "]*(?:\r\n|[" + re.escape(LINE_BREAK_CHARS) + "]|$)")
#: what an excerpt does not end with: line breaks, spaces and tabs
_RUN_TRAIL = LINE_BREAK_CHARS + " \t"


def _text_lines(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` of each line of ``text`` with its line break (:data:`_LINE_WITH_BREAK`)."""
    return [(m.start(), m.end()) for m in _LINE_WITH_BREAK.finditer(text) if m.end() > m.start()]


def _excerpt_runs(text: str, lexicon: RiskLexicon, domains: Sequence[str], max_chars: int,
                  lines: Sequence[tuple[int, int]] | None = None, marked: Sequence[int] | None = None) -> list[tuple[int, int, int, int]]:
    """The candidate excerpts of :func:`best_risk_span`: ``(start, end, first line, last line)`` of each run of whole
    lines (``lines``: :func:`_text_lines`) that fits in ``max_chars``, starting at a line that names a term of
    ``domains`` (``marked``: their indices; by default each line read on its own) or the line before it (its context),
    in order; with no such line (a risk only in numbers) every line is a start. A single line longer than
    ``max_chars`` is cut at its last space before the limit, and then its last line is -1 (part of a line)."""
    if lines is None:
        lines = _text_lines(text)
    if marked is None:
        union = _domain_terms(lexicon, domains)[1]
        marked = [i for i in range(len(lines)) if union is not None and union.search(normalise_ocr(text[slice(*lines[i])]))]
    starts = sorted({j for i in marked for j in (i - 1, i) if j >= 0}) if marked else list(range(len(lines)))
    runs = []
    for i in starts:
        start = lines[i][0]
        end = lines[i][1]
        last = i
        if end - start > max_chars:
            cut = text.rfind(" ", start, start + max_chars)
            end = cut if cut > start else start + max_chars
            last = -1
        else:
            j = i
            while j + 1 < len(lines) and lines[j + 1][1] - start <= max_chars:
                j += 1
            end = lines[j][1]
            last = j
        while end > start and text[end - 1] in _RUN_TRAIL:
            end -= 1
        if end > start:
            runs.append((start, end, i, last))
    return runs


def _low_line_map(text: str, low: str) -> list[tuple[int, int]] | None:
    """For each line of ``low`` (``normalise_ocr(text)``), the first and the last line of ``text`` (as
    :func:`_text_lines` counts them) it was written from; None should the count not come out as ``low``'s.

    :func:`normalise_ocr` keeps a text's line breaks but for two: a word hyphenated across lines is joined (its break
    and any blank lines after it go), and a run of blank lines becomes one blank line. Both are followed here on
    the text of its first step (:func:`_plain_lines`), where the hyphen joins are matched as it matches them; what it
    does after them (spaces, case, OCR repairs) neither adds nor removes a line break."""
    plain = _plain_lines(text)
    breaks = [m.start() for m in re.finditer("\n", plain)]
    joined = [(m.start(), m.end()) for m in _HYPHEN_BREAK.finditer(plain)]
    kept: list[int] = []  # the breaks normalise_ocr keeps, as indices into breaks
    j = 0
    for k, at in enumerate(breaks):
        while j < len(joined) and joined[j][1] <= at:
            j += 1
        if not (j < len(joined) and joined[j][0] <= at < joined[j][1]):
            kept.append(k)
    line_of = [0] * (len(breaks) + 1)  # the line of low each line of the text is on
    n = 0
    blank_run = 0  # kept breaks so far with nothing but spaces since the one before (a run of blank lines)
    for x, k in enumerate(kept):
        prev = breaks[kept[x - 1]] if x else -1
        if x and not plain[prev + 1:breaks[k]].strip(" \t"):
            blank_run += 1
        else:
            blank_run = 0
        if blank_run < 2:  # the third break of a blank run and those after it are gone
            n += 1
        line_of[k + 1] = n
        for i in range(k + 2, (kept[x + 1] if x + 1 < len(kept) else len(breaks)) + 1):
            line_of[i] = n  # lines after a joined break: the same line of low
    if n != low.count("\n"):
        return None
    spans: list[tuple[int, int]] = [(-1, -1)] * (n + 1)
    for i, line in enumerate(line_of):
        first, _ = spans[line]
        spans[line] = (i if first < 0 else first, i)
    return spans


def best_risk_span(text: str, lexicon: RiskLexicon, domains: Sequence[str], *, max_chars: int = EXCERPT_MAX_CHARS,
                   shortfall_ratio: float = 0.5) -> tuple[int, int] | None:
    """The contiguous run of whole lines (at most ``max_chars``) that carries the chunk's strongest risk.

    Of the runs of consecutive lines that fit in ``max_chars`` and start at or just before a line naming a term,
    the best is the one with a material kind, then the highest score, then the most material kinds, then the fewest
    misleading mentions, then the earliest. A run counts a mention at what the run shows of it on its own and no
    more than the chunk reads it: a lien the chunk reads as discharged (by a heading or a discharge outside the run)
    is no risk of the run, and one the run still shows as a risk is a misleading mention; a run that leaves out what
    makes a mention concrete (its amount, its number) shows less of it. Numeric
    findings count where the detectors find them in the run and in the chunk. Runs are read in the order of the
    chunk's reading of their lines (an upper bound of what they can show), and the reading stops at the first
    run whose bound is not above the best read. Where no run shows a risk the chunk reads (the chunk reads it from
    words no run holds with it), the run of whole lines that holds most of what the chunk reads is the excerpt. A
    single line longer than ``max_chars`` is cut at the last space before the limit.
    Returns ``(start, end)`` character offsets into ``text`` (trailing line break excluded), or None when
    no run carries a material risk or the best run is the whole text.
    """
    return best_risk_spans(text, ((lexicon, domains, max_chars),), shortfall_ratio=shortfall_ratio)[0]


def best_risk_spans(text: str, asks: Sequence[tuple[RiskLexicon, Sequence[str], int]], *,
                    shortfall_ratio: float = 0.5) -> list[tuple[int, int] | None]:
    """:func:`best_risk_span` of ``text`` for each ``(lexicon, domains, max_chars)`` of ``asks``, in order, the text
    and each run of its lines read once for all of them. Ingest asks this of a material chunk for each setting that
    finds it material."""
    return _best_spans(text, asks, shortfall_ratio, _TextReads(text.rstrip()))


class _LineTrace:
    """Where each offset of a text's :func:`normalise_ocr` form was written: :func:`_low_line_map` with the normalised
    text's line breaks."""

    __slots__ = ("breaks", "line_map")

    def __init__(self, line_map: list[tuple[int, int]], low: str) -> None:
        self.line_map = line_map
        self.breaks = [m.start() for m in re.finditer("\n", low)]

    @classmethod
    def of(cls, text: str, low: str) -> _LineTrace | None:
        """The trace of ``text`` (``low``: its normalised form); None should its lines not be followed."""
        line_map = _low_line_map(text, low)
        return cls(line_map, low) if line_map is not None else None

    def lines(self, start: int, end: int) -> tuple[int, int]:
        """The first and last line of the text that ``low[start:end]`` (not empty) was written from."""
        return (self.line_map[bisect.bisect_left(self.breaks, start)][0],
                self.line_map[bisect.bisect_left(self.breaks, max(start, end - 1))][1])


class _Placed:
    """The mentions of a text read under one setting, each with the first and last line of the text it stands on
    (:func:`_low_line_map`), and by its place: its kind, its first line and its rank among the mentions of that kind
    that start on that line (a run that ends on "CAVEAT" shows the caveat the chunk reads as "caveat re: ..." over two
    lines)."""

    __slots__ = ("by_place", "lines", "matches")

    def __init__(self, matches: list[RiskMatch], trace: _LineTrace, shift: int = 0) -> None:
        self.matches = matches
        self.lines = [(lo + shift, hi + shift) for lo, hi in (trace.lines(m.start, m.end) for m in matches)]
        seen: dict[tuple[str, int], int] = {}
        self.by_place: dict[tuple[str, int, int], RiskMatch] = {}
        for m, (lo, _) in sorted(zip(matches, self.lines, strict=True), key=lambda ml: ml[0].start):
            n = seen.get((m.kind, lo), 0)
            seen[(m.kind, lo)] = n + 1
            self.by_place[(m.kind, lo, n)] = m

    def within(self, first: int, last: int) -> list[RiskMatch]:
        """The mentions on lines ``first`` to ``last``."""
        return [m for m, (lo, hi) in zip(self.matches, self.lines, strict=True) if first <= lo and hi <= last]


def _best_spans(text: str, asks: Sequence[tuple[RiskLexicon, Sequence[str], int]], shortfall_ratio: float,
                whole: _TextReads) -> list[tuple[int, int] | None]:
    """:func:`best_risk_spans`, with ``whole``: the text read (``text.rstrip()``)."""
    if not asks:
        return []
    search = _SpanSearch(text, whole)
    out: list[tuple[int, int] | None] = []
    for lexicon, domains, max_chars in asks:
        ask = search.ask(lexicon, domains, shortfall_ratio)
        runs = search.runs(lexicon, domains, max_chars)
        best: tuple[tuple[bool, float, int, int, int], tuple[int, int]] | None = None
        for bound, run in sorted(((ask.bound(run), run) for run in runs), reverse=True):
            if best is not None and bound <= best[0]:
                break  # neither this run nor any after it can show more than the best
            key = ask.shown(run)
            if best is None or key > best[0]:
                best = (key, run[:2])
        if best is None or not best[0][0]:
            # no run shows on its own a risk the chunk reads (the chunk reads it from words no run holds with it: a copy's
            # title made concrete by its registration number above it): the run of whole lines holding most of what the
            # chunk reads, so a material chunk that does not fit whole can still be quoted
            best = max(((ask.held(run), run[:2]) for run in runs if run[3] >= 0), default=best)
        span = None if best is None or not best[0][0] else best[1]
        if span is not None and span[0] == 0 and span[1] >= len(whole.text):
            span = None
        out.append(span)
    return out


class _SpanSearch:
    """The excerpt search of one text (:func:`best_risk_span`): its lines, the chunk's reading (``whole``) and the runs
    of lines read on their own, shared by every setting and size asked of it."""

    def __init__(self, text: str, whole: _TextReads) -> None:
        self.text = text
        self.whole = whole
        self.lines = _text_lines(text)
        self.trace = _LineTrace.of(whole.text, whole.low)
        self._placed: dict[tuple[int, tuple[str, ...]], _Placed] = {}
        self._read: dict[tuple[int, int], _TextReads] = {}

    def runs(self, lexicon: RiskLexicon, domains: Sequence[str], max_chars: int) -> list[tuple[int, int, int, int]]:
        return _excerpt_runs(self.text, lexicon, domains, max_chars, self.lines, self.marked(lexicon, domains))

    def marked(self, lexicon: RiskLexicon, domains: Sequence[str]) -> list[int] | None:
        """The lines that name a term of ``domains`` as the chunk reads it: the first line each match of a term stands on
        (a word hyphenated across lines is the line it starts on); None where the lines are not followed."""
        if self.trace is None:
            return None
        union = _domain_terms(lexicon, domains)[1]
        if union is None:
            return []
        return sorted({self.trace.lines(m.start(), m.end())[0] for m in union.finditer(self.whole.low)})

    def placed(self, lexicon: RiskLexicon, domains: Sequence[str]) -> _Placed | None:
        """The chunk's reading of its mentions under ``(lexicon, domains)``, placed on its lines (shared by the sizes asked
        of one setting); None should its lines not be followed."""
        if self.trace is None:
            return None
        key = (id(lexicon), tuple(domains))
        hit = self._placed.get(key)
        if hit is None:  # the lexicon lives as long as the whole text's reading, which keeps its matches by the same key
            hit = self._placed[key] = _Placed(self.whole.matches(lexicon, domains), self.trace)
        return hit

    def read(self, start: int, end: int) -> _TextReads:
        """``text[start:end]`` read on its own."""
        hit = self._read.get((start, end))
        if hit is None:
            hit = self._read[(start, end)] = self.whole if (start, end) == (0, len(self.whole.text)) else _TextReads(self.text[start:end])
        return hit

    def ask(self, lexicon: RiskLexicon, domains: Sequence[str], shortfall_ratio: float) -> _SpanAsk:
        return _SpanAsk(self, lexicon, domains, shortfall_ratio)


class _SpanAsk:
    """What a run of lines shows under one setting (:func:`best_risk_span`), and an upper bound of it from the chunk's
    reading alone. Keys are ``(material, score, material kinds, -misleading mentions, -start)``."""

    def __init__(self, search: _SpanSearch, lexicon: RiskLexicon, domains: Sequence[str], shortfall_ratio: float) -> None:
        self.search = search
        self.setting = (lexicon, domains, shortfall_ratio)
        whole = search.whole
        self.numeric_kinds = {kind for kind, _ in whole.numeric(lexicon, domains, shortfall_ratio)}
        # the chunk's reading of each mention, by the lines it stands on; None should its lines not be followed, and then
        # each run is read on its own only (not expected: normalise_ocr keeps the line breaks it is followed for)
        self.placed = search.placed(lexicon, domains)
        self.numeric_bound = [(kind, "") for kind in sorted(self.numeric_kinds)]

    def bound(self, run: tuple[int, int, int, int]) -> tuple[bool, float, int, int, int]:
        """At least :meth:`shown`: what the chunk reads on the run's lines (on its whole first line, for part of a line),
        with the chunk's numeric findings; a run shows no mention above the chunk's reading of it, no numeric finding the
        chunk lacks, and no fewer than no misleading mentions."""
        start, _, first, last = run
        if self.placed is None:
            return True, 2.0, 1 << 30, 0, -start
        sig = _signal_of(self.placed.within(first, first if last < 0 else last), self.numeric_bound)
        return bool(sig.kinds), sig.score, len(sig.kinds), 0, -start

    def held(self, run: tuple[int, int, int, int]) -> tuple[bool, float, int, int, int]:
        """The key of the mentions on the run's lines as the chunk reads them (its numeric findings aside)."""
        start, _, first, last = run
        if self.placed is None:
            return False, 0.0, 0, 0, -start
        sig = _signal_of(self.placed.within(first, last), [])
        return bool(sig.kinds), sig.score, len(sig.kinds), 0, -start

    def shown(self, run: tuple[int, int, int, int]) -> tuple[bool, float, int, int, int]:
        """What the run shows read on its own, each mention at no more than the chunk reads it (a mention the chunk reads as
        cleared or does not read is none); its numeric findings of the kinds the chunk has. Misleading mentions are those
        the run shows as a risk and the chunk reads as none: a discharged writ's row cut from its "Discharged?" column."""
        start, end, first, _ = run
        lexicon, domains, shortfall_ratio = self.setting
        read = self.search.read(start, end)
        shown = read.matches(lexicon, domains)
        numeric = [f for f in read.numeric(lexicon, domains, shortfall_ratio) if f[0] in self.numeric_kinds]
        misleading = 0
        if self.placed is not None and shown:
            trace = self.search.trace if read is self.search.whole else _LineTrace.of(read.text, read.low)
            mine = _Placed(shown, trace, shift=first) if trace is not None else None
            shown = []
            for place, m in mine.by_place.items() if mine is not None else ():
                chunk = self.placed.by_place.get(place)
                if chunk is None or chunk.benign or chunk.weight < MATERIAL_WEIGHT:
                    misleading += not m.benign and m.weight >= MATERIAL_WEIGHT
                if chunk is not None:  # at the lower of what the run shows and what the chunk reads
                    shown.append(chunk if chunk.benign or chunk.weight < m.weight else m)
        sig = _signal_of(shown, numeric)
        return bool(sig.kinds), sig.score, len(sig.kinds), -misleading, -start


__all__ = [
    "EXCERPT_MAX_CHARS",
    "MATERIAL_WEIGHT",
    "RiskMatch",
    "RiskSignal",
    "any_term_pattern",
    "best_risk_span",
    "best_risk_spans",
    "clause_polarity",
    "column_value",
    "entity_mentioned",
    "mention_factor",
    "mentioned_entities",
    "negative_reserve_balance",
    "normalise_ocr",
    "owner_assessments",
    "parse_amounts",
    "registration_age",
    "reserve_shortfall",
    "risk_findings",
    "risk_signal",
    "risk_signals",
    "row_value",
    "sentence_ends",
    "term_pattern",
]
