"""Scribe (drafting: legal description, parties, price, adjustments)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .base import ProfileAdapter


class ScribeAdapter(ProfileAdapter):
    """Drafting needs facts, not risks; carries forward the risks earlier agents flagged so the drafts mention them."""

    name = "scribe"

    def sharpen(self, query: str, state: Mapping[str, Any]) -> str:
        kinds = sorted({k for k in (self._findings(state).get("risk_kinds") or []) if isinstance(k, str)})
        return f"{query}; holdbacks or undertakings for {', '.join(kinds)}" if kinds else query
