"""A passage Stage 0 split across two chunks travels whole with the material half (issue 15).

Rules stated here, each in the layouts we could think of (running headers and page footers or none,
a board motion cut mid-sentence, a word broken by a hyphen, a table continued under "(cont.)" on a page
shared with another chunk, item lists that open in lower case):

* the chunk a material chunk's passage runs into or out of is packed with it;
* nothing is linked on a guess: two possible predecessors, another document, a finished sentence or a
  list item in lower case give no link;
* a companion passes the same walls as every chunk: a section the contract forbids at this stage, or a
  sensitivity above the caller's clearance, never enters a package as a companion.

Every text is written for the test.
"""

from __future__ import annotations

import pytest

from retrieval_node.ingest import Ingestor
from retrieval_node.models import TrustContext, sha256_hex
from retrieval_node.passages import body_lines, continuation_links, continues, leads_on
from retrieval_node.values import ChunkView

from tests.conftest import write_jsonl

HEADER = "HARBOUR LANE MANAGEMENT - RECORDS REQUEST 5521 - THE MEADOWS - UNIT 14"
DOC = "D/condo-package.pdf"


def view(content: str, page: int, *, n: int = 0, doc: str = DOC, page_end: int | None = None) -> ChunkView:
    h = sha256_hex(content)
    return ChunkView(
        memory_id="", chunk_id=sha256_hex(f"{doc}:{page}:{n}:{h}"), deal_id="D", document_id=doc, document_role="CONDO_DOCS",
        section_type="CONDO_MINUTES", page_start=page, page_end=page_end or page, content=content, content_hash=h, token_count=50,
        ocr_confidence=0.9, zones=(), entity_ids=(), sensitivity="confidential", document_created_at=None,
        ingested_at="2026-01-01T00:00:00+00:00",
    )


def paged(body: str, page: int, *, header: bool = True, footer: bool = True) -> str:
    parts = ([HEADER, ""] if header else []) + [body] + (["", f"Page {page} of 90"] if footer else [])
    return "\n".join(parts)


FILLER = [  # other pages of the same document, so the running header is seen as furniture
    "3. Landscaping. The spring clean-up contract was renewed for one year.",
    "4. Parking. Two visitor stalls will be marked for short stays.",
    "5. Recycling. The bins will be picked up weekly from May to October.",
]

MOTION_HEAD = ("7. Parkade membrane. The engineer presented the findings. MOVED by J. Ortiz, seconded by P. Lam,\n"
               "that the Corporation replace the parkade membrane as described in the report and that the cost be")
MOTION_TAIL = ("recovered from the owners by an assessment of $9,800 per unit, payable in two instalments due\n"
               "April 1 and July 1, 2026. CARRIED unanimously.\n\n8. Adjournment at 8:40 p.m.")


@pytest.mark.parametrize(("header", "footer"), [(True, True), (False, True), (True, False), (False, False)])
def test_a_motion_cut_mid_sentence_links_its_two_halves(header, footer):
    fill = [view(paged(t, 10 + i, header=header, footer=footer), 10 + i) for i, t in enumerate(FILLER)]
    head = view(paged(MOTION_HEAD, 20, header=header, footer=footer), 20)
    tail = view(paged(MOTION_TAIL, 21, header=header, footer=footer), 21)
    links = continuation_links([*fill, head, tail])
    assert links.links == {tail.chunk_id: head.chunk_id}
    assert links.partners(tail.chunk_id) == (head.chunk_id,) and links.partners(head.chunk_id) == (tail.chunk_id,)


def test_a_word_broken_by_a_hyphen_at_the_page_end_links():
    head = view("The Board resolved that the balcony work be funded by a special contri-", 4)
    tail = view("bution of $3,200 per unit, due on June 1, 2026.", 5)
    assert continuation_links([head, tail]).links == {tail.chunk_id: head.chunk_id}


def test_a_continued_table_links_to_the_chunk_that_holds_its_label_not_to_a_neighbour_on_the_same_page():
    other = view(paged("Table 4.1 Component inventory\nRoof  25  10  15  $410,000  2041", 30), 30, n=1)
    head = view(paged("Table 4.2 Projection at the current contribution\nYear Opening Contributions Expenditures Closing\n"
                      "2026 $300,000 $90,000 $0 $390,000", 30), 30, n=2)
    tail = view(paged("Table 4.2 (cont.)\nYear Opening Contributions Expenditures Closing\n2031 $120,000 $95,000 $400,000 $-185,000", 31), 31)
    same_page = view(paged("4.3 Funding position\nReserve balance $300,000", 31), 31, n=1)
    links = continuation_links([other, head, tail, same_page, *(view(paged(t, 40 + i), 40 + i) for i, t in enumerate(FILLER))])
    assert links.links == {tail.chunk_id: head.chunk_id}


@pytest.mark.parametrize("first", ["Table 9 (continued)", "(continued from the previous page)", "Schedule B cont.", "Note 11 (cont'd)"])
def test_continuation_markers_are_read(first):
    assert continues(first)[0]


@pytest.mark.parametrize("first", ["a) the roof; b) the parkade", "(iv) any other matter", "e.g. the parkade", "7. Parkade membrane.",
                                   "REGISTRATIONS", "Minutes of the Board"])
def test_an_item_label_heading_or_capitalised_line_does_not_continue(first):
    assert not continues(first)[0]


@pytest.mark.parametrize(("last", "open_"), [("that the cost be", True), ("contri-", True), ("CARRIED.", False),
                                             ("Meeting adjourned at 9:05 p.m.", False), ("$790,308", False), ("(see note 6)", False)])
def test_a_last_line_leads_on_only_mid_sentence(last, open_):
    assert leads_on(last) is open_


def test_no_link_on_a_guess_or_across_documents():
    head_a = view("The Board directed that the cost be", 20, n=1)
    head_b = view("The Board further directed that the amount be", 20, n=2)
    tail = view("recovered from the owners by an assessment of $9,800 per unit.", 21)
    assert continuation_links([head_a, head_b, tail]).links == {}          # two possible predecessors: none chosen
    elsewhere = view("recovered from the owners by an assessment of $9,800 per unit.", 21, doc="D/other.pdf")
    assert continuation_links([head_a, elsewhere]).links == {}             # another document
    finished = view("The motion was put to a vote.", 20)
    assert continuation_links([finished, tail]).links == {}                # the earlier chunk ends its sentence
    far = view("The Board directed that the cost be", 12)
    assert continuation_links([far, tail]).links == {}                     # not the page before
    one = view("recovered as the Board directs", 20, n=1)
    other = view("and approved by the owners", 20, n=2)
    assert continuation_links([one, other]).links == {}                    # each seems to continue the other: order unknown


@pytest.mark.parametrize("brk", ["\n", "\r\n", "\r", "\f", "\u2028"])
def test_page_furniture_is_stripped_before_the_first_and_last_lines_are_read(brk):
    """At any line break Stage 0 writes (Windows, a lone carriage return, a form feed, a Unicode line separator)."""
    chunks = [view(paged(t, 10 + i).replace("\n", brk), 10 + i) for i, t in enumerate(FILLER)]
    from retrieval_node.passages import _furniture
    furniture = _furniture(chunks)
    assert body_lines(chunks[0].content, furniture) == [FILLER[0]]


# --------------------------------------------------------------------------- through the pipeline

#: minutes that read close to the condo agent's question but carry no risk: they outscore the motion's opening half
ON_TOPIC = [
    "2. Reserve fund. The treasurer reviewed the reserve fund contribution and the reserve fund study update; received and filed.",
    "3. Financial statements. The Board reviewed the reserve fund and operating fund statements for the year and approved them.",
    "4. Reserve fund plan. Owners asked about the reserve fund plan; the manager will circulate the study summary.",
    "5. Special resolutions. The Board reviewed which matters need a special resolution of the owners under the bylaws.",
    "6. Building condition. The Board reviewed the building condition report and the reserve fund study schedule.",
]


def _minutes_deal(make_chunk, *, deal: str, head_section: str = "CONDO_MINUTES", head_sensitivity: str = "confidential"):
    doc = f"{deal}/condo-package.pdf"
    chunks = [make_chunk(paged(t, 10 + i), deal_id=deal, document_id=doc, role="CONDO_DOCS", section="CONDO_MINUTES", page=10 + i)
              for i, t in enumerate(ON_TOPIC)]
    chunks.append(make_chunk(paged(MOTION_HEAD, 20), deal_id=deal, document_id=doc, role="CONDO_DOCS", section=head_section, page=20,
                             metadata={"sensitivity": head_sensitivity}))
    chunks.append(make_chunk(paged(MOTION_TAIL, 21), deal_id=deal, document_id=doc, role="CONDO_DOCS", section="SPECIAL_RESOLUTIONS",
                             page=21))
    chunks.append(make_chunk("Legal description: Condominium Plan 071 2345, Unit 14, with its undivided share in the common property.",
                             deal_id=deal, document_id=f"{deal}/title-search.pdf", section="LEGAL_DESCRIPTION", page=1))
    return chunks


#: room for the preamble, the motion's two halves and about one more block: the on-topic minutes cannot all fit
TIGHT_BUDGET = 420


def _run(store, agent_name: str, deal: str, *, stage: str = "DILIGENCE", trust: TrustContext | None = None):
    from retrieval_node import RetrievalAgent

    trust = trust or TrustContext(max_sensitivity="privileged", authenticated=True, actor_id="test")
    agent = RetrievalAgent(store, trust=trust)
    try:
        return agent.retrieve_sync(agent.intent_for(agent_name, deal_id=deal, stage=stage, budget=TIGHT_BUDGET))
    finally:
        agent.close()


def test_the_start_of_a_levy_motion_is_packed_with_the_material_half(store, make_chunk, tmp_path):
    deal = "2026-PASS-0001"
    chunks = _minutes_deal(make_chunk, deal=deal)
    Ingestor(store).ingest([write_jsonl(tmp_path / "d.jsonl", chunks)])
    head, tail = chunks[-3], chunks[-2]
    package, summary = _run(store, "condo", deal)
    got = [r.chunk_id for r in package.ordered_chunks]
    assert tail.chunk_id in got and head.chunk_id in got
    left_out = [c.chunk_id for c in chunks[:len(ON_TOPIC)] if c.chunk_id not in got]
    assert left_out, "the budget must be tight enough that the opening half competes with something"
    assert [m.chunk_id for m in summary.material_risks if m.chunk_id == tail.chunk_id]   # the tail carries the finding
    assert head.chunk_id not in {m.chunk_id for m in summary.material_risks}            # the head is context, not a second finding


def test_a_companion_in_a_section_the_contract_forbids_never_enters(store, make_chunk, tmp_path):
    deal = "2026-PASS-0002"
    chunks = _minutes_deal(make_chunk, deal=deal)  # the head is labelled CONDO_MINUTES: the scribe's DRAFTING contract forbids it
    Ingestor(store).ingest([write_jsonl(tmp_path / "d.jsonl", chunks)])
    head, tail = chunks[-3], chunks[-2]
    package, _ = _run(store, "scribe", deal, stage="DRAFTING")
    got = {r.chunk_id for r in package.ordered_chunks}
    assert tail.chunk_id in got and head.chunk_id not in got
    assert all(r.section_type.value != "CONDO_MINUTES" for r in package.ordered_chunks)


def test_a_companion_above_the_callers_clearance_never_enters(store, make_chunk, tmp_path):
    deal = "2026-PASS-0003"
    chunks = _minutes_deal(make_chunk, deal=deal, head_sensitivity="privileged")
    Ingestor(store).ingest([write_jsonl(tmp_path / "d.jsonl", chunks)])
    head, tail = chunks[-3], chunks[-2]
    package, _ = _run(store, "condo", deal, trust=TrustContext(max_sensitivity="confidential", authenticated=True, actor_id="test"))
    got = {r.chunk_id: r for r in package.ordered_chunks}
    assert tail.chunk_id in got
    assert head.chunk_id not in got or got[head.chunk_id].redacted
