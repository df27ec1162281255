"""Command line: ``retrieval-node`` (interfaces.md section 3).

Built on Typer (typed options, help text, exit codes) and Rich (tables on a
terminal). With ``--json`` standard output holds exactly one JSON document;
progress bars and logs go to standard error.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from .errors import RetrievalNodeError, UsageError

app = typer.Typer(
    name="retrieval-node",
    help="Segment-aware, risk-weighted retrieval for conveyancing agents.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
patterns_app = typer.Typer(help="Institutional pattern memories (Mem0 global layer).", no_args_is_help=True)
app.add_typer(patterns_app, name="patterns")

StoreOpt = Annotated[
    Path | None,
    typer.Option("--store", help="Store directory [default: $RETRIEVAL_NODE_HOME, else ./.retrieval-node]."),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print exactly one JSON document on standard output.")]
ActorOpt = Annotated[str | None, typer.Option("--actor", help="Who is asking (audit trail) [default: cli:$USER].")]
SensitivityOpt = Annotated[str, typer.Option("--max-sensitivity", help="public | confidential | privileged: the highest sensitivity you may read.")]


def _cli_trust(actor: str | None, max_sensitivity: str) -> Any:
    import getpass

    from .models import TrustContext

    try:
        return TrustContext(max_sensitivity=max_sensitivity.lower(), authenticated=True, actor_id=actor or f"cli:{getpass.getuser()}")
    except ValueError as exc:
        raise UsageError(f"--max-sensitivity {max_sensitivity!r}: expected public, confidential or privileged") from exc


def _setup_logging() -> None:
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    # Mem0 logs missing optional extras (spaCy, fastembed) at WARNING on every start; they are not ours to act on.
    logging.getLogger("mem0").setLevel(logging.ERROR)
    logging.getLogger("mem0.memory.main").setLevel(logging.ERROR)
    logging.getLogger("bm25s").setLevel(logging.WARNING)


def _fail(exc: Exception, as_json: bool) -> None:
    kind = "usage error" if isinstance(exc, UsageError) else "error"
    if as_json:
        typer.echo(json.dumps({"error": {"type": type(exc).__name__, "message": str(exc)}}))
    typer.echo(f"retrieval-node: {kind}: {exc}", err=True)
    raise typer.Exit(2)


def _open_store(store: Path | None) -> Any:
    from .store import Store

    return Store.open(store)


@app.command()
def ingest(
    paths: Annotated[list[Path], typer.Argument(help="Chunk JSONL files or folders of them.")],
    store: StoreOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Ingest Stage-0 chunk JSONL (exit 0: all lines stored or already present; 1: some line rejected)."""
    _setup_logging()
    from .ingest import Ingestor

    try:
        with _open_store(store) as st:
            report = Ingestor(st).ingest(paths, progress=True)
    except RetrievalNodeError as exc:
        _fail(exc, as_json)
        return
    if as_json:
        typer.echo(json.dumps(report.model_dump(mode="json", include={"ingested", "unchanged", "rejected", "repaired"})))
    else:
        from rich.console import Console
        from rich.table import Table

        console = Console()
        console.print(f"ingested [bold]{report.ingested}[/] new chunk(s), [bold]{report.unchanged}[/] already present"
                      + (f", {report.repaired} repaired" if report.repaired else "")
                      + f", [bold]{len(report.rejected)}[/] rejected line(s)")
        if report.rejected:
            table = Table("file", "line", "field", "error", title="rejected lines")
            for r in report.rejected:
                table.add_row(r.file, str(r.line), r.field, r.error)
            console.print(table)
    raise typer.Exit(0 if report.ok else 1)


@app.command()
def compact(
    store: StoreOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Rewrite the embedded store's qdrant-edge shards in their on-disk layout (stores from before it use ~1 GB
    more RAM at 100k chunks); search results do not change. About a minute per 100k chunks."""
    _setup_logging()
    try:
        with _open_store(store) as st:
            out = st.compact()
    except RetrievalNodeError as exc:
        _fail(exc, as_json)
        return
    if as_json:
        typer.echo(json.dumps({"compacted": out}))
    else:
        for name, changed in out.items():
            typer.echo(f"{name}: {'compacted' if changed else 'already compact'}")
    raise typer.Exit(0)


@patterns_app.command("add")
def patterns_add(
    file: Annotated[Path, typer.Argument(help="Pattern-memory JSONL (interfaces.md section 2).")],
    store: StoreOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Load institutional pattern memories into Mem0's global layer."""
    _setup_logging()
    from .ingest import add_patterns, read_patterns

    try:
        if not file.is_file():
            raise UsageError(f"pattern file {file} does not exist")
        patterns, rejected = read_patterns(file)
        with _open_store(store) as st:
            added, unchanged = add_patterns(st, patterns)
    except RetrievalNodeError as exc:
        _fail(exc, as_json)
        return
    out = {"added": added, "unchanged": unchanged, "rejected": [r.model_dump() for r in rejected]}
    if as_json:
        typer.echo(json.dumps(out))
    else:
        typer.echo(f"added {added} pattern(s), {unchanged} already present, {len(rejected)} rejected")
        for r in rejected:
            typer.echo(f"  {r.file}:{r.line}: {r.field}: {r.error}")
    raise typer.Exit(0 if not rejected else 1)


@app.command()
def retrieve(
    deal: Annotated[str, typer.Option("--deal", help="Deal id, e.g. 2026-ACME-0042.")],
    agent: Annotated[str, typer.Option("--agent", help="investigator | tax | condo | scribe (configs/agents.yaml).")],
    stage: Annotated[str, typer.Option("--stage", help="INTAKE | DILIGENCE | DRAFTING | CLOSING.")] = "DILIGENCE",
    budget: Annotated[int | None, typer.Option("--budget", help="Token budget (cl100k); default from the agent profile.")] = None,
    store: StoreOpt = None,
    as_json: JsonOpt = False,
    actor: ActorOpt = None,
    max_sensitivity: SensitivityOpt = "confidential",
) -> None:
    """Run one agent's retrieval; --json prints {"package": ..., "summary": ...}."""
    _setup_logging()
    from .agent import RetrievalAgent

    try:
        trust = _cli_trust(actor, max_sensitivity)
        with _open_store(store) as st:
            ra = RetrievalAgent(st, trust=trust)
            intent = ra.intent_for(agent, deal_id=deal, stage=stage.upper(), budget=budget)
            try:
                package, summary = ra.retrieve_sync(intent)
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
    print_package(agent, package, summary, budget=intent.max_tokens_budget)


@app.command()
def replay(
    audit_id: Annotated[str, typer.Argument(help="Audit id from a retrieval summary (aud_...).")],
    store: StoreOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Print the package exactly as it was given, from its audit snapshot, without retrieving again."""
    _setup_logging()
    from .agent import replay_snapshot
    from .audit import AuditLog
    from .store import resolve_home

    try:
        home = resolve_home(store)
        audit = AuditLog(home / "audit", registry=None)  # reading a snapshot needs no backend
        try:
            package, summary = replay_snapshot(audit, audit_id)
        except (FileNotFoundError, ValueError) as exc:
            raise UsageError(str(exc)) from exc
    except RetrievalNodeError as exc:
        _fail(exc, as_json)
        return
    if as_json:
        typer.echo(json.dumps({"package": package.model_dump(mode="json"), "summary": summary.model_dump(mode="json")}))
        return
    print_package(package.agent_id, package, summary, budget=summary.tokens_selected)


def print_package(agent: str, package: Any, summary: Any, *, budget: int) -> None:
    """Human-readable view of one retrieval (tables, not raw JSON)."""
    from rich.console import Console
    from rich.panel import Panel
    from rich.table import Table

    console = Console()
    head = (
        f"[bold]{agent}[/] ({package.agent_id}, {package.intent_id}) deal {package.deal_id}\n"
        f"tokens {package.total_tokens} of {budget} | chunks {summary.chunks_selected} of {summary.chunks_inspected} inspected | "
        f"zone coverage {summary.structural_coverage_score:.0%} | audit {summary.audit_id}"
    )
    console.print(Panel(head, expand=False))
    table = Table("#", "document", "section", "pages", "chunk")
    table.columns[1].overflow = "fold"
    for i, ref in enumerate(package.ordered_chunks, start=1):
        table.add_row(f"E{i}", ref.document_id, ref.section_type.value, ref.page_range, ref.chunk_id[:12])
    console.print(table)
    console.print(f"[bold]Risks:[/] {package.risk_summary}")
    if summary.missing_zones:
        console.print(f"[bold red]Missing zones:[/] {', '.join(summary.missing_zones)}")
    if summary.needs_human_input:
        console.print("[bold red]Needs human input[/]")
    for f in summary.fallbacks:
        console.print(f"[yellow]fallback:[/] {f}")
    console.print(f"[dim]{package.exclusions_note}[/]")


@app.command()
def demo(
    store: StoreOpt = None,
    as_json: JsonOpt = False,
    deal: Annotated[str | None, typer.Option("--deal", help="Run on an already ingested deal instead of the bundled sample.")] = None,
) -> None:
    """The main job: ingest the bundled sample deal, run investigator -> tax -> condo -> scribe in LangGraph."""
    _setup_logging()
    import uuid

    from langgraph.checkpoint.sqlite import SqliteSaver

    from .agent import RetrievalAgent
    from .demo import AGENT_ORDER, SAMPLE_DEAL_ID, build_workflow, initial_state, sample_deal_files
    from .ingest import Ingestor, add_patterns, read_patterns
    from .node import RetrievalNode, package_of, summary_of

    deal_id = deal or SAMPLE_DEAL_ID
    try:
        with _open_store(store) as st:
            ingest_note = None
            if deal is None:
                chunks, patterns_file = sample_deal_files()
                report = Ingestor(st).ingest([chunks], progress=not as_json)
                patterns, _ = read_patterns(patterns_file)
                added, _unchanged = add_patterns(st, patterns)
                ingest_note = {"ingested": report.ingested, "unchanged": report.unchanged, "rejected": len(report.rejected), "patterns_added": added}
            retrieval_agent = RetrievalAgent(st, trust=_cli_trust(None, "confidential"))
            node = RetrievalNode(retrieval_agent)
            thread = {"configurable": {"thread_id": f"demo-{deal_id}-{uuid.uuid4().hex[:8]}"}}
            with SqliteSaver.from_conn_string(str(st.home / "checkpoints.sqlite")) as saver:
                app_graph = build_workflow(node, checkpointer=saver)
                try:
                    final = app_graph.invoke(initial_state(deal_id), thread)
                finally:
                    retrieval_agent.close()
            steps = sorted(final["context_packages"])
            results = []
            for step in steps:
                pkg, summ = package_of(final, step), summary_of(final, step)
                agent_name = step.split("_", 1)[1]
                budget = st.config.agents[agent_name].max_tokens_budget
                results.append((agent_name, step, pkg, summ, budget))
    except RetrievalNodeError as exc:
        _fail(exc, as_json)
        return
    if as_json:
        typer.echo(json.dumps({
            "deal_id": deal_id,
            "ingest": ingest_note,
            "thread_id": thread["configurable"]["thread_id"],
            "findings": final.get("findings", {}),
            "agents": [{"agent": a, "step": s, "package": p.model_dump(mode="json"), "summary": m.model_dump(mode="json")} for a, s, p, m, _ in results],
        }))
        return
    from rich.console import Console

    console = Console()
    if ingest_note:
        console.print(f"sample deal {deal_id}: {ingest_note['ingested']} chunk(s) ingested, {ingest_note['unchanged']} already present; "
                      f"{ingest_note['patterns_added']} pattern memorie(s) added")
    console.print(f"LangGraph workflow {' -> '.join(AGENT_ORDER)} (thread {thread['configurable']['thread_id']}, checkpoints in {st.home / 'checkpoints.sqlite'})\n")
    for agent_name, _step, pkg, summ, budget in results:
        print_package(agent_name, pkg, summ, budget=budget)
        console.print()


def main() -> None:  # pragma: no cover - console entry point
    app()


__all__ = ["app", "main"]

if __name__ == "__main__":  # pragma: no cover
    app()
