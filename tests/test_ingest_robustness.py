"""Issue 16 items 6 and 7: long texts never crash the embedder; one bad line (or one refused write) is named and
the other lines land. Real MiniLM, qdrant-edge, Mem0 and tiktoken; the one fake (a registry that refuses every
write) only injects a fault and says so in its name."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from retrieval_node.backends.mem0_registry import Mem0Registry
from retrieval_node.backends.vectors import point_id
from retrieval_node.embedding import POOL_OVERLAP_TOKENS, POOL_WINDOW_TOKENS
from retrieval_node.ingest import (
    MAX_CONSECUTIVE_WRITE_FAILURES,
    Ingestor,
    Rejection,
    _Pending,
    add_patterns,
    parse_chunk_line,
    read_patterns,
)
from retrieval_node.models import MAX_PAGE, DocumentChunk, PatternMemory, compute_chunk_id, sha256_hex
from retrieval_node.tokens import TiktokenCounter
from tests.conftest import write_jsonl

DEAL = "2026-TEST-0001"
#: about 1,300 word pieces: well past MiniLM's 512-row position table
LONG = " ".join(f"Clause {i}: the purchaser shall pay the special levy of ${i * 37},00 on demand." for i in range(90))


def _line(chunk: DocumentChunk, **changes: object) -> str:
    return json.dumps(chunk.model_dump(mode="json") | changes)


def _rebuilt(counter: TiktokenCounter, base: DocumentChunk | dict, **changes: object) -> dict:
    """The chunk's JSON with ``changes`` and its hash, id and token count made consistent again."""
    d = (base.model_dump(mode="json") if isinstance(base, DocumentChunk) else dict(base)) | changes
    d["content_hash"] = sha256_hex(d["content"])
    d["chunk_id"] = compute_chunk_id(d["document_id"], d["page_start"], d["page_end"], d["content_hash"])
    d["token_count"] = counter.count(d["content"])
    return d


# -- item 6: the embedder never hands the model more than it reads -------------------------------------
def test_long_text_is_the_mean_of_its_windows(embedder):
    assert len(embedder._tokenizer(LONG, add_special_tokens=False)["input_ids"]) > 512
    vec = embedder.embed([LONG, "short"])  # the old embedder raised RuntimeError (tensor a (1273) ... (512))
    spans = embedder.window_spans(LONG, POOL_WINDOW_TOKENS, POOL_OVERLAP_TOKENS)
    windows = embedder.embed([LONG[a:b] for a, b in spans])
    mean = windows.mean(axis=0)
    assert len(spans) > 2
    assert np.allclose(vec[0], mean / np.linalg.norm(mean), atol=1e-4)
    assert np.allclose(np.linalg.norm(vec, axis=1), 1.0, atol=1e-5)


def test_query_of_4000_characters_is_embedded(embedder):
    query = ("builders lien caveat writ arrears special levy reserve fund " * 80)[:4000]
    vec = embedder.embed([query])
    assert vec.shape == (1, embedder.dimension) and np.isfinite(vec).all()


def test_repair_of_a_long_chunk_registers_it(store, make_chunk, tmp_path):
    chunk = make_chunk(LONG, role="CONDO_DOCS", section="CONDO_BYLAWS")
    ingestor = Ingestor(store)
    # a crash between the vector write and the registry write: vectors only
    ingestor._write([_Pending(chunk=chunk, file="x", line=1, needs_vectors=True, needs_registry=False)], progress=False)
    report = ingestor.ingest([write_jsonl(tmp_path / "r.jsonl", [chunk])])  # old code: RuntimeError on the repair path
    assert (report.ingested, report.repaired, report.rejected) == (1, 1, [])
    assert [r.chunk_id for r in store.registry.deal_records(DEAL)] == [chunk.chunk_id]
    # the registry's vector is the chunk's first window, as on a first ingest
    first = store.chunks.payloads([point_id(chunk.chunk_id, 0)])
    assert first and first[point_id(chunk.chunk_id, 0)]["n_windows"] > 2


def test_long_pattern_memory_is_added(store):
    pattern = PatternMemory(entity_type="builder", entity_id="builder:prairie-peak-homes", topic="liens", content=LONG)
    assert add_patterns(store, [pattern]) == (1, 0)  # old code: RuntimeError from the model
    assert [p.content for p in store.registry.all_patterns()] == [LONG]


# -- item 7: one bad line is named, never aborts the others ------------------------------------------
@pytest.fixture()
def good(make_chunk) -> DocumentChunk:
    return make_chunk("Caveat 252 300 111 re: option to purchase, filed by Bow River Holdings Ltd.", page=3,
                      metadata={"sensitivity": "privileged", "entity_ids": ["builder:prairie-peak-homes"]})


def _bad_lines(good: DocumentChunk, counter: TiktokenCounter) -> list[tuple[str | bytes, str]]:
    """(line, field the rejection must name) for every kind of breakage the tester reported, and neighbours."""
    deep = 1
    for _ in range(20):
        deep = [deep]
    text = _line(good)
    return [
        ('{"chunk_id": ' * 3000 + "1" + "}" * 3000, "(line)"),  # was RecursionError: nothing landed
        (text[:-1] + ', "metadata": {"sensitivity": "privileged", "sensitivity": "public"}}', "metadata"),
        (text[:-1].replace('"metadata": {', '"metadata": {"sensitivity": "public", ', 1) + "}", "metadata.sensitivity"),
        (text[:-1] + f', "deal_id": "{good.deal_id}"}}', "deal_id"),  # a duplicate top-level key
        (_line(good, metadata={"note": "scan \ud800 page"}), "metadata.note"),  # was BackendError mid-batch
        (_line(good, metadata={"\udc80": 1}), "metadata"),
        (_line(good, content="Lot 4 \ud83d plan"), "content"),
        (_line(good, deal_id="2026 TEST 0001"), "deal_id"),  # Mem0 refused the whole ingest
        (_line(good, deal_id=f" {DEAL}"), "deal_id"),  # was stripped and merged into another deal
        (_line(good, deal_id=f"{DEAL}\u200b"), "deal_id"),
        (_line(good, document_id=f"{good.document_id} "), "document_id"),
        (_line(good, page_end=10**30), "page_end"),  # was stored
        (json.dumps(_rebuilt(counter, good, page_end=MAX_PAGE + 1)), "page_end"),
        (json.dumps(_rebuilt(counter, good, content="\u200b\u200b \u200b")), "content"),  # later crashed bm25s
        (json.dumps(_rebuilt(counter, good, content="\n\t\u00a0\ufeff")), "content"),
        (_line(good, metadata={"nested": deep}), "metadata.nested" + "[0]" * 15),
        (_line(good, metadata={"pages": 10**30}), "metadata.pages"),
        ('{"page_end": ' + "9" * 5000 + "}", "(line)"),
        (_line(good, ocr_confidence=float("nan")), "ocr_confidence"),
        (_line(good, **{"\ud800": 1}), "\\ud800"),
        (_line(good, chunk_id=deep), "chunk_id"),
    ]


def test_each_broken_line_is_named_by_the_parser(good, counter):
    for i, (raw, fld) in enumerate(_bad_lines(good, counter), start=1):
        out = parse_chunk_line(raw.encode() if isinstance(raw, str) else raw, file="f.jsonl", line=i, count_tokens=counter.count)
        assert isinstance(out, Rejection), (i, fld)
        assert (out.file, out.line, out.field) == ("f.jsonl", i, fld), out
        json.dumps(out.model_dump())  # printable and dumpable, whatever the line held
        out.error.encode("utf-8")


def test_duplicate_key_is_not_last_wins(good):
    line = _line(good)[:-1].replace('"metadata": {', '"metadata": {"sensitivity": "public", ', 1) + "}"
    out = parse_chunk_line(line.encode(), file="f", line=1, count_tokens=None)
    assert isinstance(out, Rejection) and "sensitivity" in out.error  # the old parser stored it as public


def test_bad_lines_are_named_and_every_good_line_lands(store, make_chunk, good, counter, tmp_path):
    goods = [make_chunk(f"Instrument 25{i} 114 567 builders' lien, amount ${i},260.00", page=i) for i in range(1, 42)]
    bad = _bad_lines(good, counter)
    path = write_jsonl(tmp_path / "mixed.jsonl", goods[:20], [raw for raw, _ in bad] + [_line(c) for c in goods[20:]])
    report = Ingestor(store).ingest([path])
    assert (report.ingested, report.unchanged) == (41, 0)
    assert [(r.line, r.field) for r in report.rejected] == [(21 + i, fld) for i, (_, fld) in enumerate(bad)]
    assert {r.chunk_id for r in store.registry.deal_records(DEAL)} == {c.chunk_id for c in goods}


class RegistryThatRefusesEveryWrite(Mem0Registry):
    """Fault injection: a Mem0 registry whose chunk writes all fail (as on a broken disk)."""

    def register_chunk(self, record, content, vector):  # noqa: ANN001, ANN201
        raise OSError("injected fault: registry write refused")


def test_refused_write_is_reported_for_that_chunk_and_the_rest_land(store, make_chunk):
    goods = [make_chunk(f"Tax certificate roll {i}: arrears $0.00", role="TAX_CERTIFICATE", section="TAX_ARREARS", page=i)
             for i in range(1, 6)]
    # a chunk that skipped validation with a deal id Mem0 refuses: the real Mem0 error, no fake
    other = goods[0].model_dump() | {"deal_id": "BAD DEAL", "page_start": 9, "page_end": 9}
    other["chunk_id"] = compute_chunk_id(other["document_id"], 9, 9, other["content_hash"])
    refused = DocumentChunk.model_construct(**other)
    items = [(c, "t.jsonl", i) for i, c in enumerate(goods[:2] + [refused] + goods[2:], start=1)]
    report = Ingestor(store).ingest_chunks(items)  # old code: BackendError, and what landed was unsaid
    assert report.ingested == 5
    assert [(r.line, r.field) for r in report.rejected] == [(3, "(store)")]
    assert "BAD DEAL" in report.rejected[0].error
    assert {r.chunk_id for r in store.registry.deal_records(DEAL)} == {c.chunk_id for c in goods}


class RegistryThatRefusesOneChunk(Mem0Registry):
    """Fault injection: the real Mem0 registry, except that writing chunk ``refused_id`` fails."""

    refused_id = ""

    def register_chunk(self, record, content, vector):  # noqa: ANN001, ANN201
        if record["chunk_id"] == self.refused_id:
            raise OSError("injected fault: registry write refused")
        return super().register_chunk(record, content, vector)


class ChunkIndexThatRefusesOneChunk:
    """Fault injection: the real chunk index, except that an upsert holding chunk ``refused_id`` fails."""

    def __init__(self, real, refused_id: str) -> None:  # noqa: ANN001
        self._real, self.refused_id = real, refused_id

    def upsert(self, points):  # noqa: ANN001, ANN201
        if any(p.payload["chunk_id"] == self.refused_id for p in points):
            raise OSError("injected fault: vector write refused")
        return self._real.upsert(points)

    def __getattr__(self, name: str):  # noqa: ANN204
        return getattr(self._real, name)


@pytest.mark.parametrize("side", ["registry", "vector"])
def test_one_refused_chunk_write_is_reported_and_the_batch_lands(store, make_chunk, side):
    chunks = [make_chunk(f"Condo minutes {i}: the board approved the reserve fund study", role="CONDO_DOCS",
                         section="CONDO_MINUTES", page=i) for i in range(1, 9)]
    target = chunks[4].chunk_id
    if side == "registry":
        reg = store.registry
        store.registry = RegistryThatRefusesOneChunk(reg.memory, reg._embeddings, thread_safe_store=True)
        store.registry.refused_id = target
    else:
        store.chunks = ChunkIndexThatRefusesOneChunk(store.chunks, target)
    report = Ingestor(store).ingest_chunks([(c, "m.jsonl", i) for i, c in enumerate(chunks, start=1)])
    assert report.ingested == 7  # old code: BackendError for the whole batch
    assert [(r.line, r.field) for r in report.rejected] == [(5, "(store)")]
    assert side in report.rejected[0].error
    assert {r.chunk_id for r in store.registry.deal_records(DEAL)} == {c.chunk_id for c in chunks} - {target}


def test_a_failing_store_stops_after_a_run_of_refusals(store, make_chunk):
    store.registry = RegistryThatRefusesEveryWrite(store.registry.memory, store.registry._embeddings)
    n = MAX_CONSECUTIVE_WRITE_FAILURES + 40
    chunks = [(make_chunk(f"Page {i} of the condo minutes", role="CONDO_DOCS", section="CONDO_MINUTES", page=i), "m.jsonl", i)
              for i in range(1, n + 1)]
    report = Ingestor(store).ingest_chunks(chunks)
    assert report.ingested == 0
    assert sorted(r.line for r in report.rejected) == list(range(1, n + 1))
    assert sum("not attempted" in r.error for r in report.rejected) >= n - MAX_CONSECUTIVE_WRITE_FAILURES - 64


def test_pattern_file_rejects_duplicate_keys_and_padded_ids(tmp_path):
    path = tmp_path / "p.jsonl"
    ok = {"entity_type": "builder", "entity_id": "builder:kodiak", "topic": "liens", "content": "Files liens late."}
    path.write_text("\n".join([
        json.dumps(ok),
        json.dumps(ok)[:-1] + ', "topic": "warranty"}',
        json.dumps(ok | {"entity_id": "builder:kodiak "}),
        json.dumps(ok | {"content": "\u200b"}),
        "[" * 5000,
    ]) + "\n")
    good, bad = read_patterns(path)
    assert [p.entity_id for p in good] == ["builder:kodiak"]
    assert [(r.line, r.field) for r in bad] == [(2, "topic"), (3, "entity_id"), (4, "content"), (5, "(line)")]


# -- fuzz: random valid lines and lines broken in random ways ------------------------------------------
_COUNTER = TiktokenCounter()
_ROLES = ["TITLE_SEARCH", "CONDO_DOCS", "TAX_CERTIFICATE", "OTHER"]
_SECTIONS = ["TITLE_SUMMARY", "INSTRUMENTS_REGISTER", "CONDO_MINUTES", "TAX_ARREARS", "GENERAL"]
_TEXT = st.text(st.characters(codec="utf-8", categories=["L", "N", "P", "S", "Zs"]), min_size=0, max_size=120)


@st.composite
def valid_chunks(draw: st.DrawFn) -> dict:
    deal = draw(st.from_regex(r"[A-Z0-9][A-Z0-9\-]{0,14}", fullmatch=True))
    name = draw(st.from_regex(r"[a-z0-9][a-z0-9 _\-]{0,18}[a-z0-9]", fullmatch=True))
    start = draw(st.integers(1, MAX_PAGE))
    end = draw(st.integers(start, min(MAX_PAGE, start + 50)))
    content = draw(st.sampled_from("ABCxyz7é§")) + draw(_TEXT)
    metadata = draw(st.fixed_dictionaries({}, optional={
        "sensitivity": st.sampled_from(["public", "confidential", "privileged"]),
        "zones": st.lists(st.sampled_from(["front_summary", "caveats_section", "tax_liens"]), max_size=2, unique=True),
        "entity_ids": st.lists(st.from_regex(r"builder:[a-z\-]{1,12}", fullmatch=True), max_size=2),
        "source": st.dictionaries(st.from_regex(r"[a-z]{1,6}", fullmatch=True), st.integers(-2**63, 2**63 - 1) | _TEXT, max_size=2),
    }))
    return _rebuilt(_COUNTER, {}, **{
        "deal_id": deal, "document_id": f"{deal}/{name}.pdf", "document_role": draw(st.sampled_from(_ROLES)),
        "section_type": draw(st.sampled_from(_SECTIONS)), "page_start": start, "page_end": end, "content": content,
        "ocr_confidence": draw(st.floats(0.0, 1.0)), "metadata": metadata,
    })


def _breakages(d: dict) -> list[tuple[str, bytes]]:
    """(field the rejection must name, the broken line) for one valid chunk ``d``."""
    text = json.dumps(d)

    def line(**changes: object) -> bytes:
        return json.dumps(d | changes).encode()

    def rebuilt(**changes: object) -> bytes:
        return json.dumps(_rebuilt(_COUNTER, d, **changes)).encode()

    deep: object = 1
    for _ in range(40):
        deep = {"k": deep}
    return [
        ("deal_id", line(deal_id=" " + d["deal_id"])),
        ("deal_id", line(deal_id=d["deal_id"] + "\t")),
        ("deal_id", line(deal_id=d["deal_id"][:1] + " " + d["deal_id"][1:])),
        ("document_id", line(document_id="\u200b" + d["document_id"])),
        ("page_end", line(page_end=10**30)),
        ("page_start", rebuilt(page_start=MAX_PAGE + 1, page_end=MAX_PAGE + 1)),
        ("page_start", line(page_start=str(d["page_start"]))),
        ("content", rebuilt(content="\u200b" * 3)),
        ("content", rebuilt(content=" \u2028 ")),
        ("content", line(content=d["content"] + "\ud800")),
        ("content_hash", line(content=d["content"] + "!")),
        ("token_count", line(token_count=d["token_count"] + 1)),
        ("section_type", line(section_type="LIENS")),
        ("document_role", line(document_role=None)),
        ("chunk_id", line(chunk_id="0" * 64)),
        ("ocr_confidence", line(ocr_confidence=1.5)),
        ("metadata.extra", line(metadata=d["metadata"] | {"extra": "\udfff"})),
        ("metadata.extra", line(metadata=d["metadata"] | {"extra": 2**64})),
        ("metadata.zones", line(metadata=d["metadata"] | {"zones": ["basement"]})),
        ("metadata.sensitivity", line(metadata=d["metadata"] | {"sensitivity": "secret"})),
        ("metadata.deep" + ".k" * 15, line(metadata={"deep": deep})),
        ("deal_id", (text[:-1] + f', "deal_id": {json.dumps(d["deal_id"])}}}').encode()),
        ("content", (text[:-1] + ', "content": "other"}').encode()),
        ("page_end", json.dumps({k: v for k, v in d.items() if k != "page_end"}).encode()),
        ("color", line(color="red")),
        ("(line)", text[: len(text) // 2].encode()),
        ("(line)", text.encode()[:-1] + b"\xff}"),
        ("(line)", b"[" * 100_000),
        ("(line)", json.dumps([d]).encode()),
    ]


@st.composite
def fuzz_lines(draw: st.DrawFn) -> tuple[bytes, str | None, dict]:
    """A chunk line: valid (expected field None) or broken in one random way (the field it must be named by)."""
    d = draw(valid_chunks())
    if draw(st.booleans()):
        return json.dumps(d).encode(), None, d
    fld, raw = draw(st.sampled_from(_breakages(d)))
    return raw, fld, d


@settings(max_examples=200, deadline=None, derandomize=True)
@given(case=fuzz_lines())
def test_fuzz_parser_names_every_broken_line(case):
    raw, fld, d = case
    out = parse_chunk_line(raw, file="fuzz.jsonl", line=7, count_tokens=_COUNTER.count)
    if fld is None:
        assert isinstance(out, DocumentChunk), out
        assert out.model_dump(mode="json") == d | {"metadata": out.model_dump(mode="json")["metadata"]}
        assert out.chunk_id == d["chunk_id"]
    else:
        assert isinstance(out, Rejection), (fld, raw[:200])
        assert (out.file, out.line, out.field) == ("fuzz.jsonl", 7, fld), (out, raw[:200])
        json.dumps(out.model_dump())


# one example of 200 lines; no shrinking (each step would be a whole ingest): a failure prints the 200 lines
@settings(max_examples=1, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck),
          phases=[Phase.explicit, Phase.reuse, Phase.generate])
@given(cases=st.lists(fuzz_lines(), min_size=200, max_size=200))
def test_fuzz_200_lines_every_valid_line_lands(cases, tmp_path_factory, embedder, node_config):
    """200 random lines in one file, ingested into a real store: every valid one lands, every broken one is
    named by file, line and field, and nothing raises."""
    from retrieval_node.store import Store

    path = Path(tmp_path_factory.mktemp("fuzz")) / "fuzz.jsonl"
    path.write_bytes(b"".join(raw + b"\n" for raw, _, _ in cases))
    expected_bad = {i: fld for i, (_, fld, _) in enumerate(cases, start=1) if fld is not None}
    valid = {d["chunk_id"]: d for _, fld, d in cases if fld is None}
    with Store.open(tmp_path_factory.mktemp("fuzz-store"), config=node_config, embedder=embedder) as st_:
        report = Ingestor(st_).ingest([path])
        assert {r.line: r.field for r in report.rejected} == expected_bad
        assert all(r.file == str(path) for r in report.rejected)
        assert report.ingested == len(valid)
        landed = {r.chunk_id for deal in {d["deal_id"] for d in valid.values()} for r in st_.registry.deal_records(deal)}
        assert landed == set(valid)
