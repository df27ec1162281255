"""Risk signal: terms that are routine until money is named ("special resolution", "deductible", "holdback")."""

from __future__ import annotations

import pytest

from retrieval_node.config import RiskLexicon, load_config
from retrieval_node.risk import best_risk_span, risk_signal

LEX = RiskLexicon.model_validate({
    "domains": {"condo": {"terms": [
        {"term": "special resolution", "weight": 0.6, "kind": "special_levy", "needs_amount": True},
        {"term": "deductible", "weight": 0.6, "kind": "insurance", "needs_amount": True},
        {"term": "special levy", "weight": 1.0, "kind": "special_levy"},
    ]}},
    "benign_cues": ["certified and paid"],
})


@pytest.mark.parametrize(("text", "material"), [
    # a resolution that names no money is not a levy, whatever dates and instrument numbers surround it
    ("Bylaw 22 was amended by Special Resolution registered as Instrument 241 087 552 on April 2, 2024.", False),
    ("The owners passed a Special Resolution on March 8, 2024 restricting pets.", False),
    # the same term with an amount owed is concrete
    ("Envelope Contribution under Special Resolution 2026-1: $1,200.00, payable in two instalments.", True),
    ("With a water damage deductible of $250,000, an escape of water is paid from the Corporation's funds.", True),
    # normative wording stays generic even with money
    ("The Corporation may charge an owner the deductible, up to $50,000.", False),
    ("The deductible is $0.00 for this policy.", False),
    # an instrument that names its own amount is concrete even beside "any"; a threshold is not
    ("The Corporation may establish a credit facility of up to $1,000,000.", False),
    ("A special levy of $18,400 funds any part of the work not covered by the reserve.", True),
    ("Report any special levy over $5,000 to the lender.", False),
    # an ordinary term keeps the old rule: a date makes it concrete
    ("A special levy was approved on February 24, 2026.", True),
    # the month of May is a date, not the modal verb
    ("A special levy was approved on May 2, 2026.", True),
    ("A special levy of $4,000,000 was approved at the meeting of May, 2026.", True),
    ("The board may approve a special levy.", False),
])
def test_needs_amount_terms_are_material_only_with_money(text, material):
    assert risk_signal(text, LEX, ["condo"]).material is material, risk_signal(text, LEX, ["condo"])


def test_shipped_lexicon_on_the_hard_fixture_wording():
    lex = load_config().risk_signals
    assert lex is not None
    routine = ("HME reports that progress draw 1 ($118,750 less holdback) has been certified and paid.")
    owed = ("Kodiak's invoice for the final progress payment and release of holdback, totalling $386,915.40, was received "
            "and the Corporation withheld it pending the engineer's report.")
    assert not risk_signal(routine, lex, ["condo"]).material
    assert risk_signal(owed, lex, ["condo"]).material
    pets = "3. This Special Resolution does not levy, authorize or change any contribution or borrowing."
    assert not risk_signal(pets, lex, ["condo"]).material


def test_excerpt_length_follows_max_chars():
    text = "\n".join(["Routine line about the parking stall and the storage locker."] * 6
                     + ["A special levy of $18,400 for Unit 147 is payable on closing."]
                     + ["Another routine line about the bicycle room and elevators."] * 6)
    for limit in (120, 350, 700):
        span = best_risk_span(text, LEX, ["condo"], max_chars=limit)
        assert span is not None and span[1] - span[0] <= limit
        assert "special levy of $18,400" in text[span[0]:span[1]]


def test_risk_kinds_restrict_what_counts_as_a_risk():
    """An agent that acts on levies and registrations only: litigation alone is no risk for it, a levy still is."""
    lex = load_config().risk_signals
    assert lex is not None
    suit = "Certificate of lis pendens registered as instrument 262 044 118 on April 3, 2026."
    levy = "The owners approved a special levy of $18,400 for Unit 147, payable on June 1, 2026."
    only = lex.only_kinds(["special_levy", "builders_lien"])
    assert risk_signal(suit, lex, ["title"]).material and not risk_signal(suit, only, ["title"]).material
    assert risk_signal(levy, only, ["condo"]).kinds == ("special_levy",)
    reserve = "Reserve fund balance $212,418; fully funded balance $1,402,600."
    assert "reserve_shortfall" in risk_signal(reserve, lex, ["condo"]).kinds
    assert not risk_signal(reserve, only, ["condo"]).kinds


def test_unknown_risk_kind_in_a_profile_names_the_agent():
    cfg = load_config()
    agents = {n: a.model_dump() for n, a in cfg.agents.items()}
    agents["scribe"]["risk_kinds"] = ["special_levy", "speling_mistake"]
    with pytest.raises(ValueError, match=r"scribe.*speling_mistake"):
        type(cfg).model_validate({**cfg.model_dump(), "agents": agents})
