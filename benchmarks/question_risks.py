"""Do questions about a risk reach the risk on deals written by others? (issue 19, questions on conveyancing deals)

For every deal of a dev-set folder (``../shared/bench/deals`` or a ``generate.py --seed N`` set: ``deals/*.jsonl``,
``gold/*.json``), three questions in our own words are asked with ``RetrievalAgent.ask_sync`` at ``--budget``
tokens::

    python benchmarks/question_risks.py --set-dir ../shared/bench/deals --store /tmp/qr/std_store
    python benchmarks/question_risks.py --set-dir ../shared/bench/deals --store /tmp/qr/std_store --no-risk-kinds

What is counted, per question kind: the deal's chunks that the gold marks material (for any agent) and that the
node's own risk scan gives that kind, and how many of them the question's package holds. It is a proxy (the set has
no question gold: the kind comes from our scan, so the figure is recall of what the scan recognises, not of every
levy a lawyer would count) and it measures recall only. Gold is read after the calls, to score them; nothing of it
reaches the product. The store is filled from ``deals/`` when a deal is missing (a store ``score.py`` filled can be
reused). ``--no-risk-kinds`` asks with the glossary concepts' ``risk_kinds`` cleared (the ranking before them).
Prints and writes JSON (``--out``, default ``benchmarks/results/question_risks.json``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine_info, now_iso, result_path, write_result  # noqa: E402

#: question kind (a risk kind of configs/risk_signals.yaml) -> the question asked
QUESTIONS = {
    "special_levy": "Is a special levy planned or approved?",
    "builders_lien": "Is there a builders' lien against the property?",
    "tax_arrears": "Are the property taxes in arrears?",
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set-dir", type=Path, required=True, help="folder with deals/*.jsonl and gold/*.json")
    ap.add_argument("--store", type=Path, required=True, help="store directory (filled from deals/ when a deal is missing)")
    ap.add_argument("--budget", type=int, default=1000)
    ap.add_argument("--no-risk-kinds", action="store_true", help="ask with the glossary concepts' risk_kinds cleared")
    ap.add_argument("--out", default=None, help="result file (default benchmarks/results/question_risks.json)")
    args = ap.parse_args(argv)

    from retrieval_node import RetrievalAgent, Store, TrustContext
    from retrieval_node.ingest import Ingestor
    from retrieval_node.risk import risk_signal

    golds = [json.loads(p.read_text(encoding="utf-8")) for p in sorted((args.set_dir / "gold").glob("*.json"))]
    if not golds:
        ap.error(f"--set-dir {args.set_dir}: no gold/*.json")
    rows = []
    with Store.open(args.store) as st:
        missing = [g["deal_id"] for g in golds if not st.registry.deal_records(g["deal_id"])]
        if missing:
            Ingestor(st).ingest([args.set_dir / "deals"])
        concepts = st.config.glossary.concepts
        if args.no_risk_kinds:  # an ablation: the concepts as they were before risk_kinds
            for name, concept in list(concepts.items()):
                concepts[name] = concept.model_copy(update={"risk_kinds": []})
        lexicon = st.config.risk_signals
        domains = tuple(lexicon.domains)
        agent = RetrievalAgent(st, trust=TrustContext(max_sensitivity="confidential", authenticated=True, actor_id="bench:question-risks"))
        try:
            for gold in golds:
                deal = gold["deal_id"]
                records = {r.chunk_id: r for r in st.registry.deal_records(deal)}
                material = {x["chunk_id"] for it in gold["intents"].values() for x in it["gold"] if x["kind"] == "material"}
                for kind, question in QUESTIONS.items():
                    want = set()
                    for cid in material & set(records):
                        sig = risk_signal(records[cid].content, lexicon, domains)
                        if sig.material and kind in sig.kinds:
                            want.add(cid)
                    if not want:
                        continue
                    package, _summary = agent.ask_sync(deal, question, budget=args.budget)
                    packed = {r.chunk_id for r in package.ordered_chunks}
                    rows.append({"deal": deal, "kind": kind, "question": question, "material": len(want), "packed": len(want & packed),
                                 "package_chunks": len(packed), "package_tokens": package.total_tokens})
        finally:
            agent.close()
    by_kind = {k: {"packed": sum(r["packed"] for r in rows if r["kind"] == k), "material": sum(r["material"] for r in rows if r["kind"] == k)}
               for k in QUESTIONS}
    out = {"benchmark": "question_risks", "date": now_iso(), "machine": machine_info(), "set_dir": str(args.set_dir), "store": str(args.store),
           "budget": args.budget, "risk_kinds": not args.no_risk_kinds, "by_kind": by_kind, "rows": rows}
    for r in rows:
        print(f"{r['deal']:<16} {r['kind']:<14} {r['packed']}/{r['material']}  ({r['package_chunks']} chunks, {r['package_tokens']} tokens)")
    print("by kind: " + ", ".join(f"{k} {v['packed']}/{v['material']}" for k, v in by_kind.items()))
    print(f"wrote {write_result(result_path('question_risks', args.out, False), out)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
