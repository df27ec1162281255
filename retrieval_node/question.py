"""Question intents (issue 19): rank a deal's chunks for a free-text question.

``RetrievalAgent.ask(deal_id, question)`` builds a :class:`~retrieval_node.models.QuestionIntent`
(:func:`question_intent`) and runs it through the same :class:`~retrieval_node.pipeline.Pipeline` as every other
intent: admission, contract plan, trust gate, budgeted selection, finalize, explain, audit, snapshot and replay. Only
the *retrieve + rank* step differs; it is this stage's entry point, :meth:`QuestionStage.rank`:

1. **Parse** (:func:`parse_question`): the document description the question gives ("Consider X; ...", "In the X,
   ..."), the question itself with a generic lead-in
   ("What is the", "Information about the") dropped, the terms it quotes, and the glossary concepts it names
   (``configs/glossary.yaml``; a word of seven letters or more may be misspelt by one letter: "Interveining Event").
2. **Route** (:mod:`retrieval_node.routing`): among the documents this call may see, the ones an explicit
   description names; none named, or no description: the whole deal. Words naming a document's title, kind or year
   in passing only favour it (document evidence, below): a guess must not hide the rest of the deal. The phrases of
   the glossary concepts the question asks about name no document (:func:`without_concepts`: a question about a
   lien is not a question about the document called "lien copy").
3. **Score** the routed documents' chunks (every chunk the gate lets through): dense = best MiniLM window cosine
   through the chunk index; lexical = BM25 (bm25s, English stop words, a light plural/-ing/-ed stemmer) over each
   document's own chunks, so IDF is the document's ("confidential" is everywhere in an NDA and says nothing there),
   each chunk prefixed with the title of the section it sits in; a glossary concept mixes its pseudo-clauses into
   the dense score and its drafting terms into the lexical score; min-max normalised fusion (lexical weight 0.5);
   chunks defining a quoted term (“Knowledge” means ..., also “Company Knowledge” or “Knowledge of the Seller”: the
   term with up to three more words) gain ``DEFINE_BOOST``, and the chunks a long definition runs on into (until the
   next definition or a section heading starts, at most ``DEFINE_REACH``) gain ``DEFINE_CONTINUE`` x that boost;
   chunks the risk scan found material for one of a matched concept's ``risk_kinds`` gain the glossary's
   ``risk_boost`` (a levy the minutes plan without the words "special levy");
   chunks of the Stage-0 section types a matched concept is recorded in (its ``sections``: registrations in the
   title's instruments register, arrears on the tax certificate) gain the glossary's ``section_boost``, so the record
   that shows there is none is read too;
   chunks under a section title of a matched concept gain the glossary's ``heading_boost`` (an article's or section's
   title, or an annex's, exhibit's, schedule's or appendix's: a chunk that opens with a heading sits under it); a
   concept marked ``leads`` (the consequences of a breach) replaces the other concepts named; neighbour smoothing
   ``s_i + 0.4·max(s_{i-1}, s_{i+1})`` in reading order (answers run over consecutive chunks); table-of-contents
   chunks last; then **passage growth** (:func:`grow_passages`): the first ``GROW_DEPTH`` places are filled one at a
   time, and a chunk placed lifts each unplaced reading-order neighbour under the same section heading towards its
   own score (``s_j + GROW·(s_i − s_j)``): an answer runs on past the chunk that matched best, inside its section,
   before a weaker match elsewhere comes in (the best chunk keeps the first place). Unrouted, the same over the whole
   deal (dense top windows of the deal, deal-wide BM25, one normalisation unit), plus **document evidence**: a chunk
   gains ``DOCUMENT_WEIGHT`` x its document's match of the question's words in document names and of its proper
   nouns (parties, years) in document openings (:meth:`~retrieval_node.routing.DocumentRouter.evidence`, 0..1), so a
   question naming "the 2024 reserve fund study" in passing, or "the NDA between CopAcc and ToP Mentors" when
   routing is off, favours that document's chunks (a clause chunk never repeats the parties); noted as
   ``question_favoured``.
4. The ranked :class:`~retrieval_node.values.Scored` list goes to the packager like any other: a question's chunks
   carry no risk kinds while they are selected (the package is filled by relevance, not risk first);
   :meth:`QuestionStage.annotate` then screens what was packed, so the package's risk summary still reports any
   material risk it holds.

Reading order is (document, pages, chunk id): a Stage 0 that cuts a page into several chunks should give each its
own page range for the smoothing to see true neighbours (the LegalBench runner numbers its chunks as pages).
"""

from __future__ import annotations

import bisect
import difflib
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .cache import BoundedCache
from .config import Glossary, NodeConfig
from .contracts import ContractSet
from .deals import DealView, Gate
from .errors import ContractViolation
from .models import QuestionIntent, RiskProfile, SectionType, Stage, TrustContext
from .ports import SearchScope
from .precompute import risk_settings
from .retrieve import SegmentAwareRetriever
from .routing import DocumentDescription, DocumentRouter, split_hint
from .values import ChunkView, Scored, ScoreTerms, Selection

#: ``intent_id`` of every question (the question itself is the intent's ``query_text``).
QUESTION_INTENT_ID = "question_v1"
#: The contract (and ``agent_id``) of a question from a caller bound to no agent (configs/contracts.yaml).
QUESTIONS_AGENT = "questions"
#: Package budget of a question when the caller gives none (cl100k tokens).
DEFAULT_QUESTION_BUDGET = 2000
#: Share of BM25 in the fused score (the rest is the dense similarity); both min-max normalised per document.
LEXICAL_WEIGHT = 0.5
#: Neighbour smoothing λ.
SMOOTH = 0.4
#: Passage growth: a placed chunk lifts an unplaced neighbour in its section this share of the way to its own score ...
GROW = 0.4
#: ... while the first this many places are filled (a 2k-token package holds ~16 chunks of 500 characters).
GROW_DEPTH = 32
#: Added to the fused score of a chunk that defines a term the question quotes.
DEFINE_BOOST = 1.0
#: A long definition: the chunks it runs on into gain this share of ``DEFINE_BOOST`` (at most ``DEFINE_REACH`` of them).
DEFINE_CONTINUE = 0.8
DEFINE_REACH = 15
#: Unrouted: added to every chunk of a document x the question's evidence for that document (0..1).
DOCUMENT_WEIGHT = 1.0
#: Dense windows fetched for an unrouted question (the rest of the deal's chunks count as least similar).
UNROUTED_WINDOWS = 400
#: Chunks a ranking returns at most (best first): more than any budget packs (200k tokens are ~1,500 chunks of ~130).
MAX_RANKED = 2000
#: Characters of a document's opening the router reads (title, parties).
HEAD_CHARS = 2000
#: Deal indexes kept per stage (deal + ingest generation).
DEAL_INDEXES = 16

# --------------------------------------------------------------------------- text


_SUFFIXES = (("sses", "ss"), ("ies", "y"), ("ing", ""), ("ed", ""), ("s", ""))


def light_stem(words: list[str]) -> list[str]:
    """Plural and -ing/-ed stripping (no dependency): 'obligations' -> 'obligation', 'disclosed' -> 'disclos'."""
    out = []
    for w in words:
        for suf, rep in _SUFFIXES:
            if w.endswith(suf) and len(w) - len(suf) >= 3 and not (suf == "s" and w.endswith(("ss", "us", "is"))):
                w = w[: len(w) - len(suf)] + rep
                break
        out.append(w)
    return out


def _tokenize(texts: list[str] | str, *, return_ids: bool = True) -> Any:
    import bm25s

    return bm25s.tokenize(texts, stopwords="en", stemmer=light_stem, return_ids=return_ids, show_progress=False)


class LexicalIndex:
    """Stemmed BM25 (Lucene variant, k1 1.2, b 0.75) over a fixed list of texts."""

    def __init__(self, texts: Sequence[str]) -> None:
        import bm25s

        self.n = len(texts)
        self._tok = _tokenize(list(texts)) if texts else None
        self._model = bm25s.BM25(k1=1.2, b=0.75)
        if self._tok is not None:
            self._model.index(self._tok, show_progress=False)

    def scores(self, query: str) -> np.ndarray:
        if not self.n or self._tok is None:
            return np.zeros(self.n)
        q = [t for t in _tokenize(query, return_ids=False)[0] if t in self._tok.vocab]
        if not q:
            return np.zeros(self.n)
        return np.asarray(self._model.get_scores(q), dtype=np.float64)


def minmax(x: np.ndarray) -> np.ndarray:
    if x.size == 0:
        return x
    lo, hi = float(x.min()), float(x.max())
    return (x - lo) / (hi - lo) if hi > lo else np.zeros_like(x)


_HEADING = re.compile(r"(?:Section|SECTION|ARTICLE|Article)\s+[\dIVX]+(?:\.\d+)*\.?\s+([A-Z“\"][^\n]{2,120}?)(?:\.\s|\n|\s{3,})")
_ARTICLE = re.compile(r"(?:(?:ARTICLE|Article)\s+[\dIVX]+\.?\s+|(?:^|\n)[ \t]*\d{1,2}\.[ \t]+)([A-Z“\"][^\n]{2,120}?)(?:\.\s|\n|\s{3,})")
#: An annex, exhibit, schedule or appendix title on a line of its own (at a line start or after a column gap): a letter,
#: a roman or a one- or two-digit number, then the title up to the line's end or a column gap ("SCHEDULE B CONDITIONS OF
#: SALE", 'Schedule "A" – Legal Description'); "Exhibit 10.1", "SCHEDULE OF EXCEPTIONS" and "... IN SCHEDULE C THE ..."
#: in running text open nothing
_ANNEX = re.compile(
    r"(?:^|(?<=\n)|(?<=[ \t]{3}))[ \t]*(?:ANNEX|EXHIBIT|SCHEDULE|APPENDIX|Annex|Exhibit|Schedule|Appendix)[ \t]+"
    r"[\"'“‘]?(?:[A-Z]|[IVX]{1,4}|\d{1,2})[\"'”’]?(?![\w.])[ \t]*[-–—:.]?[ \t]*\n?[ \t]*"
    r"([A-Z“\"][^\n]{2,120}?)[ \t]*(?:\n|[ \t]{3,}|$)"
)
_SECTION = re.compile(r"(?:(?:Section|SECTION)\s+|(?:^|\n|[ \t]{3,})[ \t]*)(\d{1,2}\.\d{1,2}[a-z]?)\.?[ \t]+([A-Z“\"][^\n.]{2,100}?)(?:\.\s|\n|[ \t]{3,})")
_SMALL_WORDS = {"a", "an", "and", "as", "at", "by", "for", "from", "in", "of", "on", "or", "the", "to", "with", "upon", "under", "pending", "prior"}


def section_headings(text: str, starts: Sequence[int]) -> list[str]:
    """For each chunk start, the title of the last "Section/Article <number> <Title>" heading at or before it."""
    found = [(m.start(), m.group(1)) for m in _HEADING.finditer(text)]
    pos = [p for p, _t in found]
    out = []
    for s in starts:
        i = bisect.bisect_right(pos, s) - 1
        out.append(found[i][1] if i >= 0 else "")
    return out


def _title_like(title: str) -> bool:
    """Headings are title case ("Conduct of Business Pending the Merger"); running text is not."""
    if re.search(r"\d|\bmeans?\b|\bshall\b|\bmeaning\b", title):
        return False
    words = [w for w in re.findall(r"[A-Za-z][A-Za-z’'\-]*", title) if w.lower() not in _SMALL_WORDS]
    return bool(words) and len(words) <= 12 and sum(w[0].isupper() for w in words) >= 0.75 * len(words)


def _skip_space(text: str, i: int) -> int:
    while i < len(text) and text[i].isspace():
        i += 1
    return i


def _annexes(text: str) -> list[tuple[int, str]]:
    """(position, title) of each annex, exhibit, schedule or appendix title, the first time it appears: a title
    repeated at the top of every page is a running header, not a new part."""
    seen: set[str] = set()
    out = []
    for m in _ANNEX.finditer(text):
        title = m.group(1).strip()
        head = " ".join(m.group(0).split()).lower()
        if _title_like(title) and head not in seen:
            seen.add(head)
            out.append((_skip_space(text, m.start()), title))
    return out


def heading_paths(text: str, starts: Sequence[int]) -> list[str]:
    """For each chunk start, "<article title> / <section title>" of the title-case headings at or before it (an annex,
    exhibit, schedule or appendix title counts as an article's; a chunk that opens with a heading, after any
    whitespace, sits under it)."""
    arts = sorted([(m.start(), m.group(1).strip()) for m in _ARTICLE.finditer(text) if _title_like(m.group(1))] + _annexes(text))
    # a section starts where its heading's text starts (the match may begin on the whitespace before it): a chunk that
    # opens with "Section 6.2 Filings." sits under 6.2, not under the section before it
    secs = [(_skip_space(text, m.start()), m.group(2).strip()) for m in _SECTION.finditer(text) if _title_like(m.group(2))]
    apos = [p for p, _t in arts]
    spos = [p for p, _t in secs]
    out = []
    for s in starts:
        s = _skip_space(text, s)
        i = bisect.bisect_right(apos, s) - 1
        j = bisect.bisect_right(spos, s) - 1
        art = arts[i] if i >= 0 else (-1, "")
        sec = secs[j] if j >= 0 and secs[j][0] >= art[0] else (-1, "")
        out.append(f"{art[1]} / {sec[1]}" if art[1] or sec[1] else "")
    return out


_TOC_REF = re.compile(r"(?:Section|SECTION|ARTICLE|Article)\s+[\dIVX]+(?:\.\d+)*")
_PAGE_NO = re.compile(r"\s\d{1,3}\s")


def toc_like(content: str) -> bool:
    """Four or more section references and three or more bare page numbers: a table of contents."""
    return len(_TOC_REF.findall(content)) >= 4 and len(_PAGE_NO.findall(content)) >= 3


_LEAD_IN = re.compile(
    r"^\s*(?:i want information about|information about|what (?:is|are)|where is|what happens during|is there|what about)\s+(?:the|a|an)?\s*",
    re.IGNORECASE,
)


def clean_question(question: str) -> str:
    """The question without a generic lead-in; unchanged when nothing would remain."""
    out = _LEAD_IN.sub("", question).strip()
    return out or question


_QUOTED = re.compile(r"[\"“”]([^\"“”]{2,80})[\"“”]")
_DEFINES = re.compile(
    r"[“\"]([^\"“”]{2,100})[”\"][^.;:“\"]{0,80}?\b(?:means|mean|shall mean|has the meaning|shall have the meaning|have the meanings?|is defined|refers to)\b",
    re.IGNORECASE,
)


_ENUM = re.compile(r"\(\s*[a-zA-Z0-9]{1,5}\s*\)|\b[a-z0-9]{1,4}\.(?=\s)")


def quoted_terms(question: str) -> tuple[str, ...]:
    """Terms the question puts in quotes: 'What is the Definition of "Knowledge"' -> ('knowledge',)."""
    return tuple(" ".join(t.lower().split()) for t in _QUOTED.findall(question))


def _same_term(defined: str, asked: str) -> bool:
    defined = " ".join(defined.lower().split())
    if defined == asked or defined.endswith(" " + asked):  # "company material adverse effect" defines "material adverse effect"
        return True
    if f" {asked} " in f" {defined} " and len(defined.split()) - len(asked.split()) <= 3:  # "... effect on the company"
        return True
    return difflib.SequenceMatcher(None, defined, asked).ratio() >= 0.85  # a misspelt question ("interveining")


def _norm_phrase(text: str) -> str:
    return " " + " ".join(re.findall(r"[a-z0-9]+", text.lower().replace("’", "'").replace("'s", ""))) + " "


def _same_word(asked: str, written: str) -> bool:
    """Equal, or a misspelling of a long word: one letter added, dropped or changed ("interveining" for "intervening")."""
    if asked == written:
        return True
    if min(len(asked), len(written)) < 7 or abs(len(asked) - len(written)) > 1 or asked[0] != written[0]:
        return False
    return difflib.SequenceMatcher(None, asked, written).ratio() >= 0.9


def _phrase_at(words: list[str], phrase: str) -> list[tuple[int, int]]:
    """(first word, end word) of each place ``phrase`` stands in ``words`` (whole words; long words may be misspelt)."""
    p = _norm_phrase(phrase).split()
    if not p:
        return []
    return [(i, i + len(p)) for i in range(len(words) - len(p) + 1)
            if all(_same_word(w, x) for w, x in zip(words[i:i + len(p)], p, strict=True))]


def match_concepts(question: str, glossary: Glossary) -> tuple[str, ...]:
    """Glossary concepts the question names (a ``match`` phrase as whole words, case, quotes and hyphens ignored; a
    word of seven letters or more may be misspelt by one letter; a concept with ``requires`` also needs one of those
    phrases in the question); where two matched phrases overlap, the longer wins. A concept marked ``leads`` (it asks
    about another: what follows a breach of it) replaces the others named: the answer is drafted in its language and
    sits under its headings, and the question's own words still name the clause asked about."""
    return _concept_names(_concept_hits(question, glossary), glossary)


def _concept_names(hits: list[tuple[int, int, str, bool]], glossary: Glossary) -> tuple[str, ...]:
    names = tuple(dict.fromkeys(name for _s, _e, name, asked in hits if asked))
    return tuple(n for n in names if glossary.concepts[n].leads) or names


#: Words that set a concept aside: "other than the seller's mortgage, is anything registered?" does not ask about
#: the mortgage; "on top of the monthly fees" does not ask about the fees.
SET_ASIDE = ("other than", "apart from", "aside from", "besides", "except", "except for", "excluding", "not counting",
             "leaving aside", "on top of", "in addition to", "beyond")
#: Words between a set-aside cue and the concept it sets aside ("other than [the seller's] mortgage").
SET_ASIDE_GAP = 3
#: Words that name a baseline, not where the answer is: "registered since the November 2025 search" asks about the
#: searches after it. The noun phrase after one (or after a :data:`SET_ASIDE` cue) names no document.
BASELINE = ("since",)
_CLAUSE_END = re.compile(r"[,;:?!.]")
#: Words that end the baseline's noun phrase ("besides the seller's mortgage | that must be cleared from title").
_PHRASE_END = frozenset("that which who whom whose is are was were has have had must should will would can could may "
                        "shall does do did and but or".split())


def _concept_hits(question: str, glossary: Glossary) -> list[tuple[int, int, str, bool]]:
    """(first word, end word, concept, asked) of each concept phrase :func:`match_concepts` finds, in question order
    (words as :func:`_norm_phrase` splits them); ``asked`` is False for a concept set aside by one of
    :data:`SET_ASIDE` at most :data:`SET_ASIDE_GAP` words before it (it names no document either)."""
    words = _norm_phrase(question).split()
    hits: list[tuple[int, int, str]] = []  # (first word, end word, concept)
    for name, concept in glossary.concepts.items():
        found = [(i, j, name) for phrase in concept.match for i, j in _phrase_at(words, phrase)]
        if found and concept.requires and not any(_phrase_at(words, r) for r in concept.requires):
            continue  # the question names the concept's cue but not what the concept is about
        hits.extend(found)
    hits.sort(key=lambda h: (-(h[1] - h[0]), h[0]))
    kept: list[tuple[int, int, str]] = []
    for h in hits:
        if all(h[1] <= k[0] or h[0] >= k[1] for k in kept):
            kept.append(h)
    cue_ends = {j for cue in SET_ASIDE for _i, j in _phrase_at(words, cue)}
    return [(i, j, name, not any(i - SET_ASIDE_GAP <= e <= i for e in cue_ends)) for i, j, name in sorted(kept)]


def without_concepts(question: str, glossary: Glossary | None) -> str:
    """The question's words without the glossary phrases it names, case kept: what the document evidence of a question
    with no explicit document description reads. Its subject is not a document's name: "is there a builders' lien
    against the unit?" asks about a lien, wherever the deal shows one, not about the document called "lien copy"."""
    return question if glossary is None else _without(question, _concept_hits(question, glossary))


def _without(question: str, hits: list[tuple[int, int, str, bool]]) -> str:
    """``question`` without the words of ``hits`` (:func:`_concept_hits` of it) and the noun phrase after a set-aside
    or baseline cue (up to a punctuation mark, a relative pronoun, a verb such as "is" / "was" / "must", or "and"),
    case kept."""
    text = question.replace("’", "'").replace("'s", "").replace("'S", "")
    spans = [(m.start(), m.end()) for m in re.finditer(r"[A-Za-z0-9]+", text)]
    tokens = [text[a:b] for a, b in spans]
    words = [t.lower() for t in tokens]
    if words != _norm_phrase(question).split():
        return question  # a spelling the two splits read differently: the whole question counts
    dropped = {k for i, j, _n, _asked in hits for k in range(i, j)}
    for cue in (*SET_ASIDE, *BASELINE):  # "since the listing search", "other than the lien copy": not where to look
        for _i, j in _phrase_at(words, cue):
            for k in range(j, len(tokens)):
                if words[k] in _PHRASE_END or (k > j and _CLAUSE_END.search(text[spans[k - 1][1]:spans[k][0]])):
                    break  # the noun phrase ends at a verb, a relative pronoun or a punctuation mark
                dropped.add(k)
    return " ".join(t for k, t in enumerate(tokens) if k not in dropped)


# --------------------------------------------------------------------------- intents


def question_intent(question: str, *, deal_id: str, trust: TrustContext, config: NodeConfig, stage: Stage | str = Stage.DILIGENCE,
                    budget: int | None = None) -> QuestionIntent:
    """The intent of a question: under the contract of the caller's agent (``trust.agent_id``), else the
    ``questions`` contract; its target sections are every section that contract allows in ``stage``.

    A caller bound to an agent asks as that agent: its contract's walls apply to the question exactly as to its
    profile's intents, so a question never widens what the agent may see. Raises
    :class:`~retrieval_node.errors.ContractViolation` when no contract applies or it allows nothing in ``stage``.
    """
    stage = Stage(stage)
    agent_id = trust.agent_id or QUESTIONS_AGENT
    name = next((n for n, p in config.agents.items() if p.agent_id == agent_id), agent_id)
    contracts: ContractSet | None = config.contracts
    contract = None if contracts is None else contracts.contracts.get(name)
    if contract is None:
        raise ContractViolation(f"no retrieval contract {name!r} in configs/contracts.yaml for questions of agent {agent_id!r}; nothing is retrieved without one")
    rule = contract.rule_for(stage)
    sections = [s for s in (rule.allowed_sections or list(SectionType)) if s not in set(rule.forbidden_sections)]
    if not sections:
        raise ContractViolation(f"the contract {name!r} allows no section in stage {stage.value}")
    return QuestionIntent(
        intent_id=QUESTION_INTENT_ID, deal_id=deal_id, agent_id=agent_id, query_text=question, target_section_types=sections,
        risk_profile=RiskProfile.BALANCED, max_tokens_budget=budget if budget is not None else DEFAULT_QUESTION_BUDGET, stage=stage,
    )


@dataclass(frozen=True, slots=True)
class ParsedQuestion:
    """A question taken apart for ranking."""

    text: str                    # as asked
    hint: str                    # the document description ('' when none is given explicitly)
    explicit: bool               # the description came from an explicit form ("Consider X;", "In the X,")
    body: str                    # what the chunks are ranked by: the question, lead-in dropped
    terms: tuple[str, ...]       # quoted terms (definitions are boosted)
    concepts: tuple[str, ...]    # glossary concepts named (a leading one alone)
    subject_free: str | None = None  # the question without the glossary phrases it names (its document evidence when
    #                                  no description is given; None: an explicit description routes it)


def parse_question(text: str, glossary: Glossary | None = None, *, clean: bool = True) -> ParsedQuestion:
    hint, rest = split_hint(text)
    body = clean_question(rest) if clean else rest
    hits = _concept_hits(rest, glossary) if glossary is not None else []  # once: the names and the evidence come from them
    return ParsedQuestion(text=text, hint=hint, explicit=bool(hint), body=body, terms=quoted_terms(rest),
                          concepts=_concept_names(hits, glossary) if glossary is not None else (),
                          subject_free=None if hint else _without(rest, hits))  # an explicit description routes itself


# --------------------------------------------------------------------------- per-deal index


@dataclass(slots=True)
class _Doc:
    """One document of a deal, its chunks in reading order, what the ranking reads of them."""

    document_id: str
    role: str
    chunks: list[ChunkView]
    headings: list[str]
    paths: list[str]
    toc: np.ndarray
    _lexical: LexicalIndex | None = None
    _heading_hits: dict[tuple[str, ...], np.ndarray] = field(default_factory=dict)
    _section_hits: dict[tuple[str, ...], np.ndarray] = field(default_factory=dict)
    _definitions: dict[Any, np.ndarray] = field(default_factory=dict)

    def lexical(self) -> LexicalIndex:
        if self._lexical is None:  # built on first use (a routed question reads one document)
            self._lexical = LexicalIndex([f"{h} {c.content}" if h else c.content for h, c in zip(self.headings, self.chunks, strict=True)])
        return self._lexical

    def definitions(self, terms: tuple[str, ...], cont: float, reach: int) -> np.ndarray:
        """1 for a chunk that defines one of ``terms``, ``cont`` for the chunks the definition runs on into (up to
        ``reach`` of them, until another definition or a section heading starts), else 0."""
        key = (terms, cont, reach)
        hit = self._definitions.get(key)
        if hit is not None:
            return hit
        n = len(self.chunks)
        hit = np.zeros(n)
        for j, c in enumerate(self.chunks):
            starts = [(m.start(), m.group(1)) for m in _DEFINES.finditer(c.content)]
            own = [p for p, t in starts if any(_same_term(t, x) for x in terms)]
            if not own:
                continue
            hit[j] = 1.0
            if not cont or any(p > own[0] for p, _t in starts) or _HEADING.search(c.content, own[0]):
                continue  # the definition ends inside this chunk
            for k in range(j + 1, min(n, j + 1 + reach)):
                nxt = self.chunks[k].content
                first = min([m.start() for m in _DEFINES.finditer(nxt)] + [m.start() for m in _HEADING.finditer(nxt)], default=len(nxt))
                if len(_ENUM.sub("", nxt[:first]).strip()) < 20:
                    break  # the next definition (or section) starts here
                hit[k] = max(hit[k], cont)
                if first < len(nxt):
                    break
        self._definitions[key] = hit
        return hit

    def heading_hits(self, words: tuple[str, ...]) -> np.ndarray:
        hit = self._heading_hits.get(words)
        if hit is None:
            pat = re.compile("|".join(re.escape(w) for w in words), re.IGNORECASE) if words else None
            hit = self._heading_hits[words] = np.array([bool(pat and p and pat.search(p)) for p in self.paths], dtype=np.float64)
        return hit

    def section_hits(self, sections: tuple[str, ...]) -> np.ndarray:
        """1 for a chunk whose Stage-0 section type is one of ``sections``, else 0 (memoised like the headings)."""
        hit = self._section_hits.get(sections)
        if hit is None:
            hit = self._section_hits[sections] = np.array([c.section_type in sections for c in self.chunks], dtype=np.float64)
        return hit


class _DealIndex:
    """Every document of one deal view (built once per ingest generation), a deal-wide BM25 and routers per gate."""

    def __init__(self, view: DealView) -> None:
        by_doc: dict[str, list[ChunkView]] = {}
        for c in view.chunks.values():
            by_doc.setdefault(c.document_id, []).append(c)
        self.docs: dict[str, _Doc] = {}
        for doc_id in sorted(by_doc):
            chunks = sorted(by_doc[doc_id], key=lambda c: c.reading_key)
            starts, parts, pos = [], [], 0
            for i, c in enumerate(chunks):
                sep = "" if i == 0 or parts[-1][-1:].isspace() or c.content[:1].isspace() else "\n"
                pos += len(sep)
                starts.append(pos)
                parts.append(sep + c.content if sep else c.content)
                pos += len(c.content)
            text = "".join(parts)
            self.docs[doc_id] = _Doc(doc_id, chunks[0].document_role, chunks, section_headings(text, starts), heading_paths(text, starts),
                                     np.array([toc_like(c.content) for c in chunks], dtype=bool))
        self.flat: list[tuple[str, int]] = [(d, i) for d, doc in self.docs.items() for i in range(len(doc.chunks))]
        self._corpus: LexicalIndex | None = None
        self.routers: BoundedCache[Any, tuple[DocumentRouter, list[str]]] = BoundedCache(32)
        self.visible: BoundedCache[Any, dict[str, list[int]]] = BoundedCache(32)
        self.positions = {key: k for k, key in enumerate(self.flat)}
        self.lock = threading.Lock()

    def corpus_lexical(self) -> LexicalIndex:
        with self.lock:
            if self._corpus is None:
                self._corpus = LexicalIndex([f"{self.docs[d].headings[i]} {self.docs[d].chunks[i].content}" for d, i in self.flat])
            return self._corpus


def _year(chunk: ChunkView) -> str:
    return (chunk.document_created_at or "")[:4] if (chunk.document_created_at or "")[:4].isdigit() else ""


# --------------------------------------------------------------------------- the stage


@dataclass(slots=True)
class QuestionResult:
    """The ranked chunks of one question, and how they were found."""

    scored: list[Scored]                 # best first
    routed: list[str]                    # document ids searched ([] = the whole deal)
    notes: list[str]
    timings_ms: dict[str, float]


@dataclass(frozen=True, slots=True)
class QuestionSettings:
    """The ranking's knobs (the defaults are the module constants; the LegalBench runner's ablations change them)."""

    lexical_weight: float = LEXICAL_WEIGHT
    smooth: float = SMOOTH
    define_boost: float = DEFINE_BOOST
    toc_last: bool = True
    routing: bool = True
    glossary: bool = True
    clean: bool = True
    define_continue: float = 0.8
    document_weight: float = DOCUMENT_WEIGHT
    define_reach: int = 15
    unrouted_windows: int = UNROUTED_WINDOWS
    max_ranked: int = MAX_RANKED
    grow: float = GROW
    grow_depth: int = GROW_DEPTH


class QuestionStage:
    """Parse, route and rank one question over a deal view, through the call's gate.

    >>> stage = QuestionStage(store, store.config, retriever, query_vector)             # doctest: +SKIP
    >>> result = stage.rank(stage.parse("In the lender's instructions, when are funds released?"), view=view,
    ...                     gate=gate, query_vector=vec)                                 # doctest: +SKIP
    """

    def __init__(self, config: NodeConfig, retriever: SegmentAwareRetriever, query_vector: Callable[[str], np.ndarray],
                 settings: QuestionSettings | None = None) -> None:
        self.config = config
        self.retriever = retriever
        self.query_vector = query_vector
        self.settings = settings or QuestionSettings()
        self._deals: BoundedCache[tuple[str, int, float], _DealIndex] = BoundedCache(DEAL_INDEXES)
        self._lock = threading.Lock()
        self._risk_keys: tuple[str, ...] | None = None  # the stored risk settings (the configured profiles')

    def parse(self, text: str) -> ParsedQuestion:
        """The question taken apart; with routing off, a document description stays part of what is ranked by."""
        q = parse_question(text, self.config.glossary if self.settings.glossary else None, clean=self.settings.clean)
        if not self.settings.routing and q.hint:
            return ParsedQuestion(text=q.text, hint="", explicit=False, body=f"{q.hint} {q.body}", terms=q.terms, concepts=q.concepts,
                                  subject_free=q.subject_free)
        return q

    def forget(self, view: DealView) -> None:
        """Drop the question index built over ``view`` (the view left the deal cache)."""
        self._deals.pop((view.deal_id, view.generation, view.loaded_at))

    def _index(self, view: DealView) -> _DealIndex:
        key = (view.deal_id, view.generation, view.loaded_at)
        with self._lock:
            return self._deals.get_or_build(key, lambda: _DealIndex(view))

    def _router(self, index: _DealIndex, gate: Gate, visible: dict[str, list[int]]) -> tuple[DocumentRouter, list[str]]:
        """A router over the documents this gate lets the caller see (their heads from visible chunks only)."""
        def build() -> tuple[DocumentRouter, list[str]]:
            descs = []
            for doc_id, pos in visible.items():
                doc = index.docs[doc_id]
                head, n = [], 0
                for i in pos:
                    if n >= HEAD_CHARS:
                        break
                    head.append(doc.chunks[i].content)
                    n += len(doc.chunks[i].content)
                descs.append(DocumentDescription(doc_id, doc.role, _year(doc.chunks[pos[0]]), "".join(head)[:HEAD_CHARS]))
            return DocumentRouter(descs, head_chars=HEAD_CHARS), [d.document_id for d in descs]

        return index.routers.get_or_build((gate.key, gate.as_of), build)

    def rank(self, q: ParsedQuestion, *, view: DealView, gate: Gate, query_vector: np.ndarray) -> QuestionResult:
        """The chunks of the routed documents (or of the deal) that the gate lets through, best first (at most ``max_ranked``)."""
        import time

        st = self.settings
        timings: dict[str, float] = {}
        t0 = time.perf_counter()
        index = self._index(view)

        def eligible() -> dict[str, list[int]]:
            out: dict[str, list[int]] = {}
            for doc_id, doc in index.docs.items():
                pos = [i for i, c in enumerate(doc.chunks) if gate.eligible(c) and gate.in_time(c)]
                if pos:
                    out[doc_id] = pos
            return out

        visible = index.visible.get_or_build((gate.key, gate.as_of), eligible)  # per gate: what this caller may see
        timings["structural_ms"] = (time.perf_counter() - t0) * 1000
        if not visible:  # the gate lets no chunk of the deal through: nothing to rank (the pipeline reports no_chunks)
            timings.update(routing_ms=0.0, vector_ms=0.0, ranking_ms=0.0)
            return QuestionResult([], [], [], timings)
        notes: list[str] = []
        routed: list[str] = []
        t1 = time.perf_counter()
        if st.routing and q.explicit:  # only a description the caller gave routes ("In the lender's instructions, ...")
            router, _ids = self._router(index, gate, visible)
            routed = router.route(q.hint)
            if routed:
                notes.append(f"question_routed: to {', '.join(routed)} (named by {q.hint!r})")
            else:
                notes.append(f"question_not_routed: no document of the deal matches {q.hint!r}; searched every document")
        prior: dict[str, float] = {}
        if not routed and st.document_weight > 0:  # unrouted: the documents the question's names point at, as soft evidence
            router, ids_ = self._router(index, gate, visible)
            # a question's subject is not a document's name (a question about a lien is not about the "lien copy")
            text = q.text if not st.routing else (q.hint or (q.text if q.subject_free is None else q.subject_free))
            prior = dict(zip(ids_, router.evidence(text).tolist(), strict=True))
            favoured = sorted(d for d, v in prior.items() if v >= 1.0)
            if favoured and len(favoured) < len(prior):
                notes.append(f"question_favoured: {', '.join(favoured)} (named in passing by {' '.join(text.split())!r}: "
                             "the question's words outside its subject and baselines; the rest of the deal still searched)")
        timings["routing_ms"] = (time.perf_counter() - t1) * 1000
        concepts = [self.config.glossary.concepts[c] for c in q.concepts]
        if concepts:
            notes.append(f"question_glossary: {', '.join(q.concepts)}")
        t2 = time.perf_counter()
        docs = routed or list(visible)
        segments = [(d, visible[d]) for d in docs]
        ids = [index.docs[d].chunks[i].chunk_id for d, pos in segments for i in pos]
        clause_texts = [t for c in concepts for t in c.clauses] if self.config.glossary.clause_weight > 0 else []
        vectors = [query_vector] + [self.query_vector(t) for t in clause_texts]
        if routed:
            limit = min(10_000, sum(_windows(index.docs[d].chunks[i], self.config) for d, pos in segments for i in pos))
            scope = SearchScope(deal_id=view.deal_id, chunk_ids=tuple(ids))
        else:
            limit = st.unrouted_windows
            scope = SearchScope(deal_id=view.deal_id)
        hits = self.retriever.dense_hits_many(view, [(v, scope, limit) for v in vectors])
        where = {cid: k for k, cid in enumerate(ids)}
        dense_all = []
        for res in hits:
            d = np.full(len(ids), np.nan)
            for cid, _w, score in res:
                k = where.get(cid)
                if k is not None and not score <= d[k]:
                    d[k] = score
            floor = np.nanmin(d) - 1e-3 if np.any(~np.isnan(d)) else 0.0
            dense_all.append(np.where(np.isnan(d), floor, d))
        timings["vector_ms"] = (time.perf_counter() - t2) * 1000

        t3 = time.perf_counter()
        cosine = dense_all[0]
        dense = cosine
        g = self.config.glossary
        if len(dense_all) > 1:
            dense = (1 - g.clause_weight) * cosine + g.clause_weight * np.max(np.vstack(dense_all[1:]), axis=0)
        terms_text = " ".join(c.terms for c in concepts)
        headings = tuple(sorted({h.lower() for c in concepts for h in c.headings}))
        offsets = np.cumsum([0] + [len(p) for _d, p in segments])
        lexical = np.zeros(len(ids))
        if routed:
            for (d, pos), a, b in zip(segments, offsets[:-1], offsets[1:], strict=True):
                lexical[a:b] = self._lexical(index.docs[d].lexical(), q.body, terms_text, pos)
        else:
            rows = [index.positions[(d, i)] for d, pos in segments for i in pos]
            lexical = self._lexical(index.corpus_lexical(), q.body, terms_text, rows)
        heads = np.concatenate([index.docs[d].heading_hits(headings)[pos] for d, pos in segments]) if headings and g.heading_boost else None
        asked_kinds = frozenset(k for c in concepts for k in c.risk_kinds)
        risky = None
        if asked_kinds and g.risk_boost:  # the chunks the risk scan found material for a kind the question asks about
            if self._risk_keys is None:
                self._risk_keys = tuple(sorted({setting.key for setting in risk_settings(self.config)}))
            found = view.material_kinds(self._risk_keys)
            hit = {cid for cid, kinds in found.items() if kinds & asked_kinds}
            risky = np.array([cid in hit for cid in ids], dtype=np.float64)
            if risky.any():
                notes.append(f"question_risk: {int(risky.sum())} chunk(s) material for {', '.join(sorted(asked_kinds))}")
        recorded = tuple(sorted({x.value for c in concepts for x in c.sections}))
        # the sections such a matter is recorded in (the register that shows none too)
        in_record = np.concatenate([index.docs[d].section_hits(recorded)[pos] for d, pos in segments]) \
            if recorded and g.section_boost else None
        toc = np.concatenate([index.docs[d].toc[pos] for d, pos in segments])
        defining = np.concatenate([index.docs[d].definitions(q.terms, st.define_continue, st.define_reach)[pos] for d, pos in segments]) \
            if q.terms and st.define_boost else None
        prior_arr = np.concatenate([np.full(len(pos), prior.get(d, 0.0)) for d, pos in segments]) if prior and any(prior.values()) else None
        # one normalisation unit per routed document; the whole pool when unrouted (BM25 is deal-wide then)
        units = list(zip(offsets[:-1], offsets[1:], strict=True)) if routed else [(0, len(ids))]
        final = np.zeros(len(ids))
        fused_all = np.zeros(len(ids))
        lex_norm = np.zeros(len(ids))
        for a, b in units:
            lex_norm[a:b] = minmax(lexical[a:b])
            fused = (1 - st.lexical_weight) * minmax(dense[a:b]) + st.lexical_weight * lex_norm[a:b]
            if defining is not None:
                fused = fused + st.define_boost * defining[a:b]
            if heads is not None:
                fused = fused + g.heading_boost * heads[a:b]
            if risky is not None:
                fused = fused + g.risk_boost * risky[a:b]
            if in_record is not None:
                fused = fused + g.section_boost * in_record[a:b]
            if prior_arr is not None:
                fused = fused + st.document_weight * prior_arr[a:b]
            fused_all[a:b] = fused
            final[a:b] = _smooth(fused, st.smooth, [x - a for x in offsets if a < x < b])
        if st.toc_last:
            final = np.where(toc, -1.0 + 0.001 * final, final)
        flat = [(d, i) for d, pos in segments for i in pos]
        if st.grow and st.grow_depth:
            sections = [index.docs[d].paths[i] for d, i in flat]
            final = grow_passages(final, [x for x in offsets[1:-1]], sections, toc, lift=st.grow, depth=st.grow_depth)
        combined = _unit(final)
        order = np.lexsort((np.arange(len(ids)), -final))[: st.max_ranked]
        scored = []
        for k in order:
            d, i = flat[k]
            terms = ScoreTerms(dense=float(max(0.0, min(1.0, cosine[k]))), lexical=float(lex_norm[k]), semantic=float(fused_all[k]),
                               combined=float(combined[k]))
            scored.append(Scored(chunk=index.docs[d].chunks[i], terms=terms, origin="question"))
        timings["ranking_ms"] = (time.perf_counter() - t3) * 1000
        return QuestionResult(scored, routed, notes, timings)

    def _lexical(self, lex: LexicalIndex, body: str, terms_text: str, rows: Sequence[int]) -> np.ndarray:
        """BM25 of the question over ``rows``; mixed with BM25 of a matched concept's drafting terms (``term_weight``)."""
        s = lex.scores(body)[list(rows)]
        tw = self.config.glossary.term_weight
        if terms_text and tw > 0:
            return (1 - tw) * minmax(s) + tw * minmax(lex.scores(terms_text)[list(rows)])
        return s

    def annotate(self, sel: Selection, screen: Callable[[ChunkView], Any]) -> None:
        """Screen the packed chunks for material risk (``screen(chunk)`` gives a :class:`~retrieval_node.risk.RiskSignal`),
        so the package's risk summary reports what it holds; selection is already done."""
        for s in sel.chosen.values():
            sig = screen(s.chunk)
            if sig.material:
                s.terms = ScoreTerms(dense=s.terms.dense, lexical=s.terms.lexical, semantic=s.terms.semantic, risk=sig.score,
                                     combined=s.terms.combined, risk_kinds=sig.kinds, risk_terms=sig.risk_terms,
                                     benign_terms=sig.benign_terms, numeric=sig.numeric)


def _windows(chunk: ChunkView, config: NodeConfig) -> int:
    """The MiniLM windows a chunk probably has (1.5 word pieces per cl100k token, as the deal's point table)."""
    rc = config.retrieval
    step = max(1, rc.window_tokens - rc.window_overlap_tokens)
    return 1 + max(0, -(-int(1.5 * chunk.token_count - rc.window_tokens) // step))


def _smooth(scores: np.ndarray, lam: float, breaks: Sequence[int]) -> np.ndarray:
    """``s_i + lam·max(s_{i-1}, s_{i+1})`` on min-max normalised scores; neighbours across a document break count 0."""
    s = minmax(np.asarray(scores, dtype=np.float64))
    if lam == 0 or s.size < 2:
        return s
    left = np.r_[0.0, s[:-1]]
    right = np.r_[s[1:], 0.0]
    for b in breaks:
        left[b] = 0.0
        right[b - 1] = 0.0
    return s + lam * np.maximum(left, right)


def grow_passages(scores: np.ndarray, breaks: Sequence[int], sections: Sequence[str], toc: np.ndarray, *, lift: float,
                  depth: int) -> np.ndarray:
    """The scores with the first ``depth`` places filled one at a time: the best unplaced chunk (ties: reading order)
    is placed, and each unplaced neighbour of it in reading order, under the same non-empty section heading, in the
    same document (``breaks``: the positions where a new document starts), not a table of contents, is lifted to
    ``s_j + lift·(s_i − s_j)`` when the placed chunk's own score ``s_i`` is higher (the largest lift counts; always
    below ``s_i``, whatever ``lift``).

    A lift stays below the score of the chunk that gave it and every chunk still unplaced scored at most that, so
    the placed chunks' scores fall in the order they were placed: sorting by the returned scores gives that order.
    The best chunk keeps the first place; past the first ``depth`` places the order is by score again (a chunk lifted
    but not placed keeps its lift, at most the last placed chunk's score).
    """
    s = np.asarray(scores, dtype=np.float64)
    n = s.size
    out = s.copy()
    if not lift or not depth or n < 2:
        return out
    starts = set(breaks)
    placed = np.zeros(n, dtype=bool)
    for _ in range(min(depth, n)):
        i = int(np.argmax(np.where(placed, -np.inf, out)))
        placed[i] = True
        for j in (i - 1, i + 1):
            if not 0 <= j < n or placed[j] or toc[j] or not sections[i] or sections[j] != sections[i]:
                continue
            if max(i, j) in starts:  # j and i sit in different documents
                continue
            if s[i] > s[j]:  # never up to the giver's own score: it keeps its place before the chunk it lifts
                out[j] = max(out[j], min(s[j] + lift * (s[i] - s[j]), float(np.nextafter(s[i], -np.inf))))
    return out


def _unit(final: np.ndarray) -> np.ndarray:
    """Scores mapped into [0, 1] keeping their order (the packager's ``combined``)."""
    return minmax(final) if final.size else final


__all__ = [
    "DEFAULT_QUESTION_BUDGET",
    "QUESTIONS_AGENT",
    "QUESTION_INTENT_ID",
    "ParsedQuestion",
    "QuestionResult",
    "QuestionSettings",
    "QuestionStage",
    "grow_passages",
    "match_concepts",
    "parse_question",
    "question_intent",
    "without_concepts",
]
