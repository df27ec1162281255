"""retrieval-node: segment-aware, risk-weighted, budget-bounded retrieval for conveyancing agents.

Public surface (everything else is an implementation detail)::

    from retrieval_node import Store, Ingestor, RetrievalAgent, RetrievalNode
"""

from .agent import RetrievalAgent, intent_from_profile, replay_snapshot
from .config import AgentProfile, NodeConfig, RetrievalConfig, RiskWeights, load_config
from .errors import (
    BackendError,
    ConfigError,
    ContractViolation,
    EmbeddingModelMissing,
    IntegrityError,
    IntentError,
    RetrievalNodeError,
    RuntimeFailure,
    StoreLockedError,
    UnknownAgentError,
    UsageError,
)
from .ingest import IngestReport, Ingestor, Rejection
from .models import (
    ChunkReference,
    ContextPackage,
    DocumentChunk,
    DocumentRole,
    PatternMemory,
    RetrievalAuditEntry,
    RetrievalIntent,
    RetrievalMetrics,
    RetrievalSummary,
    RiskProfile,
    SectionType,
    Sensitivity,
    Stage,
)
from .node import AdapterRegistry, DealState, RetrievalNode, StateKeys, package_of, summary_of
from .store import Store

__version__ = "0.1.0"

__all__ = [
    "AdapterRegistry",
    "AgentProfile",
    "BackendError",
    "ChunkReference",
    "ConfigError",
    "ContextPackage",
    "ContractViolation",
    "DealState",
    "DocumentChunk",
    "DocumentRole",
    "EmbeddingModelMissing",
    "IngestReport",
    "Ingestor",
    "IntegrityError",
    "IntentError",
    "NodeConfig",
    "PatternMemory",
    "Rejection",
    "RetrievalAgent",
    "RetrievalAuditEntry",
    "RetrievalConfig",
    "RetrievalIntent",
    "RetrievalMetrics",
    "RetrievalNode",
    "RetrievalNodeError",
    "RetrievalSummary",
    "RiskProfile",
    "RiskWeights",
    "RuntimeFailure",
    "SectionType",
    "Sensitivity",
    "Stage",
    "StateKeys",
    "Store",
    "StoreLockedError",
    "UnknownAgentError",
    "UsageError",
    "__version__",
    "intent_from_profile",
    "load_config",
    "package_of",
    "replay_snapshot",
    "summary_of",
]
