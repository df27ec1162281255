"""Older copies of a register: a registration is one finding, read where the newest search shows it (issue 15).

A deal's file often holds two searches of the same title: the one pulled at listing and the one pulled for
closing. Every registration of the old search that is still on title is printed again in the new one, and
the new one is the authority (it also shows what was registered or discharged since). Flagging both copies
tells the lawyer the same thing twice and spends the budget on the stale copy.

A chunk is a *superseded copy* when it lists registrations as a search's register does (a line opening
with the registration number, ``ddd ddd ddd``, and its date) and a later search of the same title shows
them again: another document of the same role, whose newest date is later, whose register lists every
registration of this document's register (so a search of another title, a parking unit's say, which has
registrations of its own, never supersedes it) and every registration number the chunk names. A copy of the instrument itself
(a caveat, a statement of lien, a certificate of lis pendens) is not a register: it carries the claim's
details, not only its line, and keeps its finding. A chunk naming one
registration the newer document lacks is not superseded: that registration is read from it as before (the
newer search may be missing the page, and a lawyer must see it). The judgement depends only on the deal's
chunks, so it is built once per deal view; :func:`demote` applies it to scored candidates. Building it reads the
register lines of the documents whose role has two or more in the deal (a line is tried only where it opens with a
registration number), and the dates only of the registers that another of their role lists in full and of those
others (issue 18: the first call).
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import replace

from .values import ChunkView, Scored

#: A registration number as Alberta prints it: "262 091 447" (also "262091447" in some extracts).
_REGISTRATION = re.compile(r"(?<![\d$,.])(\d{3}) ?(\d{3}) ?(\d{3})(?![\d,.])")
_MONTHS = {m: i for i, m in enumerate(("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"), start=1)}
_DATES = re.compile(
    r"\b(?P<d1>\d{1,2})/(?P<m1>\d{1,2})/(?P<y1>(?:19|20)\d{2})\b"                                  # 14/05/2021 (Alberta: day first)
    r"|\b(?P<y2>(?:19|20)\d{2})-(?P<m2>\d{2})-(?P<d2>\d{2})\b"                                    # 2026-03-11
    r"|\b(?P<mon3>jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.? (?P<d3>\d{1,2}),? (?P<y3>(?:19|20)\d{2})\b"
    r"|\b(?P<d4>\d{1,2})(?:st|nd|rd|th)? day of (?P<mon4>jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*,? (?P<y4>(?:19|20)\d{2})\b",
    re.IGNORECASE,
)


#: Where a date may stand: a year, ``19dd`` or ``20dd``, which every date the patterns above read contains.
_YEAR = re.compile(r"(?:19|20)\d\d")
#: What no date contains, so no date runs across it: an ASCII character other than a letter, a digit, a space or
#: ``/.,-``, or two spaces in a row (the patterns' spaces are single and never adjacent; a register's columns are
#: set apart by runs of them).
_BREAK = "[" + re.escape("".join(chr(i) for i in range(128) if not (chr(i).isalnum() or chr(i) in " /.,-"))) + "]|  "
_NEXT_BREAK = re.compile(_BREAK)
_LAST_BREAK = re.compile(rf".*(?:{_BREAK})", re.DOTALL)


def _date_matches(text: str) -> Iterator[re.Match[str]]:
    """``_DATES.finditer(text)``, the regular expression run only over the stretches between two breaks that hold a
    year: a date lies inside one such stretch, and the scan of a stretch starts where the whole text's scan would
    find no date running into it (its ``\\b`` sees the characters around the stretch, the break after it included)."""
    pos, n = 0, len(text)
    while (year := _YEAR.search(text, pos)) is not None:
        before = _LAST_BREAK.match(text, pos, year.start())
        after = _NEXT_BREAK.search(text, year.end())
        end = after.start() if after is not None else n
        yield from _DATES.finditer(text, before.end() if before is not None else pos, min(end + 1, n))
        pos = end


def dates_in(text: str) -> list[tuple[int, int, int]]:
    """Every calendar date the text states, as (year, month, day). A month's name is read case-folded: the pattern's
    IGNORECASE lets a long s (U+017F) stand for the s of "sep", which ``lower()`` keeps."""
    out = []
    for m in _date_matches(text):
        d1, m1, y1, y2, m2, d2, mon3, d3, y3, d4, mon4, y4 = m.groups()  # the groups in the pattern's order
        if y1:
            y, mo, d = int(y1), int(m1), int(d1)
        elif y2:
            y, mo, d = int(y2), int(m2), int(d2)
        elif y3:
            y, mo, d = int(y3), _MONTHS[mon3[:3].casefold()], int(d3)
        else:
            y, mo, d = int(y4), _MONTHS[mon4[:3].casefold()], int(d4)
        if 1 <= mo <= 12 and 1 <= d <= 31:
            out.append((y, mo, d))
    return out


#: A line of a register as a search prints it: the registration number, then its date ("012 330 918   19/11/2001  CAVEAT").
_REGISTER_LINE = re.compile(r"^[ \t]*(\d{3}) ?(\d{3}) ?(\d{3})[ \t]+\d{1,4}[/-]\d{1,2}[/-]\d{1,4}\b", re.MULTILINE)
#: The line breaks a register line may follow (the line opens with a registration number): where
#: :func:`register_lines_in` tries ``_REGISTER_LINE``.
_NUMBERED_LINE = re.compile(r"\n(?=[ \t]*\d{3} ?\d{3} ?\d{3}[ \t])")


def registrations_in(text: str) -> set[str]:
    """Every registration number the text names, on a register line or in prose."""
    return {"".join(m.groups()) for m in _REGISTRATION.finditer(text)}


def register_lines_in(text: str) -> set[str]:
    """The registration numbers the text lists as a search does: at the start of a line, followed by the date."""
    # a register line lies within its line, so ``_REGISTER_LINE.finditer`` finds one at every line start where it
    # matches: tried at the text's start and after each line break a registration number follows (a cheap scan)
    first = _REGISTER_LINE.match(text)
    found = {"".join(first.groups())} if first is not None else set()
    for br in _NUMBERED_LINE.finditer(text):
        m = _REGISTER_LINE.match(text, br.end())
        if m is not None:
            found.add("".join(m.groups()))
    return found


def superseded_copies(chunks: Iterable[ChunkView]) -> dict[str, str]:
    """chunk id -> the newer document that shows every registration the chunk shows (see the module's rule)."""
    everything: dict[str, list[ChunkView]] = defaultdict(list)
    for c in chunks:
        everything[c.document_id].append(c)
    # only documents that print a register can supersede or be superseded, and only within a role that has two:
    # the register lines of a document alone in its role are never read
    per_role = Counter(cs[0].document_role for cs in everything.values())
    lines = {d: [register_lines_in(c.content) for c in cs] for d, cs in everything.items() if per_role[cs[0].document_role] > 1}
    held = {d: set().union(*found) for d, found in lines.items()}
    registers = {d: everything[d] for d in lines if held[d]}
    roles = [cs[0].document_role for cs in registers.values()]
    docs = {d: cs for d, cs in registers.items() if roles.count(cs[0].document_role) > 1}
    role = {d: cs[0].document_role for d, cs in docs.items()}
    # a document whose register another one of its role lists in full, and those others: only their dates are read
    covering = {d: [o for o in docs if o != d and role[o] == role[d] and held[d] <= held[o]] for d in docs}
    dated = {d for d, os in covering.items() if os} | {o for os in covering.values() for o in os}
    newest = {d: max((dt for c in docs[d] for dt in dates_in(c.content)), default=None) for d in docs if d in dated}
    out: dict[str, str] = {}
    for d, cs in docs.items():
        if not covering[d] or newest[d] is None:
            continue
        later = sorted((o for o in covering[d] if newest[o] is not None and newest[o] > newest[d]),  # type: ignore[operator]
                       key=lambda o: (newest[o], o), reverse=True)
        if not later:
            continue
        for c, listed in zip(cs, lines[d], strict=True):
            if not listed:
                continue  # not a search's register: a copy of an instrument carries more than its register line
            shown = registrations_in(c.content)
            for o in later:
                if shown <= held[o]:
                    out[c.chunk_id] = o
                    break
    return out


def demote(scored: Sequence[Scored], copies: Mapping[str, str], beta: float) -> list[Scored]:
    """``scored`` with every superseded copy stripped of its material kinds and its β term (its finding is read
    at the newer document), the reason kept among its benign terms; others unchanged."""
    out = []
    for s in scored:
        newer = copies.get(s.chunk.chunk_id)
        if newer is None or not (s.terms.risk_kinds or s.terms.risk):
            out.append(s)
            continue
        t = s.terms
        terms = replace(t, risk=0.0, combined=max(0.0, t.combined - beta * t.risk), risk_kinds=(), risk_terms=(),
                        benign_terms=tuple(sorted({*t.benign_terms, f"superseded copy (every registration shown again in {newer})"})))
        out.append(Scored(chunk=s.chunk, terms=terms, group=s.group, origin=s.origin, span=s.span))
    return out


__all__ = ["dates_in", "demote", "registrations_in", "superseded_copies"]
