#!/usr/bin/env python
"""Deal quality: risk recall at budget, zone coverage and false risks, node vs baselines and ablations.

The bundled fixtures (``retrieval_node/sample_data/{sample_deal,clean_deal,hard_deal}``, gold labels
in each ``gold.yaml``) are ingested through the normal ``Ingestor`` into a temporary store, with the
pattern memories. For every agent profile and deal, at the agent's default budget:
the node, the node with α, β or γ set to 0 (the other two rescaled), the node without risk-first
packing, dense top-K (MiniLM, the agent's target sections) and BM25 top-K, each filled to the
same budget with the same rendering. Then a recall-vs-budget sweep for the node and the two
baselines on the deals with gold risks. Definitions: :mod:`retrieval_node.evaluation`.

    python benchmarks/deal_quality.py            # everything (~1-2 min after the model loads)
    python benchmarks/deal_quality.py --smoke    # sample deal, two agents, no sweep

Writes ``benchmarks/results/deal_quality.json`` (``deal_quality_smoke.json`` with ``--smoke``).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine_info, now_iso, print_machine, result_path, table, write_result  # noqa: E402

NAME = "deal_quality"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--deals", default=None, help="comma-separated fixture names (default: every bundled deal)")
    ap.add_argument("--agents", default="investigator,tax,condo,scribe")
    ap.add_argument("--sweep", default="1000,2000,4000,6000,8000", help="budgets of the recall sweep ('' for none)")
    ap.add_argument("--out", default=None)
    ap.add_argument("--smoke", action="store_true", help="sample deal, investigator + tax, no sweep (for CI)")
    args = ap.parse_args(argv)
    if args.smoke:
        args.deals, args.agents, args.sweep = "sample_deal", "investigator,tax", ""
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from retrieval_node.evaluation import METHODS, SAMPLE_DATA, bundled_deals, evaluate
    from retrieval_node.ingest import Ingestor, add_patterns, read_patterns
    from retrieval_node.store import Store

    deals = bundled_deals(args.deals.split(",") if args.deals else None)
    agents = [a for a in args.agents.split(",") if a]
    sweep = [int(b) for b in args.sweep.split(",") if b.strip()]
    started = now_iso()
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="rn-deal-quality-") as tmp, Store.open(Path(tmp) / "store") as store:
        report = Ingestor(store).ingest([d.chunks_file for d in deals])
        if report.rejected:
            print(f"rejected lines: {report.rejected}", file=sys.stderr)
            return 1
        patterns, bad = read_patterns(SAMPLE_DATA / "patterns.jsonl")
        add_patterns(store, patterns)
        result = evaluate(store, deals=deals, agents=agents, sweep=sweep, sweep_deals=[d.name for d in deals if d.name != "clean_deal"])
        config = store.config
    wall = time.perf_counter() - t0
    machine = machine_info()
    print_machine(machine)

    rows = result["default_budget"]
    by = {(r["deal"], r["agent"], r["method"]): r for r in rows}
    headers = ["deal", "agent", "budget", *METHODS, "node tokens", "node zones"]
    lines = []
    for d in deals:
        for a in agents:
            node = by[(d.name, a, "node")]
            cells = []
            for m in METHODS:
                r = by[(d.name, a, m)]
                cells.append(f"{r['found']}/{r['gold']}" if r["gold"] else ("FALSE RISK" if r["false_material_risk"] else "-"))
            lines.append([d.name, a, node["budget"], *cells, node["tokens"], node["zone_coverage"]])
    print("\nGold risk chunks in the package at the default budget (found/gold; '-' = no gold risk for the agent, none claimed)")
    print(table(headers, lines))
    s = result["summary"]
    print("\nrecall over every (deal, agent): " + ", ".join(f"{m} {v['recall']:.1%}" for m, v in s["recall_by_method"].items()))
    print("recall over the gold risks each agent's contract lets it retrieve: "
          + ", ".join(f"{m} {v['recall_in_scope']:.1%}" for m, v in s["recall_by_method"].items() if v["recall_in_scope"] is not None))
    if s["gold_outside_contract"]:
        print("gold risks the agent's contract does not allow at this stage (not retrievable by design): "
              + "; ".join(f"{k}: {', '.join(v)}" for k, v in s["gold_outside_contract"].items()))
    print("node minus dense, points: " + ", ".join(f"{k} {v:+.1f}" for k, v in s["node_minus_dense_points"].items()))
    print(f"false material risks from the node: {s['false_material_risks_node'] or 'none'}")
    missed = [f"{r['deal']}/{r['agent']}: {', '.join(r['missed'])}" for r in rows if r["method"] == "node" and r["missed"]]
    if missed:
        print("node missed: " + "; ".join(missed))
    if result["sweep"]:
        sw = {(r["deal"], r["agent"], r["method"], r["budget"]): r for r in result["sweep"]}
        lines = []
        for d in deals:
            for a in agents:
                if not d.gold_risks(a) or d.name == "clean_deal":
                    continue
                for m in ("node", "dense", "bm25"):
                    lines.append([d.name, a, m, *[f"{sw[(d.name, a, m, b)]['found']}/{sw[(d.name, a, m, b)]['gold']}" for b in sweep]])
        print("\nRecall vs budget (found/gold)")
        print(table(["deal", "agent", "method", *map(str, sweep)], lines))
    payload = {
        "benchmark": NAME,
        "date": started,
        "wall_s": round(wall, 1),
        "command": " ".join([Path(sys.executable).name, sys.argv[0], *(argv if argv is not None else sys.argv[1:])]),
        "machine": machine,
        "settings": {"deals": [d.name for d in deals], "agents": agents, "sweep": sweep, "methods": list(METHODS),
                     "budgets": {a: config.agents[a].max_tokens_budget for a in agents}, "weights": {k.value: v.model_dump() for k, v in config.weights.items()}},
        **result,
    }
    path = write_result(result_path(NAME, args.out, args.smoke), payload)
    print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
