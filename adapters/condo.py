"""Condo agent (``condo_reserve_fund_health_v1``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .base import ProfileAdapter


class CondoAdapter(ProfileAdapter):
    """Reserve fund, levies, structural issues; names the condominium corporation when known."""

    name = "condo"

    def sharpen(self, query: str, state: Mapping[str, Any]) -> str:
        corp = self._findings(state).get("condo_corporation")
        return f"{query} of {corp}" if isinstance(corp, str) and corp else query
