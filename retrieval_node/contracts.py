"""Retrieval contracts: what each agent may retrieve, per deal stage (hard constraints, not ranking hints).

A contract lists the ALLOWED and FORBIDDEN section types and document roles of
one agent, the stages in which it may run, and whether vector search may be
used. Every intent is compiled into a finite :class:`ContractPlan` of typed
queries (the target sections are searched; everything the contract allows is scanned for
material risks and looked up for required zones: Stage-0 labels are evidence, the contract's
FORBIDDEN lists and the caller's trust are the walls); a request the contract cannot represent (a forbidden or unlisted
section, a stage the agent does not run in, an agent without a contract) raises
:class:`~retrieval_node.errors.ContractViolation` and nothing is retrieved. Every
chunk that reaches a package is re-checked by :meth:`ContractPlan.allows`.
"""

from __future__ import annotations

import logging
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .errors import ContractViolation
from .models import DocumentRole, RetrievalIntent, SectionType, Stage

logger = logging.getLogger("retrieval_node.contracts")


class ContractRule(BaseModel):
    """ALLOWED / FORBIDDEN sets; ``None`` for an allowed set means "any not forbidden"."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    allowed_sections: list[SectionType] | None = None
    forbidden_sections: list[SectionType] = Field(default_factory=list)
    allowed_roles: list[DocumentRole] | None = None
    forbidden_roles: list[DocumentRole] = Field(default_factory=list)
    vector_search: bool = Field(True, description="Whether semantic (vector) search may be used; structural filters always are.")

    @model_validator(mode="after")
    def _disjoint(self) -> ContractRule:
        if self.allowed_sections is not None and set(self.allowed_sections) & set(self.forbidden_sections):
            raise ValueError(f"sections both allowed and forbidden: {sorted(s.value for s in set(self.allowed_sections) & set(self.forbidden_sections))}")
        if self.allowed_roles is not None and set(self.allowed_roles) & set(self.forbidden_roles):
            raise ValueError(f"roles both allowed and forbidden: {sorted(r.value for r in set(self.allowed_roles) & set(self.forbidden_roles))}")
        return self


class StageOverride(BaseModel):
    """Extra restrictions in one stage (they only ever narrow the base rule)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    forbidden_sections: list[SectionType] = Field(default_factory=list)
    forbidden_roles: list[DocumentRole] = Field(default_factory=list)
    vector_search: bool | None = None


class AgentContract(ContractRule):
    stages: list[Stage] = Field(default_factory=lambda: list(Stage), description="Stages in which the agent may retrieve at all.")
    stage_overrides: dict[Stage, StageOverride] = Field(default_factory=dict)

    def rule_for(self, stage: Stage) -> ContractRule:
        o = self.stage_overrides.get(stage)
        if o is None:
            return ContractRule(**self.model_dump(include=set(ContractRule.model_fields)))
        forbidden_sections = set(self.forbidden_sections) | set(o.forbidden_sections)
        forbidden_roles = set(self.forbidden_roles) | set(o.forbidden_roles)
        return ContractRule(
            allowed_sections=None if self.allowed_sections is None else [s for s in self.allowed_sections if s not in forbidden_sections],
            forbidden_sections=sorted(forbidden_sections, key=lambda s: s.value),
            allowed_roles=None if self.allowed_roles is None else [r for r in self.allowed_roles if r not in forbidden_roles],
            forbidden_roles=sorted(forbidden_roles, key=lambda r: r.value),
            vector_search=self.vector_search if o.vector_search is None else (self.vector_search and o.vector_search),
        )


class ContractSet(BaseModel):
    """``configs/contracts.yaml``: one contract per agent name."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    contracts: dict[str, AgentContract]


QueryType = Literal["structural_filter", "semantic_search", "lexical_search", "risk_scan", "zone_lookup", "broadened_search"]
QuerySource = Literal["metadata", "vector", "structured"]


class ContractQuery(BaseModel):
    """One typed query of a plan; nothing outside a plan is ever sent to a backend."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: QueryType
    source: QuerySource
    deal_id: str
    section_types: list[str]
    document_roles: list[str] | None
    zone: str | None = None


class ContractPlan(BaseModel):
    """The compiled, finite retrieval plan of one intent."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    agent: str
    stage: Stage
    deal_id: str
    sections: list[str]
    roles: list[str] | None
    allowed_sections: list[str]
    forbidden_sections: list[str]
    allowed_roles: list[str] | None
    forbidden_roles: list[str]
    vector_search: bool
    queries: list[ContractQuery]

    def search_queries(self) -> list[ContractQuery]:
        """The first retrieval's queries: the structural filter of the target sections, the semantic (if allowed) and
        lexical searches over them, and the risk scan over everything the contract allows."""
        return [q for q in self.queries if q.type in ("structural_filter", "semantic_search", "lexical_search", "risk_scan")]

    def query(self, type: QueryType) -> ContractQuery:
        """The plan's first query of ``type``; a plan without one refuses to run it."""
        for q in self.queries:
            if q.type == type:
                return q
        raise ContractViolation(f"the contract plan of agent {self.agent!r} has no {type} query")

    def allows(self, section_type: str, document_role: str) -> bool:
        """The re-check every candidate passes before it can enter a package."""
        if section_type in self.forbidden_sections or document_role in self.forbidden_roles:
            return False
        if section_type not in self.allowed_sections:
            return False
        return self.allowed_roles is None or document_role in self.allowed_roles


def compile_plan(intent: RetrievalIntent, agent_name: str, contracts: ContractSet) -> ContractPlan:
    """Compile ``intent`` under the contract of ``agent_name``, or raise :class:`ContractViolation`."""
    contract = contracts.contracts.get(agent_name)
    if contract is None:
        _reject(intent, f"agent {agent_name!r} has no retrieval contract in configs/contracts.yaml; nothing is retrieved without one")
    assert contract is not None
    if intent.stage not in contract.stages:
        _reject(intent, f"agent {agent_name!r} may not retrieve in stage {intent.stage.value} (contract stages: {[s.value for s in contract.stages]})")
    rule = contract.rule_for(intent.stage)
    allowed = {s.value for s in (rule.allowed_sections or list(SectionType))} - {s.value for s in rule.forbidden_sections}
    requested = [s.value for s in intent.target_section_types]
    forbidden_hit = sorted(set(requested) & {s.value for s in rule.forbidden_sections})
    if forbidden_hit:
        _reject(intent, f"agent {agent_name!r} in stage {intent.stage.value} is forbidden section(s) {forbidden_hit}")
    outside = sorted(set(requested) - allowed)
    if outside:
        _reject(intent, f"section(s) {outside} are outside the contract of agent {agent_name!r} (allowed: {sorted(allowed)})")
    allowed_roles = None if rule.allowed_roles is None else {r.value for r in rule.allowed_roles} - {r.value for r in rule.forbidden_roles}
    forbidden_roles = sorted(r.value for r in rule.forbidden_roles)
    if intent.document_roles is not None:
        roles = [r.value for r in intent.document_roles]
        bad = sorted(set(roles) & set(forbidden_roles))
        if bad:
            _reject(intent, f"agent {agent_name!r} is forbidden document role(s) {bad}")
        if allowed_roles is not None and set(roles) - allowed_roles:
            _reject(intent, f"document role(s) {sorted(set(roles) - allowed_roles)} are outside the contract of agent {agent_name!r}")
        effective_roles: list[str] | None = sorted(roles)
    else:
        effective_roles = sorted(allowed_roles) if allowed_roles is not None else None
    sections = sorted(requested)
    queries = [ContractQuery(type="structural_filter", source="metadata", deal_id=intent.deal_id, section_types=sections, document_roles=effective_roles)]
    if rule.vector_search:
        queries.append(ContractQuery(type="semantic_search", source="vector", deal_id=intent.deal_id, section_types=sections, document_roles=effective_roles))
    queries.append(ContractQuery(type="lexical_search", source="structured", deal_id=intent.deal_id, section_types=sections, document_roles=effective_roles))
    # Stage-0 labels are evidence, not walls: a chunk with a material risk anywhere the contract allows is a candidate
    # (a caveat copied onto a page labelled GENERAL), while the target sections stay the preference for plain context
    zone_roles = sorted(allowed_roles) if allowed_roles is not None else None
    queries.append(ContractQuery(type="risk_scan", source="metadata", deal_id=intent.deal_id, section_types=sorted(allowed), document_roles=zone_roles))
    # a required zone is looked up in every section and role the contract allows (the intent's own narrowing is a
    # preference for the search, not a wall: a zone's chunk may sit in a document of another role)
    for zone in intent.required_structural_zones or []:
        queries.append(ContractQuery(type="zone_lookup", source="metadata", deal_id=intent.deal_id, section_types=sorted(allowed), document_roles=zone_roles, zone=zone))
    queries.append(ContractQuery(type="broadened_search", source="vector" if rule.vector_search else "structured", deal_id=intent.deal_id, section_types=sorted(allowed), document_roles=effective_roles))
    return ContractPlan(
        agent=agent_name, stage=intent.stage, deal_id=intent.deal_id, sections=sections, roles=effective_roles,
        allowed_sections=sorted(allowed), forbidden_sections=sorted(s.value for s in rule.forbidden_sections),
        allowed_roles=sorted(allowed_roles) if allowed_roles is not None else None, forbidden_roles=forbidden_roles,
        vector_search=rule.vector_search, queries=queries,
    )


def narrow_to_contract(
    intent: RetrievalIntent,
    agent_name: str,
    contracts: ContractSet | None,
    *,
    profile_sections: list[SectionType],
    profile_roles: list[DocumentRole] | None = None,
) -> RetrievalIntent:
    """Drop from a profile-built intent the profile's default sections / roles its contract forbids at the intent's stage.

    A profile lists everything its agent may need over the whole deal; its contract may take
    some of it away in one stage (the drafting-stage scribe gets no raw board minutes). The
    intent an adapter builds from the profile therefore asks only for what the stage allows.
    Only the profile's own defaults are dropped: a section an adapter or a caller added stays,
    and :func:`compile_plan` still rejects it. If nothing would be left, the intent is returned
    unchanged (and is rejected by :func:`compile_plan`, with the reason).
    """
    contract = None if contracts is None else contracts.contracts.get(agent_name)
    if contract is None or intent.stage not in contract.stages:
        return intent
    rule = contract.rule_for(intent.stage)
    allowed = set(rule.allowed_sections or list(SectionType)) - set(rule.forbidden_sections)
    sections = [s for s in intent.target_section_types if s in allowed or s not in set(profile_sections)]
    roles = intent.document_roles
    if roles is not None:
        allowed_roles = set(rule.allowed_roles or list(DocumentRole)) - set(rule.forbidden_roles)
        roles = [r for r in roles if r in allowed_roles or r not in set(profile_roles or [])]
    dropped = sorted({s.value for s in intent.target_section_types} - {s.value for s in sections})
    dropped += sorted({r.value for r in intent.document_roles or []} - {r.value for r in roles or []})
    if not dropped or not sections or roles == []:
        return intent
    logger.info("intent %s of agent %r narrowed to its contract in stage %s: dropped %s", intent.intent_id, agent_name, intent.stage.value, dropped)
    return RetrievalIntent.model_validate({**intent.model_dump(), "target_section_types": sections, "document_roles": roles})


def _reject(intent: RetrievalIntent, why: str) -> None:
    logger.warning("retrieval request rejected by contract: deal=%s intent=%s agent=%s: %s", intent.deal_id, intent.intent_id, intent.agent_id, why)
    raise ContractViolation(why)


__all__ = ["AgentContract", "ContractPlan", "ContractQuery", "ContractRule", "ContractSet", "StageOverride", "compile_plan", "narrow_to_contract"]
