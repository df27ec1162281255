"""Exceptions raised by retrieval-node.

The tree separates mistakes of the caller from failures at run time::

    RetrievalNodeError
    ├── UsageError                  you used it wrong; fix the call or the input
    │   ├── ConfigError             a config file or environment value is invalid
    │   ├── IntentError             a RetrievalIntent cannot be built or served
    │   ├── UnknownAgentError       no adapter / profile for that agent name
    │   ├── ContractViolation       the request asks for something its contract forbids
    │   ├── TrustRequired           no TrustContext was given
    │   ├── AccessDenied            the caller's trust does not reach that chunk
    │   ├── ChunkNotFound           no chunk has that id
    │   ├── NoInputFiles            an ingest folder holds no *.jsonl file
    │   └── StorePathError          --store is not a usable directory (a file, not writable)
    └── RuntimeFailure              something failed while running
        ├── BackendError            Qdrant, Mem0 or the embedding model failed (cause chained)
        │   ├── StoreLockedError    the embedded store is open in another process
        │   └── StorageFullError    the store's disk has too little free space to write
        ├── EmbeddingModelMissing   the packaged MiniLM model is not installed
        └── IntegrityError          stored data does not match its hash (tampering, corruption)

Backend failures always chain the original exception with ``raise ... from``.
"""

from __future__ import annotations


class RetrievalNodeError(Exception):
    """Base class of every error raised by retrieval-node."""


class UsageError(RetrievalNodeError):
    """The caller used the library wrongly; the message says what to change."""


class ConfigError(UsageError):
    """A configuration file or environment override is invalid.

    The message names the file (or environment variable) and the key.
    """


class IntentError(UsageError):
    """A retrieval intent is invalid or cannot be served (unknown deal, bad budget...)."""


class UnknownAgentError(UsageError):
    """No adapter or profile is registered under the requested agent name."""


class ContractViolation(UsageError):
    """The request asks for data its retrieval contract forbids or cannot represent."""


class TrustRequired(UsageError):
    """Every retrieval needs a TrustContext (who asks, how far their access reaches)."""


class AccessDenied(UsageError):
    """The caller's trust does not reach the requested chunk."""


class ChunkNotFound(UsageError, KeyError):
    """No registered chunk has the requested id."""


class NoInputFiles(UsageError):
    """An ingest path is a folder with no ``*.jsonl`` file in it."""


class StorePathError(UsageError):
    """The store path cannot be used: it is a file, or it cannot be created or written."""


class RuntimeFailure(RetrievalNodeError):
    """Something failed at run time although the call was valid."""


class BackendError(RuntimeFailure):
    """A storage or model backend failed. ``__cause__`` holds the original error."""


class StoreLockedError(BackendError):
    """The embedded store directory is already opened by another process."""


class StorageFullError(BackendError):
    """The disk of the store has too little free space for the write asked for; nothing more was written."""


class EmbeddingModelMissing(RuntimeFailure):
    """The embedding model could not be loaded from the local installation."""


class IntegrityError(RuntimeFailure):
    """Stored data failed its integrity check (hash mismatch)."""


__all__ = [
    "AccessDenied",
    "BackendError",
    "ChunkNotFound",
    "ConfigError",
    "ContractViolation",
    "EmbeddingModelMissing",
    "IntegrityError",
    "IntentError",
    "NoInputFiles",
    "RetrievalNodeError",
    "RuntimeFailure",
    "StoreLockedError",
    "StorePathError",
    "StorageFullError",
    "TrustRequired",
    "UnknownAgentError",
    "UsageError",
]
