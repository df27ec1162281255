"""Retrieval contracts: forbidden requests are refused before any backend is touched; packages stay inside."""

from __future__ import annotations

from tests.conftest import FULL_TRUST, write_jsonl

import pytest

from retrieval_node.agent import RetrievalAgent
from retrieval_node.config import load_config
from retrieval_node.contracts import ContractSet, compile_plan, narrow_to_contract
from retrieval_node.errors import ContractViolation
from retrieval_node.ingest import Ingestor
from retrieval_node.models import RetrievalIntent
from retrieval_node.node import RetrievalNode
from retrieval_node.store import Store

SAMPLE = "2026-ACME-0042"


@pytest.fixture(scope="module")
def agent(sample_store):
    return RetrievalAgent(sample_store, trust=FULL_TRUST)


def _with(intent: RetrievalIntent, **change) -> RetrievalIntent:
    return RetrievalIntent.model_validate(intent.model_dump() | change)


def test_tax_agent_never_sees_lender_instructions(agent, sample_store):
    base = agent.intent_for("tax", deal_id=SAMPLE)
    calls = sample_store.registry.stats.calls
    with pytest.raises(ContractViolation, match="LENDER_INSTRUCTIONS"):
        agent.retrieve_sync(_with(base, document_roles=["TAX_CERTIFICATE", "LENDER_INSTRUCTIONS"]))
    assert sample_store.registry.stats.calls == calls  # refused before Mem0 (or anything else) was asked
    pkg, _ = agent.retrieve_sync(base)
    assert all(r.document_role.value != "LENDER_INSTRUCTIONS" for r in pkg.ordered_chunks)


def test_drafting_scribe_gets_no_raw_board_minutes(agent):
    base = agent.intent_for("scribe", deal_id=SAMPLE, stage="DRAFTING")
    with pytest.raises(ContractViolation, match="CONDO_MINUTES"):
        agent.retrieve_sync(_with(base, target_section_types=["GENERAL", "CONDO_MINUTES"]))
    pkg, summary = agent.retrieve_sync(base)
    assert all(r.section_type.value != "CONDO_MINUTES" for r in pkg.ordered_chunks)
    snap = agent.audit.read_snapshot(summary.audit_id)
    assert "CONDO_MINUTES" in snap["contract"]["forbidden_sections"]
    assert all(c["section_type"] != "CONDO_MINUTES" for c in snap["candidates"])
    # in diligence the same agent may read minutes
    assert agent.retrieve_sync(_with(base, stage="DILIGENCE", target_section_types=["GENERAL", "CONDO_MINUTES"]))


def test_profile_defaults_are_narrowed_to_the_stage_contract(agent, node_config):
    """The scribe's profile lists minutes (the levy the owners approved); its drafting-stage intent does not ask for them."""
    profile = node_config.agents["scribe"]
    assert "CONDO_MINUTES" in profile.target_section_types
    drafting = agent.intent_for("scribe", deal_id=SAMPLE, stage="DRAFTING")
    assert "CONDO_MINUTES" not in drafting.target_section_types
    assert set(drafting.target_section_types) == set(profile.target_section_types) - {"CONDO_MINUTES"}
    diligence = agent.intent_for("scribe", deal_id=SAMPLE, stage="DILIGENCE")
    assert set(diligence.target_section_types) == set(profile.target_section_types)
    # a section the caller (or an adapter) added is not silently dropped: the contract still refuses it
    extra = _with(drafting, target_section_types=[*drafting.target_section_types, "RESERVE_FUND_REPORT"])
    assert narrow_to_contract(extra, "scribe", node_config.contracts, profile_sections=profile.target_section_types) == extra
    with pytest.raises(ContractViolation, match="RESERVE_FUND_REPORT"):
        agent.retrieve_sync(extra)


def test_graph_node_narrows_the_adapters_intent(agent):
    node = RetrievalNode(agent, trust=FULL_TRUST)
    _, intent = node.build_intent({"deal_id": SAMPLE, "current_agent": "scribe", "deal_stage": "DRAFTING"})
    assert "CONDO_MINUTES" not in intent.target_section_types and "SPECIAL_RESOLUTIONS" in intent.target_section_types
    update = node({"deal_id": SAMPLE, "current_agent": "scribe", "deal_stage": "DRAFTING"})
    chunks = next(iter(update["context_packages"].values()))["ordered_chunks"]
    assert chunks and all(c["section_type"] != "CONDO_MINUTES" for c in chunks)


def test_sections_outside_the_contract_and_unknown_agents_are_refused(agent):
    base = agent.intent_for("investigator", deal_id=SAMPLE)
    with pytest.raises(ContractViolation, match="outside the contract"):
        agent.retrieve_sync(_with(base, target_section_types=["RESERVE_FUND_REPORT"]))
    with pytest.raises(ContractViolation, match="no retrieval contract"):
        agent.retrieve_sync(_with(base, agent_id="freelancer_x"))


def test_plan_is_finite_and_typed(node_config):
    intent = RetrievalIntent(intent_id="title_risk_scan_v1", deal_id="D", agent_id="investigator_r1", query_text="q",
                             target_section_types=["INSTRUMENTS_REGISTER"], risk_profile="HIGH_RISK", max_tokens_budget=100,
                             required_structural_zones=["caveats_section"])
    plan = compile_plan(intent, "investigator", node_config.contracts)
    assert [q.type for q in plan.queries] == ["structural_filter", "semantic_search", "lexical_search", "risk_scan", "zone_lookup", "broadened_search"]
    scan = plan.query("risk_scan")
    assert "GENERAL" in scan.section_types and "CONDO_MINUTES" not in scan.section_types and "LENDER_INSTRUCTIONS" not in (scan.document_roles or [])
    assert all(q.deal_id == "D" for q in plan.queries)
    assert plan.allows("CAVEATS_SECTION", "TITLE_SEARCH") and not plan.allows("CAVEATS_SECTION", "LENDER_INSTRUCTIONS")
    assert not plan.allows("CONDO_MINUTES", "TITLE_SEARCH")


def test_contract_without_vectors_uses_structure_only(sample_store, node_config):
    contracts = ContractSet.model_validate({"contracts": {**{k: v.model_dump() for k, v in node_config.contracts.contracts.items()},
                                                          "investigator": node_config.contracts.contracts["investigator"].model_dump() | {"vector_search": False}}})
    agent = RetrievalAgent(sample_store, config=node_config.model_copy(update={"contracts": contracts}), trust=FULL_TRUST)
    pkg, summary = agent.retrieve_sync(agent.intent_for("investigator", deal_id=SAMPLE))
    snap = agent.audit.read_snapshot(summary.audit_id)
    assert "semantic_search" not in [q["type"] for q in snap["contract"]["queries"]]
    assert all(c["terms"]["dense"] == 0.0 for c in snap["candidates"])
    assert "builders_lien" in summary.risk_distribution


def test_contract_config_rejects_contradictions():
    with pytest.raises(ValueError, match="both allowed and forbidden"):
        ContractSet.model_validate({"contracts": {"x": {"allowed_sections": ["GENERAL"], "forbidden_sections": ["GENERAL"]}}})
    assert load_config().contracts is not None


def test_stage0_labels_are_hints_and_the_contract_is_the_wall(tmp_path, embedder, make_chunk):
    """A title instrument Stage 0 put on a page labelled GENERAL (no zones), in the title search or in a loose copy,
    reaches the investigator when it carries a material risk; a plain GENERAL page does not crowd in; a page of a
    role or section the contract forbids never reaches it, whatever it says."""
    deal = "2026-LBL-0001"
    pages = {
        "title": make_chunk("CERTIFICATE OF TITLE. Registered owner: Ada Kowalczyk. Estate: fee simple.", deal_id=deal, section="TITLE_SUMMARY", page=1),
        "register": make_chunk("172 200 310 2017/06/11 MORTGAGE to First Prairie Bank, $310,000.", deal_id=deal, page=2),
        "mislabelled": make_chunk("Registration 242 118 004 2024/05/02 CAVEAT re: lien for unpaid condominium contributions, "
                                  "caveator Condominium Corporation No. 771 0042, $6,180.00.", deal_id=deal, section="GENERAL", page=3),
        "copy": make_chunk("Copy of registered STATEMENT OF LIEN 252 009 731 under the Prompt Payment and Construction Lien Act, "
                           "claimant Tamarack Framing Ltd., $22,400.00.", deal_id=deal, section="GENERAL", role="OTHER", page=1,
                           document_id=f"{deal}/lien-copy.pdf"),
        "plain": make_chunk("Search requested by Halvorsen LLP. Fees paid by cheque.", deal_id=deal, section="GENERAL", page=4),
        "lender": make_chunk("Lender instructions: a writ of enforcement 232 555 010 for $12,400 must be discharged before funding.",
                             deal_id=deal, section="GENERAL", role="LENDER_INSTRUCTIONS", page=1, document_id=f"{deal}/lender.pdf"),
        "minutes": make_chunk("Board minutes: the caveat 242 118 004 for the owner's arrears of $6,180 stays registered.",
                              deal_id=deal, section="CONDO_MINUTES", role="TITLE_SEARCH", page=5),
    }
    with Store.open(tmp_path / "s", embedder=embedder) as store:
        Ingestor(store).ingest([write_jsonl(tmp_path / "c.jsonl", list(pages.values()))])
        agent = RetrievalAgent(store, trust=FULL_TRUST)
        pkg, summary = agent.retrieve_sync(agent.intent_for("investigator", deal_id=deal))
        got = {r.chunk_id for r in pkg.ordered_chunks}
        assert pages["mislabelled"].chunk_id in got and pages["copy"].chunk_id in got
        assert {m.chunk_id for m in summary.material_risks} >= {pages["mislabelled"].chunk_id, pages["copy"].chunk_id}
        assert pages["plain"].chunk_id not in got  # a label is a preference: plain pages outside the targets stay out
        assert pages["lender"].chunk_id not in got and pages["minutes"].chunk_id not in got  # the contract is the wall
        snap = agent.audit.read_snapshot(summary.audit_id)
        considered = {c["chunk_id"] for c in snap["candidates"]}
        assert pages["lender"].chunk_id not in considered and pages["minutes"].chunk_id not in considered
