"""``retrieval-node ask --deal ID "question"``: a package ranked for a free-text question (issue 19).

The question runs through :meth:`~retrieval_node.agent.RetrievalAgent.ask_sync`: routed to the documents it names,
under the ``questions`` contract (the CLI's caller is bound to no agent) and the caller's ``--max-sensitivity``,
packed to ``--budget``, audited like every retrieval (``retrieval-node replay AUDIT_ID`` gives it back). Arguments
are checked before torch, Qdrant or Mem0 are imported. With ``--json`` exactly one JSON document
``{"package": ..., "summary": ...}`` on standard output. Exit 0 done, 2 an error.

Registered on the main app as ``app.command("ask")(ask_command)``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated

import typer

from .errors import RetrievalNodeError, UsageError


def ask_command(
    question: Annotated[str, typer.Argument(metavar="QUESTION", show_default=False,
                                            help='The question, e.g. "In the purchase contract, what is the deposit and when is it due?"')],
    deal: Annotated[str, typer.Option("--deal", metavar="ID", show_default=False, help="Deal id, e.g. 2026-ACME-0042.")],
    budget: Annotated[int | None, typer.Option("--budget", metavar="TOKENS", show_default=False,
                                               help="Token budget (cl100k). Default: 2000.")] = None,
    stage: Annotated[str, typer.Option("--stage", metavar="STAGE", help="Deal stage: INTAKE, DILIGENCE, DRAFTING or CLOSING.")] = "DILIGENCE",
    store: Annotated[Path | None, typer.Option("--store", metavar="DIR", show_default=False, file_okay=False,
                                               help="Store directory. Default: $RETRIEVAL_NODE_HOME, else ./.retrieval-node.")] = None,
    as_json: Annotated[bool, typer.Option("--json", metavar="", show_default=False, help="Print exactly one JSON document on standard output.")] = False,
    actor: Annotated[str | None, typer.Option("--actor", metavar="ID", show_default=False, help="Who is asking, for the audit trail. Default: cli:$USER.")] = None,
    max_sensitivity: Annotated[str, typer.Option("--max-sensitivity", metavar="LEVEL",
                                                 help="Caller clearance: public, confidential or privileged.")] = "confidential",
) -> None:
    """Ask one deal a question; prints the package ranked for it (--json: {"package": ..., "summary": ...})."""
    try:
        stage_name = _one_of("--stage", stage.upper(), STAGES)
        level = _one_of("--max-sensitivity", max_sensitivity.lower(), LEVELS)
        if not question.strip():
            raise UsageError("QUESTION is empty")
        if budget is not None and not 1 <= budget <= MAX_BUDGET:
            raise UsageError(f"--budget {budget}: must be between 1 and {MAX_BUDGET}")
        home = _existing_store(store)
    except RetrievalNodeError as exc:
        _fail(exc, as_json)
        return
    import getpass

    from .agent import RetrievalAgent
    from .models import TrustContext
    from .store import Store

    try:
        trust = TrustContext(max_sensitivity=level, authenticated=True, actor_id=actor or f"cli:{getpass.getuser()}")
        with Store.open(home) as st:
            ra = RetrievalAgent(st, trust=trust)
            try:
                package, summary = ra.ask_sync(deal, question, budget=budget, stage=stage_name)
            finally:
                ra.close()
    except RetrievalNodeError as exc:
        _fail(exc, as_json)
        return
    except ValueError as exc:  # pydantic validation of the intent (names the field)
        _fail(UsageError(str(exc)), as_json)
        return
    if as_json:
        typer.echo(json.dumps({"package": package.model_dump(mode="json"), "summary": summary.model_dump(mode="json")}))
        return
    typer.echo(f"question to deal {package.deal_id} ({package.agent_id}): {package.total_tokens} tokens, "
               f"{summary.chunks_selected} of {summary.chunks_inspected} chunks, audit {summary.audit_id}")
    for note in summary.fallbacks:
        typer.echo(f"note: {note}")
    typer.echo(package.risk_summary)
    typer.echo(package.to_prompt())


#: models.Stage / models.Sensitivity / models.MAX_TOKENS_BUDGET and cli.STORE_MARKERS, repeated so that argument
#: checks import nothing heavy (tests/test_question.py checks they agree)
STAGES = ("INTAKE", "DILIGENCE", "DRAFTING", "CLOSING")
LEVELS = ("public", "confidential", "privileged")
MAX_BUDGET = 200_000
STORE_MARKERS = ("store.json", "vectors", "mem0_edge", "mem0_history.db", "qdrant")


def _one_of(option: str, value: str, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise UsageError(f"{option} {value!r}: valid values: {', '.join(choices)}")
    return value


def _existing_store(store: Path | None) -> Path:
    home = store if store is not None else Path(os.environ.get("RETRIEVAL_NODE_HOME") or ".retrieval-node")
    if not (home.is_dir() and any((home / m).exists() for m in STORE_MARKERS)):
        raise UsageError(f"no store at {home}; check --store, or create one with `retrieval-node ingest FILE --store {home}`")
    return home


def _fail(exc: Exception, as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps({"error": {"type": type(exc).__name__, "message": str(exc)}}))
    typer.echo(f"retrieval-node ask: error: {exc}", err=True)
    raise typer.Exit(2)


__all__ = ["ask_command"]
