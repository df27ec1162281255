"""LangGraph integration: ``DealState``, the ``RetrievalNode`` and the adapter registry (spec 7).

The node is a thin shell: state -> intent (through the current agent's adapter)
-> ``RetrievalAgent.retrieve`` -> a partial state update. Retrieval scope is
fixed per turn: the node plans once per call and nothing in generation can
trigger more retrieval.

Packages and summaries are kept in state as JSON-ready dicts (what every
LangGraph checkpointer can store without allow-listing our classes); read them
back as models with :func:`package_of` / :func:`summary_of`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Annotated, Any, Protocol, TypedDict, runtime_checkable

from langchain_core.runnables import RunnableLambda

from .agent import RetrievalAgent, intent_from_profile
from .config import AgentProfile, NodeConfig
from .errors import TrustRequired, IntentError, UnknownAgentError
from .models import ContextPackage, RetrievalIntent, RetrievalSummary, TrustContext

ADAPTER_GROUP = "retrieval_node.adapters"


def merge_dicts(left: dict[str, Any] | None, right: dict[str, Any] | None) -> dict[str, Any]:
    """Reducer: per-step dicts merge; a later step's entry replaces the same step's earlier one."""
    return {**(left or {}), **(right or {})}


class DealState(TypedDict, total=False):
    """Graph state of one conveyancing file.

    ``context_packages`` / ``retrieval_summaries`` / ``audit_ids`` are keyed by step
    and merged, so every agent's package stays in state for the rest of the run.
    """

    deal_id: str
    deal_stage: str
    current_agent: str
    current_step: str
    agent_queue: list[str]
    budgets: dict[str, int]
    trust: dict[str, Any]
    findings: Annotated[dict[str, Any], merge_dicts]
    context_packages: Annotated[dict[str, dict[str, Any]], merge_dicts]
    retrieval_summaries: Annotated[dict[str, dict[str, Any]], merge_dicts]
    audit_ids: Annotated[dict[str, str], merge_dicts]


def package_of(state: Mapping[str, Any], step: str, *, key: str = "context_packages") -> ContextPackage:
    return ContextPackage.model_validate(state[key][step])


def summary_of(state: Mapping[str, Any], step: str, *, key: str = "retrieval_summaries") -> RetrievalSummary:
    return RetrievalSummary.model_validate(state[key][step])


@runtime_checkable
class AgentAdapter(Protocol):
    """Builds the retrieval intent of one downstream agent from graph state (see ``adapters/``)."""

    name: str

    def build_intent(self, state: Mapping[str, Any], profile: AgentProfile) -> RetrievalIntent: ...


class _ProfileOnly:
    """Fallback adapter for an agent configured in agents.yaml without an adapter: the profile as is."""

    def __init__(self, name: str) -> None:
        self.name = name

    def build_intent(self, state: Mapping[str, Any], profile: AgentProfile) -> RetrievalIntent:
        deal_id = state.get("deal_id")
        if not deal_id:
            raise IntentError(f"graph state has no 'deal_id'; the retrieval node needs it (state keys present: {sorted(state)})")
        return intent_from_profile(self.name, profile, deal_id=deal_id, stage=state.get("deal_stage") or "DILIGENCE")


class AdapterRegistry:
    """Adapters by agent name; an unknown name is a clear error.

    >>> registry = AdapterRegistry.from_entry_points(config)   # doctest: +SKIP
    >>> registry.names()                                        # doctest: +SKIP
    ['condo', 'investigator', 'scribe', 'tax']
    """

    def __init__(self, config: NodeConfig, adapters: Iterable[AgentAdapter] = ()) -> None:
        self.config = config
        self._adapters: dict[str, AgentAdapter] = {}
        for a in adapters:
            self.register(a)

    @classmethod
    def from_entry_points(cls, config: NodeConfig) -> AdapterRegistry:
        """Adapters installed under the ``retrieval_node.adapters`` entry-point group."""
        found = []
        for ep in sorted(entry_points(group=ADAPTER_GROUP), key=lambda e: e.name):
            adapter = ep.load()()
            if adapter.name in config.agents:
                found.append(adapter)
        return cls(config, found)

    def register(self, adapter: AgentAdapter) -> None:
        if adapter.name not in self.config.agents:
            raise UnknownAgentError(
                f"adapter {adapter.name!r} has no profile in configs/agents.yaml; add one (configured: {sorted(self.config.agents)})"
            )
        self._adapters[adapter.name] = adapter

    def names(self) -> list[str]:
        return sorted(self._adapters)

    def get(self, name: str) -> AgentAdapter:
        adapter = self._adapters.get(name)
        if adapter is not None:
            return adapter
        if name in self.config.agents:
            return _ProfileOnly(name)
        raise UnknownAgentError(f"unknown agent {name!r}: no adapter and no profile; known agents: {sorted(set(self._adapters) | set(self.config.agents))}")

    def build_intent(self, name: str, state: Mapping[str, Any]) -> RetrievalIntent:
        return self.get(name).build_intent(state, self.config.agents[name])


@dataclass(frozen=True)
class StateKeys:
    """Names of the state keys the node reads and writes (override to fit your graph)."""

    deal_id: str = "deal_id"
    current_agent: str = "current_agent"
    current_step: str = "current_step"
    context_packages: str = "context_packages"
    retrieval_summaries: str = "retrieval_summaries"
    audit_ids: str = "audit_ids"
    trust: str = "trust"


class RetrievalNode:
    """A LangGraph node: ``state -> {context_packages: {step: ...}, retrieval_summaries: {...}, audit_ids: {...}}``.

    >>> node = RetrievalNode(agent, AdapterRegistry.from_entry_points(agent.config))   # doctest: +SKIP
    >>> graph.add_node("retrieve", node.as_runnable())                                # doctest: +SKIP
    """

    def __init__(
        self,
        agent: RetrievalAgent,
        adapters: AdapterRegistry | None = None,
        *,
        keys: StateKeys | None = None,
        trust: TrustContext | None = None,
    ) -> None:
        """``trust`` is the most this node serves (else the agent's default trust); a trust in the graph state under
        ``keys.trust`` can only narrow it, never widen it: whatever writes graph state does not choose its own clearance."""
        self.agent = agent
        self.adapters = adapters or AdapterRegistry.from_entry_points(agent.config)
        self.keys = keys or StateKeys()
        self.trust = trust

    def _trust(self, state: Mapping[str, Any]) -> TrustContext | None:
        base = self.trust or self.agent.trust
        raw = state.get(self.keys.trust)
        if raw is None:
            return base
        asked = raw if isinstance(raw, TrustContext) else TrustContext.model_validate(raw)
        if base is None:
            raise TrustRequired(
                f"graph state key {self.keys.trust!r} may narrow the node's trust, not establish it: build "
                "RetrievalNode(agent, trust=TrustContext(...)) or RetrievalAgent(store, trust=...) in the host application"
            )
        return base.narrowed_by(asked)

    def build_intent(self, state: Mapping[str, Any]) -> tuple[str, RetrievalIntent]:
        k = self.keys
        agent_name = state.get(k.current_agent)
        if not agent_name:
            raise IntentError(f"graph state has no {k.current_agent!r}: the node cannot tell which agent it serves")
        if not state.get(k.deal_id):
            raise IntentError(f"graph state has no {k.deal_id!r}; the retrieval node needs it (state keys present: {sorted(state)})")
        adapter = self.adapters.get(agent_name)
        state_for_adapter = dict(state)
        if k.deal_id != "deal_id":
            state_for_adapter["deal_id"] = state[k.deal_id]
        intent = adapter.build_intent(state_for_adapter, self.agent.config.agents[agent_name])
        # the profile's defaults the stage's contract takes away are not asked for (an adapter's own additions are)
        intent = self.agent.narrow(intent, agent_name)
        step = state.get(k.current_step) or agent_name
        return step, intent

    def _update(self, step: str, package: ContextPackage, summary: RetrievalSummary) -> dict[str, Any]:
        k = self.keys
        return {
            k.context_packages: {step: package.model_dump(mode="json")},
            k.retrieval_summaries: {step: summary.model_dump(mode="json")},
            k.audit_ids: {step: summary.audit_id},
        }

    def __call__(self, state: Mapping[str, Any]) -> dict[str, Any]:
        step, intent = self.build_intent(state)
        package, summary = self.agent.retrieve_sync(intent, trust=self._trust(state))
        return self._update(step, package, summary)

    async def ainvoke(self, state: Mapping[str, Any]) -> dict[str, Any]:
        step, intent = self.build_intent(state)
        package, summary = await self.agent.retrieve(intent, trust=self._trust(state))
        return self._update(step, package, summary)

    def as_runnable(self) -> RunnableLambda:
        """The node as a runnable with both paths, for ``graph.invoke`` and ``graph.ainvoke``."""
        return RunnableLambda(self.__call__, afunc=self.ainvoke, name="retrieval_node")


__all__ = [
    "ADAPTER_GROUP",
    "AdapterRegistry",
    "AgentAdapter",
    "DealState",
    "RetrievalNode",
    "StateKeys",
    "merge_dicts",
    "package_of",
    "summary_of",
]
