"""``retrieval-node eval DEALS_DIR``: score the node on a labelled folder (interfaces.md section 5).

A table with one row per deal x agent and a closing line beginning ``SCORE`` on a terminal; with
``--json`` exactly one JSON document (:class:`~retrieval_node.labelled_eval.LabelledReport`) on
standard output. The progress bar goes to standard error. Exit 0 when the evaluation ran (the scores
are information, not a failure); 2 when the folder is malformed (the message names the file) or a
backend fails.

Registered on the main app as ``app.command("eval")(eval_command)``.
"""

from __future__ import annotations

import json
import tempfile
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from .errors import RetrievalNodeError

if TYPE_CHECKING:
    from .labelled_eval import LabelledReport


def eval_command(
    deals_dir: Annotated[Path, typer.Argument(help="Labelled folder: deals/*.jsonl, gold/<deal_id>.json, intents.json, optional patterns.jsonl.")],
    store: Annotated[Path | None, typer.Option("--store", help="Store to ingest into and retrieve from [default: a new temporary store, removed afterwards].")] = None,
    agents: Annotated[str | None, typer.Option("--agents", help="Comma-separated agents of intents.json [default: all].")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print exactly one JSON document on standard output.")] = False,
) -> None:
    """Score the node on labelled deals: recall, material recall, budget, zones, distractors, false material claims."""
    from .labelled_eval import evaluate_labelled, load_labelled_set
    from .store import Store

    _quiet_logs()
    wanted = [a.strip() for a in agents.split(",") if a.strip()] if agents else None
    try:
        labelled = load_labelled_set(deals_dir, agents=wanted)  # a malformed folder fails before a store is opened
        with ExitStack() as stack:
            home = store or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="rn-eval-"))) / "store"
            report = evaluate_labelled(stack.enter_context(Store.open(home)), labelled, progress=True)
    except RetrievalNodeError as exc:
        if as_json:
            typer.echo(json.dumps({"error": {"type": type(exc).__name__, "message": str(exc)}}))
        typer.echo(f"retrieval-node eval: error: {exc}", err=True)
        raise typer.Exit(2) from None
    if as_json:
        typer.echo(report.model_dump_json())
    else:
        print_report(report)
    raise typer.Exit(0)


def _quiet_logs() -> None:
    import logging

    for name in ("mem0", "mem0.memory.main", "bm25s"):
        logging.getLogger(name).setLevel(logging.ERROR)


def _ratio(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def print_report(report: LabelledReport) -> None:
    """The table of runs, the per-agent totals and the ``SCORE`` line, on standard output."""
    from rich.console import Console
    from rich.table import Table

    console = Console()
    if not console.is_terminal:  # piped to a file: one line per row, not Rich's 80-column default
        console = Console(width=220)
    table = Table("deal", "agent", "recall", "material", "tokens", "over", "zones unrep.", "zones false", "distr.",
                  "false claim", "flag prec.", "framing", "note", title=f"labelled evaluation of {report.folder}")
    for column in table.columns[:-1]:
        column.no_wrap = True
    for r in report.runs:
        claim = "Y" if r.false_material_claim else ("." if r.expect_nothing_material else "")
        table.add_row(r.deal_id, r.agent, f"{r.gold_found}/{r.gold}", f"{r.material_found}/{r.material}",
                      "-" if r.total_tokens is None else str(r.total_tokens), "Y" if r.over_budget else "",
                      str(len(r.unreported_missing_zones)), str(len(r.false_missing_zones)), str(r.distractors_packed),
                      claim, _ratio(r.flag_precision), "-" if r.framing_share is None else f"{r.framing_share:.0%}",
                      r.error or r.risk_summary_head[:40])
    console.print(table)
    for agent, t in report.by_agent.items():
        console.print(f"{agent:<13} recall {_ratio(t.recall)} ({t.gold_found}/{t.gold})  material {_ratio(t.material_recall)} "
                      f"({t.material_found}/{t.material})  over-budget {t.over_budget}  unreported-zones {t.unreported_missing_zones}  "
                      f"distractors {t.distractors_packed}  false-claims {t.false_material_claims}/{t.clean_intents}  "
                      f"flag-precision {_ratio(t.flag_precision)}", highlight=False)
    t = report.total
    console.print(f"framing share {'-' if t.framing_share is None else f'{t.framing_share:.1%}'} of {t.total_tokens} package tokens; "
                  f"{report.elapsed_s:.0f} s", highlight=False)
    console.print(t.score_line(), highlight=False, soft_wrap=True)


__all__ = ["eval_command", "print_report"]
