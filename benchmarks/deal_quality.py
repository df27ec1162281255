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

With ``--labelled DIR`` it scores a labelled folder instead (the layout of ``shared/bench/deals``;
:mod:`retrieval_node.labelled_eval` defines the metrics): the node and three baselines on the same
store, intents (budget and stage from ``intents.json``) and trust (up to ``confidential``), each
baseline limited to the deal's chunks in the intent's target sections and document roles, rendered
with :func:`~retrieval_node.pack.render_evidence` and filled greedily with whole chunks, in rank
order, until the budget (cl100k tokens of the rendering):

* ``dense``: MiniLM query vector against the chunk windows in the store, best window per chunk;
* ``bm25``: BM25 (bm25s) over the deal's chunks;
* ``ensemble``: LangChain's ``EnsembleRetriever`` (weighted reciprocal-rank fusion, equal weights)
  of ``BM25Retriever`` (langchain-community, rank_bm25, its default whitespace tokenisation) and a
  MiniLM retriever over the same windows (``pip install -e .[bench]``).

A baseline makes no risk claim and reports no missing zone. Writes
``benchmarks/results/deal_quality_labelled.json``::

    python benchmarks/deal_quality.py --labelled ../shared/bench/deals [--store DIR] [--agents tax,condo]
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
LABELLED_METHODS = ("node", "dense", "bm25", "ensemble")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--deals", default=None, help="comma-separated fixture names, or deal ids with --labelled (default: all)")
    ap.add_argument("--labelled", default=None, metavar="DIR", help="score a labelled folder (deals/, gold/, intents.json) instead")
    ap.add_argument("--store", default=None, help="with --labelled: store to ingest into and retrieve from (default: a temporary one)")
    ap.add_argument("--methods", default=",".join(LABELLED_METHODS), help="with --labelled: methods to run")
    ap.add_argument("--agents", default="investigator,tax,condo,scribe")
    ap.add_argument("--sweep", default="1000,2000,4000,6000,8000", help="budgets of the recall sweep ('' for none)")
    ap.add_argument("--out", default=None)
    ap.add_argument("--smoke", action="store_true", help="sample deal, investigator + tax, no sweep (for CI)")
    args = ap.parse_args(argv)
    if args.smoke and args.labelled:
        args.agents = "investigator,tax"
    elif args.smoke:
        args.deals, args.agents, args.sweep = "sample_deal", "investigator,tax", ""
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.labelled:
        return labelled_main(args, argv)
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


# -- labelled folder: the node vs dense, BM25 and a LangChain ensemble -----------------------------


class BaselineRetrievals:
    """Packages of the three baselines for an intent, on the node's store, scope, trust and rendering."""

    def __init__(self, store, *, max_sensitivity: str) -> None:  # noqa: ANN001 - a retrieval_node Store
        from retrieval_node.agent import RetrievalAgent
        from retrieval_node.models import TrustContext
        from retrieval_node.pack import ContextPackager

        self.store = store
        self.trust = TrustContext(max_sensitivity=max_sensitivity, authenticated=True, actor_id="bench:baseline")
        self.agent = RetrievalAgent(store, trust=self.trust)
        self.packager = ContextPackager(store.tokens)

    def close(self) -> None:
        self.agent.close()

    def members(self, intent):  # noqa: ANN001, ANN201
        """The deal's chunks in the intent's sections (and roles, when it names some) that the trust reaches."""
        view, _ = self.agent.pipeline.deals.view(intent.deal_id)
        sections = {s.value for s in intent.target_section_types}
        roles = {r.value for r in intent.document_roles} if intent.document_roles else None
        return view, [c for c in view.chunks.values() if c.section_type in sections and (roles is None or c.document_role in roles)
                      and self.trust.allows(c.deal_id, c.sensitivity)]

    def dense_order(self, intent, members) -> list[str]:  # noqa: ANN001
        from retrieval_node.backends.vectors import SearchScope

        qvec = self.store.embedder.embed([intent.query_text])[0]
        scope = SearchScope(deal_id=intent.deal_id, section_types=tuple(sorted({c.section_type for c in members})),
                            chunk_ids=tuple(sorted(c.chunk_id for c in members)))
        best: dict[str, float] = {}
        for h in self.store.chunks.search(qvec, scope, 10_000) if members else []:
            best[h.chunk_id] = max(best.get(h.chunk_id, -1.0), h.score)
        return sorted(best, key=lambda c: (-best[c], c))

    def bm25_order(self, intent, view, members) -> list[str]:  # noqa: ANN001
        scores = view.bm25_scores(intent.query_text)
        return sorted((c.chunk_id for c in members), key=lambda c: (-scores.get(c, 0.0), c))

    def ensemble_order(self, intent, members) -> list[str]:  # noqa: ANN001
        from langchain_classic.retrievers import EnsembleRetriever
        from langchain_community.retrievers import BM25Retriever
        from langchain_core.callbacks import CallbackManagerForRetrieverRun
        from langchain_core.documents import Document
        from langchain_core.retrievers import BaseRetriever

        if not members:
            return []
        outer = self

        class MiniLMChunkRetriever(BaseRetriever):
            """The deal's chunks in scope, ranked by the best cosine of their MiniLM windows in the store."""

            def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
                order = outer.dense_order(intent.model_copy(update={"query_text": query}), members)
                by_id = {c.chunk_id: c for c in members}
                return [Document(page_content=by_id[c].content, metadata={"chunk_id": c}) for c in order]

        docs = [Document(page_content=c.content, metadata={"chunk_id": c.chunk_id}) for c in sorted(members, key=lambda c: c.chunk_id)]
        bm25 = BM25Retriever.from_documents(docs, k=len(docs))
        fused = EnsembleRetriever(retrievers=[bm25, MiniLMChunkRetriever()], weights=[0.5, 0.5], id_key="chunk_id")
        return [d.metadata["chunk_id"] for d in fused.invoke(intent.query_text)]

    def scope_facts(self, intent, gold: list[str]) -> tuple[int, bool]:  # noqa: ANN001
        """(gold chunks inside the baselines' scope, whether all in-scope chunks overflow the budget)."""
        _, members = self.members(intent)
        ids = {c.chunk_id for c in members}
        need = self.packager.overhead(intent.deal_id, intent.intent_id, intent.agent_id) + sum(self.packager.block_cost(c) for c in members)
        return sum(1 for g in gold if g in ids), need > intent.max_tokens_budget

    def retrieve(self, method: str, intent):  # noqa: ANN001, ANN201
        """(ContextPackage, RetrievalSummary) of ``method`` for ``intent``: ranked chunks, whole, until the budget."""
        from retrieval_node.models import RetrievalSummary
        from retrieval_node.models import build_package, evidence_code
        from retrieval_node.pack import render_evidence, to_reference

        view, members = self.members(intent)
        if method == "dense":
            order = self.dense_order(intent, members)
        elif method == "bm25":
            order = self.bm25_order(intent, view, members)
        elif method == "ensemble":
            order = self.ensemble_order(intent, members)
        else:
            raise ValueError(f"unknown baseline {method!r}; known: dense, bm25, ensemble")
        by_id = {c.chunk_id: c for c in members}
        room = intent.max_tokens_budget - self.packager.overhead(intent.deal_id, intent.intent_id, intent.agent_id)
        chosen = []
        for cid in order:
            cost = self.packager.block_cost(by_id[cid])
            if cost <= room:
                chosen.append(by_id[cid])
                room -= cost
        refs = [to_reference(c) for c in sorted(chosen, key=lambda c: c.reading_key)]
        # rendered exactly as the node renders its own packages (same evidence code scheme, same token count)
        code = evidence_code(self.store.secret(), intent.deal_id, intent.intent_id, intent.agent_id, refs) if refs else None
        total = self.store.tokens.count(render_evidence(intent.deal_id, intent.intent_id, intent.agent_id, refs, code=code))
        package = build_package(deal_id=intent.deal_id, intent_id=intent.intent_id, agent_id=intent.agent_id, refs=refs, structural_toc="",
                                exclusions_note="", total_tokens=total, risk_summary="", evidence_code=code)
        summary = RetrievalSummary(audit_id=f"baseline:{method}", chunks_inspected=len(members), chunks_selected=len(refs),
                                   tokens_selected=total, risk_distribution={}, structural_coverage_score=0.0, missing_zones=[],
                                   needs_human_input=False, fallbacks=[], latency_ms={})
        return package, summary


def _labelled_table(reports: dict, agents: list[str]) -> str:  # noqa: ANN001
    def pct(x: float | None) -> str:
        return "-" if x is None else f"{x:.1%}"

    lines = []
    for group in [*agents, "total"]:
        for method, rep in reports.items():
            t = rep.total if group == "total" else rep.by_agent[group]
            claims = f"{t.false_material_claims}/{t.clean_intents}" if method == "node" else f"- /{t.clean_intents}"
            lines.append([group, method, f"{pct(t.recall)} ({t.gold_found}/{t.gold})",
                          f"{pct(t.material_recall)} ({t.material_found}/{t.material})", t.distractors_packed, claims,
                          t.unreported_missing_zones, t.over_budget, pct(t.framing_share)])
    return table(["agent", "method", "recall", "material recall", "distractors", "false claims", "unrep. zones", "over budget",
                  "framing"], lines)


def labelled_main(args: argparse.Namespace, argv: list[str] | None) -> int:
    import dataclasses

    from retrieval_node.labelled_eval import EVAL_MAX_SENSITIVITY, evaluate_labelled, load_labelled_set, prepare_store
    from retrieval_node.store import Store

    agents = [a for a in args.agents.split(",") if a]
    methods = [m for m in args.methods.split(",") if m]
    unknown = set(methods) - set(LABELLED_METHODS)
    if unknown:
        print(f"unknown method(s) {sorted(unknown)}; known: {list(LABELLED_METHODS)}", file=sys.stderr)
        return 2
    labelled = load_labelled_set(args.labelled, agents=agents)
    if args.deals:
        keep = args.deals.split(",")
        labelled = dataclasses.replace(labelled, golds={d: g for d, g in labelled.golds.items() if d in keep})
    if args.smoke:
        labelled = dataclasses.replace(labelled, golds=dict(list(labelled.golds.items())[:2]))
    started = now_iso()
    t0 = time.perf_counter()
    reports = {}
    seconds = {}
    with tempfile.TemporaryDirectory(prefix="rn-deal-quality-") as tmp, Store.open(Path(args.store) if args.store else Path(tmp) / "store") as store:
        ingest = prepare_store(store, labelled, progress=True)
        print(f"store {store.home}: {ingest}", file=sys.stderr)
        baselines = BaselineRetrievals(store, max_sensitivity=EVAL_MAX_SENSITIVITY)
        try:
            for method in methods:
                t = time.perf_counter()
                retrieve = None if method == "node" else (lambda intent, m=method: baselines.retrieve(m, intent))
                reports[method] = evaluate_labelled(store, labelled, agents=agents, retrieve=retrieve, ingest=False, progress=True)
                seconds[method] = round(time.perf_counter() - t, 1)
                print(f"{method:<9} {reports[method].total.score_line()}  ({seconds[method]} s)", file=sys.stderr)
            scope: dict[str, dict[str, int]] = {}
            for deal_id, gold in labelled.golds.items():
                for agent_name, spec in labelled.intents.items():
                    intent = baselines.agent.intent_for(agent_name, deal_id=deal_id, stage=spec.stage, budget=spec.budget)
                    in_scope, overflows = baselines.scope_facts(intent, gold.intents[spec.intent_id].risk_chunk_ids)
                    acc = scope.setdefault(agent_name, {"gold": 0, "gold_in_scope": 0, "runs": 0, "scope_over_budget": 0})
                    acc["gold"] += len(gold.intents[spec.intent_id].risk_chunk_ids)
                    acc["gold_in_scope"] += in_scope
                    acc["runs"] += 1
                    acc["scope_over_budget"] += int(overflows)
        finally:
            baselines.close()
    wall = time.perf_counter() - t0
    machine = machine_info()
    print_machine(machine)
    print(f"\n{len(labelled.golds)} deal(s) x {len(agents)} agent(s) of {args.labelled}; budgets and stages from intents.json; "
          "false claims on gold-clean intents (a baseline makes none)")
    print(_labelled_table(reports, agents))
    for method, rep in reports.items():
        print(f"{method:<9} {rep.total.score_line()}")
    print("\nscope (the intent's sections and roles, trust up to confidential): gold inside it, and the deal x agent runs "
          "whose in-scope chunks exceed the budget (only there can a ranking change recall)")
    print(table(["agent", "gold in scope", "scope over budget"],
                [[a, f"{v['gold_in_scope']}/{v['gold']}", f"{v['scope_over_budget']}/{v['runs']}"] for a, v in scope.items()]))
    payload = {
        "benchmark": f"{NAME}_labelled",
        "date": started,
        "wall_s": round(wall, 1),
        "seconds_per_method": seconds,
        "command": " ".join([Path(sys.executable).name, sys.argv[0], *(argv if argv is not None else sys.argv[1:])]),
        "machine": machine,
        "settings": {"folder": str(labelled.root), "deals": list(labelled.golds), "agents": agents, "methods": methods,
                     "intents": {a: s.model_dump(mode="json") for a, s in labelled.intents.items()}, "ingest": ingest.model_dump()},
        "scope": scope,
        "reports": {m: r.model_dump(mode="json") for m, r in reports.items()},
    }
    path = write_result(result_path(f"{NAME}_labelled", args.out, args.smoke), payload)
    print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
