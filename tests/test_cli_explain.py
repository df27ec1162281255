"""``retrieval-node explain``: what was chosen and left out, with score terms, risk finding and reason, from the snapshot."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from retrieval_node import snapshot_files
from retrieval_node.agent import RetrievalAgent
from retrieval_node.cli import app
from retrieval_node.cli_explain import describe
from retrieval_node.demo import SAMPLE_DEAL_ID
from retrieval_node.explain import reason_kind
from retrieval_node.ingest import Ingestor
from retrieval_node.models import TrustContext
from tests.conftest import FULL_TRUST, write_jsonl

runner = CliRunner()


def _explain(home, audit_id, *args):
    res = runner.invoke(app, ["explain", audit_id, "--store", str(home), *args], env={"COLUMNS": "220"})
    return res


def _doc(home, audit_id, *args):
    res = _explain(home, audit_id, "--json", *args)
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


@pytest.fixture(scope="module")
def tight(sample_store):
    """The investigator on the sample deal with half its budget: some chunks chosen, some left out for budget."""
    agent = RetrievalAgent(sample_store, trust=FULL_TRUST)
    pkg, summary = agent.retrieve_sync(agent.intent_for("investigator", deal_id=SAMPLE_DEAL_ID, budget=1500))
    agent.flush_audit()
    return agent, pkg, summary


def test_chosen_and_left_out_with_terms_risk_and_reason(sample_store, tight):
    agent, pkg, summary = tight
    doc = _doc(sample_store.home, summary.audit_id, "--max-sensitivity", "privileged")
    assert doc["package_hash"] == pkg.package_hash and doc["budget"] == 1500
    # the chosen chunks are the package's, in citation order
    assert [c["chunk_id"] for c in doc["chosen"]] == [r.chunk_id for r in pkg.ordered_chunks if not r.redacted]
    assert [c["citation"] for c in doc["chosen"]] == [f"E{i}" for i, r in enumerate(pkg.ordered_chunks, 1) if not r.redacted]
    assert doc["left_out"], "half the budget leaves chunks out"
    assert {c["reason_kind"] for c in doc["left_out"]} <= {"budget", "budget (exact count)", "budget (room made for a zone)",
                                                          "budget (room made for a risk)", "not needed (zone candidate)"}
    assert any(c["reason_kind"] == "risk" for c in doc["chosen"])
    w = doc["weights"]
    assert (w["alpha"], w["beta"], w["gamma"]) == (0.3, 0.5, 0.2)  # HIGH_RISK in configs/weights.yaml
    for c in doc["chosen"] + doc["left_out"]:
        t = c["terms"]
        assert t["alpha_semantic"] + t["beta_risk"] + t["gamma_pattern"] == pytest.approx(t["total"], abs=1e-5)
        assert c["risk"]["material"] == bool(c["risk"]["kinds"])
        if c["risk"]["material"]:  # the verbatim words: a substring of the chunk
            assert c["risk"]["evidence"] and c["risk"]["evidence"] in agent.get_chunk(c["chunk_id"]).content
    # the package's material risks left out are among the left-out chunks, with their evidence
    out = {c["chunk_id"]: c for c in doc["left_out"]}
    for m in summary.material_risks:
        if not m.in_package:
            assert out[m.chunk_id]["risk"]["evidence"] == m.evidence
    # the explanation reads the snapshot: the replayed package is unchanged by it
    assert agent.replay(summary.audit_id)[0] == pkg


def test_every_reason_of_real_retrievals_has_a_kind(sample_store):
    """A reason text the packager, the coverage repair or finalize writes must have a kind in explain.py."""
    agent = RetrievalAgent(sample_store, trust=FULL_TRUST)
    seen = set()
    for name, deal, budget in [("investigator", SAMPLE_DEAL_ID, 700), ("investigator", SAMPLE_DEAL_ID, 1200), ("tax", SAMPLE_DEAL_ID, 600),
                               ("condo", SAMPLE_DEAL_ID, 900), ("scribe", SAMPLE_DEAL_ID, 1500), ("investigator", SAMPLE_DEAL_ID, 4000),
                               ("condo", "2026-KEST-0313", 1200), ("tax", "2026-BRDG-0107", 2500)]:
        _, summary = agent.retrieve_sync(agent.intent_for(name, deal_id=deal, budget=budget))
        snap = agent.audit.read_snapshot(summary.audit_id)
        for r in snap["selected"]:
            assert reason_kind(r["reason"], chosen=True) != "other", r["reason"]
            seen.add(reason_kind(r["reason"], chosen=True))
        for r in snap["rejected"]:
            assert reason_kind(r["reason"], chosen=False) != "other", r["reason"]
            seen.add(reason_kind(r["reason"], chosen=False))
    assert {"risk", "score", "zone coverage", "budget"} <= seen
    assert reason_kind("something new", chosen=True) == "other"


def test_chunk_prefix_one_chunk_and_ambiguous_prefix_lists_matches(sample_store, tight):
    _, pkg, summary = tight
    first = pkg.ordered_chunks[0].chunk_id
    doc = _doc(sample_store.home, summary.audit_id, "--chunk", first[:10], "--max-sensitivity", "privileged")
    assert [c["chunk_id"] for c in doc["chosen"] + doc["left_out"]] == [first]
    full = _doc(sample_store.home, summary.audit_id, "--max-sensitivity", "privileged")
    ids = [c["chunk_id"] for c in full["chosen"] + full["left_out"]]
    prefix = next(p for p in "0123456789abcdef" if sum(i.startswith(p) for i in ids) >= 2)
    res = _explain(sample_store.home, summary.audit_id, "--chunk", prefix, "--max-sensitivity", "privileged")
    assert res.exit_code == 2 and "ambiguous" in res.stderr
    assert all(i[:16] in res.stderr for i in ids if i.startswith(prefix))
    res = _explain(sample_store.home, summary.audit_id, "--chunk", "ffffffffffffffff0")
    assert res.exit_code == 2 and "no chunk" in res.stderr
    res = _explain(sample_store.home, summary.audit_id, "--chunk", "XYZ")
    assert res.exit_code == 2 and "hex" in res.stderr


def test_terminal_table_prints_data_verbatim_not_as_markup(store, make_chunk, tmp_path):
    text = "252 114 567 BUILDERS' LIEN [bold red]by[/bold red] Bow River Drywall Ltd. for $48,260.00"
    Ingestor(store).ingest([write_jsonl(tmp_path / "m.jsonl", [make_chunk(text, page=2),
                                                                make_chunk("Certificate of title. Registered owner: Dana Whitford.", section="TITLE_SUMMARY")])])
    agent = RetrievalAgent(store, trust=FULL_TRUST)
    _, summary = agent.retrieve_sync(agent.intent_for("investigator", deal_id="2026-TEST-0001"))
    res = _explain(store.home, summary.audit_id)
    assert res.exit_code == 0, res.output
    assert "[bold red]by[/bold red]" in res.stdout  # Rich would have eaten the tags had it read them as markup
    assert "chosen (2)" in res.stdout and "builders_lien (material)" in res.stdout and "α 0.3, β 0.5, γ 0.2" in res.stdout


def test_trust_applies_as_in_replay(tiered):
    """Above the caller's clearance: counted, not described; a caller without the deal's scope is refused."""
    store, chunks = tiered
    agent = RetrievalAgent(store, trust=FULL_TRUST)
    _, summary = agent.retrieve_sync(agent.intent_for("investigator", deal_id="2026-TEST-0001"))
    full = _doc(store.home, summary.audit_id, "--max-sensitivity", "privileged")
    described = {c["chunk_id"] for c in full["chosen"] + full["left_out"]}
    assert chunks[2].chunk_id in described  # the privileged note, to a privileged caller
    assert full["not_described"]["count"] == 0
    low = _doc(store.home, summary.audit_id, "--max-sensitivity", "public")
    shown = {c["chunk_id"] for c in low["chosen"] + low["left_out"] + low["redacted"]}
    assert chunks[2].chunk_id not in shown and chunks[1].chunk_id not in {c["chunk_id"] for c in low["chosen"] + low["left_out"]}
    assert low["not_described"]["count"] >= 1
    assert "solicitor" not in json.dumps(low) and "Bow River" not in json.dumps(low)
    assert {c["chunk_id"] for c in low["chosen"]} <= {chunks[0].chunk_id}
    # the confidential lien is one level above public: listed (no content) at most
    for r in low["redacted"]:
        assert r["chunk_id"] == chunks[1].chunk_id and r["reason_kind"] == "redacted by trust"
    scoped = TrustContext(max_sensitivity="privileged", authenticated=True, actor_id="t", scopes=["deal:OTHER"])
    from retrieval_node.cli_explain import load_explanation
    from retrieval_node.errors import AccessDenied

    with pytest.raises(AccessDenied, match="scope"):
        load_explanation(store.home, summary.audit_id, scoped)


def test_a_tampered_snapshot_is_refused(tiered):
    store, _ = tiered
    agent = RetrievalAgent(store, trust=FULL_TRUST)
    _, summary = agent.retrieve_sync(agent.intent_for("investigator", deal_id="2026-TEST-0001"))
    path = agent.audit.snapshot_path(summary.audit_id)
    raw = snapshot_files.read(path)
    assert b'"combined":' in raw
    snapshot_files.write(path, raw.replace(b'"combined":', b'"combined":0.9,"x":', 1))
    res = _explain(store.home, summary.audit_id, "--json")
    assert res.exit_code == 2 and json.loads(res.stdout)["error"]["type"] == "IntegrityError"


def test_weights_that_do_not_reproduce_the_totals_are_not_shown(sample_store, tight):
    agent, _, summary = tight
    snap = agent.audit.read_snapshot(summary.audit_id)
    doc = describe(snap, FULL_TRUST, weights=(0.5, 0.3, 0.2))  # BALANCED: not the weights this call ranked with
    assert doc["weights"]["alpha"] is None and "do not reproduce" in doc["weights"]["source"]
    assert all("alpha_semantic" not in c["terms"] for c in doc["chosen"] + doc["left_out"])
    assert describe(snap, FULL_TRUST, weights=(0.3, 0.5, 0.2))["weights"]["alpha"] == 0.3


def test_bad_arguments_answer_before_any_heavy_import(tmp_path):
    code = ("import sys; from typer.testing import CliRunner; from retrieval_node.cli import app; "
            "r = CliRunner().invoke(app, ['explain', 'not-an-id', '--store', sys.argv[1]]); "
            "print(r.exit_code, 'torch' in sys.modules, 'qdrant_edge' in sys.modules, 'mem0' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["2", "False", "False", "False"]
    res = runner.invoke(app, ["explain", "aud_abc", "--store", str(tmp_path / "nope")])
    assert res.exit_code == 2 and "no store at" in res.stderr
    res = runner.invoke(app, ["explain", "aud_abc", "--max-sensitivity", "secret"])
    assert res.exit_code == 2 and "public, confidential, privileged" in res.stderr
