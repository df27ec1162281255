"""Memory of one process serving many deals (issue 18): RSS after the first call on each deal of an existing store.

Run after ``benchmarks/retrieval_latency.py --keep`` (its 100k store holds 50 deals of 2,000 chunks)::

    python benchmarks/deal_memory.py --store /tmp/lat/store-100000 --deals 30

One process opens the store and makes the first call on deals ``2026-SCALE-0001`` .. ``--deals`` in turn (the
investigator, condo and tax profiles in rotation), printing after each the deal views kept, the RSS and its split:
the process's own heap (``RssAnon``) and mapped files (``RssFile``: shared libraries and the store's memory-mapped
vector and payload files, clean pages the kernel can drop and read again). Once ``deal_cache_size`` views are kept,
what the RSS still gains per deal is reported as the slope of both parts. Linux only (``/proc/self/status``).
Writes JSON (``--out``).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine_info, now_iso, rss_parts_mb, write_result  # noqa: E402

AGENTS = ("investigator", "condo", "tax")


def _slope(points: list[tuple[int, float]]) -> float | None:
    """Least-squares MB per deal."""
    if len(points) < 2:
        return None
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    var = sum((x - mx) ** 2 for x, _ in points)
    return round(sum((x - mx) * (y - my) for x, y in points) / var, 2) if var else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", type=Path, required=True)
    ap.add_argument("--deals", type=int, default=30, help="first calls on deals 2026-SCALE-0001 .. N (default 30)")
    ap.add_argument("--prefix", default="2026-SCALE-", help="deal id prefix (ids are <prefix><4-digit number>)")
    ap.add_argument("--out", type=Path, default=Path("deal_memory.json"))
    args = ap.parse_args()
    if rss_parts_mb() is None:
        sys.exit("deal_memory.py reads /proc/self/status: Linux only")

    from retrieval_node import RetrievalAgent, Store, TrustContext

    rows = []
    with Store.open(args.store) as st:
        opened = rss_parts_mb()
        agent = RetrievalAgent(st, trust=TrustContext(max_sensitivity="confidential", authenticated=True, actor_id="bench:memory"))
        limit = agent.config.retrieval.deal_cache_size
        for i in range(args.deals):
            deal = f"{args.prefix}{i + 1:04d}"
            t = time.perf_counter()
            agent.retrieve_sync(agent.intent_for(AGENTS[i % len(AGENTS)], deal_id=deal))
            ms = (time.perf_counter() - t) * 1000
            parts = rss_parts_mb() or {}
            rows.append({"deal": deal, "first_call_ms": round(ms, 1), "views": len(agent.pipeline.deals), **parts})
            print(f"{i + 1:3d} {deal}  {ms:7.0f} ms  views {rows[-1]['views']:3d}  own heap {parts['anon']:7.1f} MB  mapped files {parts['file']:7.1f} MB", flush=True)
        agent.close()
    full = [(i, r) for i, r in enumerate(rows, 1) if i > limit]
    out = {
        "benchmark": "deal_memory", "date": now_iso(), "store": str(args.store), "deals": args.deals, "deal_cache_size": limit,
        "rss_after_open_mb": opened, "per_deal": rows,
        "mb_per_further_deal_once_cache_full": {"anon": _slope([(i, r["anon"]) for i, r in full]), "file": _slope([(i, r["file"]) for i, r in full])},
        "load_avg_1m_after": round(os.getloadavg()[0], 2), "machine": machine_info(),
    }
    print(f"after open: own heap {opened['anon']} MB, mapped files {opened['file']} MB; once {limit} views are kept, each further deal adds "
          f"{out['mb_per_further_deal_once_cache_full']['anon']} MB of heap and {out['mb_per_further_deal_once_cache_full']['file']} MB of mapped files")
    write_result(args.out, out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
