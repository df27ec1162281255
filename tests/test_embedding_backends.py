"""Embedding backends (issue 18 "Faster ingest"): ``embedding_backend: torch | onnx | onnx-int8``.

Real parts only: the packaged MiniLM exported to ONNX in a temporary cache, ONNX Runtime, Qdrant edge, Mem0.
The agreement thresholds are the measured ones (benchmarks/embedding_backends.py, README "Embedding backends")
with a margin, not timings.
"""

from __future__ import annotations

import json
import shutil
import stat
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnxruntime", reason="the onnx extra (pip install 'retrieval-node[onnx]') is not installed")

from retrieval_node.config import load_config  # noqa: E402
from retrieval_node.embedding import (  # noqa: E402
    LazyEmbedder,
    OnnxSentenceModel,
    SentenceTransformerEmbedder,
    model_identity,
    onnx_cache_dir,
    resolve_model_path,
)
from retrieval_node.errors import ConfigError  # noqa: E402
from retrieval_node.ingest import Ingestor  # noqa: E402
from retrieval_node.query_cache import QUERY_DB, QueryVectorCache  # noqa: E402
from retrieval_node.store import MANIFEST, Store  # noqa: E402
from tests.conftest import FULL_TRUST, write_jsonl  # noqa: E402

DEAL = "2026-ONNX-0001"

# Written for these tests (plain conveyancing prose in our own words), short and long ones (a long one is cut into
# windows and mean-pooled, so the pooled path is compared too).
TEXTS = [
    "Caveat registered by a mortgage lender against the lot, claiming an interest under a registered mortgage.",
    "The seller will pay the outstanding property tax arrears out of the sale proceeds on the closing day.",
    "Condominium corporation estoppel letter: monthly fees paid to date, no special levy has been approved.",
    "Real property report with municipal compliance stamp; the rear deck is within the side yard setback.",
    "Utility right of way granted to the gas distributor along the north boundary of the parcel.",
    "builders' lien",
    "reserve fund study",
    " ".join(
        f"Clause {i}: the buyer's lawyer holds the deposit in trust until the title transfers, and any holdback for "
        f"deficiencies named in the walkthrough report number {i} is released only on the seller's written confirmation."
        for i in range(30)
    ),
]


def _config(env: dict[str, str]):
    return load_config(environ=env)


@pytest.fixture(scope="module")
def onnx_dir(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("onnx-cache"))


def _backend_config(backend: str, onnx_dir: str):
    return _config({"RETRIEVAL_NODE_EMBEDDING_BACKEND": backend, "RETRIEVAL_NODE_EMBEDDING_ONNX_DIR": onnx_dir})


def test_backend_setting_is_read_from_the_environment_and_rejects_unknown_values() -> None:
    assert _config({}).retrieval.embedding_backend == "auto"  # the store's own; a new store's by the CPU (test_embedding_bf16)
    assert _config({"RETRIEVAL_NODE_EMBEDDING_BACKEND": "torch"}).retrieval.embedding_backend == "torch"
    assert _config({"RETRIEVAL_NODE_EMBEDDING_BACKEND": "onnx-int8"}).retrieval.embedding_backend == "onnx-int8"
    with pytest.raises(ConfigError, match="embedding_backend"):
        _config({"RETRIEVAL_NODE_EMBEDDING_BACKEND": "tensorrt"})


def test_each_backend_has_its_own_model_identity_and_torch_keeps_the_old_key() -> None:
    path = resolve_model_path()
    keys = {b: model_identity(path, b) for b in ("torch", "onnx", "onnx-int8")}
    assert len(set(keys.values())) == 3
    assert keys["torch"] == model_identity(path) and keys["torch"].startswith("minilm:")  # existing caches stay valid
    assert keys["onnx-int8"].startswith("minilm-onnx-int8:")


def test_onnx_vectors_agree_with_torch(embedder: SentenceTransformerEmbedder, onnx_dir: str) -> None:
    ref = embedder.embed(TEXTS)
    fp32 = LazyEmbedder(backend="onnx", onnx_dir=onnx_dir)
    int8 = LazyEmbedder(backend="onnx-int8", onnx_dir=onnx_dir)
    assert isinstance(fp32.model()._model, OnnxSentenceModel) and isinstance(int8.model()._model, OnnxSentenceModel)
    cos32 = np.sum(fp32.embed(TEXTS) * ref, axis=1)
    cos8 = np.sum(int8.embed(TEXTS) * ref, axis=1)
    # measured on 731 real chunks (2,185 windows): fp32 min 0.99999, int8 min 0.97-0.98, mean 0.99
    assert cos32.min() >= 0.9999, cos32
    assert cos8.min() >= 0.95 and cos8.mean() >= 0.98, cos8
    # int8 is a different model's vectors, not torch's under another name
    assert cos8.max() < 0.99999
    # the windows of the long text are cut by the same tokenizer, so the pooled vector follows the same path
    long = TEXTS[-1]
    assert int8.window_spans(long, 200, 48) == embedder.window_spans(long, 200, 48)


def test_exports_are_owner_only_reused_and_a_damaged_file_is_exported_again(onnx_dir: str) -> None:
    LazyEmbedder(backend="onnx-int8", onnx_dir=onnx_dir).model()  # exported by the test above, or now
    root = onnx_cache_dir(onnx_dir)
    files = sorted(root.rglob("*.onnx"))
    assert {f.name for f in files} == {"model.onnx", "model_qint8.onnx"}
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    for f in files:
        assert stat.S_IMODE(f.stat().st_mode) == 0o600 and stat.S_IMODE(f.parent.stat().st_mode) == 0o700
    # reused: loading again does not rewrite the file
    quant = next(f for f in files if f.name == "model_qint8.onnx")
    before = quant.stat().st_mtime_ns
    model = OnnxSentenceModel.load(resolve_model_path(), quantized=True, cache_dir=onnx_dir)
    assert quant.stat().st_mtime_ns == before and model.onnx_file == quant
    good = model.encode(["builders' lien"])
    # a truncated file (an interrupted run) is exported again, not an error
    quant.write_bytes(quant.read_bytes()[:1000])
    again = OnnxSentenceModel.load(resolve_model_path(), quantized=True, cache_dir=onnx_dir)
    assert quant.stat().st_size > 1_000_000 and stat.S_IMODE(quant.stat().st_mode) == 0o600
    assert float(np.dot(again.encode(["builders' lien"])[0], good[0])) > 0.9999


def _chunks(make_chunk):
    return [make_chunk(t, deal_id=DEAL, document_id=f"{DEAL}/title.pdf", page=i + 1) for i, t in enumerate(TEXTS[:5])]


def test_store_uses_the_configured_backend_and_records_it(tmp_path: Path, make_chunk, onnx_dir: str) -> None:
    config = _backend_config("onnx-int8", onnx_dir)
    home = tmp_path / "store"
    with Store.open(home, config=config) as st:
        assert st.embedder.backend == "onnx-int8" and st.embedder.model_key.startswith("minilm-onnx-int8:")
        report = Ingestor(st).ingest([write_jsonl(tmp_path / "a.jsonl", _chunks(make_chunk))])
        assert report.rejected == [] and report.ingested == 5
        assert isinstance(st.embedder.model()._model, OnnxSentenceModel)
        cache = st.query_cache()
        assert cache is not None and cache.model_key == st.embedder.model_key
        # the profile texts pre-filled at ingest are the int8 model's own vectors
        from retrieval_node.query_cache import profile_query_texts

        text = profile_query_texts(config)[0]
        assert cache.get(text).tobytes() == st.embedder.embed([text])[0].tobytes()
        from retrieval_node.agent import RetrievalAgent

        agent = RetrievalAgent(st, trust=FULL_TRUST)
        try:
            package, _ = agent.retrieve_sync(agent.intent_for("investigator", deal_id=DEAL))
        finally:
            agent.close()
        assert package.ordered_chunks
    assert json.loads((home / MANIFEST).read_text())["embedding_backend"] == "onnx-int8"


def test_a_store_is_refused_under_another_backend(tmp_path: Path, onnx_dir: str) -> None:
    int8_home = tmp_path / "int8"
    Store.open(int8_home, config=_backend_config("onnx-int8", onnx_dir)).close()
    with pytest.raises(ConfigError, match="embedding_backend: onnx-int8"):
        Store.open(int8_home, config=_config({"RETRIEVAL_NODE_EMBEDDING_BACKEND": "torch"}))
    with pytest.raises(ConfigError, match="embedding_backend: onnx-int8"):
        Store.open(int8_home, config=_backend_config("onnx", onnx_dir))
    with Store.open(int8_home, config=_config({})) as st:  # the default (auto) takes the store's own
        assert st.config.retrieval.embedding_backend == "onnx-int8" == st.embedder.backend
    torch_home = tmp_path / "torch"
    Store.open(torch_home, config=_config({"RETRIEVAL_NODE_EMBEDDING_BACKEND": "torch"})).close()
    with pytest.raises(ConfigError, match="embedding_backend: torch"):
        Store.open(torch_home, config=_backend_config("onnx-int8", onnx_dir))
    # a manifest written before backends existed has no key: its vectors are PyTorch's
    manifest = json.loads((torch_home / MANIFEST).read_text())
    del manifest["embedding_backend"]
    (torch_home / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(ConfigError, match="embedding_backend: torch"):
        Store.open(torch_home, config=_backend_config("onnx", onnx_dir))
    Store.open(torch_home, config=_config({})).close()


def test_an_embedder_passed_in_must_match_the_configured_backend(tmp_path: Path, embedder, onnx_dir: str) -> None:
    with pytest.raises(ConfigError, match="embedder passed in"):
        Store.open(tmp_path / "s", config=_backend_config("onnx-int8", onnx_dir), embedder=embedder)


def test_query_cache_never_serves_one_backends_vectors_for_another(tmp_path: Path, embedder, onnx_dir: str) -> None:
    """The cache file of a torch store copied under an int8 store: the torch rows are never served."""
    int8 = LazyEmbedder(backend="onnx-int8", onnx_dir=onnx_dir)
    text = "is there a builders' lien on title"
    torch_vec = embedder.embed([text])[0]
    path = tmp_path / QUERY_DB
    cache = QueryVectorCache(path, model_identity(resolve_model_path(), "torch"), dimension=384)
    cache.put(text, torch_vec)
    cache.close()
    home = tmp_path / "store"
    Store.open(home, config=_backend_config("onnx-int8", onnx_dir)).close()
    shutil.copy(path, home / QUERY_DB)
    with Store.open(home, config=_backend_config("onnx-int8", onnx_dir)) as st:
        assert st.query_cache().get(text) is None
        vec, calls = st.embed_query(text)
        assert calls == 1  # computed by the int8 model, not read from the torch row
        assert vec.tobytes() == int8.embed([text])[0].tobytes() and vec.tobytes() != torch_vec.tobytes()
