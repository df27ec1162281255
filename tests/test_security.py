"""Trust against a hostile caller (issue 16): who asks is set by the host, not by the request or the graph state.

Each test is a case that got through before: replay ignored trust, graph state raised its own clearance, an
intent chose another agent's contract, an unauthenticated caller saw provenance of confidential chunks.
"""

from __future__ import annotations

import pytest

from retrieval_node.agent import RetrievalAgent
from retrieval_node.errors import AccessDenied, TrustRequired
from retrieval_node.models import TrustContext
from retrieval_node.node import RetrievalNode
from tests.conftest import FULL_TRUST

DEAL = "2026-TEST-0001"
PUBLIC = TrustContext(max_sensitivity="public", authenticated=True, actor_id="agent:reader")
ANON = TrustContext(max_sensitivity="privileged", authenticated=False, actor_id="anonymous")


def test_replay_applies_the_callers_trust(tiered):
    store, chunks = tiered
    agent = RetrievalAgent(store, trust=FULL_TRUST)
    pkg, summary = agent.retrieve_sync(agent.intent_for("investigator", deal_id=DEAL))
    assert any(r.sensitivity.value == "privileged" and not r.redacted for r in pkg.ordered_chunks)
    with pytest.raises(AccessDenied, match="privileged"):
        agent.replay(summary.audit_id, trust=PUBLIC)
    with pytest.raises(AccessDenied, match="no scope"):
        agent.replay(summary.audit_id, trust=FULL_TRUST.model_copy(update={"scopes": ["deal:2026-OTHER-0001"]}))
    assert agent.replay(summary.audit_id)[0] == pkg  # the clearance that made it replays it, exactly


def test_replay_needs_the_clearance_the_package_was_made_under(store, make_chunk, tmp_path):
    """A package's summary and notes describe the deal as its caller's clearance saw it (left-out risks with their
    words, counts, the table of contents), so a narrower caller may not replay it even when every packaged chunk is
    within its clearance; the same or a wider clearance replays it exactly."""
    from retrieval_node.ingest import Ingestor
    from tests.conftest import write_jsonl

    chunks = [make_chunk("Certificate of title. Registered owner: Dana Whitford.", section="TITLE_SUMMARY", page=1,
                         metadata={"sensitivity": "public"}),
              make_chunk("252 114 567 2025/11/03 BUILDERS' LIEN by Bow River Drywall Ltd. for $48,260.00.", page=2,
                         metadata={"sensitivity": "public"})]
    Ingestor(store).ingest([write_jsonl(tmp_path / "t.jsonl", chunks)])
    clerk = TrustContext(max_sensitivity="confidential", authenticated=True, actor_id="agent:clerk")
    agent = RetrievalAgent(store, trust=clerk)
    pkg, summary = agent.retrieve_sync(agent.intent_for("investigator", deal_id=DEAL))
    assert pkg.ordered_chunks and all(r.sensitivity.value == "public" for r in pkg.ordered_chunks)
    for narrower in (PUBLIC, ANON):
        with pytest.raises(AccessDenied, match="wider clearance"):
            agent.replay(summary.audit_id, trust=narrower)
    assert agent.replay(summary.audit_id)[0] == pkg
    assert agent.replay(summary.audit_id, trust=FULL_TRUST)[0] == pkg


def test_graph_state_narrows_trust_and_never_widens_it(tiered):
    store, _ = tiered
    agent = RetrievalAgent(store)
    wide = {"max_sensitivity": "privileged", "authenticated": True, "actor_id": "state-writer"}
    node = RetrievalNode(agent, trust=PUBLIC)
    update = node({"deal_id": DEAL, "current_agent": "investigator", "trust": wide})
    chunks = next(iter(update["context_packages"].values()))["ordered_chunks"]
    assert chunks and all(c["sensitivity"] == "public" or c["redacted"] for c in chunks)
    assert not any(c["sensitivity"] == "privileged" for c in chunks)  # not even listed: two levels above public
    narrow = RetrievalNode(agent, trust=FULL_TRUST)({"deal_id": DEAL, "current_agent": "investigator",
                                                     "trust": PUBLIC.model_dump(mode="json")})
    assert all(c["sensitivity"] == "public" or c["redacted"] for c in next(iter(narrow["context_packages"].values()))["ordered_chunks"])
    with pytest.raises(TrustRequired, match="narrow"):
        RetrievalNode(agent)({"deal_id": DEAL, "current_agent": "investigator", "trust": wide})


def test_an_intent_cannot_choose_another_agents_contract(tiered):
    store, _ = tiered
    tax_caller = FULL_TRUST.model_copy(update={"agent_id": "tax_r1", "actor_id": "agent:tax_r1"})
    agent = RetrievalAgent(store, trust=tax_caller)
    posing = agent.intent_for("scribe", deal_id=DEAL)  # the scribe's contract allows lender instructions; tax's forbids them
    with pytest.raises(AccessDenied, match="tax_r1"):
        agent.retrieve_sync(posing)
    agent.retrieve_sync(agent.intent_for("tax", deal_id=DEAL))  # its own contract still works


def test_a_caller_bound_to_an_agent_reads_by_id_only_what_its_contract_allows(store, make_chunk, tmp_path):
    from retrieval_node.ingest import Ingestor
    from tests.conftest import write_jsonl

    lender = make_chunk("Lender instructions: fund on closing; payout of mortgage 221 044 519 required.", role="LENDER_INSTRUCTIONS",
                        section="GENERAL", document_id=f"{DEAL}/lender.pdf")
    tax_cert = make_chunk("Tax certificate: 2025 taxes paid in full; arrears $0.00.", role="TAX_CERTIFICATE", section="TAX_ARREARS",
                          document_id=f"{DEAL}/tax.pdf")
    Ingestor(store).ingest([write_jsonl(tmp_path / "t.jsonl", [lender, tax_cert])])
    tax_caller = FULL_TRUST.model_copy(update={"agent_id": "tax_r1", "actor_id": "agent:tax_r1"})
    agent = RetrievalAgent(store, trust=tax_caller)
    assert agent.get_chunk(tax_cert.chunk_id).content == tax_cert.content
    with pytest.raises(AccessDenied, match="outside the tax contract"):
        agent.get_chunk(lender.chunk_id)
    assert agent.get_chunk(lender.chunk_id, trust=FULL_TRUST).content == lender.content  # an unbound operator may
    with pytest.raises(AccessDenied, match="no configured profile"):
        agent.get_chunk(tax_cert.chunk_id, trust=FULL_TRUST.model_copy(update={"agent_id": "ghost_r9"}))


def test_an_unauthenticated_caller_learns_nothing_about_chunks_above_public(tiered):
    store, chunks = tiered
    agent = RetrievalAgent(store, trust=ANON)
    pkg, summary = agent.retrieve_sync(agent.intent_for("investigator", deal_id=DEAL))
    assert [r.chunk_id for r in pkg.ordered_chunks] == [chunks[0].chunk_id]
    assert not any(r.redacted for r in pkg.ordered_chunks)
    assert not any(f.startswith(("redacted", "filtered_by_trust")) for f in summary.fallbacks)  # not even a count


def test_trust_narrowing_is_a_meet():
    a = TrustContext(max_sensitivity="privileged", authenticated=True, actor_id="host", scopes=["deal:A", "deal:B"])
    b = TrustContext(max_sensitivity="confidential", authenticated=False, actor_id="state", scopes=["deal:B", "deal:C"], agent_id="tax_r1")
    m = a.narrowed_by(b)
    assert (m.max_sensitivity.value, m.authenticated, m.actor_id, m.scopes, m.agent_id) == ("confidential", False, "host", ["deal:B"], "tax_r1")
    disjoint = a.narrowed_by(b.model_copy(update={"scopes": ["deal:Z"]}))
    assert not disjoint.in_scope("A") and not disjoint.in_scope("Z")
    clash = a.model_copy(update={"agent_id": "scribe_r1"}).narrowed_by(b)
    assert not clash.in_scope("B")


def test_mem0_telemetry_is_off_whichever_backend_imports_mem0_first():
    """Nothing is sent anywhere at run time: Mem0's telemetry switch is read at its first import, which the qdrant-edge
    memory store makes before the registry module (it used to be on for every process that opened a store)."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "MEM0_TELEMETRY"}
    code = "import retrieval_node.backends.mem0_edge\nimport mem0.memory.telemetry as t\nprint(t.MEM0_TELEMETRY)"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "False", out.stderr[-2000:]


def _forge(path, edit):
    """Rewrite a snapshot file as a forger who knows the format (but not the store's secret) would."""
    import hashlib
    import json

    from retrieval_node.audit import canonical_json

    from retrieval_node import snapshot_files

    wrapper = json.loads(snapshot_files.read(path))
    snap = wrapper["snapshot"]
    edit(snap, wrapper)
    wrapper["sha256"] = hashlib.sha256(canonical_json(snap)).hexdigest()
    snapshot_files.write(path, json.dumps(wrapper).encode())


def test_a_forged_or_swapped_snapshot_does_not_replay(tiered):
    from retrieval_node.errors import IntegrityError
    from retrieval_node.models import package_hash

    store, _ = tiered
    agent = RetrievalAgent(store, trust=FULL_TRUST)
    intent = agent.intent_for("investigator", deal_id=DEAL)
    pkg_a, a = agent.retrieve_sync(intent)
    _, b = agent.retrieve_sync(intent.model_copy(update={"max_tokens_budget": 300}))
    path_a, path_b = agent.audit.snapshot_path(a.audit_id), agent.audit.snapshot_path(b.audit_id)
    original = path_a.read_bytes()

    def clear_title(snap, _wrapper):  # change the content and re-hash both the package and the file
        pkg = snap["package"]
        pkg["ordered_chunks"][0]["content"] = "No registrations. Title is clear."
        pkg["package_hash"] = package_hash(pkg)

    _forge(path_a, clear_title)
    with pytest.raises(IntegrityError, match="MAC"):
        agent.replay(a.audit_id)
    path_a.write_bytes(path_b.read_bytes())  # B's genuine snapshot under A's name
    with pytest.raises(IntegrityError, match="holds audit"):
        agent.replay(a.audit_id)
    path_a.write_bytes(original)
    _forge(path_a, lambda snap, wrapper: wrapper.pop("mac"))  # the MAC stripped: an unauthenticated file
    with pytest.raises(IntegrityError, match="no MAC"):
        agent.replay(a.audit_id)
    assert agent.replay(a.audit_id, allow_legacy=True)[1].audit_id == a.audit_id  # only when the caller says so
    from retrieval_node.audit import AuditLog
    keyless = AuditLog(agent.audit.directory, registry=None, key=None)  # a copy of the store without secret.key
    with pytest.raises(IntegrityError, match="no MAC"):  # a missing key does not make a MAC-less file trusted
        keyless.read_snapshot(a.audit_id)
    for bad in (7, ["x"], "é" * 64):  # a MAC of the wrong type is a failed MAC, not a TypeError
        path_a.write_bytes(original)
        _forge(path_a, lambda snap, wrapper, bad=bad: wrapper.update(mac=bad))
        with pytest.raises(IntegrityError, match="MAC"):
            agent.replay(a.audit_id)
    path_a.write_bytes(original)
    assert agent.replay(a.audit_id)[0] == pkg_a
