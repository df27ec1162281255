"""Passages Stage 0 split across chunks: which chunk continues which (spec 2.4: complete evidence).

Stage 0 cuts a document at page and size limits, not where a sentence or a table ends. A board motion
reads "MOVED ... that the cost be" at the foot of one page and "recovered from owners by an assessment of
$14,500 per unit ... CARRIED" at the top of the next; a reserve fund projection puts its title and first
rows in one chunk and its "(cont.)" rows, where the balance turns negative, in the next. Either half alone
misreads the passage: the amount without the decision, or the shortfall without the table it belongs to.
A chunk judged material therefore brings the chunk its passage runs into or out of
(:func:`companions`), and the packager places that companion right after the material chunks.

What links two chunks (same document, the second starting on the page the first ends on or the next):

* the second *continues*: its first line of text (after the page's running header, which is recognised
  as a line that opens or closes many chunks of the document, and after page-number lines) starts in
  lower case ("recovered from owners ...", not an item label like "a)") or carries a continuation marker
  ("Table 6.2 (cont.)", "(continued)", "continued from");
* and the first *leads into it*: its last line of text ends without a sentence's closing punctuation or
  with a hyphen ("... that the cost be", "descr-"), or, for a marker that names its table or schedule
  ("Table 6.2 (cont.)"), the first holds that label.

Exactly one chunk may qualify as the predecessor; when two do, nothing is linked (no guess). The links
depend only on the deal's chunks, so they are built once per deal view, each chunk's when first asked; a document's
running headers and footers when one of its chunks is first read.
"""

from __future__ import annotations

import re
import threading
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence

from .values import Candidate, ChunkView, Scored

#: A line that is only a page number: "Page 61 of 238", "- 12 -", "12", "p. 4", "4/238".
_PAGE_LINE = re.compile(r"(?:page|p\.|pg\.?)?\s*[-\u2013]?\s*\d{1,5}\s*(?:(?:of|/)\s*\d{1,5})?\s*[-\u2013]?", re.IGNORECASE)
#: A continuation marker on a chunk's first line, with the label before it ("Table 6.2 (cont.)").
_MARKER = re.compile(r"\(\s*cont(?:inued|'d|d|\.)?\s*\)|\bcontinued\b|\bcont\.(?=\s|$)", re.IGNORECASE)
#: A label a marker continues: "Table 6.2", "Schedule B", "Appendix C-1", "Note 11".
_LABEL = re.compile(r"\b(table|schedule|appendix|exhibit|note|section|article|part)\s+([0-9]+(?:\.[0-9]+)*|[a-z](?:[-.][0-9]+)?)\b",
                    re.IGNORECASE)
#: An item label that opens a line in lower case without continuing anything: "a)", "(iv)", "i.", "e.g.".
_ITEM = re.compile(r"(?:\(?[a-z]{1,4}[.)]|e\.g\.|i\.e\.)(?:\s|$)")
#: What a finished last line ends with: a sentence's or a clause's end, a closing bracket or quote.
_CLOSED_END = re.compile(r"[.!?:;)\]\"'\u2019\u201d]\s*$")
#: A running header or footer opens or closes at least this many chunks of the document, and at least this share.
FURNITURE_MIN = 3
FURNITURE_SHARE = 0.3


_DIGIT = re.compile(r"\d")
_ASCII_DIGITS = bytes.maketrans(b"0123456789", b"##########")
#: The ASCII control characters: every whitespace character str.split() splits at, but the space, is one of them.
_ASCII_CONTROL = bytes(range(32)) + b"\x7f"


def _shape(line: str) -> str:
    """A line as furniture is compared: lower case, digits as '#', spaces collapsed."""
    if line.isascii():
        raw = line.encode("ascii")
        shaped = raw.translate(_ASCII_DIGITS, _ASCII_CONTROL)  # digits as '#', control characters dropped
        if len(shaped) == len(raw) and b"  " not in shaped and shaped[:1] != b" " and shaped[-1:] != b" ":
            return shaped.lower().decode("ascii")  # the common line: single inner spaces only, nothing to collapse
    return " ".join(_DIGIT.sub("#", line.lower()).split())


def _lines(text: str) -> list[str]:
    return [ln.strip() for ln in text.splitlines() if ln.strip()]


def _edges(text: str) -> list[str]:
    """The first two and last two non-blank lines of ``text`` (what running headers and footers occupy), at any line
    break Stage 0 writes (``str.splitlines``: ``\\r\\n``, a lone ``\\r``, a form feed between pages ...)."""
    lines = text.strip().splitlines()
    head = [ln.strip() for ln in lines[:4] if ln.strip()][:2]
    tail = [ln.strip() for ln in lines[-4:] if ln.strip()][-2:]
    return head + tail


def _furniture(chunks: Sequence[ChunkView]) -> set[str]:
    """Shapes of the lines that open or close many chunks of one document: running headers and footers."""
    seen: Counter[str] = Counter()
    for c in chunks:
        seen.update({_shape(ln) for ln in _edges(c.content)})
    floor = max(FURNITURE_MIN, FURNITURE_SHARE * len(chunks))
    return {shape for shape, n in seen.items() if n >= floor}


def is_furniture(line: str, furniture: set[str] = frozenset()) -> bool:  # type: ignore[assignment]
    """Whether ``line`` is a running header or footer of its document (``furniture``: :meth:`Links.furniture`) or a
    page-number line."""
    line = line.strip()
    return bool(line) and (_shape(line) in furniture or _PAGE_LINE.fullmatch(line) is not None)


def body_lines(text: str, furniture: set[str] = frozenset()) -> list[str]:  # type: ignore[assignment]
    """The chunk's lines without the running header/footer lines around them and without page-number lines."""
    lines = _lines(text)

    def furniture_line(ln: str) -> bool:
        return _shape(ln) in furniture or _PAGE_LINE.fullmatch(ln) is not None

    while lines and furniture_line(lines[0]):
        lines.pop(0)
    while lines and furniture_line(lines[-1]):
        lines.pop()
    return lines


def continues(first: str) -> tuple[bool, str | None]:
    """(whether a chunk whose first line of text is ``first`` continues the previous one, the label it continues)."""
    # every marker holds "cont", which IGNORECASE matches only as C/c O/o N/n T/t: without it, no regular expression
    marker = _MARKER.search(first) if "cont" in first.lower() else None
    if marker is not None:
        label = _LABEL.search(first[:marker.start()])
        return True, (f"{label.group(1)} {label.group(2)}".lower() if label else None)
    opening = first.lstrip("\"'(\u201c\u2018")
    if opening[:1].islower() and _ITEM.match(opening) is None:
        return True, None
    return False, None


def leads_on(last: str) -> bool:
    """Whether a last line of text ends mid-sentence: no closing punctuation, or a word broken by a hyphen."""
    if last.endswith("-") and not last.endswith("--"):
        return True
    return _CLOSED_END.search(last) is None and re.search(r"[a-z,]$", last) is not None


def _has_label(lines: Sequence[str], label: str) -> bool:
    kind, _, number = label.partition(" ")
    pattern = re.compile(rf"\b{re.escape(kind)}\s+{re.escape(number)}(?![0-9.]*[0-9])", re.IGNORECASE)
    return any(pattern.search(ln) for ln in lines)


class Links:
    """Continuation links of one deal, worked out per chunk when first asked (a call asks only about its material
    chunks and their neighbours), each answer kept: ``previous(c)`` is the chunk ``c`` continues,
    ``following(p)`` the chunk that continues ``p``."""

    def __init__(self, chunks: Iterable[ChunkView]) -> None:
        self._docs: dict[str, list[ChunkView]] = defaultdict(list)
        for c in chunks:
            self._docs[c.document_id].append(c)
        self._by_id = {c.chunk_id: c for cs in self._docs.values() for c in cs}
        starting: dict[tuple[str, int], list[str]] = defaultdict(list)
        ending: dict[tuple[str, int], list[str]] = defaultdict(list)
        for c in self._by_id.values():
            starting[(c.document_id, c.page_start)].append(c.chunk_id)
            ending[(c.document_id, c.page_end)].append(c.chunk_id)
        # kept as tuples of chunk ids (a view lives across calls: tuples of strings leave the garbage collector's
        # lists, lists of chunks would be visited by every full collection for as long as the view is cached)
        self._starting = {k: tuple(v) for k, v in starting.items()}
        self._ending = {k: tuple(v) for k, v in ending.items()}
        self._furniture: dict[str, set[str]] = {}
        self._ends: dict[str, tuple[str, ...]] = {}  # chunk id -> first and last line of its body (_body)
        self._claimed: dict[str, str | None] = {}
        self._partners: dict[str, tuple[str, ...]] = {}  # answers of partners(), final once asked (the chunks never change)
        self._lock = threading.Lock()

    def furniture(self, document_id: str) -> set[str]:
        """Shapes of the running header and footer lines of ``document_id`` (see :func:`is_furniture`)."""
        with self._lock:
            return self._furniture_of(document_id)

    def _furniture_of(self, document_id: str) -> set[str]:  # caller holds the lock
        found = self._furniture.get(document_id)
        if found is None:
            found = self._furniture[document_id] = _furniture(self._docs.get(document_id, []))
        return found

    def _body(self, c: ChunkView) -> tuple[str, ...]:
        """The first and last line of ``c``'s body (one line twice; () for no body): all a link reads of a chunk but a
        label check (:meth:`_lines`). Only the ends are kept: a view lives across calls, its chunks' lines need not."""
        ends = self._ends.get(c.chunk_id)
        if ends is None:
            body = self._lines(c)
            ends = self._ends[c.chunk_id] = (body[0], body[-1]) if body else ()
        return ends

    def _lines(self, c: ChunkView) -> list[str]:
        """Every line of ``c``'s body (its running header, footer and page number left out)."""
        return body_lines(c.content, self._furniture_of(c.document_id))

    def _claim(self, c: ChunkView) -> str | None:
        """The one chunk ``c`` says it continues (before the checks that involve other chunks' claims)."""
        if c.chunk_id in self._claimed:
            return self._claimed[c.chunk_id]
        found: str | None = None
        body = self._body(c)
        flag, label = continues(body[0]) if body else (False, None)
        if flag and len(self._docs[c.document_id]) > 1:
            near = [p for page in (c.page_start - 1, c.page_start) for pid in self._ending.get((c.document_id, page), ())
                    if pid != c.chunk_id and (p := self._by_id[pid]).page_start <= c.page_start and self._body(p)]
            if label is not None:
                fits = [p for p in near if _has_label(self._lines(p), label) and not _continues_label(self._body(p), label)]
            else:
                fits = [p for p in near if leads_on(self._body(p)[-1])]
            if len(fits) == 1:
                found = fits[0].chunk_id
        self._claimed[c.chunk_id] = found
        return found

    def _claimants(self, p: ChunkView) -> list[str]:
        """The chunks that claim to continue ``p``."""
        return [cid for page in (p.page_end, p.page_end + 1) for cid in self._starting.get((p.document_id, page), ())
                if cid != p.chunk_id and self._claim(self._by_id[cid]) == p.chunk_id]

    def previous(self, chunk_id: str) -> str | None:
        with self._lock:
            c = self._by_id.get(chunk_id)
            pid = self._claim(c) if c is not None else None
            if pid is None:
                return None
            if self._claim(self._by_id[pid]) == chunk_id:  # two chunks of one page that each continue the other: order unknown
                return None
            if len(self._claimants(self._by_id[pid])) != 1:  # two chunks claim the same predecessor: neither is linked
                return None
            return pid

    def following(self, chunk_id: str) -> str | None:
        p = self._by_id.get(chunk_id)
        if p is None:
            return None
        with self._lock:
            claimants = self._claimants(p)
        return claimants[0] if len(claimants) == 1 and self.previous(claimants[0]) == chunk_id else None

    def partners(self, chunk_id: str) -> tuple[str, ...]:
        """The chunks ``chunk_id``'s passage runs into or out of (at most one each way), in reading order."""
        found = self._partners.get(chunk_id)
        if found is None:
            found = self._partners[chunk_id] = tuple(c for c in (self.previous(chunk_id), self.following(chunk_id)) if c is not None)
        return found

    @property
    def links(self) -> dict[str, str]:
        """Every link of the deal, chunk -> the chunk it continues (computes them all; for tests and tools)."""
        return {cid: pid for cid in sorted(self._by_id) if (pid := self.previous(cid)) is not None}


def continuation_links(chunks: Iterable[ChunkView]) -> Links:
    """Which chunk continues which, per document (see the module's rules). Deterministic: a function of the chunks."""
    return Links(chunks)


def _continues_label(lines: Sequence[str], label: str) -> bool:
    """Whether the chunk itself opens as a continuation of ``label`` (then it is not the label's head)."""
    flag, own = continues(lines[0])
    return flag and own == label


def companions(scored: Sequence[Scored], *, links: Links, chunks: Mapping[str, ChunkView], eligible: Callable[[ChunkView], bool],
               score: Callable[[list[Candidate]], list[Scored]]) -> tuple[dict[str, list[Scored]], list[Scored]]:
    """For each material chunk of ``scored``, the chunks its passage runs into or out of: (material chunk id ->
    companions in reading order, the companions that were not candidates, scored with ``score``). A companion
    passes the same ``eligible`` check (contract and trust) as every candidate; one that is material itself is
    not a companion: it competes in the risk phase like any other material chunk."""
    found = {s.chunk.chunk_id: s for s in scored}
    out: dict[str, list[Scored]] = {}
    fresh: dict[str, list[str]] = {}
    for s in scored:
        if not s.material:
            continue
        for pid in links.partners(s.chunk.chunk_id):
            chunk = chunks.get(pid)
            if chunk is None or not eligible(chunk):
                continue
            if pid in found:
                if not found[pid].material:
                    out.setdefault(s.chunk.chunk_id, []).append(found[pid])
            else:
                fresh.setdefault(pid, []).append(s.chunk.chunk_id)
    added = score([Candidate(chunk=chunks[pid]) for pid in sorted(fresh)]) if fresh else []
    for comp in added:
        if not comp.material:
            for mid in fresh[comp.chunk.chunk_id]:
                out.setdefault(mid, []).append(comp)
    return {mid: sorted(v, key=lambda x: x.chunk.reading_key) for mid, v in out.items()}, added


__all__ = ["Links", "body_lines", "companions", "continuation_links", "continues", "is_furniture", "leads_on"]
