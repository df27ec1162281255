"""LangGraph: a real StateGraph with the node and all four adapters on the bundled sample deal."""

from __future__ import annotations

from tests.conftest import FULL_TRUST

import json
from typing import Annotated, Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver

from retrieval_node.agent import RetrievalAgent
from retrieval_node.demo import AGENT_ORDER, SAMPLE_DEAL_ID, build_workflow, initial_state
from langgraph.graph import END, START, StateGraph

from retrieval_node.errors import IntentError, TrustRequired, UnknownAgentError
from retrieval_node.models import Stage
from retrieval_node.langchain_retriever import ConveyancingRetriever
from retrieval_node.node import AdapterRegistry, DealState, RetrievalNode, merge_dicts, package_of, summary_of


@pytest.fixture(scope="module")
def node(sample_store):
    return RetrievalNode(RetrievalAgent(sample_store, trust=FULL_TRUST))


def test_registry_finds_the_four_adapters(node):
    assert node.adapters.names() == ["condo", "investigator", "scribe", "tax"]
    with pytest.raises(UnknownAgentError, match="'zoning'"):
        node.adapters.get("zoning")


def test_workflow_runs_every_agent_and_keeps_package_references_in_state(node):
    app = build_workflow(node, checkpointer=InMemorySaver())
    final = app.invoke(initial_state(), {"configurable": {"thread_id": "t1"}})
    steps = sorted(final["package_refs"])
    assert [s.split("_", 1)[1] for s in steps] == AGENT_ORDER
    assert "context_packages" not in final or not final["context_packages"]  # a checkpointed run keeps references only
    with pytest.raises(KeyError, match="agent="):
        package_of(final, steps[0])
    for step in steps:
        pkg, summary = package_of(final, step, agent=node.agent), summary_of(final, step)
        assert pkg == node.package(final, step) and pkg.package_hash == final["package_refs"][step]["package_hash"]
        assert pkg.deal_id == SAMPLE_DEAL_ID
        assert final["audit_ids"][step] == summary.audit_id
        agent = step.split("_", 1)[1]
        assert pkg.total_tokens <= node.agent.config.agents[agent].max_tokens_budget
    inv = node.package(final, steps[0])
    assert "builders_lien" in inv.risk_summary
    assert final["findings"]["parties"]  # the review step carried parties forward for later agents


def test_interrupt_and_resume_through_sqlite_checkpointer(node, tmp_path):
    db = tmp_path / "ckpt.sqlite"
    thread = {"configurable": {"thread_id": "resume-1"}}
    with SqliteSaver.from_conn_string(str(db)) as saver:
        app = build_workflow(node, checkpointer=saver, interrupt_after=["retrieve"])
        state = app.invoke(initial_state(), thread)
        assert list(state["package_refs"]) == ["01_investigator"]
        first = state["package_refs"]["01_investigator"]
    # a new process would do this: a new saver on the same file, same thread id
    with SqliteSaver.from_conn_string(str(db)) as saver:
        app = build_workflow(node, checkpointer=saver)
        snapshot = app.get_state(thread)
        assert snapshot.values["package_refs"]["01_investigator"] == first
        final = app.invoke(None, thread)
        while set(final["package_refs"]) != {"01_investigator", "02_tax", "03_condo", "04_scribe"}:
            final = app.invoke(None, thread)
    assert final["package_refs"]["01_investigator"] == first
    assert node.package(final, "01_investigator").package_hash == first["package_hash"]


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


# --------------------------------------------------------------------------- RunnableConfig, JSON state, checkpoints

class RenamedState(DealState, total=False):
    """A host graph's state with the packages under another key."""

    pkgs: Annotated[dict[str, dict[str, Any]], merge_dicts]


def _one_step_graph(node, checkpointer=None, schema=DealState):
    graph = StateGraph(schema)
    graph.add_node("retrieve", node.as_runnable())
    graph.add_edge(START, "retrieve")
    graph.add_edge("retrieve", END)
    return graph.compile(checkpointer=checkpointer)


def _intent_of(node, state, step):
    return node.agent.audit.read_snapshot(state["audit_ids"][step])["intent"]


def test_configurable_budget_and_stage_change_the_run(node):
    app = _one_step_graph(node, InMemorySaver())
    start = {"deal_id": SAMPLE_DEAL_ID, "current_agent": "scribe", "current_step": "s"}
    plain = app.invoke(start, {"configurable": {"thread_id": "cfg-0"}})
    assert _intent_of(node, plain, "s")["max_tokens_budget"] == node.agent.config.agents["scribe"].max_tokens_budget
    small = app.invoke(start, {"configurable": {"thread_id": "cfg-1", "budget": 500}})
    assert _intent_of(node, small, "s")["max_tokens_budget"] == 500
    assert small["package_refs"]["s"]["total_tokens"] <= 500 < plain["package_refs"]["s"]["total_tokens"]
    # the config comes before the state, the state before the constructor
    both = app.invoke({**start, "budgets": {"scribe": 900}}, {"configurable": {"thread_id": "cfg-2", "budget": 700}})
    assert _intent_of(node, both, "s")["max_tokens_budget"] == 700
    state_only = app.invoke({**start, "budgets": {"scribe": 900}}, {"configurable": {"thread_id": "cfg-3"}})
    assert _intent_of(node, state_only, "s")["max_tokens_budget"] == 900
    built = RetrievalNode(node.agent, node.adapters, budget=800)
    assert _intent_of(node, built(start), "s")["max_tokens_budget"] == 800
    drafting = app.invoke({**start, "deal_stage": "DILIGENCE"}, {"configurable": {"thread_id": "cfg-4", "stage": "DRAFTING"}})
    assert _intent_of(node, drafting, "s")["stage"] == "DRAFTING"


def test_configurable_state_keys_and_full_package(node):
    app = _one_step_graph(node, InMemorySaver(), RenamedState)
    out = app.invoke({"deal_id": SAMPLE_DEAL_ID, "current_agent": "tax", "current_step": "s"},
                     {"configurable": {"thread_id": "keys", "include_package": True, "state_keys": {"context_packages": "pkgs"}}})
    assert out["pkgs"]["s"]["package_hash"] == out["package_refs"]["s"]["package_hash"]
    assert package_of(out, "s", key="pkgs") == node.package(out, "s")
    with pytest.raises(IntentError, match="state_keys"):
        node({"deal_id": SAMPLE_DEAL_ID, "current_agent": "tax"}, {"configurable": {"state_keys": {"nope": "x"}}})
    # no checkpointer, no config: the full package is in the update (nothing persists it)
    assert "context_packages" in node({"deal_id": SAMPLE_DEAL_ID, "current_agent": "tax", "current_step": "s"})


def test_trust_from_config_or_provider_narrows_and_never_widens(tiered):
    from tests.test_security import PUBLIC

    store, chunks = tiered
    agent = RetrievalAgent(store)
    start = {"deal_id": "2026-TEST-0001", "current_agent": "investigator", "current_step": "s"}
    wide = {"max_sensitivity": "privileged", "authenticated": True, "actor_id": "config-writer"}

    def levels(update):
        return {c["sensitivity"] for c in update["context_packages"]["s"]["ordered_chunks"] if not c["redacted"]}

    public = RetrievalNode(agent, trust=PUBLIC)
    assert levels(public(start, {"configurable": {"trust": wide}})) <= {"public"}
    assert levels(public(start, {"configurable": {"trust_provider": lambda state, config: wide}})) <= {"public"}
    full = RetrievalNode(agent, trust=FULL_TRUST)
    assert "privileged" in levels(full(start))
    assert levels(full(start, {"configurable": {"trust": PUBLIC.model_dump(mode="json")}})) <= {"public"}
    assert levels(full(start, {"configurable": {"trust_provider": lambda state, config: PUBLIC}})) <= {"public"}
    # config and state both narrow: the lower of the two wins
    assert levels(full({**start, "trust": PUBLIC.model_dump(mode="json")}, {"configurable": {"trust": wide}})) <= {"public"}
    with pytest.raises(TrustRequired, match="config 'trust'"):
        RetrievalNode(agent)(start, {"configurable": {"trust": wide}})
    # a package read back from its snapshot is read under the same narrowing: a public run cannot read a full one
    ref_only = RetrievalNode(agent, trust=FULL_TRUST, include_package=False)
    update = ref_only(start)
    assert "privileged" in {r.sensitivity.value for r in ref_only.package(update, "s").ordered_chunks}
    from retrieval_node.errors import AccessDenied

    with pytest.raises(AccessDenied):
        ref_only.package({**update, "trust": PUBLIC.model_dump(mode="json")}, "s")


def _latest_checkpoint_bytes(saver, thread):
    tup = saver.get_tuple({"configurable": {"thread_id": thread}})
    return len(saver.serde.dumps_typed(tup.checkpoint)[1])


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_checkpointed_state_is_json_without_serialisation_warnings(node, kind, tmp_path, caplog):
    """The whole workflow through a checkpointer, the trust in state as a dict: LangGraph's serde reports nothing
    (its listener sees every unregistered type, its log warning is printed once per process), and the state is JSON."""
    import contextlib
    import logging
    import warnings

    from langgraph.checkpoint.serde.event_hooks import register_serde_event_listener

    events: list[dict] = []
    unregister = register_serde_event_listener(events.append)
    thread = {"configurable": {"thread_id": f"json-{kind}"}}
    start = {**initial_state(), "trust": FULL_TRUST.model_dump(mode="json")}
    try:
        with warnings.catch_warnings(record=True) as caught, caplog.at_level(logging.WARNING):
            warnings.simplefilter("always")
            with contextlib.ExitStack() as stack:
                saver = InMemorySaver() if kind == "memory" else stack.enter_context(SqliteSaver.from_conn_string(str(tmp_path / "c.sqlite")))
                app = build_workflow(node, checkpointer=saver)
                final = app.invoke(start, thread)
                values = app.get_state(thread).values  # read back: deserialised from the checkpoint
                history = list(app.get_state_history(thread))
        assert events == [] and [str(w.message) for w in caught if "serial" in str(w.message).lower()] == []
        assert [r.getMessage() for r in caplog.records if "unregistered" in r.getMessage() or "Blocked" in r.getMessage()] == []
        assert len(history) > 4 and sorted(values["package_refs"]) == sorted(final["package_refs"])
        assert json.loads(json.dumps(values)) == values  # plain JSON all the way down
        # control: a TrustContext object in state is what LangGraph reports (the listener above is live)
        app2 = build_workflow(node, checkpointer=InMemorySaver())
        app2.invoke({**initial_state(agents=["tax"]), "trust": FULL_TRUST}, {"configurable": {"thread_id": "obj"}})
        app2.get_state({"configurable": {"thread_id": "obj"}})
        assert any(e["name"] == "TrustContext" for e in events)
    finally:
        unregister()


def test_checkpoints_stay_small_with_package_references(node, capsys):
    """Four steps of the sample workflow: the last checkpoint with references only vs with every package in state."""
    sizes = {}
    for include in (False, True):
        saver = InMemorySaver()
        app = build_workflow(RetrievalNode(node.agent, node.adapters, trust=FULL_TRUST, include_package=include), checkpointer=saver)
        app.invoke(initial_state(), {"configurable": {"thread_id": f"size-{include}"}})
        sizes[include] = _latest_checkpoint_bytes(saver, f"size-{include}")
    with capsys.disabled():
        print(f"\nlast checkpoint after four steps: {sizes[False]} bytes with references, {sizes[True]} with full packages")
    assert sizes[False] * 3 < sizes[True]


# --------------------------------------------------------------------------- questions from state (issue 19)

RENTAL_QUESTION = "In the condo bylaws, may an owner rent out the unit?"
BYLAWS = f"{SAMPLE_DEAL_ID}/condo-bylaws.pdf"


def test_question_in_state_is_asked_by_its_step_under_the_step_agents_contract(node):
    """``questions[step]`` turns a step into a question: ranked for it (the document it names, the clause it asks
    about), under the step agent's contract, budget from the config, audited, referenced in state, replayable."""
    app = _one_step_graph(node, InMemorySaver())
    start = {"deal_id": SAMPLE_DEAL_ID, "current_agent": "condo", "current_step": "q1", "questions": {"q1": RENTAL_QUESTION}}
    out = app.invoke(start, {"configurable": {"thread_id": "question-1", "budget": 900}})
    ref, summary = out["package_refs"]["q1"], summary_of(out, "q1")
    assert ref["intent_id"] == "question_v1" and ref["agent_id"] == node.agent.config.agents["condo"].agent_id
    package = node.package(out, "q1")
    assert 0 < package.total_tokens <= 900 and {r.document_id for r in package.ordered_chunks} == {BYLAWS}
    assert "lease" in package.ordered_chunks[0].content.lower()  # the bylaw on leasing, not the bylaws' first page
    snap = node.agent.audit.read_snapshot(out["audit_ids"]["q1"])
    assert snap["intent"]["kind"] == "question" and snap["intent"]["query_text"] == RENTAL_QUESTION
    assert snap["intent"]["max_tokens_budget"] == 900 and snap["contract"]["agent"] == "condo"
    assert out["audit_ids"]["q1"] == summary.audit_id == ref["audit_id"]
    replayed, replayed_summary = node.agent.replay(summary.audit_id)
    assert replayed == package and replayed.package_hash == ref["package_hash"] and replayed_summary == summary
    # the same question without a budget anywhere: the step agent's profile budget
    plain = node(start)
    assert _intent_of(node, plain, "q1")["max_tokens_budget"] == node.agent.config.agents["condo"].max_tokens_budget
    # a question keyed by another step changes nothing: this step runs its profile
    other = node({**start, "current_step": "q2"})
    assert other["package_refs"]["q2"]["intent_id"] == node.agent.config.agents["condo"].intent_id


def test_question_step_keeps_the_step_agents_contract_walls(node):
    """The investigator asking about the lender's instructions: its contract forbids them, so the question finds none."""
    out = node({"deal_id": SAMPLE_DEAL_ID, "current_agent": "investigator", "current_step": "q",
                "questions": {"q": "In the lender's instructions, what title requirements apply?"}})
    package = package_of(out, "q")
    assert package.ordered_chunks and package.agent_id == node.agent.config.agents["investigator"].agent_id
    assert "LENDER_INSTRUCTIONS" not in {r.document_role.value for r in package.ordered_chunks}
    assert node.agent.audit.read_snapshot(out["audit_ids"]["q"])["contract"]["agent"] == "investigator"


def test_question_step_never_widens_trust(tiered):
    from retrieval_node.errors import AccessDenied
    from tests.test_security import PUBLIC

    store, _chunks = tiered
    agent = RetrievalAgent(store)
    start = {"deal_id": "2026-TEST-0001", "current_agent": "investigator", "current_step": "q",
             "questions": {"q": "Is there a builders' lien, and what does the solicitor's note advise?"}}
    wide = {"max_sensitivity": "privileged", "authenticated": True, "actor_id": "state-writer"}

    def levels(update):
        return {c["sensitivity"] for c in update["context_packages"]["q"]["ordered_chunks"] if not c["redacted"]}

    assert "privileged" in levels(RetrievalNode(agent, trust=FULL_TRUST)(start))  # control: the full node reads it
    public = RetrievalNode(agent, trust=PUBLIC)
    for update in (public({**start, "trust": wide}), public(start, {"configurable": {"trust": wide}}),
                   public(start, {"configurable": {"trust_provider": lambda state, config: wide}})):
        assert update["package_refs"]["q"]["intent_id"] == "question_v1" and levels(update) <= {"public"}
    with pytest.raises(TrustRequired, match="graph state key 'trust'"):
        RetrievalNode(agent)({**start, "trust": wide})
    # a node bound to another agent cannot have its question asked as this step's agent
    tax_bound = FULL_TRUST.model_copy(update={"agent_id": "tax_r1"})
    with pytest.raises(AccessDenied, match="tax_r1"):
        RetrievalNode(agent, trust=tax_bound)(start)


@pytest.mark.parametrize("bad", [42, "", "   ", ["Is there a lien?"], {"text": "Is there a lien?"}])
def test_question_that_is_not_a_non_empty_string_is_a_clear_error(node, bad):
    start = {"deal_id": SAMPLE_DEAL_ID, "current_agent": "tax", "current_step": "s"}
    with pytest.raises(IntentError, match=r"'questions'.*'s'.*non-empty string"):
        node({**start, "questions": {"s": bad}})
    with pytest.raises(IntentError, match=r"'asks'.*'s'"):
        node({**start, "asks": {"s": bad}}, {"configurable": {"state_keys": {"questions": "asks"}}})


def test_questions_key_that_is_not_a_mapping_is_a_clear_error(node):
    with pytest.raises(IntentError, match=r"'questions' maps step names.*str"):
        node({"deal_id": SAMPLE_DEAL_ID, "current_agent": "tax", "current_step": "s", "questions": "Are there tax arrears?"})


async def _aask(node, state):
    return await node.ainvoke(state)


def test_async_question_step_matches_sync(node):
    import asyncio

    state = {"deal_id": SAMPLE_DEAL_ID, "current_agent": "tax", "current_step": "s", "questions": {"s": "Are there tax arrears?"}}
    a, b = asyncio.run(_aask(node, state)), node(state)
    assert a["package_refs"]["s"]["intent_id"] == "question_v1"
    assert a["package_refs"]["s"]["package_hash"] == b["package_refs"]["s"]["package_hash"]


def test_question_step_refuses_a_stage_the_step_agents_profile_does_not_run_in(node):
    """A profile step refuses a stage its agent's profile does not list (``stages``); a question step of that agent
    refuses it the same way, with the same error, before anything is retrieved (a question is no way round it)."""
    agents = node.agent.config.agents
    original = agents["tax"]
    agents["tax"] = original.model_copy(update={"stages": [Stage.DILIGENCE]})
    try:
        start = {"deal_id": SAMPLE_DEAL_ID, "current_agent": "tax", "current_step": "s", "deal_stage": "CLOSING"}
        with pytest.raises(IntentError, match=r"agent 'tax' does not run in stage CLOSING") as profile_refusal:
            node(start)
        with pytest.raises(IntentError, match=r"agent 'tax' does not run in stage CLOSING") as question_refusal:
            node({**start, "questions": {"s": "Are there tax arrears?"}})
        assert str(question_refusal.value) == str(profile_refusal.value)
        with pytest.raises(IntentError, match=r"does not run in stage CLOSING"):  # the stage from the config as well
            node({**start, "deal_stage": "DILIGENCE", "questions": {"s": "Are there tax arrears?"}}, {"configurable": {"stage": "CLOSING"}})
        # in a stage it runs in, the question is asked
        ok = node({**start, "deal_stage": "DILIGENCE", "questions": {"s": "Are there tax arrears?"}})
        assert ok["package_refs"]["s"]["intent_id"] == "question_v1"
    finally:
        agents["tax"] = original
