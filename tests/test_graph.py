"""LangGraph: a real StateGraph with the node and all four adapters on the bundled sample deal."""

from __future__ import annotations

from tests.conftest import FULL_TRUST

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver

from retrieval_node.agent import RetrievalAgent
from retrieval_node.demo import AGENT_ORDER, SAMPLE_DEAL_ID, build_workflow, initial_state
from retrieval_node.errors import IntentError, UnknownAgentError
from retrieval_node.langchain_retriever import ConveyancingRetriever
from retrieval_node.node import AdapterRegistry, RetrievalNode, package_of, summary_of


@pytest.fixture(scope="module")
def node(sample_store):
    return RetrievalNode(RetrievalAgent(sample_store, trust=FULL_TRUST))


def test_registry_finds_the_four_adapters(node):
    assert node.adapters.names() == ["condo", "investigator", "scribe", "tax"]
    with pytest.raises(UnknownAgentError, match="'zoning'"):
        node.adapters.get("zoning")


def test_workflow_runs_every_agent_and_keeps_packages_in_state(node):
    app = build_workflow(node, checkpointer=InMemorySaver())
    final = app.invoke(initial_state(), {"configurable": {"thread_id": "t1"}})
    steps = sorted(final["context_packages"])
    assert [s.split("_", 1)[1] for s in steps] == AGENT_ORDER
    for step in steps:
        pkg, summary = package_of(final, step), summary_of(final, step)
        assert pkg.deal_id == SAMPLE_DEAL_ID
        assert final["audit_ids"][step] == summary.audit_id
        agent = step.split("_", 1)[1]
        assert pkg.total_tokens <= node.agent.config.agents[agent].max_tokens_budget
    inv = package_of(final, steps[0])
    assert "builders_lien" in inv.risk_summary
    assert final["findings"]["parties"]  # the review step carried parties forward for later agents


def test_interrupt_and_resume_through_sqlite_checkpointer(node, tmp_path):
    db = tmp_path / "ckpt.sqlite"
    thread = {"configurable": {"thread_id": "resume-1"}}
    with SqliteSaver.from_conn_string(str(db)) as saver:
        app = build_workflow(node, checkpointer=saver, interrupt_after=["retrieve"])
        state = app.invoke(initial_state(), thread)
        assert list(state["context_packages"]) == ["01_investigator"]
        first = state["context_packages"]["01_investigator"]
    # a new process would do this: a new saver on the same file, same thread id
    with SqliteSaver.from_conn_string(str(db)) as saver:
        app = build_workflow(node, checkpointer=saver)
        snapshot = app.get_state(thread)
        assert snapshot.values["context_packages"]["01_investigator"] == first
        final = app.invoke(None, thread)
        while set(final["context_packages"]) != {"01_investigator", "02_tax", "03_condo", "04_scribe"}:
            final = app.invoke(None, thread)
    assert final["context_packages"]["01_investigator"] == first
    assert package_of(final, "01_investigator").package_hash == first["package_hash"]


def test_state_without_deal_or_with_unknown_agent_fails_clearly(node):
    with pytest.raises(IntentError, match="deal_id"):
        node({"current_agent": "investigator", "current_step": "x"})
    with pytest.raises(UnknownAgentError, match="'surveyor'"):
        node({"deal_id": SAMPLE_DEAL_ID, "current_agent": "surveyor"})
    with pytest.raises(IntentError, match="current_agent"):
        node({"deal_id": SAMPLE_DEAL_ID})


async def _arun(node):
    return await node.ainvoke({"deal_id": SAMPLE_DEAL_ID, "current_agent": "tax", "current_step": "s"})


def test_async_path_matches_sync(node):
    import asyncio

    a = asyncio.run(_arun(node))
    b = node({"deal_id": SAMPLE_DEAL_ID, "current_agent": "tax", "current_step": "s"})
    assert a["context_packages"]["s"]["package_hash"] == b["context_packages"]["s"]["package_hash"]


def test_adapter_sharpens_query_from_state(node):
    reg = node.adapters
    plain = reg.build_intent("condo", {"deal_id": SAMPLE_DEAL_ID})
    sharp = reg.build_intent("condo", {"deal_id": SAMPLE_DEAL_ID, "findings": {"condo_corporation": "Condominium Corporation No. 0712345"}})
    assert "0712345" in sharp.query_text and "0712345" not in plain.query_text
    assert sharp.intent_id == "condo_reserve_fund_health_v1" and sharp.max_tokens_budget == node.agent.config.agents["condo"].max_tokens_budget


def test_langchain_retriever_returns_documents_with_provenance(sample_store):
    r = ConveyancingRetriever(agent=RetrievalAgent(sample_store, trust=FULL_TRUST), agent_name="condo", deal_id=SAMPLE_DEAL_ID)
    docs = r.invoke("special levy for building envelope repairs")
    assert docs and all(d.metadata["deal_id"] == SAMPLE_DEAL_ID for d in docs)
    assert {"chunk_id", "page_range", "content_hash", "audit_id", "citation"} <= set(docs[0].metadata)
    assert any("levy" in d.page_content.lower() for d in docs)


def test_registry_rejects_adapter_without_profile(node_config):
    class Zoning:
        name = "zoning"

        def build_intent(self, state, profile):
            raise AssertionError

    with pytest.raises(UnknownAgentError, match="zoning"):
        AdapterRegistry(node_config, [Zoning()])
