"""Offset-keeping recursive chunker for the LegalBench-RAG documents.

Every chunk is a ``(start, end)`` pair with ``text[start:end]`` as its content, so a
retrieved chunk maps back to a character range of the source file. Chunks tile the
document (no gaps, no overlap): a gold span's trailing whitespace is never lost, and
merged retrieved ranges are exactly the chunks' union.

Splitting is recursive, like LangChain's ``RecursiveCharacterTextSplitter`` (what the
LegalBench-RAG paper used, 500 characters, no overlap), but boundaries are
legal-text aware and offsets are kept:

0. blank lines, 1. line breaks, 2. runs of 3+ spaces (the MAUD/EDGAR paragraph gap),
3. sentence / clause ends (``. ; : ? !`` before white space), 4. commas, 5. any white space,
6. a hard cut.

A piece longer than ``max_chars`` is split at the next level; consecutive pieces are
then packed greedily up to ``max_chars``. A separator stays with the piece before it,
so chunks start on text. White-space-only pieces are glued to their neighbour.
"""

from __future__ import annotations

import itertools
import re

_LEVELS: tuple[re.Pattern[str], ...] = (
    re.compile(r"\n[ \t\r\f\v]*\n\s*"),
    re.compile(r"\n\s*"),
    re.compile(r"[ \t]{3,}\s*"),
    re.compile(r"(?<=[.;:?!])[\"”’)]*\s+"),
    re.compile(r"(?<=,)\s+"),
    re.compile(r"\s+"),
)


def _cut(text: str, start: int, end: int, level: int) -> list[tuple[int, int]]:
    """Pieces of ``text[start:end]`` cut after every separator of ``level``."""
    pieces: list[tuple[int, int]] = []
    pos = start
    for m in _LEVELS[level].finditer(text, start, end):
        if m.end() >= end:
            break
        if m.end() > pos:
            pieces.append((pos, m.end()))
            pos = m.end()
    pieces.append((pos, end))
    return pieces


def _split(text: str, start: int, end: int, max_chars: int, level: int) -> list[tuple[int, int]]:
    if end - start <= max_chars:
        return [(start, end)]
    if level >= len(_LEVELS):
        return [(s, min(s + max_chars, end)) for s in range(start, end, max_chars)]
    pieces = _cut(text, start, end, level)
    if len(pieces) == 1:
        return _split(text, start, end, max_chars, level + 1)
    out: list[tuple[int, int]] = []
    for s, e in pieces:
        out.extend(_split(text, s, e, max_chars, level + 1) if e - s > max_chars else [(s, e)])
    return out


def _pack(pieces: list[tuple[int, int]], max_chars: int) -> list[tuple[int, int]]:
    """Greedily join consecutive pieces while the result stays within ``max_chars``."""
    out: list[tuple[int, int]] = []
    for s, e in pieces:
        if out and e - out[-1][0] <= max_chars:
            out[-1] = (out[-1][0], e)
        else:
            out.append((s, e))
    return out


def chunk_spans(text: str, max_chars: int = 500) -> list[tuple[int, int]]:
    """Tiling ``(start, end)`` spans of at most ``max_chars`` characters (a glued blank piece may add a little)."""
    if max_chars < 20:
        raise ValueError("max_chars must be at least 20")
    if not text:
        return []
    spans = _pack(_split(text, 0, len(text), max_chars, 0), max_chars)
    # no blank chunk: glue white space to the chunk before (or after, at the start)
    out: list[tuple[int, int]] = []
    for s, e in spans:
        if not text[s:e].strip() and out:
            out[-1] = (out[-1][0], e)
            continue
        if out and not text[out[-1][0]:out[-1][1]].strip():
            s = out.pop()[0]
        out.append((s, e))
    if out and not text[out[-1][0]:out[-1][1]].strip():  # the whole text is blank
        return []
    return out


def self_check() -> None:
    """Tiling, bounds and non-blank content on a few awkward texts."""
    samples = [
        "",
        "   \n\n  ",
        "Short text.",
        "A" * 1300,
        "Section 1.01   Definitions.   (a) “Knowledge” means the actual knowledge; (b) foo.\n\n\n    \n\n9\n\n" * 20,
        "\n\n  Leading blank.  " + "word " * 400 + "\n\n",
    ]
    for text in samples:
        for size in (50, 200, 500):
            spans = chunk_spans(text, size)
            if not text.strip():
                assert spans == [], (text, spans)
                continue
            assert spans[0][0] == 0 and spans[-1][1] == len(text), spans[:2]
            for (_s1, e1), (s2, _e2) in itertools.pairwise(spans):
                assert e1 == s2, "chunks must tile the text"
            for s, e in spans:
                assert e > s and text[s:e].strip(), (s, e)
                # only glued white space may push a chunk past max_chars
                assert len(text[s:e].strip()) <= size, (len(text[s:e]), size)


__all__ = ["chunk_spans", "self_check"]
