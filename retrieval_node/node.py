"""LangGraph integration: ``DealState``, the ``RetrievalNode`` and the adapter registry (spec 7).

The node is a thin shell: state -> intent (through the current agent's adapter)
-> ``RetrievalAgent.retrieve`` -> a partial state update. A step with a question in state
(``questions[step]``, a string) asks it instead, as ``RetrievalAgent.ask`` does for a caller bound to the step's
agent: a :class:`~retrieval_node.models.QuestionIntent` under that agent's contract, with the step's budget, stage
and trust, audited and referenced in state like any step. Retrieval scope is
fixed per turn: the node plans once per call and nothing in generation can
trigger more retrieval.

Per-run settings come from ``config["configurable"]`` (LangGraph's ``RunnableConfig``), then from graph
state, then from the node's constructor: ``budget``, ``stage``, ``trust`` (a dict or a
:class:`~retrieval_node.models.TrustContext`), ``trust_provider`` (a callable ``(state, config) -> trust``),
``state_keys`` (a dict of :class:`StateKeys` fields) and ``include_package``. A trust from the config, a
provider or the state can only narrow the trust the node was built with.

State holds JSON only (what every LangGraph checkpointer stores without allow-listing our classes): per step a
package reference (``package_refs``: audit id, ``package_hash``, tokens, citations), the summary and the audit id.
The full package goes into state (``context_packages``) only when asked (``include_package=True``) or, by
default, when the run has no checkpointer; a checkpointed run keeps references only, so checkpoints stay small
(the sample workflow's last checkpoint after four steps: 12.6 KB with references, 105.7 KB with every package). :func:`package_of` reads a package back from state, or from its audit snapshot (hash- and
MAC-checked) when given the agent; :func:`summary_of` reads a summary.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields, replace
from importlib.metadata import entry_points
from typing import Annotated, Any, Protocol, TypedDict, runtime_checkable

from langchain_core.runnables import RunnableConfig, RunnableLambda

from .agent import RetrievalAgent, intent_from_profile, profile_stage
from .config import AgentProfile, NodeConfig
from .errors import TrustRequired, IntentError, UnknownAgentError
from .models import ContextPackage, RetrievalIntent, RetrievalSummary, Stage, TrustContext

ADAPTER_GROUP = "retrieval_node.adapters"
#: The ``config["configurable"]`` keys the node reads (any other key is LangGraph's or another node's).
CONFIG_KEYS = ("budget", "stage", "trust", "trust_provider", "state_keys", "include_package")
#: Where LangGraph puts the run's checkpointer in a node's config (langgraph._internal._constants.CONFIG_KEY_CHECKPOINTER).
_CHECKPOINTER_KEY = "__pregel_checkpointer"


def merge_dicts(left: dict[str, Any] | None, right: dict[str, Any] | None) -> dict[str, Any]:
    """Reducer: per-step dicts merge; a later step's entry replaces the same step's earlier one."""
    return {**(left or {}), **(right or {})}


class DealState(TypedDict, total=False):
    """Graph state of one conveyancing file.

    ``package_refs`` / ``retrieval_summaries`` / ``audit_ids`` (and ``context_packages`` when the full package
    is put in state) are keyed by step and merged, so every agent's turn stays in state for the rest of the run.
    ``questions`` maps a step to a free-text question: that step asks it (under its agent's contract) instead of
    running the agent's profile; keyed by step, a question never leaks into a later step.
    Every value is plain JSON; ``trust`` is a dict (``TrustContext.model_dump(mode="json")``).
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
    package_refs: Annotated[dict[str, dict[str, Any]], merge_dicts]
    retrieval_summaries: Annotated[dict[str, dict[str, Any]], merge_dicts]
    audit_ids: Annotated[dict[str, str], merge_dicts]
    questions: Annotated[dict[str, str], merge_dicts]


def package_of(state: Mapping[str, Any], step: str, *, key: str = "context_packages", agent: RetrievalAgent | None = None,
               refs_key: str = "package_refs", trust: TrustContext | None = None) -> ContextPackage:
    """The package of ``step``: from state when it is there, else (given ``agent``) replayed from its audit snapshot
    (hash- and MAC-checked, under ``trust`` or the agent's) and checked against the ``package_hash`` in state."""
    full = (state.get(key) or {}).get(step)
    if full is not None:
        return ContextPackage.model_validate(full)
    ref = (state.get(refs_key) or {}).get(step)
    if ref is None:
        raise KeyError(f"no package for step {step!r} in state (keys {key!r} and {refs_key!r})")
    if agent is None:
        raise KeyError(f"state holds a reference to the package of step {step!r} (audit {ref['audit_id']}), not the package: "
                       "pass agent= to read it from its audit snapshot, or run the node with include_package=True")
    package, _ = agent.replay(ref["audit_id"], trust=trust)
    if package.package_hash != ref["package_hash"]:
        raise IntentError(f"audit {ref['audit_id']} holds package {package.package_hash[:16]}, state expected {ref['package_hash'][:16]}")
    return package


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
        return intent_from_profile(self.name, profile, deal_id=deal_id, stage=state.get("deal_stage") or "DILIGENCE",
                                   budget=(state.get("budgets") or {}).get(self.name))


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
    package_refs: str = "package_refs"
    trust: str = "trust"
    deal_stage: str = "deal_stage"
    budgets: str = "budgets"
    questions: str = "questions"


def package_ref(package: ContextPackage, summary: RetrievalSummary) -> dict[str, Any]:
    """What state keeps of a package when the package itself is not in state (JSON; read it back with :func:`package_of`)."""
    return {"audit_id": summary.audit_id, "package_hash": package.package_hash, "deal_id": package.deal_id, "agent_id": package.agent_id,
            "intent_id": package.intent_id, "total_tokens": package.total_tokens, "chunk_ids": [r.chunk_id for r in package.ordered_chunks]}


@dataclass(frozen=True)
class RunSettings:
    """The settings of one call of the node, resolved from the config, the state and the constructor."""

    keys: StateKeys
    budget: int | None
    stage: str | None
    trust: TrustContext | None
    include_package: bool


class RetrievalNode:
    """A LangGraph node: ``state -> {package_refs: {step: ...}, retrieval_summaries: {...}, audit_ids: {...}}``
    (and ``context_packages: {step: ...}`` when the full package goes into state).

    >>> node = RetrievalNode(agent, AdapterRegistry.from_entry_points(agent.config))   # doctest: +SKIP
    >>> graph.add_node("retrieve", node.as_runnable())                                # doctest: +SKIP
    >>> graph.compile(checkpointer=saver).invoke(state, {"configurable": {"thread_id": "t", "budget": 500}})  # doctest: +SKIP
    """

    def __init__(
        self,
        agent: RetrievalAgent,
        adapters: AdapterRegistry | None = None,
        *,
        keys: StateKeys | None = None,
        trust: TrustContext | None = None,
        budget: int | None = None,
        stage: str | None = None,
        include_package: bool | None = None,
    ) -> None:
        """``trust`` is the most this node serves (else the agent's default trust); a trust in the config
        (``trust``, ``trust_provider``) or in the graph state under ``keys.trust`` can only narrow it, never widen it:
        whatever writes graph state or config does not choose its own clearance. ``budget`` and ``stage`` apply when
        neither the config nor the state gives one (else the agent profile's). ``include_package``: put the full
        package in state (True), references only (False), or None: the full package unless the run has a
        checkpointer."""
        self.agent = agent
        self.adapters = adapters or AdapterRegistry.from_entry_points(agent.config)
        self.keys = keys or StateKeys()
        self.trust = trust
        self.budget = budget
        self.stage = stage
        self.include_package = include_package

    # -- settings -------------------------------------------------------------------------
    def settings(self, state: Mapping[str, Any], config: RunnableConfig | None = None) -> RunSettings:
        """The call's settings: ``config["configurable"]`` first, then the state, then the constructor."""
        conf: Mapping[str, Any] = (config or {}).get("configurable") or {}
        keys = self._keys(conf)
        agent_name = state.get(keys.current_agent)
        budget = conf.get("budget")
        if budget is None:
            budget = (state.get(keys.budgets) or {}).get(agent_name) if agent_name else None
        if budget is None:
            budget = self.budget
        if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int)):
            raise IntentError(f"budget {budget!r}: a whole number of tokens")
        stage = conf.get("stage") or state.get(keys.deal_stage) or self.stage
        include = conf.get("include_package")
        if include is None:
            include = self.include_package
        if include is None:
            include = conf.get(_CHECKPOINTER_KEY) is None
        return RunSettings(keys=keys, budget=budget, stage=stage, trust=self._trust(state, conf, config, keys), include_package=bool(include))

    def _keys(self, conf: Mapping[str, Any]) -> StateKeys:
        if not conf.get("state_keys"):
            return self.keys
        try:
            return replace(self.keys, **dict(conf["state_keys"]))
        except TypeError as exc:
            raise IntentError(f"config 'state_keys': {exc}; valid keys: {sorted(f.name for f in fields(StateKeys))}") from None

    def _trust(self, state: Mapping[str, Any], conf: Mapping[str, Any], config: RunnableConfig | None, keys: StateKeys) -> TrustContext | None:
        base = self.trust or self.agent.trust
        asked: list[tuple[str, Any]] = []
        if conf.get("trust") is not None:
            asked.append(("config 'trust'", conf["trust"]))
        if conf.get("trust_provider") is not None:
            asked.append(("config 'trust_provider'", conf["trust_provider"](state, config)))
        if state.get(keys.trust) is not None:
            asked.append((f"graph state key {keys.trust!r}", state[keys.trust]))
        if not asked:
            return base
        if base is None:
            raise TrustRequired(
                f"{asked[0][0]} may narrow the node's trust, not establish it: build "
                "RetrievalNode(agent, trust=TrustContext(...)) or RetrievalAgent(store, trust=...) in the host application"
            )
        for _, raw in asked:
            base = base.narrowed_by(raw if isinstance(raw, TrustContext) else TrustContext.model_validate(raw))
        return base

    # -- the call ---------------------------------------------------------------------------
    def build_intent(self, state: Mapping[str, Any], config: RunnableConfig | None = None,
                     settings: RunSettings | None = None) -> tuple[str, RetrievalIntent]:
        run = settings or self.settings(state, config)
        k = run.keys
        agent_name = state.get(k.current_agent)
        if not agent_name:
            raise IntentError(f"graph state has no {k.current_agent!r}: the node cannot tell which agent it serves")
        if not state.get(k.deal_id):
            raise IntentError(f"graph state has no {k.deal_id!r}; the retrieval node needs it (state keys present: {sorted(state)})")
        adapter = self.adapters.get(agent_name)
        step = state.get(k.current_step) or agent_name
        question = self._question(state, k, step)
        if question is not None:
            return step, self._question_intent(run, agent_name, state[k.deal_id], question)
        # the adapter reads deal, stage and budget where adapters do; the resolved settings are put there
        state_for_adapter = dict(state)
        state_for_adapter["deal_id"] = state[k.deal_id]
        if run.stage is not None:
            state_for_adapter["deal_stage"] = run.stage
        if run.budget is not None:
            state_for_adapter["budgets"] = {**(state.get(k.budgets) or {}), agent_name: run.budget}
        intent = adapter.build_intent(state_for_adapter, self.agent.config.agents[agent_name])
        # the profile's defaults the stage's contract takes away are not asked for (an adapter's own additions are)
        intent = self.agent.narrow(intent, agent_name)
        return step, intent

    @staticmethod
    def _question(state: Mapping[str, Any], keys: StateKeys, step: str) -> str | None:
        """The question state gives ``step`` (``state[keys.questions][step]``), or None: the step runs its profile."""
        questions = state.get(keys.questions)
        if questions is None:
            return None
        if not isinstance(questions, Mapping):
            raise IntentError(f"graph state key {keys.questions!r} maps step names to questions; got {type(questions).__name__}")
        question = questions.get(step)
        if question is None:
            return None
        if not isinstance(question, str) or not question.strip():
            raise IntentError(f"graph state key {keys.questions!r}, step {step!r}: a question is a non-empty string; got {question!r}")
        return question

    def _question_intent(self, run: RunSettings, agent_name: str, deal_id: str, question: str) -> RetrievalIntent:
        """The question's intent under the step agent's contract (as ``RetrievalAgent.ask`` for a caller bound to that
        agent), with the step's budget (else the agent profile's) and stage. The retrieval itself runs under the
        call's trust, unchanged: a trust bound to another agent is refused as for a profile step. A stage the agent's
        profile does not run in is refused as for a profile step (:func:`~retrieval_node.agent.profile_stage`)."""
        profile = self.agent.config.agents[agent_name]
        stage = profile_stage(agent_name, profile, run.stage or Stage.DILIGENCE)
        base = run.trust
        if base is None:
            raise TrustRequired("a TrustContext is required: build RetrievalNode(agent, trust=...) or RetrievalAgent(store, trust=...)")
        as_agent = base.model_copy(update={"agent_id": profile.agent_id})
        budget = run.budget if run.budget is not None else profile.max_tokens_budget
        return self.agent.question_intent(deal_id, question, budget=budget, stage=stage, trust=as_agent)

    def _update(self, run: RunSettings, step: str, package: ContextPackage, summary: RetrievalSummary) -> dict[str, Any]:
        k = run.keys
        out: dict[str, Any] = {
            k.package_refs: {step: package_ref(package, summary)},
            k.retrieval_summaries: {step: summary.model_dump(mode="json")},
            k.audit_ids: {step: summary.audit_id},
        }
        if run.include_package:
            out[k.context_packages] = {step: package.model_dump(mode="json")}
        return out

    def __call__(self, state: Mapping[str, Any], config: RunnableConfig | None = None) -> dict[str, Any]:
        run = self.settings(state, config)
        step, intent = self.build_intent(state, config, run)
        package, summary = self.agent.retrieve_sync(intent, trust=run.trust)
        return self._update(run, step, package, summary)

    async def ainvoke(self, state: Mapping[str, Any], config: RunnableConfig | None = None) -> dict[str, Any]:
        run = self.settings(state, config)
        step, intent = self.build_intent(state, config, run)
        package, summary = await self.agent.retrieve(intent, trust=run.trust)
        return self._update(run, step, package, summary)

    def package(self, state: Mapping[str, Any], step: str, config: RunnableConfig | None = None) -> ContextPackage:
        """The package of ``step``, from state or from its audit snapshot, read under the trust a call with this state
        and config gets (the node's, narrowed as in a retrieval): a package above it is refused, not shown."""
        run = self.settings(state, config)
        k = run.keys
        return package_of(state, step, key=k.context_packages, refs_key=k.package_refs, agent=self.agent, trust=run.trust)

    def as_runnable(self) -> RunnableLambda:
        """The node as a runnable with both paths, for ``graph.invoke`` and ``graph.ainvoke`` (LangGraph passes the config)."""
        return RunnableLambda(self.__call__, afunc=self.ainvoke, name="retrieval_node")


__all__ = [
    "ADAPTER_GROUP",
    "AdapterRegistry",
    "AgentAdapter",
    "CONFIG_KEYS",
    "DealState",
    "RetrievalNode",
    "StateKeys",
    "RunSettings",
    "merge_dicts",
    "package_of",
    "package_ref",
    "summary_of",
]
