"""Question intents (issue 19): RetrievalAgent.ask over a hand-written deal of several documents.

Real MiniLM, Qdrant, Mem0 and tiktoken; the deal's text is written for these tests.
"""

from __future__ import annotations

import contextlib
import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retrieval_node.agent import RetrievalAgent
from retrieval_node.config import Glossary, GlossaryConcept
from retrieval_node.errors import AccessDenied
from retrieval_node.models import QuestionIntent, TrustContext, sensitivity_level
from retrieval_node.question import QUESTIONS_AGENT, match_concepts, parse_question
from retrieval_node.routing import DocumentDescription, DocumentRouter, split_hint

from tests.conftest import FULL_TRUST, write_jsonl

DEAL = "2026-ASK-0001"
PURCHASE = f"{DEAL}/purchase_contract.pdf"
LENDER = f"{DEAL}/lender_instructions.pdf"
STUDY_2024 = f"{DEAL}/reserve_fund_study_2024.pdf"
STUDY_2021 = f"{DEAL}/reserve_fund_study_2021.pdf"
BYLAWS = f"{DEAL}/condo_bylaws.pdf"
TITLE = f"{DEAL}/title_search.pdf"


@pytest.fixture()
def deal(store, make_chunk, tmp_path):
    """Six documents; the lender's instructions carry one privileged page."""
    from retrieval_node.ingest import Ingestor

    def doc(document_id, role, section, pages, **meta):
        return [make_chunk(text, deal_id=DEAL, document_id=document_id, role=role, section=section, page=i, metadata=dict(meta))
                for i, text in enumerate(pages, start=1)]

    chunks = (
        doc(PURCHASE, "PURCHASE_AGREEMENT", "GENERAL", [
            "Residential Purchase Contract between Wendell Harlow (Seller) and Priya Quince (Buyer) for Unit 1204, 88 Larch Street.",
            "The Buyer shall pay a deposit of $25,000 to the listing brokerage within two Banking Days of acceptance, held in trust.",
            "Completion Day is June 30, 2026; vacant possession and keys are delivered to the Buyer at noon on that day.",
        ])
        + doc(LENDER, "LENDER_INSTRUCTIONS", "GENERAL", [
            "Mortgage instructions from Northgate Credit Union to the Buyer's solicitor.",
            "The lender will deposit the mortgage advance into the solicitor's trust account two business days before closing.",
            "Funds are released only once title insurance is bound and the discharge of the prior mortgage is undertaken.",
        ])
        + [make_chunk("Privileged: counsel's note on the lender's underwriting exception for this borrower.", deal_id=DEAL, document_id=LENDER,
                      role="LENDER_INSTRUCTIONS", section="GENERAL", page=4, metadata={"sensitivity": "privileged"})]
        + doc(STUDY_2024, "CONDO_DOCS", "RESERVE_FUND_REPORT", [
            "Reserve Fund Study prepared in 2024 for Larch Street Condominium Corporation.",
            "The 2024 study recommends raising annual reserve contributions to $310,000 to fund roof and elevator replacement.",
        ], created_at="2024-03-01T00:00:00+00:00")
        + doc(STUDY_2021, "CONDO_DOCS", "RESERVE_FUND_REPORT", [
            "Reserve Fund Study prepared in 2021 for Larch Street Condominium Corporation.",
            "The 2021 study found annual reserve contributions of $150,000 adequate for the funding period.",
        ], created_at="2021-03-01T00:00:00+00:00")
        + doc(BYLAWS, "CONDO_DOCS", "CONDO_BYLAWS", [
            "Bylaws of Larch Street Condominium Corporation.",
            "No owner shall lease a unit for a term of less than six months; every tenant shall sign the Corporation's tenant undertaking.",
            "Pets are limited to one dog or cat per unit with the Board's written consent.",
        ])
        + doc(TITLE, "TITLE_SEARCH", "INSTRUMENTS_REGISTER", [
            "Certificate of title for Unit 1204. Registered owner: Wendell Harlow.",
            "Caveat registered by Larch Street Condominium Corporation re: right of first refusal on any sale of parking stall P-17.",
        ])
    )
    report = Ingestor(store).ingest([write_jsonl(tmp_path / "deal.jsonl", chunks)])
    assert report.rejected == []
    agent = RetrievalAgent(store, trust=FULL_TRUST)
    yield agent
    agent.close()


def _docs(package) -> set[str]:
    return {r.document_id for r in package.ordered_chunks}


# --------------------------------------------------------------------------- routing


def test_question_naming_a_document_by_title_routes_to_it(deal):
    package, summary = deal.ask_sync(DEAL, "In the lender's instructions, when is the deposit made?")
    assert _docs(package) == {LENDER}
    assert any(f.startswith("question_routed") and LENDER in f for f in summary.fallbacks)
    # the same words without the description: the purchase contract's deposit clause is found too
    ranking = deal.rank_question(DEAL, "When is the deposit made?")
    assert ranking.routed == []
    assert {s.chunk.document_id for s in ranking.scored[:3]} >= {PURCHASE}


def test_question_naming_a_document_in_passing_favours_it_without_hiding_the_rest(deal):
    """A document named in passing (its year, its kind) comes first, but the question is not routed: the other
    documents are still searched and packed after it."""
    ranking = deal.rank_question(DEAL, "What does the 2024 reserve fund study recommend for contributions?")
    assert ranking.routed == []
    assert {s.chunk.document_id for s in ranking.scored[:2]} == {STUDY_2024}
    assert len({s.chunk.document_id for s in ranking.scored}) >= 5
    assert any(n.startswith("question_favoured: " + STUDY_2024) for n in ranking.notes)


def test_an_answer_outside_the_document_named_in_passing_is_still_packed(deal):
    """The kind of question a lawyer asks by contrast ("since the 2021 study ...") names the document the answer is
    NOT in: the named one is favoured, and the answer, in the other study, is still found and packed."""
    question = "Did anything change the contributions the 2021 study called adequate?"
    ranking = deal.rank_question(DEAL, question)
    assert ranking.routed == []
    assert ranking.scored[0].chunk.document_id == STUDY_2021
    assert any("$310,000" in s.chunk.content for s in ranking.scored[:4])
    package, _summary = deal.ask_sync(DEAL, question, budget=400)
    assert any("$310,000" in r.content for r in package.ordered_chunks)
    # said explicitly, the description is the caller's instruction: only the 2021 study
    explicit = deal.rank_question(DEAL, "In the 2021 reserve fund study, are contributions adequate?")
    assert explicit.routed == [STUDY_2021] and {s.chunk.document_id for s in explicit.scored} == {STUDY_2021}


def test_question_naming_a_document_by_its_parties_routes_to_it(deal):
    ranking = deal.rank_question(DEAL, "Consider the contract between Harlow and Quince; what deposit is payable?")
    assert ranking.routed == [PURCHASE]
    assert "$25,000" in ranking.scored[0].chunk.content


def test_question_naming_no_document_searches_the_whole_deal(deal):
    ranking = deal.rank_question(DEAL, "Is there a right of first refusal?")
    assert ranking.routed == []
    assert len({s.chunk.document_id for s in ranking.scored}) >= 5
    assert "first refusal" in ranking.scored[0].chunk.content
    package, summary = deal.ask_sync(DEAL, "Is there a right of first refusal?", budget=300)
    assert not any(f.startswith("question_routed") for f in summary.fallbacks)


def test_the_subject_of_a_question_does_not_route_it_to_the_document_named_after_it(deal, store, make_chunk, tmp_path):
    """A question about a lien asks about a lien wherever the deal shows one: the copy of the lien statement is not the
    only document searched because its name says "lien" (the registration sits in the title search). A question that
    also names the document by a word of its own still routes to it."""
    from retrieval_node.ingest import Ingestor
    from retrieval_node.question import without_concepts

    lien_copy = f"{DEAL}/builders_lien_copy.pdf"
    Ingestor(store).ingest([write_jsonl(tmp_path / "lien.jsonl", [
        make_chunk("Statement of Lien. Lienor: Foothills Framing Ltd. Work: framing of the third floor. Amount claimed: $18,400.",
                   deal_id=DEAL, document_id=lien_copy, role="OTHER", section="GENERAL", page=1),
        make_chunk("Instrument 252 118 904 registered 2026/01/14: builders' lien by Foothills Framing Ltd., $18,400.",
                   deal_id=DEAL, document_id=TITLE, role="TITLE_SEARCH", section="INSTRUMENTS_REGISTER", page=3),
    ])])
    asked = deal.rank_question(DEAL, "Is there a builders' lien against the unit, and for how much?")
    assert asked.routed == []
    # both: the copy and the title's register (whose three chunks the concept's `sections` favour)
    assert {s.chunk.document_id for s in asked.scored[:4]} >= {lien_copy, TITLE}
    # words outside the subject still name a document (favoured, not routed): "the title search" the title search,
    # "the lien copy" the copy
    on_title = deal.rank_question(DEAL, "Does the title search show a builders' lien?")
    assert on_title.routed == [] and any(n.startswith(f"question_favoured: {TITLE} ") for n in on_title.notes)
    assert on_title.scored[0].chunk.document_id == TITLE
    # "registered on title" is a subject too (registrations on title): no document named, the register read first
    registered = deal.rank_question(DEAL, "Is there a builders' lien registered on title?")
    assert not any(n.startswith("question_favoured") for n in registered.notes)
    assert registered.scored[0].chunk.document_id == TITLE
    copy = deal.rank_question(DEAL, "What does the lien copy say about the work?")
    assert any(n.startswith(f"question_favoured: {lien_copy} ") for n in copy.notes)
    assert lien_copy in {s.chunk.document_id for s in copy.scored[:2]}  # beside the title's lien line (material: risk boost)
    glossary = deal.config.glossary
    assert without_concepts("Is there a builders' lien on the title?", glossary) == "Is there a on the title"
    assert without_concepts("Does the contract between Harlow and Quince set a deposit?", glossary) == \
        "Does the contract between Harlow and Quince set a"  # names keep their case: parties still route
    assert without_concepts("Is there a lien?", None) == "Is there a lien?"


def test_router_routes_a_description_and_gives_evidence_for_a_name_in_passing():
    docs = [DocumentDescription("a/condo_bylaws.pdf", "CONDO_DOCS", "", "Bylaws"),
            DocumentDescription("a/purchase_contract.pdf", "PURCHASE_AGREEMENT", "", "Purchase contract"),
            DocumentDescription("a/title_search.pdf", "TITLE_SEARCH", "", "Certificate of title")]
    router = DocumentRouter(docs)
    assert router.route("the condo bylaws") == ["a/condo_bylaws.pdf"]
    assert router.route("the minutes") == []
    named = router.evidence("does the condo bylaw restrict rentals?")
    assert named[0] == 1.0 and named[1:].max() < 1.0
    assert not router.evidence("is there a right of first refusal?").any()
    assert not router.evidence("what does the document say?").any()
    # a four-letter word in passing names a document only as a whole word of its name ("list" is not "listing")
    searches = DocumentRouter([DocumentDescription("a/title_search_listing_2025.pdf", "TITLE_SEARCH", "2025", "Title"),
                               DocumentDescription("a/title_search_current.pdf", "TITLE_SEARCH", "2026", "Title")])
    listed = searches.evidence("List the money charges on title.")
    assert listed[0] == listed[1]
    assert list(searches.evidence("What did the listing search show?")) == [1.0, 0.0]
    assert searches.route("the list") == ["a/title_search_listing_2025.pdf"]  # an explicit description still matches a part
    # an acronym is a whole token of a name, never a run of letters inside one
    acr = DocumentRouter([DocumentDescription("a/BCGD_nda.txt", "OTHER", "", "Agreement"),
                          DocumentDescription("a/abcgdx_supply.txt", "OTHER", "", "Agreement")])
    assert acr.route("Boston Consulting Group Digital") == ["a/BCGD_nda.txt"]
    assert split_hint("Under the purchase contract: who pays the deposit?") == ("the purchase contract", "who pays the deposit?")


# --------------------------------------------------------------------------- ranking rules


def test_quoted_term_ranks_its_definition_first(deal, store, make_chunk, tmp_path):
    from retrieval_node.ingest import Ingestor

    doc = f"{DEAL}/definitions.pdf"
    Ingestor(store).ingest([write_jsonl(tmp_path / "defs.jsonl", [
        make_chunk("The Seller's knowledge of defects is limited to what the inspection disclosed.", deal_id=DEAL, document_id=doc,
                   role="OTHER", section="GENERAL", page=1),
        make_chunk("“Knowledge” means the actual knowledge of the Seller after reasonable inquiry of the property manager.",
                   deal_id=DEAL, document_id=doc, role="OTHER", section="GENERAL", page=2),
    ])])
    ranking = deal.rank_question(DEAL, 'Consider the definitions; What is the definition of "Knowledge"?')
    assert ranking.routed == [doc]
    assert ranking.scored[0].chunk.content.startswith("“Knowledge” means")
    stage = deal.pipeline.questions
    from dataclasses import replace

    stage.settings = replace(stage.settings, define_boost=0.0, smooth=0.0)
    try:  # without the boost the other chunk may win: the rule is what puts the definition first
        plain = deal.rank_question(DEAL, 'Consider the definitions; What is the definition of "Knowledge"?')
        assert plain.scored[0].terms.semantic < ranking.scored[0].terms.semantic
    finally:
        stage.settings = replace(stage.settings, define_boost=1.0, smooth=0.4)


def test_table_of_contents_goes_last(deal, store, make_chunk, tmp_path):
    from retrieval_node.ingest import Ingestor

    doc = f"{DEAL}/merger_agreement.pdf"
    toc = ("Section 1.1 Definitions 2 Section 2.1 Deposit 5 Section 2.2 Closing 7 Section 3.1 Deposit Release 9 "
           "Section 4.1 Termination 11")
    Ingestor(store).ingest([write_jsonl(tmp_path / "toc.jsonl", [
        make_chunk(toc, deal_id=DEAL, document_id=doc, role="OTHER", section="GENERAL", page=1),
        make_chunk("Section 2.1 Deposit. The deposit is released to the Seller at Closing.", deal_id=DEAL, document_id=doc,
                   role="OTHER", section="GENERAL", page=2),
        make_chunk("Section 4.1 Termination. Either party may terminate if Closing has not occurred by the Outside Date.",
                   deal_id=DEAL, document_id=doc, role="OTHER", section="GENERAL", page=3),
    ])])
    ranking = deal.rank_question(DEAL, "Consider the merger agreement; deposit release")
    assert ranking.scored[-1].chunk.content == toc


def test_glossary_matches_concepts_not_question_strings():
    g = Glossary(concepts={
        "no_shop": GlossaryConcept(match=["no-shop", "no solicitation"], terms="shall not solicit initiate encourage Acquisition Proposal"),
        "fiduciary_exception": GlossaryConcept(match=["fiduciary exception"], terms="Superior Proposal fiduciary duties"),
        "mae": GlossaryConcept(match=["material adverse effect"], terms="Material Adverse Effect means"),
        "no_mae": GlossaryConcept(match=["no material adverse effect"], terms="Since the date there has not been"),
    })
    assert match_concepts("Where is the No Shop clause?", g) == ("no_shop",)
    assert match_concepts("What about the Fiduciary exception to the no-shop?", g) == ("fiduciary_exception", "no_shop")
    assert match_concepts("the Target's warranty of No Material Adverse Effect", g) == ("no_mae",)  # the longer phrase wins
    assert match_concepts("Is there a right of first refusal?", g) == ()
    q = parse_question("Consider the Merger Agreement of X; What is the Definition of \"Material Adverse Effect\"", g)
    assert (q.hint, q.body, q.terms, q.concepts) == ("the Merger Agreement of X", 'Definition of "Material Adverse Effect"', ("material adverse effect",), ("mae",))


def test_glossary_brings_drafting_language_the_question_never_uses(deal, store, make_chunk, tmp_path):
    from dataclasses import replace

    doc = f"{DEAL}/bylaws_consolidated.pdf"
    filler = ["The Board meets quarterly and keeps minutes of every meeting.",
              "Unit owners may rent a parking stall to another owner of the Corporation.",
              "No unit shall be leased or let to a tenant for a term of less than one year.",
              "The Corporation insures the common property against fire and flood."]
    _add_document(store, make_chunk, tmp_path, doc, filler, role="CONDO_DOCS", section="CONDO_BYLAWS")
    question = "Consider the bylaws consolidated; are rentals allowed?"
    with_glossary = deal.rank_question(DEAL, question)
    assert "rental_restrictions" in " ".join(n for n in with_glossary.notes)
    assert with_glossary.scored[0].chunk.content.startswith("No unit shall be leased")
    stage = deal.pipeline.questions
    stage.settings = replace(stage.settings, glossary=False)
    try:
        without = deal.rank_question(DEAL, question)
        assert not any("question_glossary" in n for n in without.notes)
        lease = with_glossary.scored[0].chunk.chunk_id
        lexical = {s.chunk.chunk_id: s.terms.lexical for s in without.scored}
        assert with_glossary.scored[0].terms.lexical > lexical[lease]  # the drafting terms are what match the clause
    finally:
        stage.settings = replace(stage.settings, glossary=True)


# --------------------------------------------------------------------------- the shared path: contract, trust, budget, audit


def test_question_package_goes_through_budget_audit_and_replay(deal):
    package, summary = deal.ask_sync(DEAL, "What is the deposit and when is it due?", budget=250)
    assert 0 < package.total_tokens <= 250
    assert package.agent_id == QUESTIONS_AGENT and package.intent_id == "question_v1"
    again, again_summary = deal.replay(summary.audit_id)
    assert again == package and again_summary.audit_id == summary.audit_id and again_summary.chunks_selected == summary.chunks_selected
    snapshot = deal.audit.read_snapshot(summary.audit_id)
    assert snapshot["intent"]["kind"] == "question" and snapshot["intent"]["query_text"] == "What is the deposit and when is it due?"
    assert snapshot["contract"]["agent"] == QUESTIONS_AGENT
    # same question, same store: same package
    package2, _ = deal.ask_sync(DEAL, "What is the deposit and when is it due?", budget=250)
    assert package2.package_hash == package.package_hash


def test_question_respects_clearance_and_redacts_one_level_above(deal):
    confidential = TrustContext(max_sensitivity="confidential", authenticated=True, actor_id="test:clerk")
    package, summary = deal.ask_sync(DEAL, "In the lender's instructions, what does counsel's note say about underwriting?", trust=confidential)
    for r in package.ordered_chunks:
        assert r.redacted or sensitivity_level(r.sensitivity) <= sensitivity_level("confidential")
    assert any(r.redacted and r.content == "" for r in package.ordered_chunks)  # privileged: listed without content
    public = TrustContext(max_sensitivity="public", authenticated=True, actor_id="test:public")
    ranking = deal.rank_question(DEAL, "Is there a right of first refusal?", trust=public)
    assert ranking.scored == []  # every chunk of the deal is confidential or above


def test_question_from_an_agent_runs_under_its_contract(deal):
    tax = TrustContext(max_sensitivity="privileged", authenticated=True, actor_id="agent:tax", agent_id="tax_r1")
    intent = deal.question_intent(DEAL, "In the lender's instructions, when are funds released?", trust=tax)
    assert isinstance(intent, QuestionIntent) and intent.agent_id == "tax_r1"
    package, summary = deal.ask_sync(DEAL, "In the lender's instructions, when are funds released?", trust=tax)
    contract = deal.config.contracts.contracts["tax"].rule_for(intent.stage)
    allowed_roles = {r.value for r in contract.allowed_roles}
    for r in package.ordered_chunks:  # the tax agent never sees lender instructions, question or not
        assert r.document_role.value in allowed_roles and r.document_role.value != "LENDER_INSTRUCTIONS"
    ranking = deal.rank_question(DEAL, "Is there a right of first refusal?", trust=tax)
    assert all(s.chunk.document_role in allowed_roles for s in ranking.scored)
    # and its identity is the caller's: a tax-bound caller cannot ask as another agent
    with pytest.raises(AccessDenied):
        deal.retrieve_sync(deal.question_intent(DEAL, "deposit?", trust=FULL_TRUST), trust=tax)


def test_question_refuses_a_deal_outside_the_callers_scope(deal):
    other = TrustContext(max_sensitivity="privileged", authenticated=True, actor_id="test:other", scopes=["deal:2026-OTHER-0001"])
    with pytest.raises(AccessDenied):
        deal.ask_sync(DEAL, "What is the deposit?", trust=other)
    with pytest.raises(AccessDenied):
        deal.rank_question(DEAL, "What is the deposit?", trust=other)


async def _ask_async(agent):
    return await agent.ask(DEAL, "Is there a right of first refusal?", budget=400)


def test_async_ask_gives_the_sync_package(deal):
    import asyncio

    package, _ = asyncio.run(_ask_async(deal))
    same, _ = deal.ask_sync(DEAL, "Is there a right of first refusal?", budget=400)
    assert package.package_hash == same.package_hash


# --------------------------------------------------------------------------- command line


def test_cli_ask_checks_arguments_before_opening_a_store(tmp_path):
    from typer.testing import CliRunner

    from retrieval_node.cli import app

    runner = CliRunner()
    res = runner.invoke(app, ["ask", "--deal", DEAL, "what?", "--store", str(tmp_path / "none"), "--json"])
    assert res.exit_code == 2 and "no store" in json.loads(res.stdout.splitlines()[0])["error"]["message"]
    res = runner.invoke(app, ["ask", "--deal", DEAL, "what?", "--stage", "NOPE"])
    assert res.exit_code == 2


def test_cli_ask_prints_one_json_package(deal, store):
    from typer.testing import CliRunner

    from retrieval_node.cli import app

    home = store.home
    deal.close()
    store.close()
    res = CliRunner().invoke(app, ["ask", "--deal", DEAL, "In the purchase contract, what is the deposit?", "--store", str(home),
                                   "--json", "--budget", "400"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert {r["document_id"] for r in out["package"]["ordered_chunks"]} == {PURCHASE}
    assert out["package"]["total_tokens"] <= 400


def test_question_package_that_holds_nothing_says_why(deal):
    """An empty package is never silent: a budget that fits none of the ranked chunks is a budget shortfall, and a
    caller the gate lets see no chunk gets the no-chunks note; either way a human must look."""
    package, summary = deal.ask_sync(DEAL, "What is the deposit and when is it due?", budget=40)
    assert package.ordered_chunks == []
    assert summary.needs_human_input
    assert any(f.startswith("budget_shortfall:") and "40 tokens" in f for f in summary.fallbacks)
    roomy, roomy_summary = deal.ask_sync(DEAL, "What is the deposit and when is it due?", budget=400)
    assert roomy.ordered_chunks and not any(f.startswith("budget_shortfall") for f in roomy_summary.fallbacks)
    public = TrustContext(max_sensitivity="public", authenticated=True, actor_id="test:public")
    package, summary = deal.ask_sync(DEAL, "Is there a right of first refusal?", trust=public)  # every chunk is above public
    assert all(r.redacted for r in package.ordered_chunks) and summary.needs_human_input  # listed without content, no evidence
    assert any(f.startswith("no_chunks:") for f in summary.fallbacks)


# --------------------------------------------------------------------------- definitions, misspellings, document evidence


def test_a_definition_runs_on_into_the_chunks_after_its_opening(deal, store, make_chunk, tmp_path):
    """A long definition split over chunks: the chunks it runs on into rank right after the one that opens it (until
    the next definition starts), ahead of a chunk elsewhere that merely uses the term; a term defined with a qualifier
    ("... on the Purchaser") counts as the term."""
    from dataclasses import replace

    doc = f"{DEAL}/share_purchase_agreement.pdf"
    pages = [
        "Section 1.1 Definitions. “Business Day” means a day on which banks in Calgary are open for business.",
        "“Material Adverse Effect on the Purchaser” means any change or event that has a material adverse effect on the "
        "financial condition of the Purchaser taken as a whole, provided that none of the following shall count:",
        "(a) general economic conditions; (b) changes in applicable law or accounting rules; (c) acts of war or terrorism;",
        "(d) any failure to meet internal projections, except to the extent those matters affect the Purchaser "
        "disproportionately compared with other participants in its industry.",
        "“Outside Date” means December 31, 2026.",
        "Section 7.2 Conditions. No Material Adverse Effect on the Purchaser shall have occurred, and the Material Adverse "
        "Effect certificate shall be delivered at Closing.",
    ]
    _add_document(store, make_chunk, tmp_path, doc, pages)
    question = 'Consider the share purchase agreement; What is the Definition of "Material Adverse Effect"'
    ranking = deal.rank_question(DEAL, question)
    top = [s.chunk.content for s in ranking.scored[:3]]
    assert top[0] == pages[1] and set(top[1:]) == {pages[2], pages[3]}
    stage = deal.pipeline.questions
    saved = stage.settings
    stage.settings = replace(saved, define_continue=0.0)
    try:  # without the rule the condition that merely uses the term outranks the definition's tail
        plain = [s.chunk.content for s in deal.rank_question(DEAL, question).scored[:3]]
        assert set(plain[1:]) != {pages[2], pages[3]}
    finally:
        stage.settings = saved


def test_glossary_concepts_tolerate_a_misspelt_long_word():
    g = Glossary(concepts={"intervening_event": GlossaryConcept(match=["intervening event"], terms="Intervening Event means"),
                           "no_shop": GlossaryConcept(match=["no shop"], terms="shall not solicit")})
    assert match_concepts('What is the Definition of "Interveining Event"', g) == ("intervening_event",)
    assert match_concepts("an intervning event", g) == ("intervening_event",)
    assert match_concepts("the inventing event", g) == ()  # two letters apart: another word
    assert match_concepts("no shoe", g) == ()  # short words must be exact


def test_unrouted_question_weighs_the_documents_its_names_point_at(deal, store, make_chunk, tmp_path):
    """With routing off (one index over the deal, the paper's setting) a question's party names are still evidence:
    the chunks of the document whose name or opening names them rank first, though the clause sits in a chunk that
    does not repeat the names and another document words it closer to the question."""
    from dataclasses import replace

    from retrieval_node.ingest import Ingestor

    a, b = f"{DEAL}/nda_ambercrest_tolland.pdf", f"{DEAL}/nda_birchview_moray.pdf"
    Ingestor(store).ingest([write_jsonl(tmp_path / "ndas.jsonl", [
        make_chunk("Mutual non-disclosure agreement between Ambercrest Robotics and Tolland Freight.", deal_id=DEAL, document_id=a,
                   role="OTHER", section="GENERAL", page=1),
        make_chunk("The recipient may share confidential information with its professional advisers bound by confidentiality.",
                   deal_id=DEAL, document_id=a, role="OTHER", section="GENERAL", page=2),
        make_chunk("Mutual non-disclosure agreement between Birchview Analytics and Moray Shipping.", deal_id=DEAL, document_id=b,
                   role="OTHER", section="GENERAL", page=1),
        make_chunk("The receiving party may share confidential information with its employees and advisers who need to know it.",
                   deal_id=DEAL, document_id=b, role="OTHER", section="GENERAL", page=2),
    ])])
    question = "Consider the agreement between Ambercrest Robotics and Tolland Freight; may the receiving party share confidential information with its employees?"
    stage = deal.pipeline.questions
    saved = stage.settings
    try:
        stage.settings = replace(saved, routing=False)
        ranking = deal.rank_question(DEAL, question)
        assert ranking.routed == [] and {s.chunk.document_id for s in ranking.scored[:2]} == {a}
        stage.settings = replace(saved, routing=False, document_weight=0.0)
        plain = deal.rank_question(DEAL, question)
        assert plain.scored[0].chunk.document_id != a or plain.scored[1].chunk.document_id != a
    finally:
        stage.settings = saved


def test_annex_exhibit_and_schedule_titles_open_a_top_level_section():
    """A schedule or annex at the back of an agreement is a section of its own: its chunks sit under its title, not
    under the last article before it (a heading boost must reach them). Running text that names a schedule, an
    exhibit number, a title that is no annex ("SCHEDULE OF ...") and a running header repeated on later pages open
    nothing."""
    from retrieval_node.question import heading_paths

    text = ("Exhibit A - Form of Purchase Contract\nARTICLE 9\nGENERAL MATTERS\n9.4 Notices. Notices go to the addresses "
            "on the signature page. EXCEPT AS SET OUT IN SCHEDULE C THE LANDS ARE SOLD AS IS.\nThe deposit is held as in "
            "Exhibit 10.1 of the listing.\nSCHEDULE OF EXCEPTIONS\nNone.\nExhibit A - Form of Purchase Contract\n"
            "Page 7.\nSCHEDULE B CONDITIONS OF SALE\nThe Buyer's obligation to complete is subject to financing approval.\n"
            "Schedule \"A\" – Legal Description\nPlan 0412345, Block 7, Lot 22, excepting mines and minerals.\n")
    starts = [text.index("Notices go"), text.index("The deposit is held"), text.index("None."), text.index("Page 7."),
              text.index("The Buyer's"), text.index("Plan 0412345")]
    paths = heading_paths(text, starts)
    assert [p.split(" / ")[0] for p in paths] == ["GENERAL MATTERS"] * 4 + ["CONDITIONS OF SALE", "Legal Description"]


def test_a_chunk_that_opens_with_its_section_heading_sits_under_that_section():
    from retrieval_node.question import heading_paths

    text = ("ARTICLE 6 COVENANTS\nSection 6.1 Operation. The Vendor runs the hotel as usual until Closing.\n"
            "Section 6.2 Regulatory Filings. Each party files its notification within ten days.\n"
            "   6.3 Employees. The Purchaser offers employment to the staff.")
    # the third chunk starts on the whitespace before its heading (Stage 0 does not strip chunks)
    starts = [0, text.index("Section 6.2"), text.index("   6.3 Employees"), text.index("The Purchaser")]
    assert heading_paths(text, starts) == ["COVENANTS / ", "COVENANTS / Regulatory Filings", "COVENANTS / Employees",
                                           "COVENANTS / Employees"]


def test_regulatory_approvals_question_finds_the_condition_and_the_covenant_to_obtain_them(deal, store, make_chunk, tmp_path):
    """Regulatory approvals are both a closing condition and the parties' covenant to seek them (filings, efforts):
    a question on them ranks the condition first and the covenant ahead of the other covenants, of the conditions on
    other matters and of an unrelated representation (configs/glossary.yaml)."""
    doc = f"{DEAL}/asset_purchase_agreement.pdf"
    pages = [
        "ARTICLE 4 REPRESENTATIONS\nSection 4.5 Consents and Approvals. Signing this agreement needs no consent, approval or filing with any "
        "Governmental Authority other than a notification under the Competition Act.",
        "Section 4.6 Litigation. No claim is pending or threatened against the Vendor that would affect the hotel.",
        "ARTICLE 6 COVENANTS\nSection 6.1 Operation of the Business. Until Closing the Vendor shall run the hotel in the usual way "
        "and shall not sell equipment outside the ordinary course.",
        "Section 6.2 Competition Act Filings. Each party shall, within ten days, file the notifications the Competition Act requires "
        "and shall use its commercially reasonable efforts to obtain the clearance of the Commissioner as soon as practicable, "
        "answering every request for information promptly.",
        "Section 6.3 Employees. The Purchaser shall offer employment to the hotel staff on terms no less favourable overall.",
        "ARTICLE 7 CONDITIONS OF CLOSING\nSection 7.1 Conditions of Each Party. (a) Competition Approval. The Commissioner shall have "
        "issued an advance ruling certificate or the waiting period shall have expired.",
        "(b) Shareholder Vote. The shareholders of the Vendor shall have approved the sale by special resolution.",
        "(c) Financing. The Purchaser's lender shall have advanced the acquisition loan on the terms of the commitment letter.",
        "(d) Title. The Vendor shall deliver title to the lands free of every encumbrance except those permitted.",
    ]
    _add_document(store, make_chunk, tmp_path, doc, pages)
    question = "Consider the asset purchase agreement; where are the regulatory approvals dealt with?"
    ranking = deal.rank_question(DEAL, question)
    assert "regulatory_approvals" in " ".join(ranking.notes)
    top = [s.chunk.content for s in ranking.scored]
    assert top[0] == pages[5]
    assert all(top.index(pages[3]) < top.index(pages[k]) for k in (1, 2, 4, 7, 8))
    shipped = deal.config.glossary.concepts["regulatory_approvals"]
    with _concept(deal, "regulatory_approvals", shipped.model_copy(update={"clauses": shipped.clauses[:1],
                                                                          "headings": ["conditions of", "conditions to"]})):
        # a concept that knows only the condition leaves the covenant behind a condition on another matter
        narrow = [s.chunk.content for s in deal.rank_question(DEAL, question).scored]
    assert narrow.index(pages[3]) > narrow.index(pages[7])


def test_a_question_on_a_breach_asks_for_its_consequences(deal, store, make_chunk, tmp_path):
    """"What happens if the Buyer breaches the deposit clause?" asks for what follows a breach (the default clause:
    termination, forfeiture, remedies), not only for the clause breached: the default clause that names the deposit
    ranks first, ahead of the deposit clause itself (configs/glossary.yaml, `breach_consequences`)."""
    doc = f"{DEAL}/acreage_purchase_contract.pdf"
    pages = [
        "3. Deposit. The Buyer shall pay a deposit of $40,000 to the Seller's brokerage within three Banking Days of acceptance, "
        "held in trust and credited to the Purchase Price on Completion.",
        "4. Possession. The Seller gives vacant possession of the house and outbuildings at noon on the Completion Day.",
        "5. Water Well. The Seller shall deliver a water potability test dated within thirty days before Completion.",
        "11. Default. If the Buyer fails to pay the deposit when due or fails to complete, the Seller may end this contract by "
        "notice, keep the deposit as liquidated damages and claim any further loss.",
        "12. Notices. Any notice is given in writing to the brokerage named for the party receiving it.",
    ]
    _add_document(store, make_chunk, tmp_path, doc, pages, role="PURCHASE_AGREEMENT")
    question = "Consider the acreage purchase contract; what happens if the Buyer is in breach of the deposit clause?"
    ranking = deal.rank_question(DEAL, question)
    assert "breach_consequences" in " ".join(ranking.notes)
    assert ranking.scored[0].chunk.content == pages[3]
    with _concept(deal, "breach_consequences", None):  # without the concept the question is about the deposit clause alone
        assert deal.rank_question(DEAL, question).scored[0].chunk.content == pages[0]


def test_a_question_that_only_mentions_a_breach_keeps_its_own_concept(deal):
    """The consequences concept needs both a consequence cue and a breach word: "is there a breach of the reserve fund
    bylaw?" asks about the reserve fund, and "what happens to the reserve fund?" about no breach."""
    glossary = deal.config.glossary
    assert match_concepts("Is there any breach of the reserve fund bylaw?", glossary) == ("reserve_fund",)
    assert match_concepts("What happens to the reserve fund at closing?", glossary) == ("reserve_fund",)
    # naming both, the consequences lead: the deposit is named by the question's own words
    assert match_concepts("What are the remedies if the Seller defaults on the deposit?", glossary) == ("breach_consequences",)


# --------------------------------------------------------------------------- passage growth


def _grow(scores, sections, *, breaks=(), toc=None, lift=0.4, depth=32):
    import numpy as np

    from retrieval_node.question import grow_passages

    toc = np.zeros(len(scores), dtype=bool) if toc is None else np.asarray(toc, dtype=bool)
    return grow_passages(np.asarray(scores, dtype=float), list(breaks), sections, toc, lift=lift, depth=depth)


def _order(scores):
    import numpy as np

    return [int(i) for i in np.lexsort((np.arange(len(scores)), -np.asarray(scores)))]


def test_passage_growth_ranks_a_sections_continuation_before_a_weaker_match_elsewhere():
    """The best chunk's section runs on into its next chunk: that chunk comes before a chunk of another section
    that matched a little better on its own; the best chunk keeps the first place."""
    scores = [0.1, 1.0, 0.5, 0.55, 0.2]
    sections = ["Definitions", "No Solicitation", "No Solicitation", "Notices", "Notices"]
    assert _order(scores) == [1, 3, 2, 4, 0]
    grown = _grow(scores, sections)
    assert _order(grown) == [1, 2, 3, 4, 0]
    assert grown[2] == pytest.approx(0.5 + 0.4 * (1.0 - 0.5)) and grown[1] == 1.0
    assert list(_grow(scores, sections, lift=0.0)) == scores  # off: the scores as they were


@pytest.mark.parametrize("case", ["other section", "no section", "other document", "table of contents"])
def test_passage_growth_stops_at_a_section_a_document_or_a_table_of_contents(case):
    """Only a neighbour under the same (named) section heading of the same document is lifted; a table of contents
    never is."""
    scores = [1.0, 0.5, 0.55]
    sections = ["No Solicitation", "No Solicitation", "Notices"]
    kwargs = {}
    if case == "other section":
        sections[1] = "Termination"
    elif case == "no section":
        sections[0] = sections[1] = ""
    elif case == "other document":
        kwargs["breaks"] = [1]
    else:
        kwargs["toc"] = [False, True, False]
    assert list(_grow(scores, sections, **kwargs)) == scores


def test_passage_growth_runs_on_chunk_by_chunk_and_only_over_its_depth():
    """A lifted chunk once placed lifts the next one (the passage grows), each time from its own score; past
    ``depth`` places nothing is lifted."""
    scores = [1.0, 0.4, 0.3, 0.6, 0.5]
    sections = ["Conditions"] * 3 + ["Covenants"] * 2
    grown = _grow(scores, sections)
    assert grown[1] == pytest.approx(0.4 + 0.4 * 0.6) and grown[2] == pytest.approx(0.3 + 0.4 * 0.1)
    assert _order(grown) == [0, 1, 3, 4, 2]
    assert list(_grow(scores, sections, depth=1))[2] == 0.3  # only chunk 0 placed: 1 lifted, 2 not yet


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.floats(-1.0, 2.0), st.sampled_from(["", "A", "B"]), st.booleans()), min_size=1, max_size=30),
       st.floats(0.0, 1.0), st.integers(0, 40))
def test_passage_growth_keeps_the_first_place_and_lifts_only_towards_a_placed_neighbour(rows, lift, depth):
    """Whatever the scores, sections and lift: no score falls, the best chunk stays first, every lift stays below the
    own score of a neighbour in the same section, and sorting by the grown scores is the order the chunks were placed
    in (the packager sorts by them)."""
    import numpy as np

    scores = [r[0] for r in rows]
    sections = [r[1] for r in rows]
    toc = [r[2] for r in rows]
    grown = _grow(scores, sections, toc=toc, lift=lift, depth=depth)
    assert all(g >= s for g, s in zip(grown, scores, strict=True))
    assert _order(grown)[0] == _order(scores)[0]
    for j, (g, s) in enumerate(zip(grown, scores, strict=True)):
        if g > s:
            assert not toc[j] and sections[j]
            assert any(0 <= i < len(scores) and sections[i] == sections[j] and scores[i] > g for i in (j - 1, j + 1))
    # replay the greedy placement and compare with the sort
    out, placed, order = np.array(scores, dtype=float), np.zeros(len(scores), dtype=bool), []
    for _ in range(min(depth, len(scores)) if lift else 0):
        i = int(np.argmax(np.where(placed, -np.inf, out)))
        placed[i] = True
        order.append(i)
        for j in (i - 1, i + 1):
            if 0 <= j < len(scores) and not placed[j] and not toc[j] and sections[i] and sections[j] == sections[i] and scores[i] > scores[j]:
                out[j] = max(out[j], min(scores[j] + lift * (scores[i] - scores[j]), np.nextafter(scores[i], -np.inf)))
    assert _order(grown)[: len(order)] == order


def test_a_question_reads_on_into_the_rest_of_the_clause_it_found(deal, store, make_chunk, tmp_path):
    """A clause cut over several chunks: the chunk that matches the question comes first, and the clause's next
    chunk (which repeats none of the question's words) comes before a chunk of another section that shares them."""
    from dataclasses import replace

    doc = f"{DEAL}/share_purchase_agreement.pdf"
    pages = [
        "ARTICLE 5 COVENANTS\nSection 5.1 Access. The Vendor gives the Purchaser access to the books and records of the Company.",
        "Section 5.2 No Solicitation. From signing until Closing the Vendor shall not solicit, initiate or encourage any "
        "offer from a third party to acquire the shares or the assets of the Company,",
        "nor furnish any information to, or enter into discussions or any agreement with, any person in respect of such "
        "an offer, and shall end any discussions already under way.",
        "Section 5.3 Notices of Offers. The Purchaser may solicit offers for its own shares and shall notify the Vendor of any offer received.",
    ]
    _add_document(store, make_chunk, tmp_path, doc, pages)
    question = "Consider the share purchase agreement; may the Vendor solicit offers from a third party?"
    stage = deal.pipeline.questions
    ranked = [s.chunk.content for s in deal.rank_question(DEAL, question).scored]
    assert ranked[0] == pages[1] and ranked[1] == pages[2]
    stage.settings = replace(stage.settings, grow=0.0)
    try:  # without growth the other section's chunk, which shares the question's words, comes before the clause's end
        plain = [s.chunk.content for s in deal.rank_question(DEAL, question).scored]
        assert plain[0] == pages[1] and plain.index(pages[3]) < plain.index(pages[2])
    finally:
        stage.settings = replace(stage.settings, grow=0.4)


def _add_document(store, make_chunk, tmp_path, document_id, pages, *, role="OTHER", section="GENERAL"):
    """One document of the test deal, a chunk per page."""
    from retrieval_node.ingest import Ingestor

    Ingestor(store).ingest([write_jsonl(tmp_path / f"{document_id.rsplit('/', 1)[-1]}.jsonl", [
        make_chunk(t, deal_id=DEAL, document_id=document_id, role=role, section=section, page=i) for i, t in enumerate(pages, 1)])])


@contextlib.contextmanager
def _concept(agent, name, concept):
    """The glossary with ``name`` replaced by ``concept`` (None: without it) while the block runs."""
    concepts = agent.config.glossary.concepts
    shipped = concepts.pop(name)
    if concept is not None:
        concepts[name] = concept
    try:
        yield
    finally:
        concepts[name] = shipped


def test_a_question_about_a_risk_finds_the_chunk_the_risk_scan_found_material_whatever_its_words(deal, store, make_chunk, tmp_path):
    """A levy the board plans is written as "a funding proposal of $18,500 per unit, payable in two instalments", not as
    "special levy": a question about a special levy still ranks it first, ahead of the bylaw that describes levies in
    general, because the risk scan found it material for the kind the glossary concept asks about (`risk_kinds`)."""
    doc = f"{DEAL}/condo_minutes_2026.pdf"
    pages = [
        "Minutes of the Board meeting of February 9, 2026. Present: four directors and the property manager.",
        "Item 4. Parkade membrane. The engineer's report prices the repair at $1.1 million and the reserve fund cannot carry it. "
        "The Board will call a general meeting in May to present a funding proposal of about $18,500 per unit, payable in two instalments.",
        "Item 5. Landscaping contract renewed for one year at the same price.",
    ]
    _add_document(store, make_chunk, tmp_path, doc, pages, role="CONDO_DOCS", section="CONDO_MINUTES")
    _add_document(store, make_chunk, tmp_path, f"{DEAL}/condo_bylaws_levies.pdf", [
        "Article 12. Levies. The Corporation may, by special resolution, raise a special levy from the owners in proportion to their unit factors.",
    ], role="CONDO_DOCS", section="CONDO_BYLAWS")
    question = "Is a special levy planned?"
    ranked = deal.rank_question(DEAL, question)
    assert ranked.scored[0].chunk.content == pages[1]
    assert any(n.startswith("question_risk") for n in ranked.notes)
    levy = deal.config.glossary.concepts["special_levy"]
    with _concept(deal, "special_levy", levy.model_copy(update={"risk_kinds": []})):
        # without the concept's risk kinds the bylaw's wording wins: the rule is what finds the planned levy
        plain = [s.chunk.content for s in deal.rank_question(DEAL, question).scored]
        assert plain[0] != pages[1]


def test_a_glossary_concept_naming_an_unknown_risk_kind_is_refused():
    from retrieval_node.config import load_config

    config = load_config()
    concepts = dict(config.glossary.concepts)
    concepts["special_levy"] = concepts["special_levy"].model_copy(update={"risk_kinds": ["special_levies"]})
    with pytest.raises(ValueError, match="glossary concept 'special_levy' names unknown risk kind"):
        type(config).model_validate({**config.model_dump(), "glossary": {**config.glossary.model_dump(), "concepts": {k: v.model_dump() for k, v in concepts.items()}}})


def test_a_question_about_a_registration_reads_the_register_that_shows_none(deal, store, make_chunk, tmp_path):
    """"Is there a builders' lien against the unit?" on a clean title: the answer is the title's register (it lists no
    lien), not the contract clause or the lender's line that talk about liens. The concept names the Stage-0 sections
    such a matter is recorded in (`sections`); their chunks gain the glossary's `section_boost`."""
    _add_document(store, make_chunk, tmp_path, f"{DEAL}/purchase_terms.pdf", [
        "Title. The Seller shall deliver title free of all liens, charges and encumbrances other than those the Buyer accepts in writing.",
    ], role="PURCHASE_AGREEMENT")
    _add_document(store, make_chunk, tmp_path, f"{DEAL}/lender_reporting.pdf", [
        "Report to us any builders' lien, writ or caveat registered against the property before you ask for the advance.",
    ], role="LENDER_INSTRUCTIONS")
    question = "Is there a builders' lien registered against the unit?"
    ranked = [s.chunk.document_id for s in deal.rank_question(DEAL, question).scored]
    assert ranked[0] == TITLE  # the register (its two chunks list the owner and a caveat, no lien)
    liens = deal.config.glossary.concepts["liens_and_encumbrances"]
    assert "INSTRUMENTS_REGISTER" in [getattr(x, "value", x) for x in liens.sections]
    registrations = deal.config.glossary.concepts["title_registrations"]  # "registered against" names it too
    with _concept(deal, "liens_and_encumbrances", liens.model_copy(update={"sections": []})), \
            _concept(deal, "title_registrations", registrations.model_copy(update={"sections": []})):
        plain = [s.chunk.document_id for s in deal.rank_question(DEAL, question).scored]
        assert plain[0] != TITLE  # without the sections, a text about liens comes first


def test_a_glossary_concept_naming_an_unknown_section_type_is_refused():
    from pydantic import ValidationError

    from retrieval_node.config import load_config

    config = load_config()
    data = config.model_dump()
    data["glossary"]["concepts"]["liens_and_encumbrances"]["sections"] = ["TITLE_REGISTER"]
    with pytest.raises(ValidationError, match=r"glossary\.concepts\.liens_and_encumbrances\.sections\.0"):
        type(config).model_validate(data)


def test_a_concept_set_aside_is_not_asked_about():
    """"Other than the seller's mortgage, is anything registered on title?" asks about the registrations, not the
    mortgage; "on top of the monthly fees" does not ask about the fees. A set-aside concept names no document either."""
    from retrieval_node.config import load_config
    from retrieval_node.question import without_concepts

    glossary = load_config().glossary
    asked = match_concepts("Other than the seller's mortgage, is anything registered on title?", glossary)
    assert "title_registrations" in asked and "mortgages_to_discharge" not in asked
    assert "mortgages_to_discharge" in match_concepts("Which mortgage is paid out on closing?", glossary)
    assert "condo_contributions" not in match_concepts("Is an assessment due on top of the monthly fees?", glossary)
    assert "condo_contributions" in match_concepts("Are the monthly fees paid up?", glossary)
    for cue in ("apart from", "besides", "excluding", "in addition to", "except for"):
        assert "mortgages_to_discharge" not in match_concepts(f"{cue} the mortgage, what is registered against the unit?", glossary)
    # four words after the cue: asked again ("other than that, which mortgage is paid out?")
    assert "mortgages_to_discharge" in match_concepts("Other than that, on closing which mortgage is paid out?", glossary)
    assert without_concepts("Other than the mortgage, is anything registered against it?", glossary) == "Other than is anything it"


def test_plain_words_name_the_conveyancing_concepts():
    """A buyer's or a clerk's words reach the same concepts as the drafting terms."""
    from retrieval_node.config import load_config

    glossary = load_config().glossary
    assert "special_levy" in match_concepts("Is there an extra assessment on the suite?", glossary)
    assert "property_tax" in match_concepts("Are the city taxes paid?", glossary)
    assert "condo_contributions" in match_concepts("Are the condo dues paid up?", glossary)
    assert "litigation" in match_concepts("Is the corporation in a court case?", glossary)
    assert "special_levy" not in match_concepts("What is the assessed value for taxes?", glossary)


def test_every_risk_the_scan_recognises_can_be_asked_about():
    """Each risk kind of the shipped lexicon (but the catch-all "other") is named by a glossary concept, so a question
    about it gains the chunks the scan found material for it (`risk_kinds`)."""
    from retrieval_node.config import load_config

    config = load_config()
    named = {k for concept in config.glossary.concepts.values() for k in concept.risk_kinds}
    assert config.risk_signals.kinds() - {"other"} <= named, sorted(config.risk_signals.kinds() - {"other"} - named)


def test_a_document_named_as_the_baseline_is_not_where_the_question_looks(deal, store, make_chunk, tmp_path, monkeypatch):
    """"Has anything been registered since the March 2025 search?" names the older search as its baseline: the answer
    is in the later one. Words after "since" (or "other than", "besides", ...) up to the end of their noun phrase name
    no document, so the older search is not favoured and the new registration comes first."""
    import retrieval_node.question as question

    older = f"{DEAL}/title_search_march_2025.pdf"
    current = f"{DEAL}/title_search_current.pdf"
    _add_document(store, make_chunk, tmp_path, older, [
        "Title search printed March 12, 2025. Registered owner: Wendell Harlow. Mortgage 192 440 118 to Northgate Credit Union.",
    ], role="TITLE_SEARCH", section="INSTRUMENTS_REGISTER")
    new_line = "Caveat 262 031 977 registered 2026/02/02 by Birchwood Roofing Ltd.: builders' lien claim of $12,400 for roof work."
    _add_document(store, make_chunk, tmp_path, current, [
        "Title search printed April 20, 2026. Registered owner: Wendell Harlow. Mortgage 192 440 118 to Northgate Credit Union.",
        new_line,
    ], role="TITLE_SEARCH", section="INSTRUMENTS_REGISTER")
    asked = "Has anything been registered on title since the March 2025 search was printed?"
    ranked = deal.rank_question(DEAL, asked)
    assert not any(n.startswith("question_favoured") and older in n for n in ranked.notes)
    assert ranked.scored[0].chunk.content == new_line
    assert question.without_concepts("Is anything besides the lien copy that must be cleared from title?", deal.config.glossary) == \
        "Is anything besides that must be cleared from title"  # the noun phrase ends at "that"
    monkeypatch.setattr(question, "BASELINE", ())
    plain = deal.rank_question(DEAL, asked)  # without the rule the March search is favoured: it climbs
    assert any(n.startswith("question_favoured") and older in n for n in plain.notes)

    def place(result):
        return [s.chunk.document_id for s in result.scored].index(older)

    assert place(plain) < place(ranked)


def test_an_explicit_description_of_two_documents_routes_to_both(deal):
    """"In the lender's instructions and the purchase contract, ..." names two documents: both are searched, nothing
    else. Parties joined by "and" ("the contract between Harlow and the Buyer") are not two documents."""
    ranking = deal.rank_question(DEAL, "In the lender's instructions and the purchase contract, when is the deposit made?")
    assert ranking.routed == sorted([LENDER, PURCHASE])
    assert {s.chunk.document_id for s in ranking.scored} == {LENDER, PURCHASE}
    assert deal.rank_question(DEAL, "In the lender's instructions, when is the deposit made?").routed == [LENDER]
    docs = [DocumentDescription("a/purchase_contract.pdf", "PURCHASE_AGREEMENT", "", "Contract between Harlow and Quince"),
            DocumentDescription("a/seller_disclosure.pdf", "OTHER", "", "Seller's property disclosure statement")]
    assert DocumentRouter(docs).route("the contract between Harlow and the seller") == ["a/purchase_contract.pdf"]
    assert DocumentRouter(docs).route("the contract, the seller disclosure") == sorted(d.document_id for d in docs)


_WORDS = st.sampled_from(["since", "other", "than", "besides", "the", "mortgage", "lien", "title", "search", "listing",
                          "2025", "is", "that", "and", "Harlow's", "on", "top", "of", "fees", "what", "registered", "against"])


@settings(max_examples=300, deadline=None)
@given(words=st.lists(_WORDS, max_size=14), marks=st.lists(st.sampled_from(["", "", "", ",", "?", ".", ";"]), max_size=14))
def test_the_words_a_question_names_documents_by_are_a_subsequence_of_it(words, marks):
    """Whatever the question, what its document evidence reads is some of its own words in order (concept phrases,
    set-aside and baseline phrases taken out), and every concept hit lies inside the question."""
    from retrieval_node.config import load_config
    from retrieval_node.question import _concept_hits, _norm_phrase, without_concepts

    glossary = load_config().glossary
    question = " ".join(w + (marks[i] if i < len(marks) else "") for i, w in enumerate(words))
    kept = without_concepts(question, glossary).split()
    source = [t for t in re.findall(r"[A-Za-z0-9]+", question.replace("'s", ""))]
    it = iter(source)
    assert all(any(k == t for t in it) for k in kept)  # a subsequence
    n = len(_norm_phrase(question).split())
    assert all(0 <= i < j <= n for i, j, _name, _asked in _concept_hits(question, glossary))
