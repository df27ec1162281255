"""The deal-quality evaluation (retrieval_node.evaluation, benchmarks/deal_quality.py) measures what it says."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from retrieval_node.evaluation import METHODS, Evaluator, _ablated, bundled_deals, evaluate

REPO = Path(__file__).resolve().parent.parent


def test_rows_on_the_bundled_deals(sample_store):
    deals = bundled_deals(["sample_deal", "clean_deal"])
    result = evaluate(sample_store, deals=deals, agents=["investigator", "tax"], sweep=(1500,), sweep_methods=("node", "dense"))
    rows = result["default_budget"]
    assert {r["method"] for r in rows} == set(METHODS)
    for r in rows + result["sweep"]:
        assert r["tokens"] <= r["budget"], r  # every method is held to the same budget
        if r["recall"] is not None:
            assert 0.0 <= r["recall"] <= 1.0 and r["found"] + len(r["missed"]) == r["gold"]
    node = {(r["deal"], r["agent"]): r for r in rows if r["method"] == "node"}
    assert node[("sample_deal", "investigator")]["recall"] == 1.0 and node[("sample_deal", "tax")]["recall"] == 1.0
    assert node[("clean_deal", "investigator")]["false_material_risk"] is False
    assert result["summary"]["false_material_risks_node"] == []
    assert {r["budget"] for r in result["sweep"]} == {1500}


def test_ablations_switch_one_weight_off(node_config):
    for method, term in (("node_alpha0", "alpha"), ("node_beta0", "beta"), ("node_gamma0", "gamma")):
        cfg = _ablated(node_config, method)
        for w in cfg.weights.values():
            assert getattr(w, term) == 0.0 and abs(w.alpha + w.beta + w.gamma - 1.0) < 1e-9
    assert all(a.risk_budget_share == 0.0 for a in _ablated(node_config, "node_no_risk_first").agents.values())


def test_unknown_method_and_deal_are_named(sample_store):
    with pytest.raises(ValueError, match="nope"):
        evaluate(sample_store, deals=bundled_deals(["sample_deal"]), methods=["nope"])
    with pytest.raises(ValueError, match="no_such_deal"):
        bundled_deals(["no_such_deal"])
    ev = Evaluator(sample_store)
    with pytest.raises(ValueError, match="bogus"):
        ev.run(bundled_deals(["sample_deal"])[0], "tax", "bogus")


@pytest.mark.slow
def test_deal_quality_script_smoke(tmp_path):
    out = tmp_path / "dq.json"
    proc = subprocess.run([sys.executable, "benchmarks/deal_quality.py", "--smoke", "--out", str(out)], cwd=REPO,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    data = json.loads(out.read_text())
    assert data["settings"]["deals"] == ["sample_deal"] and data["default_budget"]
    assert all(r["tokens"] <= r["budget"] for r in data["default_budget"])
    assert "node" in data["summary"]["recall_by_method"]
