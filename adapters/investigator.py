"""Investigator (title risk scan, ``title_risk_scan_v1``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .base import ProfileAdapter


class InvestigatorAdapter(ProfileAdapter):
    """Title search risks; sharpens the query with parties named in earlier steps (builder, lienholders)."""

    name = "investigator"

    def sharpen(self, query: str, state: Mapping[str, Any]) -> str:
        names = [n for n in (self._findings(state).get("parties") or []) if isinstance(n, str)]
        return query if not names else f"{query}; parties of interest: {', '.join(sorted(set(names)))}"
