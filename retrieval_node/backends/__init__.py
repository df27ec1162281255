"""Backends: the chunk vector index (qdrant-edge, qdrant-client) and the Mem0 registry.

Mem0 reads ``MEM0_TELEMETRY`` once, when its telemetry module is first imported (by any ``mem0`` import):
it is switched off here, before any backend module imports Mem0. Nothing is sent anywhere at run time.
"""

import os

os.environ.setdefault("MEM0_TELEMETRY", "False")
