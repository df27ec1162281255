"""Shared fixtures: real MiniLM, real Qdrant (edge + local mode), real Mem0, real tiktoken."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from retrieval_node.config import NodeConfig, load_config
from retrieval_node.embedding import SentenceTransformerEmbedder
from retrieval_node.models import DocumentChunk, TrustContext
from retrieval_node.store import Store
from retrieval_node.tokens import TiktokenCounter

REPO = Path(__file__).resolve().parent.parent
#: The trust the test suite retrieves with: an authenticated reviewer who may read everything.
FULL_TRUST = TrustContext(max_sensitivity="privileged", authenticated=True, actor_id="test:suite")
SAMPLE_DATA = REPO / "retrieval_node" / "sample_data"


@pytest.fixture(scope="session")
def embedder() -> SentenceTransformerEmbedder:
    return SentenceTransformerEmbedder.load()


@pytest.fixture(scope="session")
def counter() -> TiktokenCounter:
    return TiktokenCounter()


@pytest.fixture(scope="session")
def node_config() -> NodeConfig:
    return load_config()


@pytest.fixture()
def store(tmp_path: Path, embedder: SentenceTransformerEmbedder, node_config: NodeConfig) -> Iterator[Store]:
    st = Store.open(tmp_path / "store", config=node_config, embedder=embedder)
    try:
        yield st
    finally:
        st.close()


@pytest.fixture(scope="session")
def sample_store(tmp_path_factory, embedder, node_config) -> Iterator[Store]:
    """A store with the bundled sample deal, clean deal, hard deal and the pattern memories ingested once."""
    from retrieval_node.ingest import Ingestor, add_patterns, read_patterns

    st = Store.open(tmp_path_factory.mktemp("sample") / "store", config=node_config, embedder=embedder)
    report = Ingestor(st).ingest(sorted(SAMPLE_DATA.glob("*/chunks.jsonl")))
    assert report.rejected == [], report.rejected
    patterns, bad = read_patterns(SAMPLE_DATA / "patterns.jsonl")
    assert bad == []
    add_patterns(st, patterns)
    try:
        yield st
    finally:
        st.close()


@pytest.fixture()
def make_chunk(counter: TiktokenCounter):
    def _make(
        content: str,
        *,
        deal_id: str = "2026-TEST-0001",
        document_id: str | None = None,
        role: str = "TITLE_SEARCH",
        section: str = "INSTRUMENTS_REGISTER",
        page: int = 1,
        page_end: int | None = None,
        metadata: dict | None = None,
        ocr_confidence: float = 0.95,
    ) -> DocumentChunk:
        return DocumentChunk.build(
            deal_id=deal_id,
            document_id=document_id or f"{deal_id}/title-search.pdf",
            document_role=role,
            page_start=page,
            page_end=page_end or page,
            section_type=section,
            content=content,
            token_count=counter.count(content),
            ocr_confidence=ocr_confidence,
            metadata=metadata or {},
        )

    return _make


def write_jsonl(path: Path, chunks: list[DocumentChunk], extra_lines: list[str | bytes] = ()) -> Path:
    with open(path, "wb") as fh:
        for c in chunks:
            fh.write(c.model_dump_json().encode() + b"\n")
        for line in extra_lines:
            fh.write((line if isinstance(line, bytes) else line.encode()) + b"\n")
    return path


@pytest.fixture()
def tiered(store, make_chunk, tmp_path):
    """A deal of three tiers: a public title page, a confidential lien, a privileged solicitor note."""
    from retrieval_node.ingest import Ingestor

    chunks = [
        make_chunk("Certificate of title. Registered owner: Dana Whitford.", section="TITLE_SUMMARY", page=1, metadata={"sensitivity": "public"}),
        make_chunk("252 114 567 2025/11/03 BUILDERS' LIEN by Bow River Drywall Ltd. for $48,260.00.", page=2, metadata={"sensitivity": "confidential"}),
        make_chunk("Privileged solicitor note: client may dispute lien 252 114 567; advice dated 2026/01/09.", page=3, metadata={"sensitivity": "privileged"}),
    ]
    Ingestor(store).ingest([write_jsonl(tmp_path / "t.jsonl", chunks)])
    return store, chunks
