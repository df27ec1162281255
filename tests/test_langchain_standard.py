"""LangChain's standard retriever tests (``langchain-tests``) on a real store holding the bundled sample deal,
plus what they do not check: ``k`` under the budget, refused arguments, the async path."""

from __future__ import annotations

import asyncio

import pytest
from langchain_tests.integration_tests import RetrieversIntegrationTests

from retrieval_node import ConveyancingRetriever, RetrievalAgent
from retrieval_node.demo import SAMPLE_DEAL_ID

from conftest import FULL_TRUST


@pytest.fixture(scope="module")
def condo_agent(sample_store):
    agent = RetrievalAgent(sample_store, trust=FULL_TRUST)
    yield agent
    agent.close()


class TestConveyancingRetrieverStandard(RetrieversIntegrationTests):
    @pytest.fixture(autouse=True)
    def _agent(self, condo_agent):
        self._ra = condo_agent

    @property
    def retriever_constructor(self) -> type[ConveyancingRetriever]:
        return ConveyancingRetriever

    @property
    def retriever_constructor_params(self) -> dict:
        return {"agent": self._ra, "agent_name": "condo", "deal_id": SAMPLE_DEAL_ID}

    @property
    def retriever_query_example(self) -> str:
        return "special levy for parkade membrane repairs"


def test_k_keeps_the_strongest_chunks_within_the_budget(condo_agent):
    full = ConveyancingRetriever(agent=condo_agent, agent_name="condo", deal_id=SAMPLE_DEAL_ID, budget=3000)
    docs = full.invoke("special levy")
    capped = full.invoke("special levy", k=2)
    assert len(docs) > 2 and len(capped) == 2
    assert {d.metadata["package_hash"] for d in docs + capped} == {docs[0].metadata["package_hash"]}  # same package
    snapshot = condo_agent.audit.read_snapshot(capped[0].metadata["audit_id"])
    strength = {row["chunk_id"]: (row["terms"]["risk"], row["terms"]["combined"]) for row in snapshot["selected"]}
    kept = {d.metadata["chunk_id"] for d in capped}
    assert min(strength[c] for c in kept) >= max(strength[d.metadata["chunk_id"]] for d in docs if d.metadata["chunk_id"] not in kept)
    citations = [int(d.metadata["citation"][1:]) for d in capped]
    assert citations == sorted(citations)  # reading order kept, citation ids as in the package


def test_unknown_and_invalid_arguments_are_refused(condo_agent):
    r = ConveyancingRetriever(agent=condo_agent, agent_name="condo", deal_id=SAMPLE_DEAL_ID)
    with pytest.raises(TypeError, match="unknown argument.*top_k.*accepted: k, stage, budget"):
        r.invoke("special levy", top_k=3)
    with pytest.raises(ValueError, match="k"):
        r.invoke("special levy", k=0)
    with pytest.raises(ValueError):
        ConveyancingRetriever(agent=condo_agent, agent_name="condo", deal_id=SAMPLE_DEAL_ID, kk=3)


def test_ainvoke_runs_the_async_path_and_matches_invoke(condo_agent):
    r = ConveyancingRetriever(agent=condo_agent, agent_name="condo", deal_id=SAMPLE_DEAL_ID, k=3)
    sync_docs = r.invoke("reserve fund study")
    async_docs = asyncio.run(r.ainvoke("reserve fund study", stage="CLOSING"))
    assert "_aget_relevant_documents" in ConveyancingRetriever.__dict__  # its own async path, not LangChain's thread fallback
    assert len(async_docs) == 3
    assert [d.metadata["chunk_id"] for d in async_docs] == [d.metadata["chunk_id"] for d in asyncio.run(r.ainvoke("reserve fund study", stage="CLOSING"))]
    assert len(sync_docs) == 3
