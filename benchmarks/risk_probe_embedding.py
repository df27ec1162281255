"""An experiment beside the risk flag (not used by the node): a classifier of MiniLM embeddings, judged on probe sets.

A logistic regression (scikit-learn, which sentence-transformers already installs) on the embedding of
"<domain>: <excerpt>" and the domain, trained on the probe sets whose failures were read (A, B, E, G), predicts
material or not for the excerpts of the sets never read (C, D, F, H). Printed beside the lexicon flag
(:func:`retrieval_node.risk.risk_signal`) and two combinations: either says material (recall first), both say so.
It answers one question: does a model of the wording find what the lexicon misses on text written by others, and at
what cost in false alarms. Writes ``benchmarks/results/risk_probe_embedding.json``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine_info, now_iso, result_path, table, write_result  # noqa: E402
from risk_probe import load_set  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--train", default="set_a,set_b,set_e,set_g", help="probe sets to fit on (default: those that were read)")
    ap.add_argument("--test", default="set_c,set_d,set_f,set_h", help="probe sets to judge on (default: those never read)")
    ap.add_argument("--c", type=float, default=1.0, help="inverse regularisation strength of the logistic regression")
    ap.add_argument("--out", help="result JSON (default benchmarks/results/risk_probe_embedding.json)")
    ap.add_argument("--smoke", action="store_true", help="the first 12 excerpts of each set (CI: checks the script runs)")
    args = ap.parse_args()

    import numpy as np
    from sklearn.linear_model import LogisticRegression

    from retrieval_node.config import load_config
    from retrieval_node.embedding import SentenceTransformerEmbedder
    from retrieval_node.risk import risk_signal

    lexicon = load_config().risk_signals
    assert lexicon is not None
    embedder = SentenceTransformerEmbedder.load(backend="torch")
    domains = ("title", "tax", "condo")

    def items_of(names: str) -> dict[str, list[dict]]:
        return {n: load_set(n)[:12] if args.smoke else load_set(n) for n in names.split(",")}

    def features(items: list[dict]) -> np.ndarray:
        vectors = np.asarray(embedder.embed([f"{i['domain']}: {i['text']}" for i in items]), dtype=np.float64)
        onehot = np.array([[i["domain"] == d for d in domains] for i in items], dtype=np.float64)
        return np.hstack([vectors, onehot])

    train = [i for items in items_of(args.train).values() for i in items]
    model = LogisticRegression(C=args.c, max_iter=5000).fit(features(train), np.array([i["material"] for i in train]))
    results: dict[str, dict] = {}
    rows = []
    for name, items in items_of(args.test).items():
        truth = np.array([i["material"] for i in items])
        lex = np.array([risk_signal(i["text"], lexicon, [i["domain"]]).material for i in items])
        emb = model.predict(features(items)).astype(bool)
        results[name] = {}
        for label, pred in (("lexicon", lex), ("embedding", emb), ("either", lex | emb), ("both", lex & emb)):
            found, alarms = int((pred & truth).sum()), int((pred & ~truth).sum())
            material, benign = int(truth.sum()), int((~truth).sum())
            results[name][label] = {"found": found, "material": material, "false_alarms": alarms, "benign": benign}
            rows.append([name, label, f"{found}/{material}", found / material if material else float("nan"),
                         f"{alarms}/{benign}", alarms / benign if benign else float("nan")])
    print(table(["set", "flag", "recall", "", "false alarms", ""], rows, digits=3))
    path = write_result(result_path("risk_probe_embedding", args.out, args.smoke),
                        {"date": now_iso(), "machine": machine_info(), "smoke": args.smoke, "train": args.train, "c": args.c,
                         "train_excerpts": len(train), "results": results})
    print(f"results: {path}")


if __name__ == "__main__":
    main()
