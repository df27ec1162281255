"""The main job: ingest the bundled sample deal and run the LangGraph workflow with every adapter.

``investigator -> tax -> condo -> scribe``, each turn: ``plan`` (pick the next
agent) -> ``retrieve`` (the :class:`RetrievalNode`) -> ``review`` (a
deterministic stand-in for the downstream LLM agent: it reads its package and
records what later agents can use, e.g. the parties named in a risk chunk).
"""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path
from typing import Any

from langgraph.graph import END, START, StateGraph

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
    done = len(state.get("context_packages") or {})
    return {"current_agent": agent, "current_step": f"{done + 1:02d}_{agent}", "agent_queue": queue}


def review(state: DealState) -> dict[str, Any]:
    """Stand-in for the downstream agent: no LLM, just what it would carry forward."""
    step = state["current_step"]
    package = package_of(state, step)
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


def build_workflow(node: RetrievalNode, *, checkpointer: Any = None, interrupt_after: list[str] | None = None) -> Any:
    """The demo graph; pass a checkpointer to make runs resumable."""
    graph = StateGraph(DealState)
    graph.add_node("plan", plan)
    graph.add_node("retrieve", node.as_runnable())
    graph.add_node("review", review)
    graph.add_edge(START, "plan")
    graph.add_edge("plan", "retrieve")
    graph.add_edge("retrieve", "review")
    graph.add_conditional_edges("review", lambda s: "plan" if s.get("agent_queue") else END, ["plan", END])
    return graph.compile(checkpointer=checkpointer, interrupt_after=interrupt_after)


def initial_state(deal_id: str = SAMPLE_DEAL_ID, *, stage: str = "DILIGENCE", agents: list[str] | None = None) -> DealState:
    return DealState(deal_id=deal_id, deal_stage=stage, agent_queue=list(agents or AGENT_ORDER), findings={},
                     context_packages={}, retrieval_summaries={}, audit_ids={})


__all__ = ["AGENT_ORDER", "SAMPLE_DEAL_ID", "build_workflow", "initial_state", "plan", "review", "sample_data_dir", "sample_deal_files"]
