"""Risk flags on text written by others: recall of material excerpts and false alarms on benign ones.

Reads the probe sets in ``benchmarks/risk_probe/`` (see its README: who wrote them and which were used while the rules
changed), asks :func:`retrieval_node.risk.risk_signal` for each excerpt with the excerpt's domain, and counts, per set
and domain: material excerpts flagged material (recall) and benign excerpts flagged material (false alarms). Prints a
table and writes ``benchmarks/results/risk_probe.json`` with the ids of every miss and false alarm.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine_info, now_iso, result_path, table, write_result  # noqa: E402

PROBE_DIR = Path(__file__).resolve().parent / "risk_probe"


def load_set(name: str) -> list[dict]:
    """The excerpts of a probe set: a name in ``benchmarks/risk_probe/`` ("set_c") or a path to a ``.jsonl`` file."""
    path = Path(name) if name.endswith(".jsonl") else PROBE_DIR / f"{name}.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", default="set_a,set_b,set_c,set_d,set_e,set_f,set_g,set_h,set_i,set_j,set_k,set_l,set_m,set_n,set_o,set_p,set_q",
                    help="comma-separated probe sets: names in benchmarks/risk_probe/ or paths to .jsonl files (default the twelve shipped)")
    ap.add_argument("--out", help="result JSON (default benchmarks/results/risk_probe.json)")
    ap.add_argument("--smoke", action="store_true", help="the first 10 excerpts of each set")
    args = ap.parse_args()

    from retrieval_node.config import load_config
    from retrieval_node.risk import risk_signal

    lexicon = load_config().risk_signals
    assert lexicon is not None
    results: dict[str, dict] = {}
    rows = []
    for name in args.sets.split(","):
        items = load_set(name)
        if args.smoke:
            items = items[:10]
        per: dict[str, dict] = {}
        for it in items:
            flagged = risk_signal(it["text"], lexicon, [it["domain"]]).material
            d = per.setdefault(it["domain"], {"material": 0, "found": 0, "benign": 0, "false_alarms": 0, "missed": [], "false": []})
            if it["material"]:
                d["material"] += 1
                d["found"] += flagged
                if not flagged:
                    d["missed"].append(it["id"])
            else:
                d["benign"] += 1
                d["false_alarms"] += flagged
                if flagged:
                    d["false"].append(it["id"])
        total = {k: sum(d[k] for d in per.values()) for k in ("material", "found", "benign", "false_alarms")}
        results[name] = {"domains": per, "all": total}
        for dom, d in [*sorted(per.items()), ("ALL", total)]:
            rows.append([name, dom, f"{d['found']}/{d['material']}", d["found"] / d["material"] if d["material"] else float("nan"),
                         f"{d['false_alarms']}/{d['benign']}", d["false_alarms"] / d["benign"] if d["benign"] else float("nan")])
    print(table(["set", "domain", "recall", "", "false alarms", ""], rows, digits=3))
    path = write_result(result_path("risk_probe", args.out, args.smoke),
                        {"date": now_iso(), "machine": machine_info(), "smoke": args.smoke, "results": results})
    print(f"results: {path}")


if __name__ == "__main__":
    main()
