"""Evaluation on labelled deals (interfaces.md section 5): how well the node serves each agent on closed files.

A labelled folder (the layout of ``shared/bench/deals``)::

    DEALS_DIR/
      deals/<deal_id>.jsonl   Stage-0 chunks of one deal (interfaces.md section 1)
      gold/<deal_id>.json     per intent id: the chunks the agent must see, their material subset,
                              benign look-alikes, the required zones present in / absent from the deal
      intents.json            per agent: intent_id, budget (tokens, cl100k), stage, required_zones
      patterns.jsonl          optional institutional pattern memories (interfaces.md section 2)

:func:`evaluate_labelled` ingests the deals with a gold file (and the patterns) into the store it is
given, runs one retrieval per deal x agent with the agent's budget and stage from ``intents.json``
(trust: an authenticated caller reading up to ``confidential``, as ``retrieval-node retrieve`` does by
default), and scores each package (:func:`score_package`). Per deal x agent (:class:`RunScore`):

* **recall**: gold chunks whose id is among ``package.ordered_chunks`` / gold chunks. A verbatim
  excerpt of a chunk carries its chunk id, so it counts;
* **material recall**: the same over the material subset;
* **over budget**: ``package.total_tokens > budget``;
* **unreported absent zones**: the gold's ``zones_absent`` not listed in ``summary.missing_zones``;
  **false missing zones**: zones listed in ``summary.missing_zones`` that the gold says are present;
* **distractors packed**: packaged chunks that the gold calls benign look-alikes;
* **material claim**: ``summary.material_risks`` is not empty when the summary has that field; without
  it, ``risk_summary`` begins with ``MATERIAL RISK`` or ``risk_distribution`` has a positive
  ``material`` / ``high`` / ``critical`` entry. On a gold-clean intent (``expect_nothing_material``)
  a claim is a **false material claim**;
* **flags** and their **precision**: the chunks the node names as material (the ``chunk_id`` of each
  ``summary.material_risks`` entry when the field exists; otherwise each ``[E<n>]`` line of
  ``risk_summary`` names the n-th packaged chunk and each ``NOT IN PACKAGE (budget): ... in <doc>
  p<a>-<b>`` line the deal's chunks of that document and pages); precision = flags on material gold
  / flags, None without flags;
* **framing share**: ``(total_tokens - sum of the cl100k tokens of each quoted content) / total_tokens``,
  the part of what the agent reads that is preamble, block headers and fences.

:class:`ScoreTotals` sums the counts over runs (per agent and in total) and recomputes the ratios from
the sums. These are the metrics of the bench's black-box scorer, computed in process; the ``SCORE``
line of :meth:`ScoreTotals.score_line` has that scorer's fields and format.

A malformed folder raises :class:`LabelledSetError` naming the file (and the field or line).

>>> with Store.open(tmp / "store") as store:                                       # doctest: +SKIP
...     report = evaluate_labelled(store, Path("shared/bench/deals"), agents=["tax"])
>>> print(report.total.score_line())                                              # doctest: +SKIP
SCORE recall=1.000 (9/9) material_recall=1.000 (8/8) over_budget=0 ...
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, computed_field, model_validator

from .errors import RetrievalNodeError, UsageError
from .models import KNOWN_ZONES, MAX_TOKENS_BUDGET, ChunkId, ContextPackage, RetrievalIntent, RetrievalSummary, Stage, TrustContext
from .store import Store
from .tokens import TokenCounter

#: The trust of an evaluation run: what ``retrieval-node retrieve`` uses without ``--max-sensitivity``.
EVAL_MAX_SENSITIVITY = "confidential"

#: Retrieves one package for one intent (the node by default; a baseline in the benchmarks).
Retrieve = Callable[[RetrievalIntent], tuple[ContextPackage, RetrievalSummary]]

_CITED_BLOCK = re.compile(r"\[E(?P<n>\d+)\]\s")
_LEFT_OUT = re.compile(r"NOT IN PACKAGE \(budget\): .*? in (?P<doc>\S+) p\(?(?P<first>\d+)\s*[-,]\s*(?P<last>\d+)")
_CLAIM_KEYS = frozenset({"material", "high", "critical"})


class LabelledSetError(UsageError):
    """The labelled folder is malformed; the message names the file and the field or line."""


# -- the labelled folder ------------------------------------------------------------------------


def _zones(value: list[str], field: str) -> list[str]:
    unknown = [z for z in value if z not in KNOWN_ZONES]
    if unknown:
        raise ValueError(f"{field}: unknown zone(s) {unknown}; known zones: {list(KNOWN_ZONES)}")
    return value


class IntentSpec(BaseModel):
    """One agent's entry in ``intents.json``.

    >>> IntentSpec(intent_id="tax_arrears_check_v1", budget=2000).stage
    <Stage.DILIGENCE: 'DILIGENCE'>
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    intent_id: str = Field(min_length=1, description="Key of this agent's entry under each gold file's 'intents'.")
    agent: str | None = Field(default=None, description="The agent name (the key of the entry); informative.")
    budget: int = Field(gt=0, le=MAX_TOKENS_BUDGET, description="Token budget of each retrieval (tokens, cl100k).")
    stage: Stage = Stage.DILIGENCE
    required_zones: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _known(self) -> IntentSpec:
        _zones(self.required_zones, "required_zones")
        return self


class GoldNote(BaseModel):
    """A gold or look-alike chunk with its labeller's notes (``rationale``, ``kind``, pages...), kept as given."""

    model_config = ConfigDict(extra="allow", frozen=True)

    chunk_id: ChunkId


class IntentGold(BaseModel):
    """What one agent must see in one deal (``gold/<deal_id>.json`` -> ``intents.<intent_id>``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    risk_chunk_ids: list[ChunkId] = Field(description="Every chunk the agent must see (the gold).")
    material_chunk_ids: list[ChunkId] = Field(description="The gold chunks that carry a material risk.")
    distractor_chunk_ids: list[ChunkId] = Field(default_factory=list, description="Benign look-alikes.")
    expect_nothing_material: bool = Field(description="No material risk exists for this agent in this deal.")
    zones_present: list[str] = Field(description="Required zones present in the deal's documents.")
    zones_absent: list[str] = Field(description="Required zones absent from the deal's documents.")
    agent: str | None = None
    budget: int | None = None
    required_zones: list[str] = Field(default_factory=list)
    min_tokens_for_gold: int | None = None
    gold_fits_budget: bool | None = None
    gold: list[GoldNote] = Field(default_factory=list)
    distractors: list[GoldNote] = Field(default_factory=list)

    @model_validator(mode="after")
    def _consistent(self) -> IntentGold:
        for name in ("zones_present", "zones_absent", "required_zones"):
            _zones(getattr(self, name), name)
        outside = [c for c in self.material_chunk_ids if c not in set(self.risk_chunk_ids)]
        if outside:
            raise ValueError(f"material_chunk_ids: {outside[0]} is not in risk_chunk_ids (material is a subset of the gold)")
        if self.expect_nothing_material and self.material_chunk_ids:
            raise ValueError("expect_nothing_material is true but material_chunk_ids is not empty")
        both = set(self.zones_present) & set(self.zones_absent)
        if both:
            raise ValueError(f"zones_present and zones_absent both list {sorted(both)}")
        return self


class DealGold(BaseModel):
    """One ``gold/<deal_id>.json``: the deal id and the gold per intent id; descriptive keys are kept as given."""

    model_config = ConfigDict(extra="allow", frozen=True)

    deal_id: str = Field(min_length=1)
    intents: dict[str, IntentGold]


PageKey = tuple[str, int, int]


@dataclass(frozen=True, slots=True)
class LabelledSet:
    """A loaded labelled folder; every gold chunk id is known to name a chunk of its deal's file."""

    root: Path
    #: agent name -> its intent, in the order of ``intents.json``
    intents: dict[str, IntentSpec]
    #: deal id -> gold, in deal-id order
    golds: dict[str, DealGold]
    #: deal id -> its chunk file
    deal_files: dict[str, Path]
    #: (document id, first page, last page) -> chunk ids, over every file in ``deals/``
    pages: dict[PageKey, list[str]]
    patterns_file: Path | None


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise LabelledSetError(f"{path}: cannot be read ({exc})") from exc
    except json.JSONDecodeError as exc:
        raise LabelledSetError(f"{path}: not JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from exc


def _invalid(path: Path, exc: ValidationError, prefix: str = "") -> LabelledSetError:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in ([prefix] if prefix else []) + list(first["loc"]))
    return LabelledSetError(f"{path}: field {where or '(top level)'}: {first['msg']}")


def _scan_chunks(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise LabelledSetError(f"{path}: cannot be read ({exc})") from exc
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise LabelledSetError(f"{path}: line {n}: not JSON ({exc.msg})") from exc
        if not isinstance(row, dict):
            raise LabelledSetError(f"{path}: line {n}: expected a JSON object")
        for key, kind in (("chunk_id", str), ("document_id", str), ("page_start", int), ("page_end", int)):
            if not isinstance(row.get(key), kind):
                raise LabelledSetError(f"{path}: line {n}: field {key}: missing or not a {kind.__name__}")
        yield n, row


def load_labelled_set(root: str | Path, *, agents: Sequence[str] | None = None) -> LabelledSet:
    """Read and check a labelled folder (``agents``: only these agents' intents must have gold).

    Raises :class:`LabelledSetError` naming the file and the field or line of the first problem.
    """
    root = Path(root)
    if not root.is_dir():
        raise LabelledSetError(f"{root}: not a folder (expected deals/, gold/, intents.json)")
    intents_file = root / "intents.json"
    if not intents_file.is_file():
        raise LabelledSetError(f"{intents_file}: missing (one entry per agent: intent_id, budget, stage, required_zones)")
    raw_intents = _read_json(intents_file)
    if not isinstance(raw_intents, dict) or not raw_intents:
        raise LabelledSetError(f"{intents_file}: expected an object with one entry per agent")
    intents: dict[str, IntentSpec] = {}
    for name, spec in raw_intents.items():
        try:
            intents[name] = IntentSpec.model_validate(spec)
        except ValidationError as exc:
            raise _invalid(intents_file, exc, name) from exc
    if agents is not None:
        unknown = [a for a in agents if a not in intents]
        if unknown:
            raise LabelledSetError(f"{intents_file}: no entry for agent(s) {unknown}; its agents: {list(intents)}")
        intents = {a: intents[a] for a in intents if a in set(agents)}

    deals_dir, gold_dir = root / "deals", root / "gold"
    for d in (deals_dir, gold_dir):
        if not d.is_dir():
            raise LabelledSetError(f"{d}: missing folder")
    chunk_ids: dict[str, set[str]] = {}
    pages: dict[PageKey, list[str]] = {}
    for path in sorted(deals_dir.glob("*.jsonl")):
        ids = chunk_ids.setdefault(path.stem, set())
        for _n, row in _scan_chunks(path):
            ids.add(row["chunk_id"])
            pages.setdefault((row["document_id"], row["page_start"], row["page_end"]), []).append(row["chunk_id"])

    golds: dict[str, DealGold] = {}
    deal_files: dict[str, Path] = {}
    gold_files = sorted(gold_dir.glob("*.json"))
    if not gold_files:
        raise LabelledSetError(f"{gold_dir}: no gold file (expected gold/<deal_id>.json)")
    for path in gold_files:
        try:
            gold = DealGold.model_validate(_read_json(path))
        except ValidationError as exc:
            raise _invalid(path, exc) from exc
        if gold.deal_id != path.stem:
            raise LabelledSetError(f"{path}: field deal_id: {gold.deal_id!r} is not the file's name {path.stem!r}")
        deal_file = deals_dir / f"{path.stem}.jsonl"
        if path.stem not in chunk_ids:
            raise LabelledSetError(f"{path}: no chunk file {deal_file} for this deal")
        for agent, spec in intents.items():
            ig = gold.intents.get(spec.intent_id)
            if ig is None:
                raise LabelledSetError(f"{path}: field intents.{spec.intent_id}: missing (the gold of agent {agent!r})")
            for field in ("risk_chunk_ids", "distractor_chunk_ids"):
                for i, cid in enumerate(getattr(ig, field)):
                    if cid not in chunk_ids[path.stem]:
                        raise LabelledSetError(f"{path}: field intents.{spec.intent_id}.{field}.{i}: chunk {cid} is not in {deal_file}")
        golds[path.stem] = gold
        deal_files[path.stem] = deal_file
    patterns = root / "patterns.jsonl"
    return LabelledSet(root=root, intents=intents, golds=golds, deal_files=deal_files, pages=pages,
                       patterns_file=patterns if patterns.is_file() else None)


# -- scoring ------------------------------------------------------------------------------------


class RunScore(BaseModel):
    """The scores of one deal x agent retrieval (definitions: module docstring)."""

    model_config = ConfigDict(extra="ignore", frozen=True)  # a saved report holds the computed ratios too

    deal_id: str
    agent: str
    intent_id: str
    budget: int = Field(description="tokens, cl100k")
    error: str | None = None
    audit_id: str | None = None
    gold: int
    gold_found: int
    missed: list[str] = Field(default_factory=list)
    material: int
    material_found: int
    expect_nothing_material: bool
    packaged: int = 0
    excerpts: int = 0
    total_tokens: int | None = None
    framing_tokens: int | None = Field(None, description="total_tokens minus the tokens of the quoted contents")
    over_budget: bool = False
    unreported_missing_zones: list[str]
    false_missing_zones: list[str] = Field(default_factory=list)
    distractors_packed: int = 0
    claims_material: bool = False
    false_material_claim: bool = False
    flags: int = 0
    flags_unresolved: int = 0
    flags_on_material: int = 0
    flags_on_distractors: int = 0
    needs_human_input: bool | None = None
    risk_summary_head: str = ""

    @computed_field  # type: ignore[prop-decorator]
    @property
    def recall(self) -> float | None:
        return self.gold_found / self.gold if self.gold else None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def material_recall(self) -> float | None:
        return self.material_found / self.material if self.material else None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def flag_precision(self) -> float | None:
        return self.flags_on_material / self.flags if self.flags else None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def framing_share(self) -> float | None:
        return self.framing_tokens / self.total_tokens if self.total_tokens and self.framing_tokens is not None else None


class ScoreTotals(BaseModel):
    """Counts summed over runs, ratios recomputed from the sums."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    runs: int
    errors: int
    gold: int
    gold_found: int
    recall: float | None
    material: int
    material_found: int
    material_recall: float | None
    over_budget: int
    unreported_missing_zones: int
    false_missing_zones: int
    distractors_packed: int
    clean_intents: int
    false_material_claims: int
    flags: int
    flags_on_material: int
    flag_precision: float | None
    total_tokens: int
    framing_tokens: int
    framing_share: float | None

    @classmethod
    def of(cls, runs: Sequence[RunScore]) -> ScoreTotals:
        def ratio(a: int, b: int) -> float | None:
            return a / b if b else None

        gold, found = sum(r.gold for r in runs), sum(r.gold_found for r in runs)
        mat, mat_found = sum(r.material for r in runs), sum(r.material_found for r in runs)
        flags, on_mat = sum(r.flags for r in runs), sum(r.flags_on_material for r in runs)
        tokens = sum(r.total_tokens or 0 for r in runs if r.framing_tokens is not None)
        framing = sum(r.framing_tokens or 0 for r in runs)
        return cls(
            runs=len(runs), errors=sum(1 for r in runs if r.error is not None),
            gold=gold, gold_found=found, recall=ratio(found, gold),
            material=mat, material_found=mat_found, material_recall=ratio(mat_found, mat),
            over_budget=sum(1 for r in runs if r.over_budget),
            unreported_missing_zones=sum(len(r.unreported_missing_zones) for r in runs),
            false_missing_zones=sum(len(r.false_missing_zones) for r in runs),
            distractors_packed=sum(r.distractors_packed for r in runs),
            clean_intents=sum(1 for r in runs if r.expect_nothing_material),
            false_material_claims=sum(1 for r in runs if r.false_material_claim),
            flags=flags, flags_on_material=on_mat, flag_precision=ratio(on_mat, flags),
            total_tokens=tokens, framing_tokens=framing, framing_share=ratio(framing, tokens),
        )

    def score_line(self) -> str:
        """One line beginning ``SCORE``, with the bench scorer's fields in its order and format."""
        def f(x: float | None) -> str:
            return "n/a" if x is None else f"{x:.3f}"

        return (f"SCORE recall={f(self.recall)} ({self.gold_found}/{self.gold}) "
                f"material_recall={f(self.material_recall)} ({self.material_found}/{self.material}) "
                f"over_budget={self.over_budget} unreported_missing_zones={self.unreported_missing_zones} "
                f"false_missing_zones={self.false_missing_zones} distractors_packed={self.distractors_packed} "
                f"false_material_flags={self.false_material_claims}/{self.clean_intents} "
                f"flag_precision={f(self.flag_precision)} errors={self.errors}/{self.runs}")


class IngestCounts(BaseModel):
    """What preparing the store did: chunks stored / already there, pattern memories added / already there."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    ingested: int = 0
    unchanged: int = 0
    patterns_added: int = 0
    patterns_unchanged: int = 0


class LabelledReport(BaseModel):
    """Every run in (deal, agent) order, totals per agent and over all runs."""

    model_config = ConfigDict(extra="ignore", frozen=True)  # a saved report holds the computed ratios too

    folder: str
    store: str
    runs: list[RunScore]
    by_agent: dict[str, ScoreTotals]
    total: ScoreTotals
    elapsed_s: float
    ingest: IngestCounts | None = Field(None, description="None when the evaluation did not ingest (ingest=False)")

    @computed_field  # type: ignore[prop-decorator]
    @property
    def score_line(self) -> str:
        return self.total.score_line()


def _findings(summary: RetrievalSummary) -> list[Any] | None:
    found = getattr(summary, "material_risks", None)
    return list(found) if isinstance(found, list) else None


def _field(item: Any, name: str) -> Any:
    return item.get(name) if isinstance(item, dict) else getattr(item, name, None)


def claims_material(package: ContextPackage, summary: RetrievalSummary) -> bool:
    """Whether the package says a material risk exists (module docstring, "material claim")."""
    findings = _findings(summary)
    if findings is not None:
        return bool(findings)
    if package.risk_summary.strip().upper().startswith("MATERIAL RISK"):
        return True
    return any(str(k).lower() in _CLAIM_KEYS and isinstance(v, int | float) and v > 0
               for k, v in (summary.risk_distribution or {}).items())


def flagged_chunks(package: ContextPackage, summary: RetrievalSummary, pages: dict[PageKey, list[str]]) -> tuple[list[str], int]:
    """(chunk ids named as material, names that resolve to no chunk); module docstring, "flags"."""
    findings = _findings(summary)
    if findings is not None:
        named = [_field(f, "chunk_id") for f in findings if isinstance(f, dict) or hasattr(f, "chunk_id")]
        return [c for c in named if c], sum(1 for c in named if not c)
    out: list[str] = []
    unresolved = 0
    for raw in package.risk_summary.splitlines():
        line = raw.strip()
        if m := _CITED_BLOCK.match(line):
            n = int(m["n"])
            if 1 <= n <= len(package.ordered_chunks):
                out.append(package.ordered_chunks[n - 1].chunk_id)
            else:
                unresolved += 1
        elif m := _LEFT_OUT.match(line):
            ids = pages.get((m["doc"], int(m["first"]), int(m["last"])))
            if ids:
                out.extend(ids)
            else:
                unresolved += 1
    return out, unresolved


def score_package(
    gold: IntentGold,
    package: ContextPackage,
    summary: RetrievalSummary,
    *,
    deal_id: str,
    agent: str,
    intent_id: str,
    budget: int,
    pages: dict[PageKey, list[str]],
    tokens: TokenCounter,
) -> RunScore:
    """Score one package against one intent's gold (pure; definitions in the module docstring)."""
    packaged = [r.chunk_id for r in package.ordered_chunks]
    inside = set(packaged)
    material, distractors = set(gold.material_chunk_ids), set(gold.distractor_chunk_ids)
    reported = set(summary.missing_zones)
    claims = claims_material(package, summary)
    flagged, unresolved = flagged_chunks(package, summary, pages)
    quoted = sum(tokens.count(r.content) for r in package.ordered_chunks if r.content)
    head = package.risk_summary.splitlines()[0][:120] if package.risk_summary else ""
    return RunScore(
        deal_id=deal_id, agent=agent, intent_id=intent_id, budget=budget, audit_id=summary.audit_id,
        gold=len(gold.risk_chunk_ids), gold_found=sum(1 for c in gold.risk_chunk_ids if c in inside),
        missed=[c for c in gold.risk_chunk_ids if c not in inside],
        material=len(gold.material_chunk_ids), material_found=sum(1 for c in gold.material_chunk_ids if c in inside),
        expect_nothing_material=gold.expect_nothing_material,
        packaged=len(packaged), excerpts=sum(1 for r in package.ordered_chunks if r.char_start is not None),
        total_tokens=package.total_tokens, framing_tokens=package.total_tokens - quoted,
        over_budget=package.total_tokens > budget,
        unreported_missing_zones=[z for z in gold.zones_absent if z not in reported],
        false_missing_zones=sorted(reported & set(gold.zones_present)),
        distractors_packed=sum(1 for c in packaged if c in distractors),
        claims_material=claims, false_material_claim=gold.expect_nothing_material and claims,
        flags=len(flagged), flags_unresolved=unresolved,
        flags_on_material=sum(1 for c in flagged if c in material),
        flags_on_distractors=sum(1 for c in flagged if c in distractors),
        needs_human_input=summary.needs_human_input, risk_summary_head=head,
    )


def failed_run(gold: IntentGold, *, deal_id: str, agent: str, intent_id: str, budget: int, error: str) -> RunScore:
    """A run that produced no package: nothing found, every absent zone unreported, no claim."""
    return RunScore(
        deal_id=deal_id, agent=agent, intent_id=intent_id, budget=budget, error=error,
        gold=len(gold.risk_chunk_ids), gold_found=0, missed=list(gold.risk_chunk_ids),
        material=len(gold.material_chunk_ids), material_found=0, expect_nothing_material=gold.expect_nothing_material,
        unreported_missing_zones=list(gold.zones_absent),
    )


# -- the run ------------------------------------------------------------------------------------


@contextmanager
def _progress_bar(total: int, enabled: bool) -> Iterator[Callable[[str], None]]:
    if not enabled:
        yield lambda _label: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("eval", total=total)
        yield lambda label: bar.update(task, advance=1, description=label)


def prepare_store(store: Store, labelled: LabelledSet, *, progress: bool = False) -> IngestCounts:
    """Ingest the deals that have gold and add the patterns; returns the counts. Rejected lines raise."""
    from .ingest import Ingestor, add_patterns, read_patterns

    report = Ingestor(store).ingest([labelled.deal_files[d] for d in labelled.golds], progress=progress)
    if report.rejected:
        r = report.rejected[0]
        raise LabelledSetError(f"{r.file}: line {r.line}: field {r.field}: {r.error}"
                               + (f" (and {len(report.rejected) - 1} more rejected line(s))" if len(report.rejected) > 1 else ""))
    added = unchanged = 0
    if labelled.patterns_file is not None:
        patterns, bad = read_patterns(labelled.patterns_file)
        if bad:
            raise LabelledSetError(f"{bad[0].file}: line {bad[0].line}: field {bad[0].field}: {bad[0].error}")
        added, unchanged = add_patterns(store, patterns)
    return IngestCounts(ingested=report.ingested, unchanged=report.unchanged, patterns_added=added, patterns_unchanged=unchanged)


def evaluate_labelled(
    store: Store,
    folder: str | Path | LabelledSet,
    *,
    agents: Sequence[str] | None = None,
    progress: bool = False,
    retrieve: Retrieve | None = None,
    ingest: bool = True,
) -> LabelledReport:
    """Score the node (or ``retrieve``) on a labelled folder, one retrieval per deal x agent.

    ``store``: where the deals are ingested (with ``ingest=False`` they must be there already).
    ``agents``: a subset of the agents of ``intents.json``. ``retrieve``: what makes a package from an
    intent, default a :class:`~retrieval_node.agent.RetrievalAgent` on ``store`` with an authenticated
    caller reading up to ``confidential``. A failed retrieval (a :class:`RetrievalNodeError`) is a run
    with ``error`` set, scored as finding nothing; a malformed folder raises :class:`LabelledSetError`.
    """
    from .agent import RetrievalAgent

    t0 = time.perf_counter()
    labelled = folder if isinstance(folder, LabelledSet) else load_labelled_set(folder, agents=agents)
    unknown = [a for a in agents or () if a not in labelled.intents]
    if unknown:
        raise LabelledSetError(f"{labelled.root / 'intents.json'}: no entry for agent(s) {unknown}; its agents: {list(labelled.intents)}")
    specs = labelled.intents if agents is None else {a: labelled.intents[a] for a in labelled.intents if a in set(agents)}
    counts = prepare_store(store, labelled, progress=progress) if ingest else None
    trust = TrustContext(max_sensitivity=EVAL_MAX_SENSITIVITY, authenticated=True, actor_id="eval:labelled")
    agent = RetrievalAgent(store, trust=trust)
    run = retrieve or agent.retrieve_sync
    runs: list[RunScore] = []
    try:
        with _progress_bar(len(labelled.golds) * len(specs), progress) as advance:
            for deal_id, gold in labelled.golds.items():
                for name, spec in specs.items():
                    ig = gold.intents[spec.intent_id]
                    where = {"deal_id": deal_id, "agent": name, "intent_id": spec.intent_id, "budget": spec.budget}
                    try:
                        intent = agent.intent_for(name, deal_id=deal_id, stage=spec.stage, budget=spec.budget)
                        package, summary = run(intent)
                    except RetrievalNodeError as exc:
                        runs.append(failed_run(ig, **where, error=f"{type(exc).__name__}: {exc}"))
                    else:
                        runs.append(score_package(ig, package, summary, **where, pages=labelled.pages, tokens=store.tokens))
                    advance(f"{deal_id} {name}")
    finally:
        agent.close()
    by_agent = {name: ScoreTotals.of([r for r in runs if r.agent == name]) for name in specs}
    return LabelledReport(folder=str(labelled.root), store=str(store.home), runs=runs, by_agent=by_agent,
                          total=ScoreTotals.of(runs), elapsed_s=round(time.perf_counter() - t0, 1), ingest=counts)


__all__ = [
    "DealGold",
    "IngestCounts",
    "IntentGold",
    "IntentSpec",
    "LabelledReport",
    "LabelledSet",
    "LabelledSetError",
    "Retrieve",
    "RunScore",
    "ScoreTotals",
    "claims_material",
    "evaluate_labelled",
    "failed_run",
    "flagged_chunks",
    "load_labelled_set",
    "prepare_store",
    "score_package",
]
