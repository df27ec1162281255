"""``embedding_backend: torch-bf16`` (issue 18 "Faster ingest"): the packaged MiniLM under PyTorch's bf16 autocast.

Real parts only (the packaged model, Qdrant edge, Mem0). The agreement bound is the measured one with a margin
(benchmarks/embedding_backends.py, README "Embedding backends"), not a timing.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import get_args

import numpy as np
import pytest

from retrieval_node import embedding
from retrieval_node.config import RetrievalConfig, load_config
from retrieval_node.embedding import (
    AUTO_BACKEND,
    EMBEDDING_BACKENDS,
    LazyEmbedder,
    SentenceTransformerEmbedder,
    model_identity,
    resolve_model_path,
)
from retrieval_node.errors import ConfigError, EmbeddingModelMissing
from retrieval_node.ingest import Ingestor
from retrieval_node.store import MANIFEST, Store
from tests.conftest import FULL_TRUST, write_jsonl

DEAL = "2026-BF16-0001"

# Our own conveyancing sentences; the last one is long enough to be cut into windows and mean-pooled.
TEXTS = [
    "A drywall contractor registered a claim of lien against the condominium unit for unpaid work on the suite.",
    "The municipality reports two years of unpaid property taxes and a penalty added on the first of January.",
    "Owners approved a one-time assessment of $8,400 per unit to replace the parkade membrane next spring.",
    "Easement in favour of the city for a storm sewer line running under the rear ten feet of the lot.",
    "special levy",
    " ".join(
        f"Paragraph {i}: the purchaser's solicitor keeps the deposit in trust until the transfer registers, and any "
        f"holdback for the items in inspection note {i} is paid out only when the vendor confirms the repairs in writing."
        for i in range(30)
    ),
]


def _config(backend: str | None):
    return load_config(environ={"RETRIEVAL_NODE_EMBEDDING_BACKEND": backend} if backend else {})


def test_every_backend_is_accepted_by_the_config_and_the_store_manifest() -> None:
    """One list of backends: the config's allowed values and the manifest check follow EMBEDDING_BACKENDS."""
    assert set(get_args(RetrievalConfig.model_fields["embedding_backend"].annotation)) == {AUTO_BACKEND, *EMBEDDING_BACKENDS}
    assert _config("torch-bf16").retrieval.embedding_backend == "torch-bf16"
    keys = {b: model_identity(resolve_model_path(), b) for b in EMBEDDING_BACKENDS}
    assert len(set(keys.values())) == len(EMBEDDING_BACKENDS)
    assert keys["torch-bf16"].startswith("minilm-torch-bf16:") and keys["torch"].startswith("minilm:")


def test_bf16_vectors_agree_with_fp32_and_leave_the_fp32_backend_untouched(embedder: SentenceTransformerEmbedder) -> None:
    before = embedder.embed(TEXTS)
    bf16 = LazyEmbedder(backend="torch-bf16")
    got = bf16.embed(TEXTS)
    cos = np.sum(got * before, axis=1)
    # measured on 731 real chunks' windows: min 0.99995, mean 0.99998
    assert cos.min() >= 0.9995, cos
    assert got.tobytes() != before.tobytes()  # the products ran in bf16: not fp32 under another name
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    # both backends share one model object; the autocast is scoped to the bf16 calls
    assert embedder.embed(TEXTS).tobytes() == before.tobytes()
    # and a caller's own autocast does not reach the fp32 backend (its vectors are filed under the fp32 identity)
    import torch

    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert embedder.embed(TEXTS).tobytes() == before.tobytes()
    long = TEXTS[-1]
    assert bf16.window_spans(long, 200, 48) == embedder.window_spans(long, 200, 48)


def test_a_bf16_kernel_that_disagrees_with_fp32_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fault injected by raising the bar above any real cosine: the load must refuse, naming the fix."""
    monkeypatch.setattr(embedding, "_MODELS", {k: v for k, v in embedding._MODELS.items() if not k.startswith("torch-bf16")})
    monkeypatch.setattr(embedding, "_BF16_CHECK", 1.5)
    with pytest.raises(EmbeddingModelMissing, match="use embedding_backend: torch"):
        LazyEmbedder(backend="torch-bf16").embed(["builders' lien"])


def test_a_cpu_without_native_bf16_is_warned_about(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """Fault injected: the CPU feature probe answers no (the backend still runs, emulated)."""
    monkeypatch.setattr(embedding, "_MODELS", {k: v for k, v in embedding._MODELS.items() if not k.startswith("torch-bf16")})
    monkeypatch.setattr(embedding, "native_bf16", lambda: False)
    with caplog.at_level(logging.WARNING, logger="retrieval_node.embedding"):
        vec = LazyEmbedder(backend="torch-bf16").embed(["builders' lien"])
    assert vec.shape == (1, 384)
    assert "no native bf16" in caplog.text


def test_a_bf16_store_records_its_backend_serves_its_own_vectors_and_refuses_fp32(tmp_path: Path, make_chunk) -> None:
    home = tmp_path / "store"
    chunks = [make_chunk(t, deal_id=DEAL, document_id=f"{DEAL}/title.pdf", page=i + 1) for i, t in enumerate(TEXTS[:4])]
    config = _config("torch-bf16")
    with Store.open(home, config=config) as st:
        assert st.embedder.backend == "torch-bf16" and st.embedder.model_key.startswith("minilm-torch-bf16:")
        assert Ingestor(st).ingest([write_jsonl(tmp_path / "a.jsonl", chunks)]).ingested == 4
        from retrieval_node.query_cache import profile_query_texts

        text = profile_query_texts(config)[0]
        assert st.query_cache().get(text).tobytes() == st.embedder.embed([text])[0].tobytes()
        from retrieval_node.agent import RetrievalAgent

        agent = RetrievalAgent(st, trust=FULL_TRUST)
        try:
            package, _ = agent.retrieve_sync(agent.intent_for("investigator", deal_id=DEAL))
        finally:
            agent.close()
        assert any("claim of lien" in c.content for c in package.ordered_chunks)
    assert json.loads((home / MANIFEST).read_text())["embedding_backend"] == "torch-bf16"
    with pytest.raises(ConfigError, match="embedding_backend: torch-bf16"):
        Store.open(home, config=_config("torch"))
    torch_home = tmp_path / "fp32"
    Store.open(torch_home, config=_config("torch")).close()
    with pytest.raises(ConfigError, match="embedding_backend: torch"):
        Store.open(torch_home, config=config)


# --------------------------------------------------------------------------- embedding_backend: auto (the default)


def test_auto_is_the_default_and_gives_a_new_store_bf16_only_on_a_cpu_that_computes_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A new store under the default takes torch-bf16 where the CPU has native bf16, torch elsewhere; the choice is
    recorded in store.json and no model is loaded to make it. The CPU probe is faked both ways (says so) to state
    both branches on any machine."""
    assert _config(None).retrieval.embedding_backend == AUTO_BACKEND
    lazy = LazyEmbedder(backend=AUTO_BACKEND)  # an embedder of its own, outside a store: as for a new store
    assert lazy.backend == embedding.default_backend() and lazy.model_key == model_identity(resolve_model_path(), lazy.backend)
    for native, want in ((True, "torch-bf16"), (False, "torch")):
        monkeypatch.setattr(embedding, "native_bf16", lambda native=native: native)  # fake: the CPU's answer
        home = tmp_path / want
        with Store.open(home, config=_config(None)) as st:
            assert st.config.retrieval.embedding_backend == want == st.embedder.backend
            assert not st.embedder.loaded
            assert st.embedder.model_key == model_identity(resolve_model_path(), want)
        assert json.loads((home / MANIFEST).read_text())["embedding_backend"] == want


def test_auto_opens_every_store_with_the_backend_its_vectors_came_from(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                        embedder: SentenceTransformerEmbedder) -> None:
    """What the CPU would choose today never overrides what a store recorded: a torch store stays torch on a bf16
    CPU, a bf16 store stays bf16 elsewhere (and a store from before manifests is torch's). A named backend other
    than the recorded one is still refused; an embedder passed in decides a new store's backend and must match an
    existing store's."""
    fp32, bf16 = tmp_path / "fp32", tmp_path / "bf16"
    Store.open(fp32, config=_config("torch")).close()
    Store.open(bf16, config=_config("torch-bf16")).close()
    for native in (True, False):
        monkeypatch.setattr(embedding, "native_bf16", lambda native=native: native)  # fake: the CPU's answer
        for home, recorded in ((fp32, "torch"), (bf16, "torch-bf16")):
            with Store.open(home, config=_config(None)) as st:
                assert st.config.retrieval.embedding_backend == recorded == st.embedder.backend
    manifest = json.loads((fp32 / MANIFEST).read_text())
    del manifest["embedding_backend"]  # written before backends existed
    (fp32 / MANIFEST).write_text(json.dumps(manifest))
    with Store.open(fp32, config=_config(None)) as st:
        assert st.config.retrieval.embedding_backend == "torch"

    def no_question(*_a: object) -> bool:  # fault injected: an existing store must not ask the CPU (nor import torch)
        raise AssertionError("native_bf16 asked for an existing store")

    monkeypatch.setattr(embedding, "native_bf16", no_question)
    for home in (fp32, bf16):
        Store.open(home, config=_config(None)).close()
    with pytest.raises(ConfigError, match="embedding_backend: torch-bf16"):
        Store.open(bf16, config=_config("torch"))
    monkeypatch.setattr(embedding, "native_bf16", lambda: True)  # fake: a bf16 CPU; the passed-in fp32 embedder decides
    passed = tmp_path / "passed"
    with Store.open(passed, config=_config(None), embedder=embedder) as st:
        assert st.config.retrieval.embedding_backend == "torch"
    assert json.loads((passed / MANIFEST).read_text())["embedding_backend"] == "torch"
    with pytest.raises(ConfigError, match="runs embedding_backend 'torch' but this store's vectors come from 'torch-bf16'.*backend='torch-bf16'"):
        Store.open(bf16, config=_config(None), embedder=embedder)


def test_the_cpu_flags_read_without_torch_agree_with_torchs_own_probe() -> None:
    """native_bf16 reads /proc/cpuinfo (no torch import when a new store is opened); it must say what PyTorch's
    probes say on this machine."""
    import torch

    if not Path("/proc/cpuinfo").exists():
        pytest.skip("no /proc/cpuinfo: native_bf16 asks PyTorch itself")
    text = Path("/proc/cpuinfo").read_text()
    probe = getattr(torch.cpu, "_is_avx512_bf16_supported", None)
    if "amx_bf16" in text or probe is None:
        pytest.skip("AMX or no PyTorch probe: nothing to compare with")
    assert embedding.native_bf16.__wrapped__() == probe()
