"""Deal-quality evaluation: risk recall at a budget, zone coverage and false risks, against baselines.

What a lawyer checks, per agent profile and deal with gold labels (``sample_data/<deal>/gold.yaml``):

* **risk recall**: share of the gold risk chunks of the agent's scope that are in its package
  (a chunk counts whether whole or as a verbatim excerpt);
* **zone coverage**: share of the agent's required zones present in the deal that the package covers;
* **false material risks** on a deal whose gold lists no risk for the agent (the clean deal);
* **tokens**: cl100k tokens of what the agent reads (the same rendering for every method).

Methods, all on the same store, intent and budget:

* ``node``: :class:`~retrieval_node.agent.RetrievalAgent` with the configured weights;
* ``node_alpha0`` / ``node_beta0`` / ``node_gamma0``: the node with one weight of
  ``combined = α·semantic + β·risk + γ·pattern`` set to 0 and the other two rescaled to sum to 1
  (risk-first packing still runs: it is the packager's policy, not β);
* ``node_no_risk_first``: the node with ``risk_budget_share = 0`` (packing by combined score only);
* ``dense``: MiniLM query embedding -> the deal's chunk index restricted to the agent's target
  sections, best window per chunk, whole chunks filled greedily by cosine until the budget;
* ``bm25``: BM25 (bm25s) over the same chunks, filled the same way.

Baselines render their chunks exactly as the node does (:func:`~retrieval_node.pack.render_evidence`)
and are filled with the packager's block costs, so "tokens" means the same thing everywhere.

>>> from retrieval_node.evaluation import evaluate, bundled_deals        # doctest: +SKIP
>>> report = evaluate(store, deals=bundled_deals(), agents=["investigator"])  # doctest: +SKIP
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .agent import RetrievalAgent
from .backends.vectors import SearchScope
from .config import NodeConfig, RiskWeights
from .models import TrustContext
from .pack import ContextPackager, render_evidence, to_reference
from .store import Store

SAMPLE_DATA = Path(__file__).resolve().parent / "sample_data"
METHODS = ("node", "node_alpha0", "node_beta0", "node_gamma0", "node_no_risk_first", "dense", "bm25")
#: The evaluation reads every sensitivity level: it measures retrieval, not access control.
EVAL_TRUST = TrustContext(max_sensitivity="privileged", authenticated=True, actor_id="evaluation")


@dataclass(frozen=True, slots=True)
class Deal:
    """A deal with gold labels: chunk id -> label, and the gold risks / zones of ``gold.yaml``."""

    name: str
    deal_id: str
    chunks_file: Path
    labels: dict[str, str]
    tokens: dict[str, int]
    gold: dict[str, Any]

    def gold_risks(self, agent: str) -> list[str]:
        return [r["label"] for r in self.gold.get("risks", []) if agent in r.get("agents", [])]

    def chunk_id(self, label: str) -> str:
        for cid, lab in self.labels.items():
            if lab == label:
                return cid
        raise KeyError(f"{self.name}: gold label {label!r} names no chunk in {self.chunks_file}")


def load_deal(directory: Path) -> Deal:
    """A fixture directory with ``chunks.jsonl`` (each chunk's ``metadata.label``) and ``gold.yaml``."""
    labels: dict[str, str] = {}
    tokens: dict[str, int] = {}
    deal_id = ""
    chunks_file = directory / "chunks.jsonl"
    for line in chunks_file.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        deal_id = row["deal_id"]
        labels[row["chunk_id"]] = (row.get("metadata") or {}).get("label", row["chunk_id"][:12])
        tokens[row["chunk_id"]] = int(row["token_count"])
    gold = yaml.safe_load((directory / "gold.yaml").read_text(encoding="utf-8")) or {}
    deal = Deal(directory.name, deal_id, chunks_file, labels, tokens, gold)
    for agent in ("investigator", "tax", "condo", "scribe"):
        for label in deal.gold_risks(agent):
            deal.chunk_id(label)  # every gold label must name a chunk
    return deal


def bundled_deals(names: Sequence[str] | None = None) -> list[Deal]:
    dirs = sorted(p for p in SAMPLE_DATA.iterdir() if (p / "gold.yaml").exists())
    if names is not None:
        unknown = set(names) - {d.name for d in dirs}
        if unknown:
            raise ValueError(f"unknown deal fixture(s) {sorted(unknown)}; bundled: {[d.name for d in dirs]}")
        dirs = [d for d in dirs if d.name in set(names)]
    return [load_deal(d) for d in dirs]


@dataclass(slots=True)
class Row:
    deal: str
    agent: str
    method: str
    budget: int
    gold: int
    found: int
    recall: float | None
    missed: list[str]
    tokens: int
    chunks: int
    zone_coverage: float | None
    false_material_risk: bool | None
    needs_human_input: bool | None = None
    excerpts: int = 0
    #: gold risks the agent's contract does not let it retrieve at this stage (by design)
    out_of_scope: list[str] = field(default_factory=list)
    recall_in_scope: float | None = None


def _ablated(config: NodeConfig, method: str) -> NodeConfig:
    if method == "node":
        return config
    if method == "node_no_risk_first":
        agents = {n: a.model_copy(update={"risk_budget_share": 0.0}) for n, a in config.agents.items()}
        return config.model_copy(update={"agents": agents})
    term = {"node_alpha0": "alpha", "node_beta0": "beta", "node_gamma0": "gamma"}[method]
    weights = {}
    for profile, w in config.weights.items():
        kept = {k: getattr(w, k) for k in ("alpha", "beta", "gamma") if k != term}
        total = sum(kept.values())
        scaled = {k: (v / total if total else 0.5) for k, v in kept.items()}
        weights[profile] = RiskWeights(**{term: 0.0}, **scaled)
    return config.model_copy(update={"weights": weights})


def _zone_coverage(required: Sequence[str], present: set[str], chosen_zones: set[str]) -> float | None:
    wanted = [z for z in dict.fromkeys(required) if z in present]
    if not wanted:
        return None
    return round(sum(1 for z in wanted if z in chosen_zones) / len(wanted), 4)


class Evaluator:
    """Runs the methods on one store (the deals must be ingested in it)."""

    def __init__(self, store: Store, *, config: NodeConfig | None = None) -> None:
        self.store = store
        self.config = config or store.config
        self._agents: dict[str, RetrievalAgent] = {}
        self.packager = ContextPackager(store.tokens)

    def agent(self, method: str) -> RetrievalAgent:
        if method not in self._agents:
            self._agents[method] = RetrievalAgent(self.store, config=_ablated(self.config, method), trust=EVAL_TRUST)
        return self._agents[method]

    def run(self, deal: Deal, agent_name: str, method: str, budget: int | None = None) -> Row:
        base = self.agent("node")
        intent = base.intent_for(agent_name, deal_id=deal.deal_id, budget=budget)
        budget = intent.max_tokens_budget
        gold = deal.gold_risks(agent_name)
        view, _ = base.pipeline.deals.view(deal.deal_id)
        present_zones = {z for c in view.chunks.values() for z in c.zones}
        if method.startswith("node"):
            pkg, summary = self.agent(method).retrieve_sync(intent)
            ids = [r.chunk_id for r in pkg.ordered_chunks if not r.redacted]
            tokens = pkg.total_tokens
            coverage = _zone_coverage(intent.required_structural_zones or [], present_zones, {z for r in pkg.ordered_chunks for z in r.zones})
            false_risk = bool(summary.risk_distribution) if not gold else None
            excerpts = sum(1 for r in pkg.ordered_chunks if r.char_start is not None)
            needs = summary.needs_human_input
        else:
            sections = {s.value for s in intent.target_section_types}
            members = [c for c in view.chunks.values() if c.section_type in sections]
            if method == "dense":
                qvec = self.store.embedder.embed([intent.query_text])[0]
                hits = self.store.chunks.search(qvec, SearchScope(deal_id=deal.deal_id, section_types=tuple(sorted(sections))), 10_000)
                best: dict[str, float] = {}
                for h in hits:
                    best[h.chunk_id] = max(best.get(h.chunk_id, -1.0), h.score)
            elif method == "bm25":
                scores = view.bm25_scores(intent.query_text)
                best = {c.chunk_id: scores.get(c.chunk_id, 0.0) for c in members}
            else:
                raise ValueError(f"unknown method {method!r}; known: {METHODS}")
            order = sorted((c for c in members if c.chunk_id in best), key=lambda c: (-best[c.chunk_id], c.chunk_id))
            remaining = budget - self.packager.overhead(deal.deal_id, intent.intent_id, intent.agent_id)
            chosen = []
            for c in order:
                cost = self.packager.block_cost(c)
                if cost <= remaining:
                    chosen.append(c)
                    remaining -= cost
            chosen.sort(key=lambda c: c.reading_key)
            refs = [to_reference(c) for c in chosen]
            tokens = self.store.tokens.count(render_evidence(deal.deal_id, intent.intent_id, intent.agent_id, refs))
            ids = [c.chunk_id for c in chosen]
            coverage = _zone_coverage(intent.required_structural_zones or [], present_zones, {z for c in chosen for z in c.zones})
            false_risk = None  # a baseline makes no risk claim
            excerpts = 0
            needs = None
        got = set(ids)
        missed = [label for label in gold if deal.chunk_id(label) not in got]
        plan = base.pipeline.plan(intent)  # the contract the node applies to this intent
        out = [label for label in gold if not plan.allows((c := view.chunks[deal.chunk_id(label)]).section_type, c.document_role)]
        in_scope = [label for label in gold if label not in out]
        return Row(
            deal=deal.name, agent=agent_name, method=method, budget=budget, gold=len(gold), found=len(gold) - len(missed),
            recall=round((len(gold) - len(missed)) / len(gold), 4) if gold else None, missed=missed, tokens=tokens,
            chunks=len(ids), zone_coverage=coverage, false_material_risk=false_risk, needs_human_input=needs, excerpts=excerpts,
            out_of_scope=out,
            recall_in_scope=round(sum(1 for label in in_scope if label not in missed) / len(in_scope), 4) if in_scope else None,
        )


def evaluate(
    store: Store,
    *,
    deals: Sequence[Deal],
    agents: Sequence[str] = ("investigator", "tax", "condo", "scribe"),
    methods: Sequence[str] = METHODS,
    sweep: Sequence[int] = (),
    sweep_deals: Sequence[str] | None = None,
    sweep_methods: Sequence[str] = ("node", "dense", "bm25"),
) -> dict[str, Any]:
    """Default-budget rows for every (deal, agent, method), then a budget sweep; plain dicts (JSON-ready)."""
    unknown = set(methods) - set(METHODS)
    if unknown:
        raise ValueError(f"unknown method(s) {sorted(unknown)}; known: {list(METHODS)}")
    ev = Evaluator(store)
    rows = [asdict(ev.run(d, a, m)) for d in deals for a in agents for m in methods]
    swept = []
    for d in deals:
        if sweep_deals is not None and d.name not in sweep_deals:
            continue
        for a in agents:
            if not d.gold_risks(a):
                continue
            for b in sweep:
                for m in sweep_methods:
                    swept.append(asdict(ev.run(d, a, m, budget=b)))
    return {"default_budget": rows, "sweep": swept, "summary": summarise(rows)}


def summarise(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per method: gold risks found / total over every (deal, agent); node minus dense per deal and agent."""
    by_method: dict[str, list[int]] = {}
    for r in rows:
        if r["gold"]:
            acc = by_method.setdefault(r["method"], [0, 0, 0, 0])
            acc[0] += r["found"]
            acc[1] += r["gold"]
            in_scope = r["gold"] - len(r["out_of_scope"])
            acc[2] += in_scope - len([m for m in r["missed"] if m not in r["out_of_scope"]])
            acc[3] += in_scope
    recall = {m: {"found": f, "gold": g, "recall": round(f / g, 4) if g else None,
                  "found_in_scope": fi, "gold_in_scope": gi, "recall_in_scope": round(fi / gi, 4) if gi else None}
              for m, (f, g, fi, gi) in by_method.items()}
    index = {(r["deal"], r["agent"], r["method"]): r for r in rows}
    gaps = {}
    for (deal, agent, method), r in index.items():
        dense = index.get((deal, agent, "dense"))
        if method == "node" and dense and r["gold"]:
            gaps[f"{deal}/{agent}"] = round(100 * (r["recall"] - dense["recall"]), 1)
    false = sorted({f"{r['deal']}/{r['agent']}" for r in rows if r["method"] == "node" and r["false_material_risk"]})
    scope = {f"{r['deal']}/{r['agent']}": r["out_of_scope"] for r in rows if r["method"] == "node" and r["out_of_scope"]}
    return {"recall_by_method": recall, "node_minus_dense_points": gaps, "false_material_risks_node": false, "gold_outside_contract": scope}


__all__ = ["METHODS", "Deal", "Evaluator", "Row", "bundled_deals", "evaluate", "load_deal", "summarise"]
