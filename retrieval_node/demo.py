"""The main job: ingest the bundled sample deal and run the LangGraph workflow with every adapter.

``investigator -> tax -> condo -> scribe``, each turn: ``plan`` (pick the next
agent) -> ``retrieve`` (the :class:`RetrievalNode`) -> ``review`` (a
deterministic stand-in for the downstream LLM agent: it reads its package and
records what later agents can use, e.g. the parties named in a risk chunk).

The run is checkpointed, so state holds package references only (audit id, ``package_hash``, summary);
``review`` reads each package from its audit snapshot through :meth:`RetrievalNode.package`.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from collections.abc import Callable
from typing import Any

from langgraph.graph import END, START, StateGraph

from .models import ContextPackage, RetrievalSummary, TrustContext
from .node import DealState, RetrievalNode, package_of, summary_of

AGENT_ORDER = ["investigator", "tax", "condo", "scribe"]
SAMPLE_DEAL_ID = "2026-ACME-0042"

_PARTY = re.compile(r"\b([A-Z][A-Za-z&'\-]+(?: [A-Z][A-Za-z&'\-]+){0,4} (?:Ltd|Inc|Corp|Corporation|LLP)\.?)")
_CONDO_CORP = re.compile(r"(Condominium Corporation No\. ?\d+)", re.IGNORECASE)
_ROLL = re.compile(r"\bRoll (?:No\.|Number)[: ]*([0-9][0-9 \-]{5,20}[0-9])", re.IGNORECASE)


def sample_data_dir() -> Path:
    return Path(str(resources.files("retrieval_node") / "sample_data"))


def sample_deal_files() -> tuple[Path, Path]:
    """(chunks.jsonl of the sample deal, patterns.jsonl)."""
    base = sample_data_dir()
    return base / "sample_deal" / "chunks.jsonl", base / "patterns.jsonl"


def plan(state: DealState) -> dict[str, Any]:
    queue = list(state.get("agent_queue") or [])
    if not queue:
        return {}
    agent = queue.pop(0)
    done = len(state.get("package_refs") or {})
    return {"current_agent": agent, "current_step": f"{done + 1:02d}_{agent}", "agent_queue": queue}


def review(state: DealState, package: ContextPackage | None = None) -> dict[str, Any]:
    """Stand-in for the downstream agent: no LLM, just what it would carry forward. ``package`` is the current step's
    package (read from state when not given: the node put it there)."""
    step = state["current_step"]
    package = package or package_of(state, step)
    summary = summary_of(state, step)
    findings: dict[str, Any] = dict(state.get("findings") or {})
    parties = set(findings.get("parties") or [])
    kinds = set(findings.get("risk_kinds") or []) | set(summary.risk_distribution)
    for ref in package.ordered_chunks:
        if ref.section_type.value in ("INSTRUMENTS_REGISTER", "CAVEATS_SECTION"):
            parties.update(m.group(1) for m in _PARTY.finditer(ref.content))
        corp = _CONDO_CORP.search(ref.content)
        if corp and "condo_corporation" not in findings:
            findings["condo_corporation"] = corp.group(1)
        roll = _ROLL.search(ref.content)
        if roll and "tax_roll" not in findings:
            findings["tax_roll"] = roll.group(1).strip()
    findings["parties"] = sorted(parties)[:8]
    findings["risk_kinds"] = sorted(kinds)
    return {"findings": findings}


def reviewer(node: RetrievalNode) -> Callable[[DealState], dict[str, Any]]:
    """:func:`review` as a graph node: the package from state, or from its audit snapshot when state holds its reference."""
    def review_step(state: DealState) -> dict[str, Any]:
        return review(state, node.package(state, state["current_step"]))

    return review_step


def build_workflow(node: RetrievalNode, *, checkpointer: Any = None, interrupt_after: list[str] | None = None) -> Any:
    """The demo graph; pass a checkpointer to make runs resumable (state then keeps package references, not packages)."""
    graph = StateGraph(DealState)
    graph.add_node("plan", plan)
    graph.add_node("retrieve", node.as_runnable())
    graph.add_node("review", reviewer(node))
    graph.add_edge(START, "plan")
    graph.add_edge("plan", "retrieve")
    graph.add_edge("retrieve", "review")
    graph.add_conditional_edges("review", lambda s: "plan" if s.get("agent_queue") else END, ["plan", END])
    return graph.compile(checkpointer=checkpointer, interrupt_after=interrupt_after)


@dataclass(frozen=True)
class AgentTurn:
    """One agent's turn of the workflow: its package, summary and the budget it had (cl100k tokens)."""

    agent: str
    step: str
    package: ContextPackage
    summary: RetrievalSummary
    budget: int


@dataclass(frozen=True)
class DemoResult:
    """What :func:`run_demo` did: the ingest (None with ``deal_id``), the LangGraph thread and each agent's turn."""

    deal_id: str
    ingest: dict[str, int] | None
    thread_id: str
    checkpoints: Path
    findings: dict[str, Any]
    agents: list[AgentTurn]

    def as_json(self) -> dict[str, Any]:
        """The ``retrieval-node demo --json`` document."""
        return {
            "deal_id": self.deal_id,
            "ingest": self.ingest,
            "thread_id": self.thread_id,
            "findings": self.findings,
            "agents": [{"agent": a.agent, "step": a.step, "package": a.package.model_dump(mode="json"),
                        "summary": a.summary.model_dump(mode="json")} for a in self.agents],
        }


def run_demo(store: str | Path | None = None, *, deal_id: str | None = None, trust: TrustContext | None = None,
             progress: bool = False) -> DemoResult:
    """The main job (``retrieval-node demo``): ingest the bundled sample deal and its pattern memories into the store
    at ``store`` (default ``$RETRIEVAL_NODE_HOME``, else ``./.retrieval-node``), then run the workflow with every adapter
    and a SQLite checkpointer in the store. With ``deal_id`` nothing is ingested and that deal is used.

    >>> result = run_demo("/tmp/rn-demo")                                  # doctest: +SKIP
    >>> [(a.agent, len(a.package.ordered_chunks)) for a in result.agents]  # doctest: +SKIP
    """
    from langgraph.checkpoint.sqlite import SqliteSaver

    from .agent import RetrievalAgent
    from .ingest import Ingestor, add_patterns, read_patterns
    from .store import Store

    trust = trust or TrustContext(max_sensitivity="confidential", authenticated=True, actor_id="demo")
    with Store.open(store) as st:
        ingest_note = None
        if deal_id is None:
            chunks, patterns_file = sample_deal_files()
            report = Ingestor(st).ingest([chunks], progress=progress)
            patterns, _ = read_patterns(patterns_file)
            added, _unchanged = add_patterns(st, patterns)
            ingest_note = {"ingested": report.ingested, "unchanged": report.unchanged, "rejected": len(report.rejected), "patterns_added": added}
        deal = deal_id or SAMPLE_DEAL_ID
        retrieval_agent = RetrievalAgent(st, trust=trust)
        thread_id = f"demo-{deal}-{uuid.uuid4().hex[:8]}"
        checkpoints = st.home / "checkpoints.sqlite"
        node = RetrievalNode(retrieval_agent)
        with SqliteSaver.from_conn_string(str(checkpoints)) as saver:
            graph = build_workflow(node, checkpointer=saver)
            try:
                final = graph.invoke(initial_state(deal), {"configurable": {"thread_id": thread_id}})
            finally:
                retrieval_agent.close()
        turns = [
            AgentTurn(agent=step.split("_", 1)[1], step=step, package=node.package(final, step), summary=summary_of(final, step),
                      budget=st.config.agents[step.split("_", 1)[1]].max_tokens_budget)
            for step in sorted(final["package_refs"])
        ]
    return DemoResult(deal_id=deal, ingest=ingest_note, thread_id=thread_id, checkpoints=checkpoints,
                      findings=dict(final.get("findings") or {}), agents=turns)


def initial_state(deal_id: str = SAMPLE_DEAL_ID, *, stage: str = "DILIGENCE", agents: list[str] | None = None) -> DealState:
    return DealState(deal_id=deal_id, deal_stage=stage, agent_queue=list(agents or AGENT_ORDER), findings={},
                     package_refs={}, retrieval_summaries={}, audit_ids={})


__all__ = [
    "AGENT_ORDER",
    "SAMPLE_DEAL_ID",
    "AgentTurn",
    "DemoResult",
    "build_workflow",
    "initial_state",
    "plan",
    "review",
    "reviewer",
    "run_demo",
    "sample_data_dir",
    "sample_deal_files",
]
