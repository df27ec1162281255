"""Questions about conveyancing deals, with question-level gold (issue 19, questions evaluated on deals we did not write)

A question file (JSONL, one question a line)::

    {"id": "q001", "deal_id": "...", "split": "dev" | "held", "category": "fact" | "risk" | "clean_check" | "document",
     "question": "...", "answer": "...", "gold": [{"chunk_id": "...", "role": "answer" | "support", "why": "..."}]}

is asked of a store holding the deals (``deals/*.jsonl`` of ``--set-dir`` are ingested when a deal is missing; a
store ``score.py`` filled can be reused)::

    python benchmarks/deal_questions.py --questions Q.jsonl --set-dir ../shared/bench/deals --store /tmp/dq/store [--split held]

For every question, two calls of the product: ``RetrievalAgent.rank_question`` (the whole ranking a package is cut
from) gives the rank of the first ``answer`` chunk (hit@1, hit@3, MRR); ``RetrievalAgent.ask_sync`` at ``--budget``
(default: the product's question budget) gives the package: the share of ``answer`` chunks it holds (all of them
and each of them), and of ``support`` chunks. Gold is read after the calls, to score them; nothing of it reaches
the product. Figures per category and split, and over all. Prints and writes JSON (``--out``, default
``benchmarks/results/deal_questions.json``).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine_info, now_iso, result_path, write_result  # noqa: E402

ROLES = ("answer", "support")


def load_questions(path: Path) -> list[dict]:
    """The question file's lines, checked: each names its deal, question and at least one ``answer`` chunk."""
    out, seen = [], set()
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            q = json.loads(line)
        except json.JSONDecodeError as exc:
            raise SystemExit(f"{path}:{n}: not JSON ({exc.msg})") from None
        for field in ("id", "deal_id", "question", "gold"):
            if not q.get(field):
                raise SystemExit(f"{path}:{n}: field {field!r} missing or empty")
        if q["id"] in seen:
            raise SystemExit(f"{path}:{n}: id {q['id']!r} repeats an earlier line")
        seen.add(q["id"])
        for g in q["gold"]:
            if g.get("role", "answer") not in ROLES:
                raise SystemExit(f"{path}:{n}: gold role {g.get('role')!r} is not one of {ROLES}")
        if not any(g.get("role", "answer") == "answer" for g in q["gold"]):
            raise SystemExit(f"{path}:{n}: no gold chunk with role 'answer'")
        out.append(q)
    return out


def summarise(rows: list[dict]) -> dict:
    """hit@1 / hit@3 / MRR of the first answer chunk in the ranking; package recall of answer and support chunks."""
    if not rows:
        return {"questions": 0}
    n = len(rows)
    firsts = [r["first_answer_rank"] for r in rows]
    answers = sum(r["answers"] for r in rows)
    supports = sum(r["supports"] for r in rows)
    return {
        "questions": n,
        "hit@1": round(sum(1 for f in firsts if f == 1) / n, 4),
        "hit@3": round(sum(1 for f in firsts if f is not None and f <= 3) / n, 4),
        "mrr": round(sum(1 / f for f in firsts if f) / n, 4),
        "all_answers_packed": round(sum(1 for r in rows if r["answers_packed"] == r["answers"]) / n, 4),
        "answer_recall": round(sum(r["answers_packed"] for r in rows) / answers, 4),
        "support_recall": round(sum(r["supports_packed"] for r in rows) / supports, 4) if supports else None,
        "mean_package_tokens": round(sum(r["package_tokens"] for r in rows) / n, 1),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--questions", type=Path, required=True, help="question file (JSONL, see the module docstring)")
    ap.add_argument("--set-dir", type=Path, required=True, help="folder with deals/*.jsonl (ingested when a deal is missing)")
    ap.add_argument("--store", type=Path, required=True, help="store directory")
    ap.add_argument("--split", default="all", help="only the questions of this split (default: all)")
    ap.add_argument("--budget", type=int, default=None, help="package budget (default: the product's question budget)")
    ap.add_argument("--out", default=None, help="result file (default benchmarks/results/deal_questions.json)")
    args = ap.parse_args(argv)

    from retrieval_node import RetrievalAgent, Store, TrustContext

    questions = [q for q in load_questions(args.questions) if args.split == "all" or q.get("split") == args.split]
    if not questions:
        ap.error(f"--questions {args.questions}: no question of split {args.split!r}")
    rows = []
    with Store.open(args.store) as st:
        deals = sorted({q["deal_id"] for q in questions})
        missing = [d for d in deals if not st.registry.deal_records(d)]
        if missing:
            files = [args.set_dir / "deals" / f"{d}.jsonl" for d in missing]
            absent = [str(f) for f in files if not f.exists()]
            if absent:
                ap.error(f"deals not in the store and not in --set-dir: {', '.join(absent)}")
            from retrieval_node.ingest import Ingestor
            Ingestor(st).ingest(files)
        agent = RetrievalAgent(st, trust=TrustContext(max_sensitivity="confidential", authenticated=True, actor_id="bench:deal-questions"))
        try:
            for q in questions:
                gold = {role: {g["chunk_id"] for g in q["gold"] if g.get("role", "answer") == role} for role in ROLES}
                ranked = [s.chunk.chunk_id for s in agent.rank_question(q["deal_id"], q["question"]).scored]
                first = next((i for i, cid in enumerate(ranked, 1) if cid in gold["answer"]), None)
                package, _summary = agent.ask_sync(q["deal_id"], q["question"], budget=args.budget)
                packed = [r.chunk_id for r in package.ordered_chunks]
                rows.append({"id": q["id"], "deal": q["deal_id"], "split": q.get("split"), "category": q.get("category"),
                             "question": q["question"], "first_answer_rank": first,
                             "answers": len(gold["answer"]), "answers_packed": len(gold["answer"] & set(packed)),
                             "supports": len(gold["support"]), "supports_packed": len(gold["support"] & set(packed)),
                             "package_chunks": len(packed), "package_tokens": package.total_tokens,
                             "missed": sorted(gold["answer"] - set(packed))})
        finally:
            agent.close()
    by_category, by_split = defaultdict(list), defaultdict(list)
    for r in rows:
        by_category[r["category"] or "-"].append(r)
        by_split[r["split"] or "-"].append(r)
    out = {"benchmark": "deal_questions", "date": now_iso(), "machine": machine_info(), "questions_file": str(args.questions),
           "set_dir": str(args.set_dir), "store": str(args.store), "split": args.split, "budget": args.budget,
           "all": summarise(rows), "by_category": {k: summarise(v) for k, v in sorted(by_category.items())},
           "by_split": {k: summarise(v) for k, v in sorted(by_split.items())}, "rows": rows}
    for r in rows:
        rank = r["first_answer_rank"] if r["first_answer_rank"] is not None else "-"
        print(f"{r['id']:<6} {r['deal']:<16} {(r['category'] or '-'):<12} rank {rank!s:<4} answers {r['answers_packed']}/{r['answers']}"
              f"  ({r['package_chunks']} chunks, {r['package_tokens']} tokens)  {r['question']}")
    for name, group in [("ALL", out["all"])] + [(f"category {k}", v) for k, v in out["by_category"].items()] + \
                       [(f"split {k}", v) for k, v in out["by_split"].items()]:
        print(f"{name:<22} " + " ".join(f"{k}={v}" for k, v in group.items()))
    print(f"wrote {write_result(result_path('deal_questions', args.out, False), out)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
