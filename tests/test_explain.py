"""summary.material_risks (interfaces.md section 4): one entry per chunk judged material, with verbatim evidence."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from retrieval_node.explain import material_risks, risk_evidence
from retrieval_node.models import sha256_hex, to_reference
from retrieval_node.values import ChunkView, Scored, ScoreTerms, Selection


def _chunk(content: str, n: int = 1) -> ChunkView:
    h = sha256_hex(content)
    return ChunkView(
        memory_id="", chunk_id=sha256_hex(f"{n}:{h}"), deal_id="D", document_id="D/title.pdf", document_role="TITLE_SEARCH",
        section_type="INSTRUMENTS_REGISTER", page_start=n, page_end=n, content=content, content_hash=h, token_count=10,
        ocr_confidence=0.9, zones=(), entity_ids=(), sensitivity="confidential", document_created_at=None,
        ingested_at="2026-01-01T00:00:00+00:00",
    )


def _scored(content: str, kinds: tuple[str, ...], terms: tuple[str, ...] = (), n: int = 1) -> Scored:
    return Scored(chunk=_chunk(content, n), terms=ScoreTerms(risk=0.9 if kinds else 0.1, risk_kinds=kinds, risk_terms=terms))


def test_evidence_is_the_line_that_names_the_risk_verbatim():
    text = "REGISTRATIONS\n252 114 567  2025/11/03  Builders'\u00a0Lien  $48,260.00  Bow River Drywall\n172 200 310  MORTGAGE"
    s = _scored(text, ("builders_lien",), ("builders' lien",))
    assert risk_evidence(s) == "252 114 567  2025/11/03  Builders'\u00a0Lien  $48,260.00  Bow River Drywall"


def test_evidence_is_the_line_that_names_the_risk_at_any_line_break_stage0_writes():
    """Windows line breaks, a lone carriage return, a page's form feed, a Unicode line separator: the evidence is still
    the one line, not the chunk from its start."""
    rows = ["REGISTRATIONS", "252 114 567  2025/11/03  Builders' Lien  $48,260.00  Bow River Drywall", "172 200 310  MORTGAGE"]
    for brk in ("\r\n", "\r", "\f", "\u2028", "\x85"):
        s = _scored(brk.join(rows), ("builders_lien",), ("builders' lien",))
        assert risk_evidence(s) == rows[1], repr(brk)


def test_a_risk_read_from_numbers_quotes_the_passage_that_carries_it():
    text = "Reserve fund study 2025.\nClosing balance $41,000; recommended balance $390,000.\nNext study due 2028."
    s = _scored(text, ("reserve_shortfall",))  # no lexicon term: the detector read the numbers
    start = text.index("Closing")
    assert risk_evidence(s, excerpt_for=lambda c: (start, text.index("\nNext"))) == "Closing balance $41,000; recommended balance $390,000."


def test_evidence_read_from_numbers_does_not_open_on_a_running_header():
    """A header every page of the document repeats, a page-number line or a blank line is not the first thing a lawyer
    reads as the evidence of a risk the numbers carry; with nothing else in the passage the passage stays as it was."""
    from retrieval_node.passages import continuation_links

    header = "HARBOUR VIEW CONDOMINIUM - RESALE FILE 4471 - UNIT 12"
    pages = [f"{header}\n\nMinutes of the board, item {i}: landscaping contract renewed.\n\nPage {i} of 9" for i in range(1, 5)]
    table = (f"{header}\n\nPage 5 of 9\nYear Opening Contributions Expenditures Closing\n"
             "2031 $412,000 $96,000 $560,000 $-52,000\n2032 $-52,000 $99,000 $10,000 $37,000")
    chunks = [_chunk(t, n) for n, t in enumerate([*pages, table], start=1)]
    furniture = continuation_links(chunks).furniture(chunks[0].document_id)
    s = Scored(chunk=chunks[-1], terms=ScoreTerms(risk=0.9, risk_kinds=("reserve_shortfall",)))
    whole = (0, len(table))
    ev = risk_evidence(s, excerpt_for=lambda c: whole, furniture=furniture)
    assert ev.startswith("Year Opening Contributions") and "$-52,000" in ev and ev in table
    assert risk_evidence(s, excerpt_for=lambda c: whole).startswith(header)  # without the document's furniture: as before
    only_header = (0, len(header))
    assert risk_evidence(s, excerpt_for=lambda c: only_header, furniture=furniture) == header
    assert risk_evidence(s, furniture=furniture).startswith("Year Opening Contributions")  # no passage: the opening, past the header


def test_packaged_and_left_out_risks_are_listed_and_plain_or_redacted_chunks_are_not():
    lien = _scored("CAVEAT 212 300 111 re: purchaser's interest, caveator H. Finch", ("caveat",), ("caveat re",), n=1)
    plain = _scored("Certificate of title. Registered owner M. Olsen.", (), n=2)
    out = _scored("Writ of enforcement 232 555 010 against the owner, $12,400", ("judgment",), ("writ of enforcement",), n=3)
    hidden = _scored("Builders' lien 252 114 567 for $9,000", ("builders_lien",), ("builders' lien",), n=4)
    sel = Selection(chosen={s.chunk.chunk_id: s for s in (lien, plain, hidden)})
    refs = [to_reference(lien.chunk), to_reference(plain.chunk),
            to_reference(hidden.chunk).model_copy(update={"content": "", "redacted": True})]
    got = material_risks(refs, sel, [out])
    assert [(m.chunk_id, m.kinds, m.in_package) for m in got] == [
        (lien.chunk.chunk_id, ["caveat"], True),
        (out.chunk.chunk_id, ["judgment"], False),
    ]
    assert got[0].evidence.startswith("CAVEAT 212 300 111") and "Writ of enforcement" in got[1].evidence
    assert material_risks([to_reference(plain.chunk)], Selection(chosen={plain.chunk.chunk_id: plain}), []) == []


@settings(max_examples=200, deadline=None)
@given(text=st.text(min_size=1, max_size=600), term=st.sampled_from(["caveat", "builders' lien", "special levy", "arrears"]),
       cut=st.integers(0, 600))
def test_evidence_is_always_a_non_empty_substring_of_the_chunk(text, term, cut):
    if not text.strip():
        text = "x" + text
    s = _scored(text, ("other",), (term,))
    span = (min(cut, len(text) - 1), len(text))
    for excerpt in (None, lambda c: span):
        ev = risk_evidence(s, excerpt_for=excerpt)
        assert ev and ev in text and len(ev) <= 300
