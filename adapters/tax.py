"""Tax agent (``tax_arrears_check_v1``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .base import ProfileAdapter


class TaxAdapter(ProfileAdapter):
    """Tax certificate, arrears, penalties and tax liens; adds the roll number when an earlier step found it."""

    name = "tax"

    def sharpen(self, query: str, state: Mapping[str, Any]) -> str:
        roll = self._findings(state).get("tax_roll")
        return f"{query}; roll {roll}" if isinstance(roll, str) and roll else query
