"""A LangChain ``BaseRetriever`` view of the retrieval agent, for users who compose runnables.

Each call runs one budgeted retrieval for one agent profile and one deal; the
documents are the package's verbatim excerpts in reading order, with their
provenance, the package hash and the audit id in ``metadata``. It passes
``langchain-tests``' ``RetrieversIntegrationTests`` (``tests/test_langchain_standard.py``).
"""

from __future__ import annotations

from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, Field

from .agent import RetrievalAgent
from .models import MAX_TOKENS_BUDGET, ContextPackage, RetrievalIntent, RetrievalSummary, Stage, TrustContext

#: keyword arguments ``invoke`` / ``ainvoke`` accept; each overrides the field of the same name for one call
CALL_ARGUMENTS = ("k", "stage", "budget")
#: consumed by LangChain's own ``invoke`` (callback verbosity) and passed on to every retriever
_LANGCHAIN_ARGUMENTS = ("verbose",)


class ConveyancingRetriever(BaseRetriever):
    """``retriever.invoke("special levy")`` -> the package's chunks as Documents.

    ``k`` caps the number of documents: the package is still made within the token
    budget, then the ``k`` strongest of its chunks (material risk first, then combined
    score, as recorded in the audit snapshot) are returned in reading order. ``k``,
    ``stage`` and ``budget`` may also be given per call; any other keyword is refused.

    >>> r = ConveyancingRetriever(agent=agent, agent_name="condo", deal_id="2026-ACME-0042", k=4)  # doctest: +SKIP
    >>> docs = r.invoke("special levy for parkade repairs")                                       # doctest: +SKIP
    >>> docs = await r.ainvoke("special levy", k=2)                                               # doctest: +SKIP
    >>> docs[0].metadata["chunk_id"], docs[0].metadata["audit_id"]                                # doctest: +SKIP
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    agent: RetrievalAgent
    agent_name: str = Field(min_length=1, description="Profile in configs/agents.yaml, e.g. 'condo'.")
    deal_id: str = Field(min_length=1)
    stage: Stage = Stage.DILIGENCE
    budget: int | None = Field(None, gt=0, le=MAX_TOKENS_BUDGET, description="Token budget (cl100k); None = the profile's.")
    k: int | None = Field(None, gt=0, description="Most documents returned; None = every chunk of the package.")
    trust: TrustContext | None = None  #: falls back to the agent's default trust

    def _call(self, query: str, kwargs: dict[str, Any]) -> tuple[RetrievalIntent, int | None]:
        unknown = sorted(set(kwargs) - set(CALL_ARGUMENTS) - set(_LANGCHAIN_ARGUMENTS))
        if unknown:
            raise TypeError(f"ConveyancingRetriever: unknown argument(s) {', '.join(unknown)}; accepted: {', '.join(CALL_ARGUMENTS)}")
        # validate per-call values exactly as the constructor does
        call = self.model_validate({**{f: getattr(self, f) for f in type(self).model_fields}, **{a: kwargs[a] for a in CALL_ARGUMENTS if a in kwargs}})
        intent = self.agent.intent_for(call.agent_name, deal_id=call.deal_id, stage=call.stage, budget=call.budget, query_text=query)
        return intent, call.k

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any) -> list[Document]:
        intent, k = self._call(query, kwargs)
        package, summary = self.agent.retrieve_sync(intent, trust=self.trust)
        return self._documents(package, summary, k)

    async def _aget_relevant_documents(self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **kwargs: Any) -> list[Document]:
        intent, k = self._call(query, kwargs)
        package, summary = await self.agent.retrieve(intent, trust=self.trust)
        return self._documents(package, summary, k)

    def _documents(self, package: ContextPackage, summary: RetrievalSummary, k: int | None) -> list[Document]:
        refs = list(enumerate(package.ordered_chunks, start=1))
        if k is not None and k < len(refs):
            keep = self._strongest(summary.audit_id, [ref.chunk_id for _, ref in refs], k)
            refs = [(i, ref) for i, ref in refs if ref.chunk_id in keep]
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
                    "char_start": ref.char_start,
                    "char_end": ref.char_end,
                    "redacted": ref.redacted,
                    "deal_id": package.deal_id,
                    "package_hash": package.package_hash,
                    "audit_id": summary.audit_id,
                },
            )
            for i, ref in refs
        ]

    def _strongest(self, audit_id: str, chunk_ids: list[str], k: int) -> set[str]:
        """The ``k`` chunks with the strongest (risk, combined score) in the call's audit snapshot; ties keep reading order."""
        terms = {row["chunk_id"]: row.get("terms") or {} for row in self.agent.audit.read_snapshot(audit_id).get("selected", [])}

        def strength(item: tuple[int, str]) -> tuple[float, float, int]:
            pos, cid = item
            t = terms.get(cid, {})
            return (-float(t.get("risk", 0.0)), -float(t.get("combined", 0.0)), pos)

        return {cid for _, cid in sorted(enumerate(chunk_ids), key=strength)[:k]}


__all__ = ["CALL_ARGUMENTS", "ConveyancingRetriever"]
