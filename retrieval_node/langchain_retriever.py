"""A LangChain ``BaseRetriever`` view of the retrieval agent, for users who compose runnables.

Each call runs one budgeted retrieval for one agent profile and one deal; the
documents are the package's verbatim excerpts in reading order, with their
provenance, the package hash and the audit id in ``metadata``.
"""

from __future__ import annotations

from typing import Any

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict

from .agent import RetrievalAgent


class ConveyancingRetriever(BaseRetriever):
    """``retriever.invoke("special levy")`` -> the package's chunks as Documents.

    >>> r = ConveyancingRetriever(agent=agent, agent_name="condo", deal_id="2026-ACME-0042")  # doctest: +SKIP
    >>> docs = r.invoke("special levy for parkade repairs")                                  # doctest: +SKIP
    >>> docs[0].metadata["chunk_id"], docs[0].metadata["audit_id"]                           # doctest: +SKIP
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    agent: Any
    agent_name: str
    deal_id: str
    stage: str = "DILIGENCE"
    budget: int | None = None
    trust: Any = None  #: a TrustContext; falls back to the agent's default

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        ra: RetrievalAgent = self.agent
        intent = ra.intent_for(self.agent_name, deal_id=self.deal_id, stage=self.stage, budget=self.budget, query_text=query)
        package, summary = ra.retrieve_sync(intent, trust=self.trust)
        return [
            Document(
                page_content=ref.content,
                metadata={
                    "citation": f"E{i}",
                    "chunk_id": ref.chunk_id,
                    "document_id": ref.document_id,
                    "document_role": ref.document_role.value,
                    "section_type": ref.section_type.value,
                    "page_range": ref.page_range,
                    "content_hash": ref.content_hash,
                    "deal_id": package.deal_id,
                    "package_hash": package.package_hash,
                    "audit_id": summary.audit_id,
                },
            )
            for i, ref in enumerate(package.ordered_chunks, start=1)
        ]


__all__ = ["ConveyancingRetriever"]
