"""Per-agent adapters: each builds a RetrievalIntent from LangGraph state and the agent's profile.

They are found by :class:`retrieval_node.node.AdapterRegistry` through the
``retrieval_node.adapters`` entry-point group (see pyproject.toml), so the core
package never imports this one.
"""

from .base import ProfileAdapter, require
from .condo import CondoAdapter
from .investigator import InvestigatorAdapter
from .scribe import ScribeAdapter
from .tax import TaxAdapter

__all__ = [
    "CondoAdapter",
    "InvestigatorAdapter",
    "ProfileAdapter",
    "ScribeAdapter",
    "TaxAdapter",
    "require",
]
