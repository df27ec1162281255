"""Query-independent work done at ingest, once: each chunk's risk findings and the pattern entities it names.

What :mod:`retrieval_node.risk` reads in a chunk (its :class:`~retrieval_node.risk.RiskSignal`: kinds, matched
spans with their weights and cues, the numbers read, the material judgement) depends on the chunk's text, the
lexicon and the risk domains only, never on the query. Ingest computes it for every *risk setting* the configured
profiles rank with (:func:`risk_settings`: the lexicon of the profile's ``risk_kinds`` over its ``risk_domains``)
and keeps it in ``<store>/chunk_findings.db`` (SQLite, owner-only 0600), by
deal, chunk id and setting, in tables clustered on that key: one deal's rows lie together, so a first call on a deal
whose pages the OS no longer holds reads a few contiguous pages (``precompute`` moves an older version's rows there). The first call on a deal then reads its findings instead of scanning the whole deal.

Every row carries the :func:`fingerprint` of what produced it: the risk lexicon (``risk_signals.yaml`` as loaded)
and the source of :mod:`retrieval_node.risk`. A row under another fingerprint is never served: after a rule or
lexicon change the findings are computed again (on the call, as before this module, and by the next ingest).

The γ term asks which institutional-pattern entities a chunk names (:func:`~retrieval_node.risk.mentioned_entities`,
read through OCR damage: the costliest part of scoring a chunk the first time). Ingest keeps that answer too, for
the entities of the patterns the store holds when it runs, under a fingerprint of the findings fingerprint and those
entities: after ``patterns add`` changes them, first calls work the mentions out again until the deal is ingested
again (slower, never another answer).

The packager's first estimate of a chunk's cost is the token count of its rendered block, whose body (the chunk's
whole content, :func:`~retrieval_node.models.quoted_body`) is the costly part to count: ingest counts it too, under
:func:`body_form` (the encoding and the body's rendering), and :class:`~retrieval_node.pack.ContextPackager` uses
it for the chunk with that content hash. The package's final count (:mod:`~retrieval_node.finalize`) never uses a
stored count: it tokenises the package text.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import logging
import sqlite3
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from . import risk
from . import models
from .config import NodeConfig, RiskLexicon
from .errors import BackendError
from .models import quoted_body, sha256_hex
from .query_cache import owner_only_sqlite
from .risk import EXCERPT_MAX_CHARS, RiskSignal, mentioned_entities, risk_findings

log = logging.getLogger(__name__)

#: the findings file inside the store directory
FINDINGS_DB = "chunk_findings.db"
#: what ingest keeps per chunk: risk findings, pattern mentions, the body token count
PARTS = frozenset({"findings", "mentions", "bodies"})
#: the shortfall ratio every ranker of the package reads reserves with (``RiskAwareRanker``'s default)
SHORTFALL_RATIO = 0.5
_EMPTY = RiskSignal(score=0.0, kinds=())
#: The tables, clustered on their keys (``WITHOUT ROWID``): one deal's rows lie together in the file, so a first call
#: on a deal whose pages the OS no longer holds reads a few contiguous pages, not one page per row.
_TABLES = {
    "findings_v3": "CREATE TABLE IF NOT EXISTS findings_v3 (fingerprint TEXT NOT NULL, deal_id TEXT NOT NULL, chunk_id TEXT NOT NULL, "
                   "setting TEXT NOT NULL, material INTEGER NOT NULL, signal TEXT, spans TEXT, "
                   "PRIMARY KEY (fingerprint, deal_id, chunk_id, setting)) WITHOUT ROWID",
    "mentions_v3": "CREATE TABLE IF NOT EXISTS mentions_v3 (fingerprint TEXT NOT NULL, deal_id TEXT NOT NULL, chunk_id TEXT NOT NULL, "
                   "found TEXT, PRIMARY KEY (fingerprint, deal_id, chunk_id)) WITHOUT ROWID",
    "body_tokens_v3": "CREATE TABLE IF NOT EXISTS body_tokens_v3 (form TEXT NOT NULL, deal_id TEXT NOT NULL, chunk_id TEXT NOT NULL, "
                      "content_hash TEXT NOT NULL, n INTEGER NOT NULL, PRIMARY KEY (form, deal_id, chunk_id)) WITHOUT ROWID",
}
#: The tables of the layout before (rowid tables, the setting spelled out): :meth:`ChunkFindings.migrate` copies
#: their rows of the current rules into the tables above and drops them.
_LEGACY = ("findings", "mentions", "body_tokens")


@dataclass(frozen=True, slots=True)
class RiskSetting:
    """One way the rankers read risk: the lexicon of ``kinds`` (None: all) over ``domains``."""

    kinds: tuple[str, ...] | None
    domains: tuple[str, ...]
    lexicon: RiskLexicon
    #: the ``excerpt_max_chars`` of the profiles that read risk this way (excerpt spans are kept for each)
    excerpt_chars: tuple[int, ...] = (EXCERPT_MAX_CHARS,)

    @property
    def key(self) -> str:
        return setting_key(self.kinds, self.domains)


def risk_settings(config: NodeConfig) -> list[RiskSetting]:
    """The risk settings of the configured profiles, as :meth:`retrieval_node.rank.Rankers.settings` resolves them (an
    intent without a profile reads the whole lexicon over every domain on the call, as before)."""
    lex = config.risk_signals
    if lex is None:
        return []
    every = tuple(sorted(lex.domains))
    seen: dict[tuple[tuple[str, ...] | None, tuple[str, ...]], RiskSetting] = {}
    for profile in config.agents.values():
        kinds = tuple(profile.risk_kinds) if profile.risk_kinds is not None else None
        domains = tuple(profile.risk_domains) if profile.risk_domains else every
        chars = int(profile.excerpt_max_chars)
        prev = seen.get((kinds, domains))
        if prev is None:
            seen[(kinds, domains)] = RiskSetting(kinds, domains, lex if kinds is None else lex.only_kinds(kinds), (chars,))
        elif chars not in prev.excerpt_chars:
            seen[(kinds, domains)] = RiskSetting(kinds, domains, prev.lexicon, tuple(sorted({*prev.excerpt_chars, chars})))
    return list(seen.values())


def fingerprint(config: NodeConfig) -> str:
    """What the findings depend on: the loaded risk lexicon, the risk module's source and the shortfall ratio."""
    h = hashlib.sha256(b"retrieval-node findings v2\0")
    lex = config.risk_signals
    h.update(json.dumps(lex.model_dump(mode="json") if lex is not None else None, sort_keys=True).encode())
    h.update(inspect.getsource(risk).encode())
    h.update(str(SHORTFALL_RATIO).encode())
    return h.hexdigest()[:32]


def body_form(encoding: str) -> str:
    """What a stored body count depends on: the encoding's name and the source of the body's rendering."""
    h = hashlib.sha256(b"retrieval-node body tokens v1\0")
    h.update(encoding.encode())
    h.update(inspect.getsource(models.quoted_body).encode())
    return h.hexdigest()[:32]


def encode_signal(sig: RiskSignal) -> str | None:
    """A signal as compact JSON (None for the empty signal of a chunk the lexicon does not touch)."""
    if sig == _EMPTY:
        return None
    return json.dumps([sig.score, sig.kinds, sig.numeric, sig.risk_terms, sig.benign_terms], separators=(",", ":"))


def decode_signal(raw: str | None) -> RiskSignal:
    if raw is None:
        return _EMPTY
    score, kinds, numeric, risk_terms, benign_terms = orjson.loads(raw)
    return RiskSignal(score=score, kinds=tuple(kinds), numeric=tuple(numeric), risk_terms=tuple(risk_terms), benign_terms=tuple(benign_terms))


@dataclass(frozen=True, slots=True)
class ComputedRows:
    """Rows :meth:`ChunkFindings.work_out` computed for some chunks, not yet written (each row's third field is the
    chunk id)."""

    findings: list[tuple[Any, ...]]
    mentions: list[tuple[Any, ...]]
    bodies: list[tuple[Any, ...]]


class ChunkFindings:
    """``<store>/chunk_findings.db``: (fingerprint, deal, chunk, setting) -> the chunk's risk signal."""

    def __init__(self, path: Path, config: NodeConfig) -> None:
        self.path = path
        self.settings = risk_settings(config)
        self._read_as = [(s.lexicon, s.domains, s.excerpt_chars) for s in self.settings]  # what risk_findings reads each chunk under
        self.fingerprint = fingerprint(config)
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = owner_only_sqlite(path)
        for ddl in _TABLES.values():
            self._conn.execute(ddl)
        self.encoding = config.retrieval.tokenizer_encoding
        self.body_form = body_form(self.encoding)
        self._counter: Any = None

    def mentions_fingerprint(self, entities: frozenset[str]) -> str:
        """What a stored mention answer depends on: the findings fingerprint (the reading rules) and the entities."""
        return hashlib.sha256(json.dumps([self.fingerprint, sorted(entities)]).encode()).hexdigest()[:32]

    def compute(self, chunks: Iterable[tuple[str, str, str]], entities: frozenset[str] = frozenset(),
                parts: frozenset[str] = PARTS) -> int:
        """Compute and keep, for each ``(deal id, chunk id, content)``, the ``parts`` asked (:data:`PARTS`): its findings
        under every setting, which of ``entities`` (the pattern entities of the store) it names, its body token count;
        returns the finding rows written."""
        return self.keep(self.work_out(chunks, entities, parts))

    def work_out(self, chunks: Iterable[tuple[str, str, str]], entities: frozenset[str] = frozenset(),
                 parts: frozenset[str] = PARTS) -> ComputedRows:
        """What :meth:`compute` keeps, computed and not written (no lock, nothing touched on disk): ingest works out a
        batch while the model embeds it and keeps the rows of the chunks that were then stored (:meth:`keep`)."""
        rows = []
        named = []
        bodies = []
        count = self._count_body() if "bodies" in parts else None
        mfp = self.mentions_fingerprint(entities) if entities and "mentions" in parts else None
        for deal_id, chunk_id, content in chunks:
            if count is not None:
                bodies.append((self.body_form, deal_id, chunk_id, sha256_hex(content), count(content)))
            if mfp is not None:
                found = mentioned_entities(content, entities)
                named.append((mfp, deal_id, chunk_id, json.dumps(sorted(found)) if found else None))
            if "findings" not in parts or not self.settings:
                continue
            for s, (sig, spans) in zip(self.settings, risk_findings(content, self._read_as, shortfall_ratio=SHORTFALL_RATIO), strict=True):
                # spans: the excerpt the packager quotes when a risk chunk does not fit whole (asked of risk chunks)
                raw = json.dumps({str(n): span for n, span in spans.items()}, separators=(",", ":")) if spans is not None else None
                rows.append((self.fingerprint, deal_id, chunk_id, s.key, int(sig.material), encode_signal(sig), raw))
        return ComputedRows(rows, named, bodies)

    def keep(self, computed: ComputedRows, chunk_ids: Iterable[str] | None = None) -> int:
        """Write what :meth:`work_out` computed (only the rows of ``chunk_ids`` when given); returns the finding rows
        written."""
        rows, named, bodies = computed.findings, computed.mentions, computed.bodies
        if chunk_ids is not None:
            keep = set(chunk_ids)
            rows = [r for r in rows if r[2] in keep]
            named = [r for r in named if r[2] in keep]
            bodies = [r for r in bodies if r[2] in keep]
        with self._lock:
            if self._conn is None:
                return 0
            self._conn.execute("BEGIN")
            self._conn.executemany("INSERT OR REPLACE INTO findings_v3 VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
            self._conn.executemany("INSERT OR REPLACE INTO mentions_v3 VALUES (?, ?, ?, ?)", named)
            self._conn.executemany("INSERT OR REPLACE INTO body_tokens_v3 VALUES (?, ?, ?, ?, ?)", bodies)
            self._conn.execute("COMMIT")
        return len(rows)

    def _count_body(self) -> Any:
        """content -> tokens of its block body under this store's encoding."""
        if self._counter is None:
            from .tokens import TiktokenCounter

            self._counter = TiktokenCounter(self.encoding)
        counter = self._counter
        return lambda content: counter.count(quoted_body(content))

    def missing(self, deal_id: str, chunks: dict[str, str], entities: frozenset[str] = frozenset()) -> dict[str, set[str]]:
        """part (:data:`PARTS`) -> which of ``chunks`` (chunk id -> content hash) lack it: a finding under some current
        setting, the body count of their current content, or (with ``entities``) their mention answer for exactly
        those entities. Parts nothing lacks are left out."""
        with self._lock:
            if self._conn is None:
                return {part: set(chunks) for part in PARTS}
            keys = sorted({s.key for s in self.settings})
            per: dict[str, int] = dict(self._conn.execute(  # rows of a setting no profile reads any more do not count
                f"SELECT chunk_id, COUNT(*) FROM findings_v3 WHERE fingerprint = ? AND deal_id = ? AND setting IN ({', '.join('?' * len(keys))}) "
                "GROUP BY chunk_id", (self.fingerprint, deal_id, *keys)).fetchall())
            bodies = dict(self._conn.execute("SELECT chunk_id, content_hash FROM body_tokens_v3 WHERE form = ? AND deal_id = ?",
                                             (self.body_form, deal_id)).fetchall())
            named = {r[0] for r in self._conn.execute("SELECT chunk_id FROM mentions_v3 WHERE fingerprint = ? AND deal_id = ?",
                                                      (self.mentions_fingerprint(entities), deal_id)).fetchall()} if entities else None
        want = len(keys)
        out = {"findings": {cid for cid in chunks if per.get(cid, 0) < want},
               "bodies": {cid for cid, h in chunks.items() if bodies.get(cid) != h},
               "mentions": {cid for cid in chunks if cid not in named} if named is not None else set()}
        return {part: ids for part, ids in out.items() if ids}

    def body_tokens(self, deal_id: str, encoding: str) -> dict[str, tuple[str, int]]:
        """chunk id -> (content hash, tokens of its block body) of the deal's chunks, as ingest counted them under
        ``encoding`` and the current body rendering (none under another)."""
        with self._lock:
            if self._conn is None:
                return {}
            rows = self._conn.execute("SELECT chunk_id, content_hash, n FROM body_tokens_v3 WHERE form = ? AND deal_id = ?",
                                      (body_form(encoding), deal_id)).fetchall()
        return {cid: (h, int(n)) for cid, h, n in rows}

    def mentions(self, deal_id: str, entities: frozenset[str]) -> dict[str, frozenset[str]]:
        """chunk id -> which of ``entities`` it names, for the deal's chunks ingest worked this out for under exactly
        these entities (none under another set: see the module's docstring)."""
        with self._lock:
            if self._conn is None or not entities:
                return {}
            rows = self._conn.execute("SELECT chunk_id, found FROM mentions_v3 WHERE fingerprint = ? AND deal_id = ?",
                                      (self.mentions_fingerprint(entities), deal_id)).fetchall()
        none: frozenset[str] = frozenset()
        return {cid: frozenset(json.loads(found)) if found else none for cid, found in rows}

    def deal(self, deal_id: str, setting: str | None = None) -> dict[str, dict[str, tuple[bool, str | None, str | None]]]:
        """setting key -> {chunk id -> (material, encoded signal, encoded excerpt spans)} of the deal's chunks under the
        current fingerprint (decoded only when used: :func:`decode_signal`); with ``setting``, that setting's only."""
        out: dict[str, dict[str, tuple[bool, str | None, str | None]]] = {}
        with self._lock:
            if self._conn is None:
                return out
            if setting is None:
                rows = self._conn.execute("SELECT chunk_id, setting, material, signal, spans FROM findings_v3 WHERE fingerprint = ? AND deal_id = ?",
                                          (self.fingerprint, deal_id)).fetchall()
            else:
                rows = self._conn.execute("SELECT chunk_id, setting, material, signal, spans FROM findings_v3 WHERE fingerprint = ? AND deal_id = ? "
                                          "AND setting = ?", (self.fingerprint, deal_id, setting)).fetchall()
        for chunk_id, setting, material, signal, spans in rows:
            out.setdefault(setting, {})[chunk_id] = (bool(material), signal, spans)
        return out

    def drop_stale(self, entities: frozenset[str] = frozenset()) -> int:
        """Delete finding rows of other fingerprints (their rules are gone), mention rows of other rules or other
        entities than ``entities`` and body counts of another encoding or rendering; returns how many finding rows went."""
        with self._lock:
            if self._conn is None:
                return 0
            gone = self._conn.execute("DELETE FROM findings_v3 WHERE fingerprint != ?", (self.fingerprint,)).rowcount
            self._conn.execute("DELETE FROM mentions_v3 WHERE fingerprint != ?", (self.mentions_fingerprint(entities),))
            self._conn.execute("DELETE FROM body_tokens_v3 WHERE form != ?", (self.body_form,))
            _give_space_back(self._conn, self.path)
            return gone

    def migrate(self) -> int:
        """Copy the rows an older version of this file keeps (:data:`_LEGACY`) under the current rules, body form and
        any mention fingerprint into this layout, drop the old tables and give their space back (:func:`_give_space_back`); returns
        the finding rows copied. Nothing is recomputed; rows of other rules are not copied (they are never served)."""
        with self._lock:
            conn = self._conn
            if conn is None:
                return 0
            conn.create_function("short_key", 1, _short_key, deterministic=True)
            busy = (f"{self.path}: the older findings tables cannot be moved now: another program has the file open; run "
                    "precompute again when it is closed (nothing was changed)")
            try:
                conn.execute("BEGIN IMMEDIATE")  # the write lock first: the tables seen are the tables moved
            except sqlite3.OperationalError as exc:
                raise BackendError(f"{busy} ({exc})") from exc
            copied = 0
            try:
                have = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
                legacy = [t for t in _LEGACY if t in have]
                if not legacy:
                    conn.execute("ROLLBACK")
                    return 0
                if "findings" in have:
                    copied = conn.execute("INSERT OR IGNORE INTO findings_v3 SELECT fingerprint, deal_id, chunk_id, short_key(setting), "
                                          "material, signal, spans FROM findings WHERE fingerprint = ?", (self.fingerprint,)).rowcount
                if "mentions" in have:
                    conn.execute("INSERT OR IGNORE INTO mentions_v3 SELECT fingerprint, deal_id, chunk_id, found FROM mentions")
                if "body_tokens" in have:
                    conn.execute("INSERT OR IGNORE INTO body_tokens_v3 SELECT form, deal_id, chunk_id, content_hash, n FROM body_tokens "
                                 "WHERE form = ?", (self.body_form,))
                for t in legacy:
                    conn.execute(f"DROP TABLE {t}")
                conn.execute("COMMIT")
            except sqlite3.OperationalError as exc:  # the commit waited for a reader in vain
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise BackendError(f"{busy} ({exc})") from exc
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            _give_space_back(conn, self.path)
            return max(copied, 0)

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


def _give_space_back(conn: sqlite3.Connection, path: Path) -> None:
    """``VACUUM`` the file when more than half of its pages are free (rows of other rules deleted, an older layout's
    tables dropped; it needs free disk about the file's size while it runs). Another program reading the file (a
    ``sqlite3`` shell, a backup: an open store holds the store's lock) can keep it from running: said in the log, tried
    again by the next ``precompute``; the rows are all in place either way."""
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    free = conn.execute("PRAGMA freelist_count").fetchone()[0]
    if not pages or free * 2 <= pages:
        return
    try:
        conn.execute("VACUUM")
    except sqlite3.OperationalError as exc:
        log.warning("%s: %d of its %d pages are free and could not be given back now (%s); the next precompute tries again", path, free, pages, exc)


_OPEN: dict[int, tuple[Any, ChunkFindings]] = {}
_OPEN_LOCK = threading.Lock()


def findings_of(backends: Any) -> ChunkFindings | None:
    """The findings file of a :class:`~retrieval_node.store.Store` (opened once per store, closed with it); None for
    backends without a store directory of their own (the process pool's workers compute as before)."""
    add_hook = getattr(backends, "add_close_hook", None)
    home = getattr(backends, "home", None)
    if add_hook is None or home is None or getattr(backends.config, "risk_signals", None) is None:
        return None
    with _OPEN_LOCK:
        held = _OPEN.get(id(backends))
        if held is not None and held[0] is backends:
            return held[1]
        found = ChunkFindings(Path(home) / FINDINGS_DB, backends.config)
        _OPEN[id(backends)] = (backends, found)

    def close() -> None:
        with _OPEN_LOCK:
            if _OPEN.get(id(backends), (None,))[0] is backends:
                del _OPEN[id(backends)]
        found.close()

    add_hook(close)
    return found


def seed_ranker(view: Any, settings: Any) -> None:
    """Offer the deal's stored signals of ``settings`` (a :class:`~retrieval_node.rank.RankSettings`) to its ranker, once
    per view and ranker, so candidates are scored without reading their text again (each signal is decoded when its
    chunk is first scored: a first call scores a few hundred of the deal's chunks, not all of them). The excerpt spans
    of the deal's material chunks go the same way."""
    stored = view.stored_findings(setting_key(settings.kinds, settings.domains))
    if not stored:
        return
    ranker = settings.ranker
    key = (id(ranker), tuple(settings.domains))
    if key in view.seeded:
        return
    domains = tuple(settings.domains)
    chars = str(settings.excerpt_chars)
    chunks = view.chunks
    for cid, (_material, raw, spans) in stored.items():
        c = chunks.get(cid)
        if c is None:
            continue
        ranker.offer(c.content_hash, domains, raw)
        if spans is not None:
            by_chars = json.loads(spans)
            if chars in by_chars:
                span = by_chars[chars]
                ranker.offer_span(c.content_hash, domains, settings.excerpt_chars, tuple(span) if span is not None else None)
    view.seeded.add(key)


def _read_once(view: Any, key: Any, backends: Any, read: Callable[[ChunkFindings], dict[str, Any]]) -> dict[str, Any]:
    """``read(findings file)`` the first time ``key`` is asked of ``view``; {} after that, without a findings file, or
    when it cannot be read (a damaged findings file costs time, never an answer)."""
    if key in view.seeded:
        return {}
    view.seeded.add(key)
    try:
        found = findings_of(backends)
        return read(found) if found is not None else {}
    except Exception:
        return {}


def offer_mentions(view: Any, ranker: Any, entities: frozenset[str], backends: Any) -> None:
    """Offer ``ranker`` which of ``entities`` each of the deal's chunks names, as ingest stored it, once per view,
    ranker and entity set (nothing when ingest ran under other pattern entities: the ranker works them out)."""
    if not entities:
        return
    chunks = view.chunks
    for cid, named in _read_once(view, ("mentions", id(ranker), entities), backends, lambda f: f.mentions(view.deal_id, entities)).items():
        c = chunks.get(cid)
        if c is not None:
            ranker.offer_mentions(c.content_hash, entities, named)


def offer_bodies(view: Any, packager: Any, backends: Any) -> None:
    """Offer ``packager`` the body token counts ingest stored for the view's chunks, once per view and packager
    (nothing for a counter that is not tiktoken's: it counts as before)."""
    encoding = getattr(packager.tokens, "encoding_name", None)
    if encoding is None:
        return
    chunks = view.chunks
    for cid, (content_hash, n) in _read_once(view, ("bodies", id(packager)), backends, lambda f: f.body_tokens(view.deal_id, encoding)).items():
        c = chunks.get(cid)
        if c is not None and c.content_hash == content_hash:
            packager.offer_body(cid, content_hash, n)


def setting_key(kinds: Sequence[str] | None, domains: Sequence[str]) -> str:
    """The key :class:`RiskSetting` files a (kinds, domains) pair under: 16 hex digits of the pair's hash (the pair
    written out is ~200 characters, repeated in every row)."""
    return _short_key(json.dumps([list(kinds) if kinds is not None else None, list(domains)], separators=(",", ":")))


def _short_key(spelled: str) -> str:
    return hashlib.sha256(spelled.encode()).hexdigest()[:16]


__all__ = ["FINDINGS_DB", "PARTS", "ChunkFindings", "RiskSetting", "body_form", "decode_signal", "encode_signal", "findings_of", "fingerprint", "offer_bodies", "offer_mentions",
           "risk_settings", "seed_ranker", "setting_key"]
