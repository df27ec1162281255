"""Package fingerprints: what every agent is given, per deal x agent x stage, as hashes and texts.

A refactoring that must not change behaviour is checked by running this before and after and comparing:

    python benchmarks/fingerprints.py --out /tmp/before.json                      # bundled fixtures
    python benchmarks/fingerprints.py --deals ../shared/bench/deals/deals --out /tmp/before.json
    ... change the code ...
    python benchmarks/fingerprints.py --deals ../shared/bench/deals/deals --compare /tmp/before.json

Per deal x agent x stage it records the package hash (over the package without its evidence code: the code is keyed by the
store's own secret, so two fresh stores give every package another code and hash), the table of contents, the exclusions note, the
risk summary, the token count, the packaged chunk ids, and the summary's coverage fields (or the error a
contract or stage rule raised). ``--compare`` prints every difference and exits 1 when there is one.
The store is a fresh temporary one unless ``--store`` names one (then it is ingested into if empty).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from retrieval_node import Ingestor, RetrievalAgent, Store
from retrieval_node.errors import RetrievalNodeError
from retrieval_node.evaluation import EVAL_TRUST, SAMPLE_DATA
from retrieval_node.ingest import add_patterns, read_patterns
from retrieval_node.models import Stage, package_hash


def _deal_ids(files: list[Path]) -> list[str]:
    ids: list[str] = []
    for f in files:
        for line in f.read_text(encoding="utf-8").splitlines():
            if line.strip():
                deal = json.loads(line)["deal_id"]
                if deal not in ids:
                    ids.append(deal)
    return ids


def fingerprints(store: Store, deal_ids: list[str]) -> dict[str, dict]:
    agent = RetrievalAgent(store, trust=EVAL_TRUST)
    out: dict[str, dict] = {}
    for deal in deal_ids:
        for name in sorted(agent.config.agents):
            for stage in Stage:
                key = f"{deal}|{name}|{stage.value}"
                try:
                    package, summary = agent.retrieve_sync(agent.intent_for(name, deal_id=deal, stage=stage))
                except RetrievalNodeError as exc:
                    out[key] = {"error": f"{type(exc).__name__}: {exc}"}
                    continue
                out[key] = {
                    "package_hash": package_hash({**package.model_dump(mode="json"), "evidence_code": None}),
                    "total_tokens": package.total_tokens,
                    "chunks": [(r.chunk_id[:16], r.char_start, r.char_end, r.redacted) for r in package.ordered_chunks],
                    "structural_toc": package.structural_toc,
                    "exclusions_note": package.exclusions_note,
                    "risk_summary": package.risk_summary,
                    "summary": {k: v for k, v in summary.model_dump(mode="json").items() if k not in ("audit_id", "latency_ms")},
                }
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--deals", type=Path, help="a folder of chunk JSONL files (one deal or more each) to add to the bundled fixtures")
    ap.add_argument("--patterns", type=Path, help="pattern memories to load besides the bundled ones (default: patterns.jsonl beside --deals)")
    ap.add_argument("--store", type=Path, help="store directory (default: a fresh temporary one)")
    ap.add_argument("--out", type=Path, help="write the fingerprints here (JSON)")
    ap.add_argument("--compare", type=Path, help="compare with an earlier --out file; exit 1 on any difference")
    a = ap.parse_args()

    files = sorted(SAMPLE_DATA.glob("*/chunks.jsonl"))
    pattern_files = [SAMPLE_DATA / "patterns.jsonl"]
    if a.deals is not None:
        files += sorted(a.deals.glob("*.jsonl"))
        extra = a.patterns or a.deals.parent / "patterns.jsonl"
        if extra.exists():
            pattern_files.append(extra)
    with tempfile.TemporaryDirectory() as tmp:
        with Store.open(a.store or Path(tmp) / "store") as store:
            report = Ingestor(store).ingest(files)
            if report.rejected:
                print(f"rejected lines: {report.rejected}", file=sys.stderr)
                return 2
            for pf in pattern_files:
                patterns, bad = read_patterns(pf)
                add_patterns(store, patterns)
            result = json.loads(json.dumps(fingerprints(store, _deal_ids(files))))  # as stored: tuples become lists
    print(f"{len(result)} deal x agent x stage runs ({sum(1 for v in result.values() if 'error' in v)} refused by contract or stage)")
    if a.out:
        a.out.write_text(json.dumps(result, indent=1, sort_keys=True))
    if a.compare:
        before = json.loads(a.compare.read_text())
        diffs = 0
        for key in sorted(set(before) | set(result)):
            old, new = before.get(key), result.get(key)
            if old == new:
                continue
            diffs += 1
            fields = sorted(k for k in set(old or {}) | set(new or {}) if (old or {}).get(k) != (new or {}).get(k))
            print(f"DIFF {key}: {fields}")
        print(f"{diffs} difference(s) against {a.compare}")
        return 1 if diffs else 0
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
