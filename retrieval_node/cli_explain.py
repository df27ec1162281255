"""``retrieval-node explain AUDIT_ID``: why each chunk of a retrieval was chosen or left out, from its audit snapshot.

Nothing is retrieved or scored again. The snapshot is read through the hash- and MAC-checked
:meth:`~retrieval_node.audit.AuditLog.read_snapshot` (``--legacy`` accepts one without a MAC, as ``replay``
does) and its package is checked against its ``package_hash``. For every chunk the snapshot records it shows:

* its score terms as recorded (semantic, risk, pattern, combined) and, weighted, ``α·semantic``, ``β·risk``,
  ``γ·pattern``: the snapshot does not record α/β/γ, so they are the configured weights of the intent's risk
  profile, shown only when they reproduce every recorded combined score (else the weighted columns are empty
  and the document says why);
* its risk finding: kinds, material or not, the lexicon terms and numbers read, and the verbatim evidence
  recorded in ``summary.material_risks``;
* the reason the packager, the coverage repair or finalize gave, and its kind
  (:func:`~retrieval_node.explain.reason_kind`): chosen as risk / by score / for zone coverage; left out
  for budget (or to make room for a zone or a risk), not needed, redacted by trust.

Trust applies as in ``replay``: the caller must reach the deal (and the agent, when bound to one); a chunk above
the caller's clearance is counted, not described. A candidate's sensitivity is not in the snapshot, only that
it passed the recorded call's trust: such chunks are described only to a caller whose clearance covers the
recorded call's (otherwise counted). Chunks the call never scored (above its trust, outside its contract) are
reported as the counts and sections the snapshot has.

Registered on the main app by ``cli.py`` as ``app.command("explain")(explain_command(cli_module))``: the command
uses the CLI's own checks (store, enum values, trust, errors) without importing ``cli`` back.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import ModuleType
from typing import Annotated, Any, Callable

import typer

from .errors import RetrievalNodeError, UsageError

#: A recorded combined score agrees with the weighted terms when within this (each value is rounded to 6 places).
WEIGHT_TOLERANCE = 5e-6

AuditArg = Annotated[str, typer.Argument(metavar="AUDIT_ID", show_default=False, help="Audit id from a retrieval summary (aud_...).")]
ChunkOpt = Annotated[str | None, typer.Option("--chunk", metavar="ID", show_default=False,
                                              help="Only this chunk (a unique prefix of its id is enough).")]
StoreOpt = Annotated[Path | None, typer.Option("--store", metavar="DIR", show_default=False, file_okay=False,
                                               help="Store directory. Default: $RETRIEVAL_NODE_HOME, else ./.retrieval-node.")]
JsonOpt = Annotated[bool, typer.Option("--json", metavar="", show_default=False, help="Print exactly one JSON document on standard output.")]
SensitivityOpt = Annotated[str | None, typer.Option(
    "--max-sensitivity", metavar="LEVEL", show_default=False,
    help="Highest sensitivity you may read: public, confidential or privileged. Default: as for replay "
         "($RETRIEVAL_NODE_MAX_SENSITIVITY, else confidential when you own the store, else public).")]
ActorOpt = Annotated[str | None, typer.Option("--actor", metavar="ID", show_default=False, help="Who is asking. Default: cli:$USER.")]
LegacyOpt = Annotated[bool, typer.Option("--legacy", help="Accept a snapshot without a MAC (written by an older version); only for files you trust.")]


def explain_command(cli: ModuleType) -> Callable[..., None]:
    """The ``explain`` command, bound to ``cli``'s argument checks (``_flag_level``, ``_caller``, ``_fail``)."""

    def explain(
        audit_id: AuditArg,
        chunk: ChunkOpt = None,
        store: StoreOpt = None,
        as_json: JsonOpt = False,
        max_sensitivity: SensitivityOpt = None,
        actor: ActorOpt = None,
        legacy: LegacyOpt = False,
    ) -> None:
        """Why each chunk of a retrieval was chosen or left out: score terms, risk finding and reason, from the audit
        snapshot (hash- and MAC-checked). Chunks above --max-sensitivity are counted, not described."""
        try:
            flag = cli._flag_level(max_sensitivity)
            if not re.fullmatch(r"aud_[0-9A-Za-z]+", audit_id):
                raise UsageError(f"{audit_id!r} is not an audit id (aud_ followed by letters and digits, as in a retrieval summary)")
            if chunk is not None and not re.fullmatch(r"[0-9a-f]{1,64}", chunk):
                raise UsageError(f"--chunk {chunk!r}: a chunk id is lower-case hex (a prefix is enough)")
            home, trust = cli._caller(store, flag, actor)
        except RetrievalNodeError as exc:
            cli._fail(exc, as_json)
            return
        try:
            doc = load_explanation(home, audit_id, trust, chunk=chunk, allow_legacy=legacy)
        except RetrievalNodeError as exc:
            cli._fail(exc, as_json)
            return
        if as_json:
            typer.echo(json.dumps(doc))
        else:
            print_explanation(doc)

    return explain


def load_explanation(home: Path, audit_id: str, trust: Any, *, chunk: str | None = None, allow_legacy: bool = False,
                     config_dir: Path | None = None) -> dict[str, Any]:
    """The explanation document of ``audit_id`` in the store at ``home`` for ``trust`` (what ``--json`` prints)."""
    from .audit import AuditLog
    from .config import load_config
    from .errors import IntegrityError
    from .models import ContextPackage, RiskProfile, package_hash
    from .pipeline import admit
    from .store import read_secret

    audit = AuditLog(home / "audit", registry=None, key=read_secret(home))
    try:
        snap = audit.read_snapshot(audit_id, allow_legacy=allow_legacy)
    except (FileNotFoundError, ValueError) as exc:
        raise UsageError(str(exc)) from exc
    package = ContextPackage.model_validate(snap["package"])
    if package_hash(package.model_dump(mode="json")) != package.package_hash:
        raise IntegrityError(f"audit snapshot {audit_id}: the package does not match its package_hash")
    admit(trust, deal_id=package.deal_id, agent_id=package.agent_id, what=f"explain of audit {audit_id}")
    profile = RiskProfile(snap["intent"]["risk_profile"])
    weights = load_config(config_dir).weights.get(profile)
    return describe(snap, trust, weights=None if weights is None else (weights.alpha, weights.beta, weights.gamma), chunk=chunk)


def describe(snap: dict[str, Any], trust: Any, *, weights: tuple[float, float, float] | None, chunk: str | None = None) -> dict[str, Any]:
    """The explanation of a checked snapshot for ``trust`` (a :class:`~retrieval_node.models.TrustContext`).

    ``weights`` are the candidate α, β, γ (the configured ones of the intent's risk profile); they are used only if
    they reproduce every recorded combined score. ``chunk`` (a chunk id or a unique prefix) keeps one chunk.
    """
    from .explain import NOT_NEEDED, REDACTED, reason_kind
    from .models import Sensitivity, TrustContext

    package, summary, intent = snap["package"], snap["summary"], snap["intent"]
    deal = package["deal_id"]
    recorded = TrustContext.model_validate(snap["trust"])
    # a candidate's sensitivity is not recorded, only that it passed the recorded call's trust
    covers_recorded = all(trust.allows(deal, s) for s in Sensitivity if recorded.allows(deal, s))
    refs = {r["chunk_id"]: (i, r) for i, r in enumerate(package["ordered_chunks"], start=1)}
    rows = {r["chunk_id"]: r for r in snap["candidates"]}
    chosen = {r["chunk_id"]: r for r in snap["selected"]}
    rejected = {r["chunk_id"]: r["reason"] for r in snap["rejected"]}
    evidence = {m["chunk_id"]: m["evidence"] for m in summary.get("material_risks") or []}
    weights_ok = weights is not None and all(
        abs(weights[0] * r["terms"]["semantic"] + weights[1] * r["terms"]["risk"] + weights[2] * r["terms"]["pattern"] - r["terms"]["combined"]) <= WEIGHT_TOLERANCE
        for r in rows.values())

    every = sorted(set(rows) | set(chosen) | set(rejected) | set(refs))
    if chunk is not None:
        matches = [cid for cid in every if cid.startswith(chunk)]
        if not matches:
            raise UsageError(f"--chunk {chunk}: no chunk of audit {snap['audit_id']} starts with it")
        if len(matches) > 1:
            raise UsageError(f"--chunk {chunk} is ambiguous: {len(matches)} chunks of audit {snap['audit_id']} start with it: "
                             + ", ".join(m[:16] for m in matches))
        every = matches

    def terms_of(t: dict[str, Any]) -> dict[str, Any]:
        out = {k: t[k] for k in ("dense", "lexical", "semantic", "risk", "pattern")}
        out["total"] = t["combined"]
        if weights_ok:
            assert weights is not None
            out |= {"alpha_semantic": round(weights[0] * t["semantic"], 6), "beta_risk": round(weights[1] * t["risk"], 6),
                    "gamma_pattern": round(weights[2] * t["pattern"], 6)}
        return out

    def risk_of(cid: str, t: dict[str, Any]) -> dict[str, Any]:
        return {"kinds": t["risk_kinds"], "material": bool(t["risk_kinds"]), "terms": t["risk_terms"], "numeric": t["numeric"],
                "benign_terms": t["benign_terms"], "patterns": t["patterns"], "evidence": evidence.get(cid)}

    out_chosen, out_left, out_redacted = [], [], []
    hidden = 0
    for cid in every:
        ref = refs.get(cid)
        if ref is not None:
            visible = trust.allows(deal, ref[1]["sensitivity"])
        else:
            visible = covers_recorded
        if ref is not None and ref[1]["redacted"]:
            if visible or trust.allows_redacted(deal, ref[1]["sensitivity"]):
                r = ref[1]
                out_redacted.append({"chunk_id": cid, "citation": f"E{ref[0]}", "document_id": r["document_id"], "section_type": r["section_type"],
                                     "page_range": r["page_range"], "sensitivity": r["sensitivity"], "reason_kind": REDACTED,
                                     "reason": f"{r['sensitivity']}: one level above the recorded caller's clearance; listed without content"})
            else:
                hidden += 1
            continue
        if not visible:
            hidden += 1
            continue
        row = rows.get(cid) or chosen.get(cid)
        if row is None:  # rejected without a candidate row: cannot happen in a snapshot this version writes
            continue
        base = {"chunk_id": cid, "document_id": row.get("document_id") or (ref[1]["document_id"] if ref else None),
                "section_type": row.get("section_type") or (ref[1]["section_type"] if ref else None),
                "page_range": row.get("page_range") or (ref[1]["page_range"] if ref else None), "origin": row["origin"],
                "terms": terms_of(row["terms"]), "risk": risk_of(cid, row["terms"])}
        if cid in chosen:
            why = chosen[cid]["reason"]
            excerpt = chosen[cid].get("excerpt")
            out_chosen.append({**base, "citation": f"E{ref[0]}" if ref else None, "reason_kind": reason_kind(why, chosen=True), "reason": why,
                               "excerpt": excerpt})
        elif cid in rejected:
            out_left.append({**base, "reason_kind": reason_kind(rejected[cid], chosen=False), "reason": rejected[cid]})
        else:
            out_left.append({**base, "reason_kind": NOT_NEEDED, "reason": "retrieved by the coverage repair for a zone already covered or not required"})

    out_chosen.sort(key=lambda d: int(d["citation"][1:]) if d["citation"] else 1 << 30)
    out_left.sort(key=lambda d: (-d["terms"]["total"], d["chunk_id"]))
    unscored = [f for f in summary.get("fallbacks") or [] if f.startswith(("filtered_by_trust", "redacted", "integrity"))]
    contract = snap.get("contract") or {}
    return {
        "audit_id": snap["audit_id"],
        "deal_id": deal,
        "agent_id": package["agent_id"],
        "intent_id": package["intent_id"],
        "stage": intent.get("stage"),
        "risk_profile": intent.get("risk_profile"),
        "budget": intent.get("max_tokens_budget"),
        "total_tokens": package["total_tokens"],
        "package_hash": package["package_hash"],
        "weights": ({"alpha": weights[0], "beta": weights[1], "gamma": weights[2], "source": "configured weights of the risk profile; they reproduce every recorded total"}
                    if weights_ok and weights is not None else
                    {"alpha": None, "beta": None, "gamma": None,
                     "source": "not recorded in the snapshot, and the configured weights do not reproduce the recorded totals"
                     if weights is not None else "not recorded in the snapshot"}),
        "chunk": chunk,
        "chosen": out_chosen,
        "left_out": out_left,
        "redacted": out_redacted,
        "not_described": {"count": hidden, "why": "above your clearance (or of unrecorded sensitivity above it): counted, not described"},
        "not_scored": {"notes": unscored, "forbidden_sections": contract.get("forbidden_sections", []),
                       "forbidden_roles": contract.get("forbidden_roles", [])},
        "coverage": snap.get("coverage"),
    }


def _fmt(x: float | None) -> str:
    return "" if x is None else f"{x:.3f}"


def print_explanation(doc: dict[str, Any]) -> None:
    """The explanation on a terminal: one Rich table for the chosen chunks, one for those left out, then the counts.
    Snapshot data is printed as :class:`rich.text.Text` (never read as markup)."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = Console()
    w = doc["weights"]
    weights = (f"α {w['alpha']:g}, β {w['beta']:g}, γ {w['gamma']:g}" if w["alpha"] is not None else f"α/β/γ {w['source']}")
    console.print(Text(f"audit {doc['audit_id']}: agent {doc['agent_id']} ({doc['intent_id']}), deal {doc['deal_id']}, stage {doc['stage']}, "
                       f"{doc['total_tokens']} of {doc['budget']} tokens, risk profile {doc['risk_profile']} ({weights})"))

    def table(title: str, rows: list[dict[str, Any]], first: str) -> None:
        t = Table(first, "chunk", "document / section / pages", "α·sem", "β·risk", "γ·pat", "total", "risk finding", "reason",
                  title=title, title_justify="left", show_lines=True)
        for r in rows:
            tm, rk = r["terms"], r["risk"]
            finding = (", ".join(rk["kinds"]) + " (material)") if rk["material"] else "not material"
            if rk["terms"] or rk["numeric"]:
                finding += "\nread: " + ", ".join(rk["terms"] + rk["numeric"])
            if rk["evidence"]:
                finding += f"\n“{rk['evidence']}”"
            t.add_row(Text(r.get("citation") or ""), Text(r["chunk_id"][:12]),
                      Text(f"{r['document_id']}\n{r['section_type']} p{r['page_range']}"),
                      Text(_fmt(tm.get("alpha_semantic"))), Text(_fmt(tm.get("beta_risk"))), Text(_fmt(tm.get("gamma_pattern"))),
                      Text(_fmt(tm["total"])), Text(finding), Text(f"{r['reason_kind']}: {r['reason']}"))
        console.print(t)

    if doc["chosen"]:
        table(f"chosen ({len(doc['chosen'])})", doc["chosen"], "#")
    if doc["left_out"]:
        table(f"left out ({len(doc['left_out'])})", doc["left_out"], "")
    for r in doc["redacted"]:
        console.print(Text(f"{r['citation']} {r['chunk_id'][:12]} {r['document_id']} {r['section_type']} p{r['page_range']}: "
                           f"{r['reason_kind']} ({r['reason']})"))
    if doc["not_described"]["count"]:
        console.print(Text(f"{doc['not_described']['count']} chunk(s) {doc['not_described']['why']}"))
    ns = doc["not_scored"]
    for note in ns["notes"]:
        console.print(Text(f"not scored: {note}"))
    if ns["forbidden_sections"] or ns["forbidden_roles"]:
        console.print(Text("never searched (contract forbids): " + ", ".join(ns["forbidden_sections"] + ns["forbidden_roles"])))
    if not (doc["chosen"] or doc["left_out"] or doc["redacted"]):
        console.print(Text("nothing to describe" + (f" for chunk {doc['chunk']}" if doc["chunk"] else "")))


__all__ = ["describe", "explain_command", "load_explanation", "print_explanation"]
