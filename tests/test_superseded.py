"""A registration shown in an older and a newer search of the same title is one finding, read at the newer one.

Rules stated here: the older copy loses its finding only when the newer document shows every registration
it shows; a registration only the older search shows keeps its finding (a page of the newer search may be
missing); without dates, or across document roles, nothing is superseded. Every text is written for the test.
"""

from __future__ import annotations

from retrieval_node.ingest import Ingestor
from retrieval_node.models import TrustContext, sha256_hex
from retrieval_node.superseded import dates_in, registrations_in, superseded_copies
from retrieval_node.values import ChunkView
from tests.conftest import write_jsonl

CAVEAT = "041 552 317   08/04/2004     CAVEAT\n                RE : AGREEMENT FOR SALE\n                CAVEATOR - MARTA KOWALCZYK."
ROW = "881 004 112   02/02/1988     UTILITY RIGHT OF WAY\n                GRANTEE - ATCO GAS."
WRIT = "262 118 905   03/02/2026     WRIT\n                CREDITOR - NORTHGATE FINANCE LTD."


def view(content: str, doc: str, *, role: str = "TITLE_SEARCH", page: int = 1) -> ChunkView:
    h = sha256_hex(content)
    return ChunkView(
        memory_id="", chunk_id=sha256_hex(f"{doc}:{page}:{h}"), deal_id="D", document_id=doc, document_role=role,
        section_type="INSTRUMENTS_REGISTER", page_start=page, page_end=page, content=content, content_hash=h, token_count=50,
        ocr_confidence=0.9, zones=(), entity_ids=(), sensitivity="confidential", document_created_at=None,
        ingested_at="2026-01-01T00:00:00+00:00",
    )


OLD_CERT = "CERTIFIED THIS 14 DAY OF AUGUST, 2025"
NEW_CERT = "CERTIFIED THIS 9 DAY OF MARCH, 2026"


def test_dates_and_registration_numbers_are_read_as_printed():
    assert dates_in("02/02/1988 and 2026-03-09, March 9, 2026, THIS 14 DAY OF AUGUST, 2025") == [
        (1988, 2, 2), (2026, 3, 9), (2026, 3, 9), (2025, 8, 14)]
    assert registrations_in(CAVEAT + "\n" + ROW + "\n$123 456 789.00") == {"041552317", "881004112"}


def test_the_older_copy_of_every_registration_is_superseded():
    old = view(f"{ROW}\n\n{CAVEAT}\n\n{OLD_CERT}", "D/search-listing.pdf")
    new = view(f"{ROW}\n\n{CAVEAT}\n\n{WRIT}\n\n{NEW_CERT}", "D/search-current.pdf")
    assert superseded_copies([old, new]) == {old.chunk_id: "D/search-current.pdf"}


def test_a_registration_only_the_older_search_shows_keeps_its_finding():
    old = view(f"{ROW}\n\n{CAVEAT}\n\n{OLD_CERT}", "D/search-listing.pdf")
    new = view(f"{ROW}\n\n{WRIT}\n\n{NEW_CERT}", "D/search-current.pdf")  # the caveat's page is not in the newer search
    assert superseded_copies([old, new]) == {}


def test_a_copy_of_the_instrument_itself_is_never_superseded_by_the_register_line():
    copy = view("COPY OF REGISTERED INSTRUMENT 041 552 317\nCAVEAT FORBIDDING REGISTRATION\nThe caveator claims an interest "
                "as purchaser under an agreement for sale dated April 2, 2004.", "D/instrument-copies.pdf")
    new = view(f"{ROW}\n\n{CAVEAT}\n\n{NEW_CERT}", "D/search-current.pdf")
    assert superseded_copies([copy, new]) == {}


def test_a_search_of_another_title_in_the_same_deal_never_supersedes():
    plan_wide = f"{ROW}\n\n{CAVEAT}"
    unit = view(f"{plan_wide}\n\n212 400 118   04/05/2021     MORTGAGE\n{OLD_CERT}", "D/search-unit-12.pdf")
    stall = view(f"{plan_wide}\n\n{WRIT}\n\n{NEW_CERT}", "D/search-parking-stall-4.pdf")  # newer, shares the plan-wide lines
    assert superseded_copies([unit, stall]) == {}


def test_nothing_is_superseded_without_a_later_date_or_across_roles():
    undated = "041 552 317  CAVEAT RE : AGREEMENT FOR SALE\n881 004 112  UTILITY RIGHT OF WAY"
    a = view(undated, "D/a.pdf")
    b = view(f"{ROW}\n\n{CAVEAT}\n\n{NEW_CERT}", "D/b.pdf")
    assert superseded_copies([a, b]) == {}                                     # one states no date: no order
    same = view(f"{ROW}\n\n{CAVEAT}\n\n{NEW_CERT}", "D/c.pdf")
    assert superseded_copies([same, b]) == {}                                  # same date: neither is newer
    payout = view(f"Payout statement for caveat 041 552 317.\n{OLD_CERT}", "D/payout.pdf", role="OTHER")
    assert superseded_copies([payout, b]) == {}                                # another kind of document


def test_the_investigator_flags_a_registration_once_at_the_newer_search(store, make_chunk, tmp_path):
    from retrieval_node import RetrievalAgent

    deal = "2026-SUPR-0001"
    old = make_chunk(f"{ROW}\n\n{CAVEAT}\n\n{OLD_CERT}", deal_id=deal, document_id=f"{deal}/search-listing.pdf")
    new = make_chunk(f"{ROW}\n\n{CAVEAT}\n\n{WRIT}\n\n{NEW_CERT}", deal_id=deal, document_id=f"{deal}/search-current.pdf")
    Ingestor(store).ingest([write_jsonl(tmp_path / "d.jsonl", [old, new])])
    agent = RetrievalAgent(store, trust=TrustContext(max_sensitivity="privileged", authenticated=True, actor_id="test"))
    try:
        package, summary = agent.retrieve_sync(agent.intent_for("investigator", deal_id=deal))
    finally:
        agent.close()
    assert [m.chunk_id for m in summary.material_risks] == [new.chunk_id]
    assert set(summary.material_risks[0].kinds) >= {"caveat", "judgment"}
    assert new.chunk_id in {r.chunk_id for r in package.ordered_chunks}
