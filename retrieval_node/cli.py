"""Command line: ``retrieval-node`` (interfaces.md section 3).

Built on Typer (typed options, help text, exit codes) and Rich (tables on a
terminal). With ``--json`` standard output holds exactly one JSON document;
progress bars and logs go to standard error.

Every command checks its arguments (enum values, files, the store directory, the
agent name against ``agents.yaml``) before it imports torch, Qdrant or Mem0, so a
mistake costs well under a second. One function per command; a new command checks
its arguments the same way (``_require_store``, ``_check_agent``) and imports the
heavy parts inside its body.

Exit codes: 0 done; 1 ingest or ``patterns add`` rejected a line; 2 an error (a usage
error or a failure, said on standard error, and as ``{"error": ...}`` with ``--json``).
"""

from __future__ import annotations

import json
import logging
import os
import sys
import warnings
from enum import Enum
from pathlib import Path
from collections.abc import Callable
from typing import Annotated, Any, NoReturn, TypeVar

import typer

from . import __version__
from ._config_dir import default_config_dir
from .errors import ConfigError, RetrievalNodeError, UsageError
from .cli_ask import ask_command
from .cli_eval import eval_command
from .cli_explain import explain_command

#: the store's directory when --store is not given: $RETRIEVAL_NODE_HOME, else ./.retrieval-node (as store.resolve_home)
HOME_ENV = "RETRIEVAL_NODE_HOME"
DEFAULT_HOME = ".retrieval-node"
#: files and folders of which at least one is in every store Store.open has made (store.json since its format 1)
STORE_MARKERS = ("store.json", "vectors", "mem0_edge", "mem0_history.db", "qdrant")
#: models.MAX_TOKENS_BUDGET, repeated so that argument checks need not import the models (tests/test_cli.py checks it)
MAX_BUDGET = 200_000


class StageName(str, Enum):
    """models.Stage, repeated for the same reason (tests/test_cli.py checks they agree)."""

    INTAKE = "INTAKE"
    DILIGENCE = "DILIGENCE"
    DRAFTING = "DRAFTING"
    CLOSING = "CLOSING"


class SensitivityName(str, Enum):
    """models.Sensitivity, repeated for the same reason."""

    public = "public"
    confidential = "confidential"
    privileged = "privileged"


app = typer.Typer(
    name="retrieval-node",
    help="Segment-aware, risk-weighted, budget-bounded retrieval for conveyancing agents (Alberta real estate).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain Click help: conventional metavars, and no Rich import to print it
)
patterns_app = typer.Typer(help="Institutional pattern memories (Mem0 global layer).", no_args_is_help=True, rich_markup_mode=None)
app.add_typer(patterns_app, name="patterns")

StoreOpt = Annotated[
    Path | None,
    typer.Option("--store", metavar="DIR", show_default=False,
                 help=f"Store directory. Default: ${HOME_ENV}, else ./{DEFAULT_HOME}.", file_okay=False),
]
JsonOpt = Annotated[bool, typer.Option("--json", metavar="", show_default=False,
                                       help="Print exactly one JSON document on standard output.")]
ActorOpt = Annotated[str | None, typer.Option("--actor", metavar="ID", show_default=False,
                                              help="Who is asking, for the audit trail. Default: cli:$USER.")]
#: the clearance of a CLI caller when --max-sensitivity is not given (see _clearance)
SENSITIVITY_ENV = "RETRIEVAL_NODE_MAX_SENSITIVITY"
SensitivityOpt = Annotated[
    str | None,
    typer.Option("--max-sensitivity", metavar="LEVEL", show_default=False,
                 help=f"Highest sensitivity you may read: public, confidential or privileged. Default: ${SENSITIVITY_ENV}, "
                      "else confidential when you (the OS user) own the store directory, else public (unauthenticated)."),
]


def _version(value: bool) -> None:
    if value:
        typer.echo(f"retrieval-node {__version__}")
        raise typer.Exit(0)


@app.callback()
def main_options(
    verbose: Annotated[int, typer.Option("--verbose", "-v", count=True, metavar="", show_default=False,
                                         help="More log output on standard error: -v info and library warnings, -vv debug.")] = 0,
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True, metavar="",
                                          help="Print the version and exit.")] = False,
) -> None:
    """Segment-aware, risk-weighted, budget-bounded retrieval for conveyancing agents (Alberta real estate)."""
    _setup_logging(verbose)


class _OursOrErrors(logging.Filter):
    """Quiet mode: our own warnings, anyone's errors. Libraries' warnings (Mem0's missing spaCy model) and debug lines
    (bm25s sets its logger to DEBUG on import) are not for the user to act on."""

    def filter(self, record: logging.LogRecord) -> bool:
        ours = record.name.split(".", 1)[0] in ("retrieval_node", "adapters", "__main__")
        return record.levelno >= (logging.WARNING if ours else logging.ERROR)


def _setup_logging(verbosity: int = 0) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    level = logging.DEBUG if verbosity >= 2 else logging.INFO if verbosity == 1 else logging.WARNING
    root.setLevel(level)
    handler.setLevel(level)  # bm25s sets its own logger to DEBUG; the handler still holds the line
    if verbosity == 0:
        handler.addFilter(_OursOrErrors())
        warnings.filterwarnings("ignore")
        warnings.filterwarnings("default", module=r"(retrieval_node|adapters)(\.|$)")


def _fail(exc: Exception, as_json: bool) -> NoReturn:
    kind = "usage error" if isinstance(exc, UsageError) else "error"
    if as_json:
        typer.echo(json.dumps({"error": {"type": type(exc).__name__, "message": str(exc)}}))
    typer.echo(f"retrieval-node: {kind}: {exc}", err=True)
    raise typer.Exit(2)


def _store_home(store: Path | None) -> Path:
    if store is not None:
        return store
    return Path(os.environ.get(HOME_ENV) or DEFAULT_HOME)


def _require_store(store: Path | None) -> Path:
    """The store directory, which must already hold a store (a mistyped --store must not start a new empty one)."""
    home = _store_home(store)
    if not (home.is_dir() and any((home / m).exists() for m in STORE_MARKERS)):
        source = "--store" if store is not None else (f"${HOME_ENV}" if os.environ.get(HOME_ENV) else "the default ./" + DEFAULT_HOME)
        raise UsageError(f"no store at {home} (from {source}); check the path, or create one with "
                         f"`retrieval-node ingest FILE --store {home}` or `retrieval-node demo --store {home}`")
    return home


def _agent_names() -> list[str]:
    """Agent names in agents.yaml, read without validating the whole configuration (that happens when the store opens)."""
    import yaml

    path = default_config_dir() / "agents.yaml"
    try:
        raw = yaml.load(path.read_text(encoding="utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: cannot read the agent profiles: {exc}") from exc
    agents = raw.get("agents") if isinstance(raw, dict) else None
    if not isinstance(agents, dict):
        raise ConfigError(f"{path}: expected a mapping 'agents: {{name: profile}}'")
    return sorted(agents)


def _choice(option: str, value: str, choices: type[Enum]) -> Any:
    try:
        return choices(value)
    except ValueError:
        raise UsageError(f"{option} {value!r}: valid values: {', '.join(c.value for c in choices)}") from None


def _check_agent(agent: str) -> None:
    names = _agent_names()
    if agent not in names:
        raise UsageError(f"--agent {agent!r}: unknown agent; valid agents: {', '.join(names)} (agents.yaml in {default_config_dir()})")


#: why a CLI caller has its clearance, recorded in the trust of every audit snapshot it makes
_CLEARANCE_SOURCES = {
    "flag": "the operator passed --max-sensitivity",
    "env": f"the operator set ${SENSITIVITY_ENV}",
    "store-owner": "the OS user owns the store directory (0700: it can read every file of the store already)",
    "default": "least privilege: no clearance given and the OS user does not own the store",
}


def _flag_level(flag: str | None) -> SensitivityName | None:
    """``--max-sensitivity`` checked (before anything else is looked at), or None when not given."""
    return None if flag is None else _choice("--max-sensitivity", flag.strip().lower(), SensitivityName)


def _clearance(flag: SensitivityName | None, home: Path, *, creating: bool = False) -> tuple[SensitivityName, str]:
    """The CLI caller's clearance and where it comes from: ``--max-sensitivity`` ("flag"), else
    ``$RETRIEVAL_NODE_MAX_SENSITIVITY`` ("env"), else confidential when the OS user owns the store directory
    ("store-owner"; ``creating``: a store this command creates), else public ("default"). Privileged is never a default."""
    if flag is not None:
        return flag, "flag"
    env = os.environ.get(SENSITIVITY_ENV, "").strip()
    if env:
        return _choice(f"${SENSITIVITY_ENV}", env.lower(), SensitivityName), "env"
    try:
        owner = home.stat().st_uid == os.getuid()
    except FileNotFoundError:
        owner = creating
    except OSError:
        owner = False
    return (SensitivityName.confidential, "store-owner") if owner else (SensitivityName.public, "default")


def _cli_trust(actor: str | None, level: SensitivityName, source: str) -> Any:
    """The CLI caller's trust: ``actor`` (default ``cli:$USER``) with a note of the clearance and its source, so the
    snapshot's trust record shows who granted it. Only the "default" source is unauthenticated (public chunks, and
    nothing listed about others); a clearance the operator gave, or store ownership, is authenticated."""
    import getpass

    from .models import TrustContext

    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (a container user)
        user = f"uid{os.getuid()}"
    note = f" [clearance {level.value} from {source}: {_CLEARANCE_SOURCES[source]}]"
    who = (actor or f"cli:{user}").strip() or f"cli:{user}"
    return TrustContext(max_sensitivity=level.value, authenticated=source != "default", actor_id=who[:max(1, 200 - len(note))] + note)


def _caller(store: Path | None, flag: SensitivityName | None, actor: str | None) -> tuple[Path, Any]:
    """The existing store and the CLI caller's trust on it (clearance from ``flag``, the environment or ownership of
    the store: :func:`_clearance`), for every command that reads a store."""
    home = _require_store(store)
    try:
        return home, _cli_trust(actor, *_clearance(flag, home))
    except ValueError as exc:  # the TrustContext's validation (an --actor it refuses), named as a usage error
        raise UsageError(f"--actor {actor!r}: {exc}") from exc


def _open_store(home: Path | None) -> Any:
    """The store, opened for one command: no background read of its index files into the page cache (a command
    answers once and exits; reading the whole store for it would only compete with its own reads)."""
    from .store import Store

    return Store.open(home, warm_page_cache=False)


_T = TypeVar("_T")


def _on_store(store: Path | None, as_json: bool, work: Callable[[Any], _T], *, existing: bool = False) -> _T:
    """``work(st)`` on the store opened at ``store`` (which must already hold one with ``existing``: a mistyped
    --store must not start an empty store); a :class:`RetrievalNodeError` is reported and exits 2 (:func:`_fail`)."""
    try:
        with _open_store(_require_store(store) if existing else store) as st:
            return work(st)
    except RetrievalNodeError as exc:
        _fail(exc, as_json)


def one_shot() -> None:
    """A command that answers once and exits: what the imports and the opened store built lives until the exit, so
    the cyclic garbage collector stops scanning it (``gc.freeze``); a collection during the call then scans only what
    the call allocates (a few hundred ms less on a 100k-chunk store)."""
    import gc

    gc.freeze()


@app.command()
def ingest(
    paths: Annotated[list[Path], typer.Argument(metavar="PATH", exists=True, show_default=False,
                                                help="Chunk JSONL files, or folders of them.")],
    store: StoreOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Ingest Stage-0 chunk JSONL into the store (created if missing).

    Exit 0: every line stored or already present; 1: some line rejected (file, line, field and reason are listed).
    """
    from .ingest import Ingestor

    report = _on_store(store, as_json, lambda st: Ingestor(st).ingest(paths, progress=sys.stderr.isatty()))
    if as_json:
        typer.echo(json.dumps(report.model_dump(mode="json", include={"ingested", "unchanged", "rejected", "repaired"})))
    else:
        from rich.console import Console
        from rich.table import Table
        from rich.text import Text

        console = Console()
        console.print(Text.assemble("ingested ", (str(report.ingested), "bold"), " new chunk(s), ", (str(report.unchanged), "bold"),
                                    " already present" + (f", {report.repaired} repaired" if report.repaired else "") + ", ",
                                    (str(len(report.rejected)), "bold"), " rejected line(s)"))
        if report.rejected:  # file names, fields and errors quote the input: printed as typed, never as Rich markup
            table = Table("file", "line", "field", "error", title="rejected lines")
            for r in report.rejected:
                table.add_row(Text(r.file), str(r.line), Text(r.field), Text(r.error))
            console.print(table)
    raise typer.Exit(0 if report.ok else 1)


@app.command()
def compact(
    store: StoreOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Rewrite the embedded store's qdrant-edge shards in their on-disk layout, and compress audit snapshots.

    Stores from before that layout use about 1 GB more RAM at 100k chunks; search results do not change.
    Audit snapshots written before snapshots were compressed are rewritten compressed (about a tenth of the
    space), each checked before its original is removed; replay reads them as before.
    About a minute per 100k chunks.
    """
    out = _on_store(store, as_json, lambda st: st.compact(), existing=True)
    if as_json:
        typer.echo(json.dumps({"compacted": out}))
    else:
        for name, changed in out.items():
            typer.echo(f"{name}: {'compacted' if changed else 'already compact'}")
    raise typer.Exit(0)


@app.command()
def convert(
    vector_datatype: Annotated[str, typer.Option("--vector-datatype", help="How the vectors are kept: float16 (half the "
                                                  "vector files and the memory their pages take) or float32.")] = "float16",
    store: StoreOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Rewrite an embedded store's vectors in another datatype, keeping every registration, pattern and audit entry.

    A store made before float16 became the default keeps float32 vectors until this runs. Each shard is copied,
    checked against the original, then swapped in; a run stopped half way is finished by running it again. The
    store must not be open in another process. About two minutes and up to 3 GB of RAM per 100k chunks, and the disk
    space of one more copy of the larger shard.
    """
    from .backends.vectors import VECTOR_DATATYPES  # no engine imported: numpy and this package only

    try:
        if vector_datatype not in VECTOR_DATATYPES:
            raise UsageError(f"--vector-datatype {vector_datatype!r}: valid values: {', '.join(VECTOR_DATATYPES)}")
        home = _require_store(store)
        from .store import Store

        out = Store.convert_vectors(home, vector_datatype)
    except RetrievalNodeError as exc:
        _fail(exc, as_json)
    if as_json:
        typer.echo(json.dumps({"converted": out}))
    elif not out:
        typer.echo("nothing to convert: this store has no embedded qdrant-edge shard (its vectors live on a Qdrant server, "
                   "whose collections keep the datatype they were created with)")
    else:
        for name, r in out.items():
            typer.echo(f"{name}: " + (f"{r['from']} -> {r['to']}, {r['points']:,} points checked and swapped in ({r['seconds']:.0f} s)"
                                      if r["converted"] else f"already {r['to']}"))
    raise typer.Exit(0)


@app.command()
def precompute(
    deals: Annotated[list[str] | None, typer.Option("--deal", metavar="ID", show_default=False,
                                                    help="Only this deal (repeatable); default every registered deal.")] = None,
    store: StoreOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Complete what ingest keeps for fast first calls (risk findings, token counts, pattern mentions, BM25 index).

    For a store ingested by an older version, or after a lexicon, rule or pattern change: re-ingesting unchanged files
    does not touch their chunks. Answers do not change; first calls get faster. Rows of other rules are deleted.
    """
    def work(st: Any) -> dict[str, int]:
        from .ingest import Ingestor  # after the store check: a wrong --store is answered without the heavy imports

        return Ingestor(st).precompute(deals)

    done = _on_store(store, as_json, work, existing=True)
    if as_json:
        typer.echo(json.dumps({"computed": done}))
    else:
        for deal_id, n in done.items():
            typer.echo(f"{deal_id}: {n} chunk(s) computed" if n else f"{deal_id}: complete")
        if not done:
            typer.echo("no registered deal")
    raise typer.Exit(0)


@patterns_app.command("add")
def patterns_add(
    file: Annotated[Path, typer.Argument(metavar="FILE", exists=True, dir_okay=False, show_default=False,
                                         help="Pattern-memory JSONL (interfaces.md section 2).")],
    store: StoreOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Load institutional pattern memories into Mem0's global layer (the store is created if missing).

    When some are new, also keeps which of the pattern entities each registered chunk names (for first calls).
    """
    from .ingest import add_patterns, read_patterns

    try:
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
    deal: Annotated[str, typer.Option("--deal", metavar="ID", show_default=False, help="Deal id, e.g. 2026-ACME-0042.")],
    agent: Annotated[str, typer.Option("--agent", metavar="NAME", show_default=False,
                                       help="Agent profile in agents.yaml: investigator, tax, condo, scribe, ...")],
    stage: Annotated[str, typer.Option("--stage", metavar="STAGE",
                                       help="Deal stage: INTAKE, DILIGENCE, DRAFTING or CLOSING.")] = StageName.DILIGENCE.value,
    budget: Annotated[int | None, typer.Option("--budget", metavar="TOKENS", min=1, max=MAX_BUDGET, show_default=False,
                                               help="Token budget (cl100k). Default: the agent profile's.")] = None,
    store: StoreOpt = None,
    as_json: JsonOpt = False,
    actor: ActorOpt = None,
    max_sensitivity: SensitivityOpt = None,
) -> None:
    """Run one agent's retrieval on one deal; --json prints {"package": ..., "summary": ...}."""
    try:
        stage_name = _choice("--stage", stage.upper(), StageName)
        flag = _flag_level(max_sensitivity)
        _check_agent(agent)
        home, trust = _caller(store, flag, actor)
    except RetrievalNodeError as exc:
        _fail(exc, as_json)
        return
    from .agent import RetrievalAgent

    try:
        with _open_store(home) as st:
            one_shot()
            ra = RetrievalAgent(st, trust=trust)
            intent = ra.intent_for(agent, deal_id=deal, stage=stage_name.value, budget=budget)
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
    audit_id: Annotated[str, typer.Argument(metavar="AUDIT_ID", show_default=False,
                                            help="Audit id from a retrieval summary (aud_...).")],
    store: StoreOpt = None,
    max_sensitivity: SensitivityOpt = None,
    actor: ActorOpt = None,
    legacy: Annotated[bool, typer.Option("--legacy", help="Accept a snapshot without a MAC (written by an older version); "
                                                          "only for files you trust.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Print a package exactly as it was given, from its audit snapshot (hash- and MAC-checked), without retrieving
    again. A package holding chunks above --max-sensitivity is refused."""
    try:
        home, trust = _caller(store, _flag_level(max_sensitivity), actor)
    except RetrievalNodeError as exc:
        _fail(exc, as_json)
        return
    from .agent import replay_snapshot
    from .audit import AuditLog

    try:
        from .store import read_secret

        audit = AuditLog(home / "audit", registry=None, key=read_secret(home))  # reading a snapshot needs no backend
        try:
            package, summary = replay_snapshot(audit, audit_id, trust, allow_legacy=legacy)
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
    """Human-readable view of one retrieval (tables, not raw JSON). Every value from the data (document ids, the
    risk summary, fallbacks, notes) is printed as plain text: Rich markup in it (``[bold]``, ``[/]``) shows as typed."""
    from rich.console import Console
    from rich.panel import Panel
    from rich.table import Table
    from rich.text import Text

    console = Console(emoji=False, highlight=False)
    head = Text.assemble(
        (agent, "bold"),
        f" ({package.agent_id}, {package.intent_id}) deal {package.deal_id}\n"
        f"tokens {package.total_tokens} of {budget} | chunks {summary.chunks_selected} of {summary.chunks_inspected} inspected | "
        f"zone coverage {summary.structural_coverage_score:.0%} | audit {summary.audit_id}",
    )
    console.print(Panel(head, expand=False))
    table = Table("#", "document", "section", "pages", "chunk")
    table.columns[1].overflow = "fold"
    for i, ref in enumerate(package.ordered_chunks, start=1):
        table.add_row(Text(f"E{i}"), Text(ref.document_id), Text(ref.section_type.value), Text(ref.page_range), Text(ref.chunk_id[:12]))
    console.print(table)
    console.print(Text.assemble(("Risks:", "bold"), " ", package.risk_summary))
    if summary.missing_zones:
        console.print(Text.assemble(("Missing zones:", "bold red"), " ", ", ".join(summary.missing_zones)))
    if summary.needs_human_input:
        console.print(Text("Needs human input", style="bold red"))
    for f in summary.fallbacks:
        console.print(Text.assemble(("fallback:", "yellow"), " ", f))
    console.print(Text(package.exclusions_note, style="dim"))


@app.command()
def demo(
    store: StoreOpt = None,
    as_json: JsonOpt = False,
    deal: Annotated[str | None, typer.Option("--deal", metavar="ID", show_default=False,
                                             help="Run on a deal already in the store instead of the bundled sample.")] = None,
    actor: ActorOpt = None,
    max_sensitivity: SensitivityOpt = None,
) -> None:
    """The main job: ingest the bundled sample deal, then run investigator -> tax -> condo -> scribe in LangGraph."""
    try:
        flag = _flag_level(max_sensitivity)
        if deal is not None:
            _require_store(store)
        level, source = _clearance(flag, _store_home(store), creating=True)
    except RetrievalNodeError as exc:
        _fail(exc, as_json)
        return
    from .demo import run_demo

    try:
        result = run_demo(store, deal_id=deal, progress=sys.stderr.isatty() and not as_json, trust=_cli_trust(actor, level, source))
    except RetrievalNodeError as exc:
        _fail(exc, as_json)
        return
    if as_json:
        typer.echo(json.dumps(result.as_json()))
        return
    from rich.console import Console
    from rich.text import Text

    console = Console()
    if result.ingest:  # plain Text: a deal id or a path is data, never Rich markup
        console.print(Text(f"sample deal {result.deal_id}: {result.ingest['ingested']} chunk(s) ingested, {result.ingest['unchanged']} "
                           f"already present; {result.ingest['patterns_added']} pattern memorie(s) added"))
    console.print(Text(f"LangGraph workflow {' -> '.join(a.agent for a in result.agents)} (thread {result.thread_id}, "
                       f"checkpoints in {result.checkpoints})\n"))
    for a in result.agents:
        print_package(a.agent, a.package, a.summary, budget=a.budget)
        console.print()


# interfaces.md section 5: a labelled folder scored with the same metrics as shared/bench/deals/score.py
app.command("eval")(eval_command)
app.command("explain")(explain_command(sys.modules[__name__]))  # cli_explain.py: why each chunk was chosen or left out
app.command("ask")(ask_command(sys.modules[__name__]))  # cli_ask.py: a package ranked for a question


def main() -> None:  # pragma: no cover - console entry point
    app()


__all__ = ["app", "main"]

if __name__ == "__main__":  # pragma: no cover
    app(prog_name="retrieval-node")
