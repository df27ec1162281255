"""`retrieval-node eval` (retrieval_node.labelled_eval, cli_eval): every metric against hand-computed values.

The labelled folder is written here: two small deals of our own (a detached house with a lien and tax
arrears, a clean house whose tax certificate has no liens line), gold files in the bench layout.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from pydantic import BaseModel
import typer
from typer.testing import CliRunner

from retrieval_node.cli_eval import eval_command
from retrieval_node.labelled_eval import (
    IntentGold,
    LabelledReport,
    LabelledSetError,
    RunScore,
    ScoreTotals,
    evaluate_labelled,
    load_labelled_set,
    score_package,
)
from retrieval_node.models import ChunkReference, ContextPackage, DocumentChunk, RetrievalIntent, RetrievalSummary
from retrieval_node.pack import render_evidence

from tests.conftest import write_jsonl

LOT = "2026-EVAL-0001"
CLEAN = "2026-EVAL-0002"
INV, TAX, SCRIBE = "title_risk_scan_v1", "tax_arrears_check_v1", "drafting_v1"


def _deal_chunks(make_chunk: Callable[..., DocumentChunk]) -> dict[str, DocumentChunk]:
    title, tax, offer = f"{LOT}/title.pdf", f"{LOT}/tax.pdf", f"{LOT}/offer.pdf"
    ctitle, ctax, coffer = f"{CLEAN}/title.pdf", f"{CLEAN}/tax.pdf", f"{CLEAN}/offer.pdf"
    return {
        "a_legal": make_chunk(
            "CERTIFICATE OF TITLE\nLINC 0041 223 918\nLEGAL DESCRIPTION: PLAN 1520334 BLOCK 4 LOT 17\n"
            "EXCEPTING THEREOUT ALL MINES AND MINERALS\nMUNICIPALITY: TOWN OF SYLVAN LAKE\nREGISTERED OWNER: DANA KOWALCZYK",
            deal_id=LOT, document_id=title, section="LEGAL_DESCRIPTION", page=1, metadata={"zones": ["front_summary", "legal_description"]}),
        "a_lien": make_chunk(
            "REGISTRATION 252 118 404  12/03/2025  BUILDERS' LIEN\nAMOUNT: $38,750.00\nLIENOR: NORTHGATE FRAMING LTD.\n"
            "Framing labour and materials supplied to Lot 17; the lien is registered against this title.",
            deal_id=LOT, document_id=title, page=2, metadata={"zones": ["instruments_register"]}),
        "a_old_mortgage": make_chunk(
            "REGISTRATION 201 447 512  06/09/2020  MORTGAGE\nMORTGAGEE: PRAIRIE CREDIT UNION  $312,000.00\n"
            "DISCHARGED 14/02/2024 BY 241 009 887 (discharge registered, nothing owing)",
            deal_id=LOT, document_id=title, page=3, metadata={"zones": ["instruments_register"]}),
        "a_caveat": make_chunk(
            "CAVEATS\n162 330 190  CAVEAT RE: UTILITY RIGHT OF WAY\nCAVEATOR: TOWN OF SYLVAN LAKE (water and sewer mains along the rear lane)",
            deal_id=LOT, document_id=title, section="CAVEATS_SECTION", page=4, metadata={"zones": ["caveats_section"]}),
        "a_tax": make_chunk(
            "TAX CERTIFICATE - TOWN OF SYLVAN LAKE\nRoll 40117\n2026 levy: $4,118.20\n"
            "ARREARS OUTSTANDING FROM 2024: $2,365.40 including penalties\nTax lien registered on title: none",
            deal_id=LOT, document_id=tax, role="TAX_CERTIFICATE", section="TAX_ARREARS", page=1,
            metadata={"zones": ["tax_certificate", "municipal_arrears", "tax_liens"]}),
        "a_offer": make_chunk(
            "RESIDENTIAL PURCHASE CONTRACT\nBuyer: Ravi Patel\nSeller: Dana Kowalczyk\nProperty: Plan 1520334 Block 4 Lot 17\n"
            "Purchase price: $529,000\nDeposit: $15,000 held in trust\nCompletion day: June 30, 2026",
            deal_id=LOT, document_id=offer, role="PURCHASE_AGREEMENT", section="GENERAL", page=1),
        "b_legal": make_chunk(
            "CERTIFICATE OF TITLE\nLINC 0036 870 112\nLEGAL DESCRIPTION: PLAN 0910773 BLOCK 2 LOT 8\n"
            "MUNICIPALITY: CITY OF SPRUCE GROVE\nREGISTERED OWNER: MORGAN LEBLANC",
            deal_id=CLEAN, document_id=ctitle, section="LEGAL_DESCRIPTION", page=1, metadata={"zones": ["front_summary", "legal_description"]}),
        "b_easement": make_chunk(
            "REGISTRATION 141 772 030  UTILITY RIGHT OF WAY\nGRANTEE: SPRUCE GROVE GAS CO-OP\nA strip three metres wide along the north boundary.",
            deal_id=CLEAN, document_id=ctitle, page=2, metadata={"zones": ["instruments_register"]}),
        "b_old_mortgage": make_chunk(
            "REGISTRATION 181 204 655  MORTGAGE  $248,000.00\nMORTGAGEE: NORTH SASKATCHEWAN TRUST\n"
            "DISCHARGED BY 231 118 020 ON 02/05/2023; no amount remains secured",
            deal_id=CLEAN, document_id=ctitle, page=3, metadata={"zones": ["instruments_register"]}),
        "b_caveat": make_chunk(
            "CAVEATS\n091 877 402  CAVEAT RE: ARCHITECTURAL CONTROLS\nCAVEATOR: the subdivision developer (fence and siding colours)",
            deal_id=CLEAN, document_id=ctitle, section="CAVEATS_SECTION", page=4, metadata={"zones": ["caveats_section"]}),
        "b_tax": make_chunk(
            "TAX CERTIFICATE - CITY OF SPRUCE GROVE\nRoll 88210\n2026 levy: $3,402.10, paid in full\nArrears: NIL",
            deal_id=CLEAN, document_id=ctax, role="TAX_CERTIFICATE", section="TAX_ARREARS", page=1,
            metadata={"zones": ["tax_certificate", "municipal_arrears"]}),
        "b_offer": make_chunk(
            "RESIDENTIAL PURCHASE CONTRACT\nBuyer: Ana Souza\nSeller: Morgan Leblanc\nProperty: Plan 0910773 Block 2 Lot 8\n"
            "Purchase price: $448,500\nDeposit: $10,000\nCompletion day: July 15, 2026",
            deal_id=CLEAN, document_id=coffer, role="PURCHASE_AGREEMENT", section="GENERAL", page=1),
    }


def _intent_gold(risk: list[str], material: list[str], *, distractors: list[str] = (), clean: bool = False,
                 present: list[str], absent: list[str] = ()) -> dict:
    return {"risk_chunk_ids": risk, "material_chunk_ids": material, "distractor_chunk_ids": list(distractors),
            "expect_nothing_material": clean, "zones_present": present, "zones_absent": list(absent),
            "gold": [{"chunk_id": c, "kind": "material" if c in material else "fact", "rationale": "labelled in the test"} for c in risk]}


TITLE_ZONES = ["front_summary", "instruments_register", "caveats_section"]


@pytest.fixture()
def folder(tmp_path: Path, make_chunk) -> tuple[Path, dict[str, str]]:
    """The labelled folder and a name -> chunk id map."""
    chunks = _deal_chunks(make_chunk)
    ids = {name: c.chunk_id for name, c in chunks.items()}
    root = tmp_path / "labelled"
    (root / "deals").mkdir(parents=True)
    (root / "gold").mkdir()
    for deal in (LOT, CLEAN):
        write_jsonl(root / "deals" / f"{deal}.jsonl", [c for c in chunks.values() if c.deal_id == deal])
    (root / "intents.json").write_text(json.dumps({
        "investigator": {"intent_id": INV, "agent": "investigator", "budget": 4000, "stage": "DILIGENCE", "required_zones": TITLE_ZONES},
        "tax": {"intent_id": TAX, "agent": "tax", "budget": 2000, "stage": "DILIGENCE",
                "required_zones": ["tax_certificate", "municipal_arrears", "tax_liens"]},
        "scribe": {"intent_id": SCRIBE, "agent": "scribe", "budget": 6000, "stage": "DILIGENCE", "required_zones": ["legal_description"]},
    }))
    gold = {
        LOT: {INV: _intent_gold([ids["a_lien"]], [ids["a_lien"]], distractors=[ids["a_old_mortgage"]], present=TITLE_ZONES),
              TAX: _intent_gold([ids["a_tax"]], [ids["a_tax"]], present=["tax_certificate", "municipal_arrears", "tax_liens"]),
              SCRIBE: _intent_gold([ids["a_legal"], ids["a_lien"], ids["a_offer"]], [ids["a_lien"]], present=["legal_description"])},
        CLEAN: {INV: _intent_gold([], [], distractors=[ids["b_old_mortgage"]], clean=True, present=TITLE_ZONES),
                TAX: _intent_gold([], [], clean=True, present=["tax_certificate", "municipal_arrears"], absent=["tax_liens"]),
                SCRIBE: _intent_gold([ids["b_legal"], ids["b_offer"]], [], clean=True, present=["legal_description"])},
    }
    for deal, intents in gold.items():
        (root / "gold" / f"{deal}.json").write_text(json.dumps({"deal_id": deal, "kind": "test deal", "intents": intents}))
    (root / "patterns.jsonl").write_text(json.dumps({
        "entity_type": "municipality", "entity_id": "municipality:sylvan-lake", "topic": "tax_arrears",
        "content": "Sylvan Lake certificates list penalties separately; add them to the arrears holdback."}) + "\n")
    return root, ids


# -- the pure scorer ------------------------------------------------------------------------------


def _ref(chunk: DocumentChunk, span: tuple[int, int] | None = None) -> ChunkReference:
    """The chunk as a package quotes it: whole, or the verbatim excerpt ``content[start:end]``."""
    start, end = span if span is not None else (None, None)
    return ChunkReference(chunk_id=chunk.chunk_id, document_id=chunk.document_id, document_role=chunk.document_role,
                          section_type=chunk.section_type, page_range=chunk.page_range,
                          content=chunk.content if span is None else chunk.content[start:end], content_hash=chunk.content_hash,
                          zones=chunk.metadata.zones, char_start=start, char_end=end)


def _package(deal: str, refs: list[ChunkReference], risk_summary: str, counter, *, total: int | None = None) -> ContextPackage:
    text = render_evidence(deal, "x", "x_r1", refs)
    return ContextPackage(deal_id=deal, intent_id="x", agent_id="x_r1", ordered_chunks=refs, structural_toc="", exclusions_note="",
                          total_tokens=counter.count(text) if total is None else total, risk_summary=risk_summary, package_hash="0" * 64)


class OlderSummary(BaseModel):
    """Fake: the summary of a node from before ``summary.material_risks`` (the scorer then reads the risk summary's lines)."""

    audit_id: str
    chunks_inspected: int
    chunks_selected: int
    tokens_selected: int
    risk_distribution: dict[str, int]
    structural_coverage_score: float
    missing_zones: list[str]
    needs_human_input: bool
    fallbacks: list[str]
    latency_ms: dict[str, float]


def _summary(missing: list[str] = (), distribution: dict[str, int] | None = None) -> OlderSummary:
    return OlderSummary(audit_id="aud_test", chunks_inspected=3, chunks_selected=2, tokens_selected=0,
                        risk_distribution=distribution or {}, structural_coverage_score=1.0, missing_zones=list(missing),
                        needs_human_input=bool(missing), fallbacks=[], latency_ms={})


class SummaryWithFindings(RetrievalSummary):
    """Fake: a summary carrying interfaces.md section 4's ``material_risks`` (for the scorer's other reading)."""

    material_risks: list[dict]


def _score(gold: IntentGold, package: ContextPackage, summary: RetrievalSummary, counter, pages=None, budget: int = 2000) -> RunScore:
    return score_package(gold, package, summary, deal_id="d", agent="tax", intent_id=TAX, budget=budget,
                         pages=pages or {}, tokens=counter)


def test_scorer_counts_excerpts_flags_zones_and_distractors(make_chunk, counter):
    chunks = _deal_chunks(make_chunk)
    lien, tax, mortgage = chunks["a_lien"], chunks["a_tax"], chunks["a_old_mortgage"]
    offer = chunks["a_offer"]
    gold = IntentGold(risk_chunk_ids=[lien.chunk_id, tax.chunk_id, offer.chunk_id], material_chunk_ids=[lien.chunk_id, tax.chunk_id],
                      distractor_chunk_ids=[mortgage.chunk_id], expect_nothing_material=False,
                      zones_present=["tax_certificate", "municipal_arrears"], zones_absent=["tax_liens"])
    excerpt = _ref(lien, (0, 60))                       # the lien quoted in part: it still counts as found
    refs = [excerpt, _ref(mortgage)]
    risk_summary = ("MATERIAL RISK INDICATORS (4):\n[E1] builders_lien in LOT/title.pdf p2-2 (lien)\n"
                    "[E2] mortgage in LOT/title.pdf p3-3 (mortgage)\n[E7] nothing there\n"
                    f"NOT IN PACKAGE (budget): tax_arrears in {tax.document_id} p1-1")
    pkg = _package(LOT, refs, risk_summary, counter)
    pages = {(tax.document_id, 1, 1): [tax.chunk_id]}
    r = _score(gold, pkg, _summary(missing=["municipal_arrears"]), counter, pages, budget=pkg.total_tokens - 1)
    assert (r.gold, r.gold_found, r.material, r.material_found) == (3, 1, 2, 1)
    assert r.missed == [tax.chunk_id, offer.chunk_id]
    assert (r.packaged, r.excerpts, r.distractors_packed) == (2, 1, 1)
    assert r.over_budget is True
    assert r.unreported_missing_zones == ["tax_liens"] and r.false_missing_zones == ["municipal_arrears"]
    # flags: E1 -> the lien, E2 -> the discharged mortgage, E7 -> no 7th block, NOT IN PACKAGE -> the tax certificate
    assert (r.flags, r.flags_unresolved, r.flags_on_material, r.flags_on_distractors) == (3, 1, 2, 1)
    assert r.flag_precision == pytest.approx(2 / 3)
    assert r.claims_material is True and r.false_material_claim is False
    quoted = counter.count(lien.content[:60]) + counter.count(mortgage.content)
    assert r.framing_tokens == pkg.total_tokens - quoted and 0 < r.framing_share < 1
    assert r.recall == pytest.approx(1 / 3) and r.material_recall == 0.5


def test_scorer_material_claims_on_a_clean_intent(make_chunk, counter):
    chunks = _deal_chunks(make_chunk)
    clean = IntentGold(risk_chunk_ids=[], material_chunk_ids=[], expect_nothing_material=True, zones_present=[], zones_absent=[])
    refs = [_ref(chunks["b_tax"])]
    said = _score(clean, _package(CLEAN, refs, "MATERIAL RISK INDICATORS (1):\n[E1] tax_arrears in x p1-1 (arrears)", counter), _summary(), counter)
    assert said.claims_material and said.false_material_claim and said.flags == 1 and said.flag_precision == 0.0
    quiet = _score(clean, _package(CLEAN, refs, "NO MATERIAL RISK INDICATORS in 1 inspected chunk(s)", counter), _summary(), counter)
    assert not quiet.claims_material and not quiet.false_material_claim and quiet.flags == 0 and quiet.flag_precision is None
    by_distribution = _score(clean, _package(CLEAN, refs, "", counter), _summary(distribution={"High": 2}), counter)
    assert by_distribution.false_material_claim and by_distribution.flags == 0
    by_kind_only = _score(clean, _package(CLEAN, refs, "", counter), _summary(distribution={"tax_arrears": 2}), counter)
    assert not by_kind_only.claims_material
    assert quiet.recall is None and quiet.material_recall is None


def test_scorer_reads_material_risks_when_the_summary_has_them(make_chunk, counter):
    chunks = _deal_chunks(make_chunk)
    tax = chunks["a_tax"]
    gold = IntentGold(risk_chunk_ids=[tax.chunk_id], material_chunk_ids=[tax.chunk_id], expect_nothing_material=False,
                      zones_present=[], zones_absent=[])
    base = _summary().model_dump()
    pkg = _package(LOT, [_ref(tax)], "MATERIAL RISK INDICATORS (1):\n[E1] tax_arrears in x p1-1 (arrears)", counter)
    found = SummaryWithFindings(**base, material_risks=[{"chunk_id": tax.chunk_id, "kinds": ["tax_arrears"], "in_package": True},
                                                        {"chunk_id": None, "kinds": ["tax_lien"]}])
    r = _score(gold, pkg, found, counter)
    assert (r.flags, r.flags_unresolved, r.flags_on_material, r.claims_material) == (1, 1, 1, True)
    nothing = SummaryWithFindings(**base, material_risks=[])  # the field wins over the "MATERIAL RISK" heading
    r = _score(gold.model_copy(update={"expect_nothing_material": False}), pkg, nothing, counter)
    assert (r.flags, r.claims_material) == (0, False)


def test_totals_and_score_line():
    def run(**kw) -> RunScore:
        base = {"deal_id": "d", "agent": "tax", "intent_id": TAX, "budget": 2000, "gold": 0, "gold_found": 0, "material": 0,
                "material_found": 0, "expect_nothing_material": False, "unreported_missing_zones": [], "total_tokens": 100, "framing_tokens": 10}
        return RunScore(**(base | kw))

    runs = [run(gold=3, gold_found=2, material=2, material_found=2, flags=2, flags_on_material=1, distractors_packed=1),
            run(expect_nothing_material=True, false_material_claim=True, claims_material=True, over_budget=True,
                unreported_missing_zones=["tax_liens", "municipal_arrears"], false_missing_zones=["tax_certificate"], total_tokens=300, framing_tokens=50),
            run(gold=1, material=1, error="BackendError: down", total_tokens=None, framing_tokens=None, expect_nothing_material=True)]
    t = ScoreTotals.of(runs)
    assert (t.runs, t.errors, t.gold, t.gold_found, t.material, t.material_found) == (3, 1, 4, 2, 3, 2)
    assert (t.over_budget, t.unreported_missing_zones, t.false_missing_zones, t.distractors_packed) == (1, 2, 1, 1)
    assert (t.clean_intents, t.false_material_claims, t.flags, t.flags_on_material) == (2, 1, 2, 1)
    assert (t.total_tokens, t.framing_tokens) == (400, 60) and t.framing_share == pytest.approx(0.15)
    assert t.score_line() == ("SCORE recall=0.500 (2/4) material_recall=0.667 (2/3) over_budget=1 unreported_missing_zones=2 "
                              "false_missing_zones=1 distractors_packed=1 false_material_flags=1/2 flag_precision=0.500 errors=1/3")
    assert ScoreTotals.of([]).score_line().startswith("SCORE recall=n/a (0/0) material_recall=n/a (0/0)")


# -- loading the folder ---------------------------------------------------------------------------


def test_load_reads_the_folder(folder):
    root, ids = folder
    s = load_labelled_set(root)
    assert list(s.intents) == ["investigator", "tax", "scribe"] and list(s.golds) == [LOT, CLEAN]
    assert s.golds[CLEAN].intents[TAX].zones_absent == ["tax_liens"]
    assert s.pages[(f"{LOT}/title.pdf", 2, 2)] == [ids["a_lien"]]
    assert s.patterns_file == root / "patterns.jsonl"
    assert list(load_labelled_set(root, agents=["tax"]).intents) == ["tax"]


@pytest.mark.parametrize(("edit", "message"), [
    (lambda g, ids: g["intents"][TAX].pop("zones_absent"), r"2026-EVAL-0002\.json: field intents\.tax_arrears_check_v1\.zones_absent: Field required"),
    (lambda g, ids: g["intents"][INV].update(risk_chunk_ids=["f" * 64]), r"2026-EVAL-0002\.json: field intents\.title_risk_scan_v1\.risk_chunk_ids\.0: chunk f{64} is not in .*2026-EVAL-0002\.jsonl"),
    (lambda g, ids: g["intents"][INV].update(material_chunk_ids=[ids["b_easement"]]), r"2026-EVAL-0002\.json: field intents\.title_risk_scan_v1: .*material_chunk_ids"),
    (lambda g, ids: g["intents"].pop(SCRIBE), r"2026-EVAL-0002\.json: field intents\.drafting_v1: missing"),
    (lambda g, ids: g.update(deal_id="2026-EVAL-9999"), r"2026-EVAL-0002\.json: field deal_id"),
    (lambda g, ids: g["intents"][TAX].update(zones_absent=["tax_lein"]), r"2026-EVAL-0002\.json: field intents\.tax_arrears_check_v1: .*tax_lein"),
])
def test_malformed_gold_names_the_file_and_field(folder, edit, message):
    root, ids = folder
    path = root / "gold" / f"{CLEAN}.json"
    gold = json.loads(path.read_text())
    edit(gold, ids)
    path.write_text(json.dumps(gold))
    with pytest.raises(LabelledSetError, match=message):
        load_labelled_set(root)


def test_malformed_intents_and_json_name_the_file(folder):
    root, _ = folder
    with pytest.raises(LabelledSetError, match=r"intents\.json: no entry for agent\(s\) \['notary'\]"):
        load_labelled_set(root, agents=["notary"])
    (root / "gold" / f"{LOT}.json").write_text('{"deal_id": "2026-EVAL-0001", "intents": {')
    with pytest.raises(LabelledSetError, match=r"2026-EVAL-0001\.json: not JSON"):
        load_labelled_set(root)
    intents = json.loads((root / "intents.json").read_text())
    intents["tax"]["budget"] = 0
    (root / "intents.json").write_text(json.dumps(intents))
    with pytest.raises(LabelledSetError, match=r"intents\.json: field tax\.budget"):
        load_labelled_set(root)


# -- the engine ---------------------------------------------------------------------------------


def test_engine_scores_what_it_is_given(folder, store, make_chunk, counter):
    """A scripted retrieval (fake) per intent: the runs equal the hand-computed scores of those packages."""
    root, ids = folder
    chunks = {c.chunk_id: c for c in _deal_chunks(make_chunk).values()}
    seen: list[RetrievalIntent] = []

    def scripted(intent: RetrievalIntent) -> tuple[ContextPackage, RetrievalSummary]:
        seen.append(intent)
        if (intent.deal_id, intent.intent_id) == (LOT, TAX):   # the arrears line quoted as an excerpt
            pkg = _package(LOT, [_ref(chunks[ids["a_tax"]], (40, 120))], "MATERIAL RISK INDICATORS (1):\n[E1] tax_arrears", counter)
            return pkg, _summary()
        if (intent.deal_id, intent.intent_id) == (CLEAN, TAX):  # a clean certificate claimed material, tax_liens not reported
            return _package(CLEAN, [_ref(chunks[ids["b_tax"]])], "MATERIAL RISK INDICATORS (1):\n[E1] tax_arrears", counter), _summary()
        if (intent.deal_id, intent.intent_id) == (CLEAN, INV):  # the discharged mortgage packed; a present zone said missing
            return (_package(CLEAN, [_ref(chunks[ids["b_old_mortgage"]])], "NO MATERIAL RISK INDICATORS in 4 inspected chunk(s)", counter),
                    _summary(missing=["caveats_section"]))
        return _package(intent.deal_id, [], "NO MATERIAL RISK INDICATORS in 4 inspected chunk(s)", counter, total=0), _summary()

    report = evaluate_labelled(store, root, agents=["investigator", "tax"], retrieve=scripted)
    assert [(i.deal_id, i.intent_id, i.max_tokens_budget) for i in seen] == [
        (LOT, INV, 4000), (LOT, TAX, 2000), (CLEAN, INV, 4000), (CLEAN, TAX, 2000)]
    assert report.ingest.model_dump() == {"ingested": 12, "unchanged": 0, "patterns_added": 1, "patterns_unchanged": 0}
    runs = {(r.deal_id, r.agent): r for r in report.runs}
    lot_tax = runs[(LOT, "tax")]
    assert (lot_tax.gold_found, lot_tax.material_found, lot_tax.excerpts, lot_tax.flags_on_material) == (1, 1, 1, 1)
    assert (runs[(LOT, "investigator")].gold_found, runs[(LOT, "investigator")].material_found) == (0, 0)
    clean_tax = runs[(CLEAN, "tax")]
    assert clean_tax.false_material_claim and clean_tax.unreported_missing_zones == ["tax_liens"] and clean_tax.flag_precision == 0.0
    clean_inv = runs[(CLEAN, "investigator")]
    assert clean_inv.distractors_packed == 1 and clean_inv.false_missing_zones == ["caveats_section"] and not clean_inv.false_material_claim
    t = report.total
    assert t.score_line() == ("SCORE recall=0.500 (1/2) material_recall=0.500 (1/2) over_budget=0 unreported_missing_zones=1 "
                              "false_missing_zones=1 distractors_packed=1 false_material_flags=1/2 flag_precision=0.500 errors=0/4")
    assert report.by_agent["tax"].gold_found == 1 and report.by_agent["investigator"].false_missing_zones == 1


def test_engine_on_the_node(folder, store):
    """The real node on the two deals: everything fits its budget, so every gold chunk is packed."""
    root, ids = folder
    report = evaluate_labelled(store, root)
    assert len(report.runs) == 6 and report.total.errors == 0
    runs = {(r.deal_id, r.agent): r for r in report.runs}
    assert report.total.recall == 1.0 and report.total.material_recall == 1.0 and report.total.over_budget == 0
    assert runs[(LOT, "investigator")].claims_material and runs[(LOT, "tax")].claims_material
    assert runs[(CLEAN, "tax")].unreported_missing_zones == []     # the node reports the certificate's missing liens line
    assert all(0 < r.framing_share < 1 for r in report.runs if r.total_tokens)
    again = evaluate_labelled(store, root, agents=["tax"])           # a second run ingests nothing new
    assert LabelledReport.model_validate_json(report.model_dump_json()) == report  # a saved report loads back
    assert again.ingest.unchanged == 12 and again.ingest.ingested == 0 and again.ingest.patterns_unchanged == 1
    assert [r.model_dump(exclude={"audit_id"}) for r in again.runs] == [
        r.model_dump(exclude={"audit_id"}) for r in report.runs if r.agent == "tax"]


# -- the command ----------------------------------------------------------------------------------


def _app() -> typer.Typer:
    app = typer.Typer()
    app.command("eval")(eval_command)
    app.command("noop")(lambda: None)  # two commands: typer keeps "eval" as a subcommand
    return app


def test_command_json_and_table(folder, tmp_path):
    root, _ = folder
    runner = CliRunner()
    out = runner.invoke(_app(), ["eval", str(root), "--agents", "tax", "--store", str(tmp_path / "s"), "--json"])
    assert out.exit_code == 0, out.output
    doc = json.loads(out.stdout)
    assert [r["deal_id"] for r in doc["runs"]] == [LOT, CLEAN] and doc["score_line"].startswith("SCORE ")
    assert doc["total"]["gold"] == 1 and "recall" in doc["runs"][0]
    table = runner.invoke(_app(), ["eval", str(root), "--agents", "tax", "--store", str(tmp_path / "s")])
    assert table.exit_code == 0, table.output
    assert re.search(r"^SCORE recall=1\.000 \(1/1\) material_recall=1\.000 \(1/1\) over_budget=0 ", table.stdout, re.M)
    assert doc["score_line"] in table.stdout
    fresh = runner.invoke(_app(), ["eval", str(root), "--agents", "tax", "--json"])  # a temporary store, removed afterwards
    assert fresh.exit_code == 0, fresh.output
    assert json.loads(fresh.stdout)["score_line"] == doc["score_line"]


def test_command_exit_2_names_the_malformed_file(folder, tmp_path):
    root, _ = folder
    (root / "gold" / f"{CLEAN}.json").write_text('{"deal_id": "2026-EVAL-0002"}')
    out = CliRunner().invoke(_app(), ["eval", str(root), "--store", str(tmp_path / "s"), "--json"])
    assert out.exit_code == 2
    assert json.loads(out.stdout)["error"]["type"] == "LabelledSetError"
    assert "2026-EVAL-0002.json: field intents: Field required" in out.stderr


# -- the baselines of benchmarks/deal_quality.py ---------------------------------------------------


@pytest.mark.parametrize("methods", [("dense", "bm25"), ("ensemble",)])
def test_baselines_fill_the_same_budget_with_the_same_rendering(folder, store, counter, methods):
    import sys

    if "ensemble" in methods:  # the bench extra: pip install -e .[bench]
        pytest.importorskip("langchain_community.retrievers")
        pytest.importorskip("langchain_classic.retrievers")
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    from deal_quality import BaselineRetrievals

    root, ids = folder
    evaluate_labelled(store, root, agents=["tax"])  # ingests the folder
    baselines = BaselineRetrievals(store, max_sensitivity="confidential")
    try:
        for method in methods:
            for agent, budget in (("investigator", 4000), ("tax", 2000), ("tax", 60)):
                intent = baselines.agent.intent_for(agent, deal_id=LOT, budget=budget)
                pkg, summary = baselines.retrieve(method, intent)
                assert pkg.total_tokens <= budget and pkg.total_tokens == counter.count(pkg.to_prompt())
                sections = {s.value for s in intent.target_section_types}
                assert all(r.section_type.value in sections and r.char_start is None for r in pkg.ordered_chunks)
                assert pkg.risk_summary == "" and summary.missing_zones == []
                got = {r.chunk_id for r in pkg.ordered_chunks}
                if agent == "investigator":  # four title chunks, all fit: every ranking packs them all
                    assert got == {ids["a_lien"], ids["a_old_mortgage"], ids["a_caveat"], ids["a_legal"]}
                elif budget == 2000:         # the tax profile reads tax certificates only, not the offer
                    assert got == {ids["a_tax"]}
                else:
                    assert got == set()       # no block fits in 60 tokens beside the preamble
        report = evaluate_labelled(store, root, agents=["tax"], ingest=False, retrieve=lambda i: baselines.retrieve(methods[-1], i))
        assert report.total.recall == 1.0 and report.total.false_material_claims == 0
        assert [r.unreported_missing_zones for r in report.runs] == [[], ["tax_liens"]]  # a baseline reports no zone
    finally:
        baselines.close()


def test_deal_quality_labelled_mode_writes_its_table(folder, tmp_path, capsys):
    import importlib.util
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    import deal_quality

    root, _ = folder
    has_bench = all(importlib.util.find_spec(m) for m in ("langchain_classic", "langchain_community", "rank_bm25"))
    methods = "node,dense,bm25" + (",ensemble" if has_bench else "")
    out = tmp_path / "dq.json"
    rc = deal_quality.main(["--labelled", str(root), "--store", str(tmp_path / "s"), "--agents", "investigator,tax",
                            "--methods", methods, "--out", str(out)])
    assert rc == 0
    data = json.loads(out.read_text())
    assert list(data["reports"]) == methods.split(",") and data["settings"]["deals"] == [LOT, CLEAN]
    assert data["scope"]["tax"] == {"gold": 1, "gold_in_scope": 1, "runs": 2, "scope_over_budget": 0}
    assert all(r["total"]["over_budget"] == 0 for r in data["reports"].values())
    printed = capsys.readouterr().out
    assert re.search(r"^total\s+node\s+100\.0% \(\d+/\d+\)", printed, re.M)
    assert sum(line.split()[1:2] == ["SCORE"] for line in printed.splitlines()) == len(methods.split(","))
