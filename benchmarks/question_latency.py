"""Warm latency of question intents (issue 19): ``RetrievalAgent.ask_sync`` on one deal of an existing store.

Run after ``benchmarks/retrieval_latency.py --keep`` (its 100k store holds 50 deals of 2,000 chunks)::

    python benchmarks/question_latency.py --store /tmp/lat/store-100000 --deal 2026-SCALE-0002

Each question is asked once to embed it (query vectors are cached afterwards), then ``--rounds`` times; every
call is a full ``ask`` (routing, ranking, packing, audit write). Prints and writes JSON (``--out``, default
``benchmarks/results/question_latency.json``) with p50 / p95 (``_common.percentile``), the first call, the machine and
its load.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine_info, now_iso, percentile, result_path, write_result  # noqa: E402

QUESTIONS = (
    "What does the reserve fund study say about the roof replacement and its cost?",
    "Is there a builders' lien or a caveat registered against the unit?",
    "What special levy did the board approve and when is it due?",
    "What are the arrears of property taxes on the roll?",
    "What does the bylaw say about renting the unit?",
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", type=Path, required=True)
    ap.add_argument("--deal", required=True)
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--out", default=None, help="result file (default benchmarks/results/question_latency.json)")
    args = ap.parse_args()

    from retrieval_node import RetrievalAgent, Store, TrustContext

    with Store.open(args.store) as st:
        agent = RetrievalAgent(st, trust=TrustContext(max_sensitivity="confidential", authenticated=True, actor_id="bench:ask"))
        t = time.perf_counter()
        agent.ask_sync(args.deal, QUESTIONS[0])
        first = (time.perf_counter() - t) * 1000
        for q in QUESTIONS:
            agent.ask_sync(args.deal, q)
        load = os.getloadavg()[0]
        ms = []
        for _ in range(args.rounds):
            for q in QUESTIONS:
                t = time.perf_counter()
                agent.ask_sync(args.deal, q)
                ms.append((time.perf_counter() - t) * 1000)
        agent.close()
    out = {"benchmark": "question_latency", "date": now_iso(), "machine": machine_info(), "store": str(args.store), "deal": args.deal,
           "first_call_ms": round(first, 1), "warm_calls": len(ms), "warm_p50_ms": round(percentile(ms, 50), 1),
           "warm_p95_ms": round(percentile(ms, 95), 1), "load_avg_1m_before": round(load, 2), "load_avg_1m_after": round(os.getloadavg()[0], 2)}
    print(json.dumps({k: v for k, v in out.items() if k != "machine"}, indent=1))
    print(f"wrote {write_result(result_path('question_latency', args.out, False), out)}")

if __name__ == "__main__":
    main()
