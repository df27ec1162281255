"""``retrieval-node ask --deal ID "question"``: a package ranked for a free-text question (issue 19).

The question runs through :meth:`~retrieval_node.agent.RetrievalAgent.ask_sync`: routed to the documents it names,
under the ``questions`` contract (the CLI's caller is bound to no agent) and the caller's clearance,
packed to ``--budget``, audited like every retrieval (``retrieval-node replay AUDIT_ID`` gives it back). Arguments
are checked before torch, Qdrant or Mem0 are imported. With ``--json`` exactly one JSON document
``{"package": ..., "summary": ...}`` on standard output. Exit 0 done, 2 an error.

Registered on the main app as ``app.command("ask")(ask_command(cli))``; the caller's clearance comes from the same
sources as ``retrieve``'s (flag, environment, store owner, else public and unauthenticated).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Annotated

import typer

from .errors import RetrievalNodeError, UsageError

QuestionArg = Annotated[str, typer.Argument(metavar="QUESTION", show_default=False,
                                            help='The question, e.g. "In the purchase contract, what is the deposit and when is it due?"')]
DealOpt = Annotated[str, typer.Option("--deal", metavar="ID", show_default=False, help="Deal id, e.g. 2026-ACME-0042.")]
BudgetOpt = Annotated[int | None, typer.Option("--budget", metavar="TOKENS", show_default=False, help="Token budget (cl100k). Default: 2000.")]
StageOpt = Annotated[str, typer.Option("--stage", metavar="STAGE", help="Deal stage: INTAKE, DILIGENCE, DRAFTING or CLOSING.")]
StoreOpt = Annotated[Path | None, typer.Option("--store", metavar="DIR", show_default=False, file_okay=False,
                                               help="Store directory. Default: $RETRIEVAL_NODE_HOME, else ./.retrieval-node.")]
JsonOpt = Annotated[bool, typer.Option("--json", metavar="", show_default=False, help="Print exactly one JSON document on standard output.")]
ActorOpt = Annotated[str | None, typer.Option("--actor", metavar="ID", show_default=False, help="Who is asking, for the audit trail. Default: cli:$USER.")]
SensitivityOpt = Annotated[str | None, typer.Option(
    "--max-sensitivity", metavar="LEVEL", show_default=False,
    help="Highest sensitivity you may read: public, confidential or privileged. Default: as for retrieve "
         "($RETRIEVAL_NODE_MAX_SENSITIVITY, else confidential when you own the store, else public).")]


def ask_command(cli: ModuleType) -> Callable[..., None]:
    """The ``ask`` command, bound to ``cli``'s argument checks and clearance (``_choice``, ``_flag_level``,
    ``_caller``, ``_fail``): the same as ``retrieve``'s."""

    def ask(
        question: QuestionArg,
        deal: DealOpt,
        budget: BudgetOpt = None,
        stage: StageOpt = "DILIGENCE",
        store: StoreOpt = None,
        as_json: JsonOpt = False,
        actor: ActorOpt = None,
        max_sensitivity: SensitivityOpt = None,
    ) -> None:
        """Ask one deal a question; prints the package ranked for it (--json: {"package": ..., "summary": ...})."""
        try:
            stage_name = cli._choice("--stage", stage.upper(), cli.StageName)
            flag = cli._flag_level(max_sensitivity)
            if not question.strip():
                raise UsageError("QUESTION is empty")
            if budget is not None and not 1 <= budget <= cli.MAX_BUDGET:
                raise UsageError(f"--budget {budget}: must be between 1 and {cli.MAX_BUDGET}")
            home, trust = cli._caller(store, flag, actor)
        except RetrievalNodeError as exc:
            cli._fail(exc, as_json)
            return
        from .agent import RetrievalAgent
        from .store import Store

        try:
            with Store.open(home, warm_page_cache=False) as st:  # one question, then exit (cli._open_store)
                cli.one_shot()
                ra = RetrievalAgent(st, trust=trust)
                try:
                    package, summary = ra.ask_sync(deal, question, budget=budget, stage=stage_name.value)
                finally:
                    ra.close()
        except RetrievalNodeError as exc:
            cli._fail(exc, as_json)
            return
        except ValueError as exc:  # pydantic validation of the intent (names the field)
            cli._fail(UsageError(str(exc)), as_json)
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

    return ask
