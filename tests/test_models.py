from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from retrieval_node.models import (
    ChunkReference,
    ContextPackage,
    DocumentChunk,
    PatternMemory,
    RetrievalIntent,
    compute_chunk_id,
    sha256_hex,
)


def _intent(**over):
    base = dict(
        intent_id="title_risk_scan_v1",
        deal_id="2026-ACME-0042",
        agent_id="investigator_r1",
        query_text="Identify title risks",
        target_section_types=["TITLE_SUMMARY", "INSTRUMENTS_REGISTER"],
        risk_profile="HIGH_RISK",
        max_tokens_budget=4000,
    )
    base.update(over)
    return RetrievalIntent(**base)


def test_chunk_build_computes_interface_hashes(make_chunk):
    c = make_chunk("Builders' Lien 252 114 567", page=2, page_end=3)
    assert c.content_hash == sha256_hex("Builders' Lien 252 114 567")
    assert c.chunk_id == compute_chunk_id(c.document_id, 2, 3, c.content_hash)
    assert c.page_range == "2-3"
    assert c.is_high_confidence


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"content_hash": "0" * 64}, "content_hash"),
        ({"chunk_id": "f" * 64}, "chunk_id"),
        ({"page_start": 5, "page_end": 4}, "page_end"),
        ({"content": ""}, "content"),
        ({"document_role": "DEED"}, "document_role"),
        ({"section_type": "LIENS"}, "section_type"),
        ({"ocr_confidence": 1.5}, "ocr_confidence"),
        ({"page_start": 0}, "page_start"),
        ({"surprise": 1}, "surprise"),
    ],
)
def test_chunk_rule_violations_name_the_rule(make_chunk, change, field):
    data = make_chunk("Caveat re: purchaser's interest").model_dump()
    data.update(change)
    with pytest.raises(ValidationError) as info:
        DocumentChunk.model_validate(data)
    assert field in str(info.value)


def test_chunk_metadata_rejects_unknown_zone(make_chunk):
    with pytest.raises(ValidationError, match="unknown zone"):
        make_chunk("x", metadata={"zones": ["front_sumary"]})


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"max_tokens_budget": 0}, "max_tokens_budget"),
        ({"max_tokens_budget": -5}, "max_tokens_budget"),
        ({"max_tokens_budget": 10**9}, "max_tokens_budget"),
        ({"target_section_types": []}, "target_section_types"),
        ({"deal_id": ""}, "deal_id"),
        ({"agent_id": "  "}, "agent_id"),
        ({"risk_profile": "YOLO"}, "risk_profile"),
        ({"required_structural_zones": ["nowhere"]}, "required_structural_zones"),
    ],
)
def test_intent_errors_name_the_field_not_assert(change, field):
    with pytest.raises(ValidationError) as info:
        _intent(**change)
    assert field in str(info.value)


def test_intent_normalises_sections_for_determinism():
    a = _intent(target_section_types=["INSTRUMENTS_REGISTER", "TITLE_SUMMARY", "TITLE_SUMMARY"])
    b = _intent(target_section_types=["TITLE_SUMMARY", "INSTRUMENTS_REGISTER"])
    assert a == b


@given(budget=st.integers(min_value=-10**6, max_value=10**6))
def test_intent_budget_property(budget):
    if 0 < budget <= 200_000:
        assert _intent(max_tokens_budget=budget).max_tokens_budget == budget
    else:
        with pytest.raises(ValidationError, match="max_tokens_budget"):
            _intent(max_tokens_budget=budget)


@given(content=st.text(min_size=1, max_size=200).filter(lambda s: any(unicodedata.category(c)[0] in "LNPS" for c in s)),
       start=st.integers(1, 500), span=st.integers(0, 20))
def test_chunk_ids_are_derived_and_checked(content, start, span):
    c = DocumentChunk.build(
        deal_id="D", document_id="D/x.pdf", document_role="OTHER", page_start=start, page_end=start + span,
        section_type="GENERAL", content=content, token_count=1,
    )
    assert DocumentChunk.model_validate_json(c.model_dump_json()) == c
    tampered = c.model_dump() | {"content": content + "!"}
    with pytest.raises(ValidationError):
        DocumentChunk.model_validate(tampered)


def test_pattern_entity_id_must_match_type():
    with pytest.raises(ValidationError, match="must start with 'builder:'"):
        PatternMemory(entity_type="builder", entity_id="condo:x", topic="liens", content="x")
    p = PatternMemory(entity_type="builder", entity_id="builder:x", topic="liens", content="x")
    assert p.memory_path == "global/builder/builder:x/liens"


def test_package_json_shape_matches_interface():
    ref = ChunkReference(
        chunk_id="a" * 64, document_id="d", document_role="TITLE_SEARCH", section_type="TITLE_SUMMARY",
        page_range="1-1", content="x", content_hash="b" * 64,
    )
    pkg = ContextPackage(
        deal_id="D", intent_id="i", agent_id="a", ordered_chunks=[ref], structural_toc="", exclusions_note="",
        total_tokens=1, risk_summary="", package_hash="c" * 64,
    )
    data = pkg.model_dump(mode="json")
    assert set(data) >= {"deal_id", "intent_id", "agent_id", "ordered_chunks", "structural_toc", "exclusions_note", "total_tokens", "risk_summary", "package_hash"}
    assert set(data["ordered_chunks"][0]) >= {"chunk_id", "document_id", "document_role", "section_type", "page_range", "content", "content_hash"}
