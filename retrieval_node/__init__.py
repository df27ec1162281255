"""retrieval-node: segment-aware, risk-weighted, budget-bounded retrieval for conveyancing agents.

Public surface (everything else is an implementation detail)::

    from retrieval_node import Ingestor, RetrievalAgent, Store, TrustContext

Names are imported on first use (PEP 562), so ``import retrieval_node`` and the
command line's argument checks do not pay for torch, Qdrant or Mem0.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from .agent import RetrievalAgent, intent_from_profile, replay_snapshot
    from .config import AgentProfile, NodeConfig, RetrievalConfig, RiskWeights, load_config
    from .errors import (
        AccessDenied,
        BackendError,
        ChunkNotFound,
        ConfigError,
        ContractViolation,
        EmbeddingModelMissing,
        IntegrityError,
        IntentError,
        RetrievalNodeError,
        RuntimeFailure,
        NoInputFiles,
        StorageFullError,
        StoreLockedError,
        StorePathError,
        TrustRequired,
        UnknownAgentError,
        UsageError,
    )
    from .ingest import IngestReport, Ingestor, Rejection
    from .langchain_retriever import ConveyancingRetriever
    from .models import (
        ChunkReference,
        ContextPackage,
        DocumentChunk,
        DocumentRole,
        MaterialRisk,
        PatternMemory,
        RetrievalAuditEntry,
        RetrievalIntent,
        RetrievalMetrics,
        RetrievalSummary,
        RiskProfile,
        SectionType,
        Sensitivity,
        Stage,
        TrustContext,
    )
    from .node import AdapterRegistry, DealState, RetrievalNode, StateKeys, package_of, summary_of
    from .store import Store
    from .workers import ProcessPoolRetrievalAgent

#: public name -> the module that defines it
_EXPORTS: dict[str, str] = {
    "RetrievalAgent": "agent",
    "intent_from_profile": "agent",
    "replay_snapshot": "agent",
    "AgentProfile": "config",
    "NodeConfig": "config",
    "RetrievalConfig": "config",
    "RiskWeights": "config",
    "load_config": "config",
    "AccessDenied": "errors",
    "BackendError": "errors",
    "ChunkNotFound": "errors",
    "ConfigError": "errors",
    "ContractViolation": "errors",
    "EmbeddingModelMissing": "errors",
    "IntegrityError": "errors",
    "IntentError": "errors",
    "RetrievalNodeError": "errors",
    "RuntimeFailure": "errors",
    "StoreLockedError": "errors",
    "StorePathError": "errors",
    "StorageFullError": "errors",
    "NoInputFiles": "errors",
    "MaterialRisk": "models",
    "TrustRequired": "errors",
    "UnknownAgentError": "errors",
    "UsageError": "errors",
    "IngestReport": "ingest",
    "Ingestor": "ingest",
    "Rejection": "ingest",
    "ConveyancingRetriever": "langchain_retriever",
    "ChunkReference": "models",
    "ContextPackage": "models",
    "DocumentChunk": "models",
    "DocumentRole": "models",
    "PatternMemory": "models",
    "RetrievalAuditEntry": "models",
    "RetrievalIntent": "models",
    "RetrievalMetrics": "models",
    "RetrievalSummary": "models",
    "RiskProfile": "models",
    "SectionType": "models",
    "Sensitivity": "models",
    "Stage": "models",
    "TrustContext": "models",
    "AdapterRegistry": "node",
    "DealState": "node",
    "RetrievalNode": "node",
    "StateKeys": "node",
    "package_of": "node",
    "summary_of": "node",
    "Store": "store",
    "ProcessPoolRetrievalAgent": "workers",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'retrieval_node' has no attribute {name!r}")
    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))


__all__ = [
    "AccessDenied",
    "AdapterRegistry",
    "AgentProfile",
    "BackendError",
    "ChunkNotFound",
    "ChunkReference",
    "ConfigError",
    "ContextPackage",
    "ContractViolation",
    "ConveyancingRetriever",
    "DealState",
    "DocumentChunk",
    "DocumentRole",
    "EmbeddingModelMissing",
    "IngestReport",
    "Ingestor",
    "IntegrityError",
    "IntentError",
    "MaterialRisk",
    "NoInputFiles",
    "NodeConfig",
    "PatternMemory",
    "ProcessPoolRetrievalAgent",
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
    "StorageFullError",
    "Store",
    "StoreLockedError",
    "StorePathError",
    "TrustContext",
    "TrustRequired",
    "UnknownAgentError",
    "UsageError",
    "__version__",
    "intent_from_profile",
    "load_config",
    "package_of",
    "replay_snapshot",
    "summary_of",
]
