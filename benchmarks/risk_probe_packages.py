#!/usr/bin/env python
"""Material excerpts written by others, in a package: is each one packed for its agent, and reported as a risk?

``risk_probe.py`` judges the material flag alone. A lawyer's question is the package's: does the agent see the lien?
Here every material excerpt of a probe set (``benchmarks/risk_probe/``, written by helpers that had not read the
repository) is put into a deal of its own, as one document among

* the bundled clean deal's chunks (title search, tax certificate, purchase agreement, lender's instructions, ...),
* the bundled sample deal's condominium documents (minutes, bylaws, financial statements, reserve study: a busy
  condo file with risks of its own),
* every benign excerpt of the same set and domain (the look-alikes: the same vocabulary, no risk for this deal),

except a look-alike that names a registration number of the material excerpt: probe writers often wrote the benign
twin of a material excerpt (the same caveat, discharged since). In one deal the twin reads as a later search of the
same title showing that registration again, and the node rightly takes the later search as the authority
(``retrieval_node.superseded``); a real file does not hold both as current. Such twins are left out of that deal and
counted (``twins_left_out``). Each excerpt is labelled as Stage 0 would label such a page (title: INSTRUMENTS_REGISTER / TITLE_SEARCH; tax:
TAX_ARREARS / TAX_CERTIFICATE; condo: CONDO_MINUTES / CONDO_DOCS). The deals are ingested through the normal path into
a fresh store and the domain's agent (title: investigator, tax: tax, condo: condo) is asked at its default budget in
the diligence stage. Counted per set and domain: the material excerpts packed (whole or as an excerpt), and those
``summary.material_risks`` reports. The flag alone (``risk_signal``) is printed beside them.

    python benchmarks/risk_probe_packages.py                   # sets C and F (never read): 90 deals, 4,950 chunks, 10-20 min
    python benchmarks/risk_probe_packages.py --sets set_e --limit 5 --domains title,tax

Writes ``benchmarks/results/risk_probe_packages.json`` (``..._smoke.json`` with ``--smoke``) with every miss.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine_info, now_iso, result_path, table, write_result  # noqa: E402
from risk_probe import load_set  # noqa: E402

#: domain -> (agent, section type, document role) of an excerpt
PLACEMENT = {"title": ("investigator", "INSTRUMENTS_REGISTER", "TITLE_SEARCH"), "tax": ("tax", "TAX_ARREARS", "TAX_CERTIFICATE"),
             "condo": ("condo", "CONDO_MINUTES", "CONDO_DOCS")}


def _base_chunks(*, condo: bool = True) -> list[dict]:
    from retrieval_node.evaluation import SAMPLE_DATA

    rows = [json.loads(x) for x in (SAMPLE_DATA / "clean_deal" / "chunks.jsonl").read_text(encoding="utf-8").splitlines() if x.strip()]
    if not condo:
        return rows
    rows += [r for r in (json.loads(x) for x in (SAMPLE_DATA / "sample_deal" / "chunks.jsonl").read_text(encoding="utf-8").splitlines() if x.strip())
             if r["document_role"] == "CONDO_DOCS"]
    return rows


def lookalikes_for(material: dict, benign: list[dict]) -> tuple[list[dict], list[str]]:
    """The look-alikes that go into ``material``'s deal, and the ids of its twins left out (they name one of its
    registration numbers)."""
    from retrieval_node.superseded import registrations_in

    own = registrations_in(material["text"])
    twins = [b["id"] for b in benign if own & registrations_in(b["text"])]
    return [b for b in benign if b["id"] not in twins], twins


def build_deal(deal_id: str, material: dict, benign: list[dict], base: list[dict], tokens) -> tuple[list[str], str]:
    """JSONL lines of one deal and the chunk id of its material excerpt."""
    from retrieval_node.models import DocumentChunk

    lines: list[str] = []
    for r in base:
        c = DocumentChunk.build(deal_id=deal_id, document_id=f"{deal_id}/base-{r['document_id'].split('/', 1)[1]}", document_role=r["document_role"],
                                page_start=r["page_start"], page_end=r["page_end"], section_type=r["section_type"], content=r["content"],
                                token_count=tokens.count(r["content"]))
        lines.append(c.model_dump_json())
    target = ""
    for it in [material, *benign]:
        _agent, section, role = PLACEMENT[it["domain"]]
        c = DocumentChunk.build(deal_id=deal_id, document_id=f"{deal_id}/probe-{it['id']}.pdf", document_role=role, page_start=1, page_end=1,
                                section_type=section, content=it["text"], token_count=tokens.count(it["text"]))
        lines.append(c.model_dump_json())
        if it is material:
            target = c.chunk_id
    return lines, target


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sets", default="set_c,set_f", help="probe sets (names in benchmarks/risk_probe/ or .jsonl paths; default the two never read)")
    ap.add_argument("--limit", type=int, default=None, help="at most this many material excerpts per set and domain")
    ap.add_argument("--out", help="result JSON (default benchmarks/results/risk_probe_packages.json)")
    ap.add_argument("--domains", default="title,tax,condo", help="comma-separated domains (default all three)")
    ap.add_argument("--smoke", action="store_true", help="one title excerpt of set C in one small deal: the clean deal and two look-alikes "
                    "(CI: checks the script runs)")
    a = ap.parse_args()
    if a.smoke:
        a.sets, a.limit, a.domains = "set_c", 1, "title"

    from retrieval_node import Ingestor, RetrievalAgent, Store
    from retrieval_node.evaluation import EVAL_TRUST
    from retrieval_node.risk import risk_signal

    t0 = time.perf_counter()
    base = _base_chunks(condo=not a.smoke)
    results: dict[str, dict] = {}
    rows = []
    with tempfile.TemporaryDirectory(prefix="rn-probe-packages-") as tmp, Store.open(Path(tmp) / "store") as store:
        lexicon = store.config.risk_signals
        jsonl = Path(tmp) / "deals.jsonl"
        plan: list[tuple[str, str, dict, str, list[str]]] = []  # (set, deal id, material excerpt, its chunk id, twins left out)
        out_lines: list[str] = []
        for name in a.sets.split(","):
            items = load_set(name)
            for domain in [d for d in PLACEMENT if d in a.domains.split(",")]:
                benign = [x for x in items if x["domain"] == domain and not x["material"]][: 2 if a.smoke else None]
                material = [x for x in items if x["domain"] == domain and x["material"]][: a.limit]
                for k, it in enumerate(material):
                    deal_id = f"2026-PROBE-{Path(name).stem.replace('_', '')}{domain[:2]}{k:03d}".upper()
                    kept, twins = lookalikes_for(it, benign)
                    lines, target = build_deal(deal_id, it, kept, base, store.tokens)
                    out_lines += lines
                    plan.append((name, deal_id, it, target, twins))
        jsonl.write_text("\n".join(out_lines) + "\n", encoding="utf-8")
        report = Ingestor(store).ingest([jsonl])
        if report.rejected:
            print(f"rejected lines: {report.rejected[:3]}", file=sys.stderr)
            return 2
        ingest_s = time.perf_counter() - t0
        agent = RetrievalAgent(store, trust=EVAL_TRUST)
        for name, deal_id, it, target, twins in plan:
            agent_name = PLACEMENT[it["domain"]][0]
            package, summary = agent.retrieve_sync(agent.intent_for(agent_name, deal_id=deal_id))
            packed = any(r.chunk_id == target for r in package.ordered_chunks)
            reported = any(m.chunk_id == target for m in summary.material_risks)
            flagged = risk_signal(it["text"], lexicon, [it["domain"]]).material
            d = results.setdefault(name, {}).setdefault(it["domain"], {"material": 0, "packed": 0, "reported": 0, "flagged": 0,
                                                                        "not_packed": [], "not_reported": [], "twins_left_out": {}})
            if twins:
                d["twins_left_out"][it["id"]] = twins
            d["material"] += 1
            d["packed"] += packed
            d["reported"] += reported
            d["flagged"] += flagged
            if not packed:
                d["not_packed"].append(it["id"])
            if not reported:
                d["not_reported"].append(it["id"])
        agent.flush_audit()
    for name, per in results.items():
        total = {k: sum(d[k] for d in per.values()) for k in ("material", "packed", "reported", "flagged")}
        total["twins_left_out"] = {i: t for d in per.values() for i, t in d["twins_left_out"].items()}
        per["ALL"] = total
        for dom, d in sorted(per.items(), key=lambda kv: (kv[0] == "ALL", kv[0])):
            n = d["material"]
            rows.append([name, dom, n, f"{d['packed']}/{n}", d["packed"] / n, f"{d['reported']}/{n}", d["reported"] / n, f"{d['flagged']}/{n}",
                         len(d["twins_left_out"])])
    print(table(["set", "domain", "material", "packed", "", "reported", "", "flag alone", "deals without a twin"], rows, digits=3))
    print(f"{len(plan)} deals, {report.ingested} chunks ingested in {ingest_s:.0f} s; total {time.perf_counter() - t0:.0f} s")
    path = write_result(result_path("risk_probe_packages", a.out, a.smoke),
                        {"date": now_iso(), "machine": machine_info(), "smoke": a.smoke, "sets": a.sets, "limit": a.limit, "results": results})
    print(f"results: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
