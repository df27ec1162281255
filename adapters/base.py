"""The base adapter: a downstream agent's intent from its configured profile plus what graph state adds."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from retrieval_node.agent import intent_from_profile
from retrieval_node.config import AgentProfile
from retrieval_node.errors import IntentError
from retrieval_node.models import RetrievalIntent, Stage


def require(state: Mapping[str, Any], key: str) -> Any:
    value = state.get(key)
    if value in (None, ""):
        raise IntentError(f"graph state has no {key!r}; the retrieval node needs it (state keys present: {sorted(state)})")
    return value


class ProfileAdapter:
    """Builds the intent from the agent's configured profile, then lets :meth:`sharpen` refine the query.

    Subclasses set ``name`` and may override :meth:`sharpen` to add what earlier
    steps learned (a builder or condo corporation named in the file). A new agent
    is a profile in ``configs/agents.yaml`` plus a subclass like this one, listed
    under the ``retrieval_node.adapters`` entry-point group:

    >>> class ZoningAdapter(ProfileAdapter):
    ...     name = "zoning"
    ...     def sharpen(self, query, state):
    ...         return query + " municipal land use bylaw"
    """

    name = "profile"

    def __init__(self, *, deal_key: str = "deal_id", stage_key: str = "deal_stage", findings_key: str = "findings") -> None:
        self.deal_key = deal_key
        self.stage_key = stage_key
        self.findings_key = findings_key

    def sharpen(self, query: str, state: Mapping[str, Any]) -> str:
        return query

    def build_intent(self, state: Mapping[str, Any], profile: AgentProfile) -> RetrievalIntent:
        deal_id = require(state, self.deal_key)
        stage = state.get(self.stage_key) or Stage.DILIGENCE
        query = self.sharpen(profile.query_text, state)
        budget = (state.get("budgets") or {}).get(self.name)
        return intent_from_profile(self.name, profile, deal_id=deal_id, stage=stage, budget=budget, query_text=query)

    def _findings(self, state: Mapping[str, Any]) -> Mapping[str, Any]:
        return state.get(self.findings_key) or {}


__all__ = ["ProfileAdapter", "require"]
