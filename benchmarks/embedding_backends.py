#!/usr/bin/env python
"""Embedding backends side by side (issue 18 "Faster ingest"): PyTorch fp32, PyTorch with bf16 autocast, ONNX Runtime
fp32, ONNX Runtime int8.

What is measured, on the same texts for every backend:

1. **export**: the ONNX backends export the packaged all-MiniLM-L6-v2 locally (``embedding_onnx_dir``, here a
   temporary directory so the one-off export is timed too) and load it; PyTorch just loads.
2. **throughput**: the chunks' window texts, cut as ingest cuts them (``window_spans`` with the config's
   ``window_tokens`` / ``window_overlap_tokens``), embedded with ``embed_windows`` in batches of
   ``embedding_batch_size``; chunks/s = chunks / seconds. Passes are interleaved (torch, torch-bf16, onnx, onnx-int8, torch, ...)
   ``--repeats`` times so load drifting on a shared machine hits every backend; the load average is recorded
   before and after every pass.
3. **agreement**: cosine of each window's vector with PyTorch's (min, 1st percentile, mean).
4. **retrieval** (unless ``--no-eval``): ``retrieval-node eval DEALS --store <fresh store> --json`` per backend
   (``RETRIEVAL_NODE_EMBEDDING_BACKEND``), one fresh process and store each; its SCORE line and totals.

Texts: ``retrieval_node/sample_data/*/chunks.jsonl`` and, when present, the dev set's ``deals/*.jsonl``
(``--deals``, read only).

    python benchmarks/embedding_backends.py                    # all texts, 3 repeats, dev-set eval per backend
    python benchmarks/embedding_backends.py --smoke            # 24 texts, 1 repeat, no eval; well under a minute

Writes ``benchmarks/results/embedding_backends.json`` (``embedding_backends_smoke.json`` for ``--smoke``;
``--out`` overrides).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO, machine_info, now_iso, result_path, table, write_result  # noqa: E402

sys.path.insert(0, str(REPO))
from retrieval_node.config import load_config  # noqa: E402
from retrieval_node.embedding import EMBEDDING_BACKENDS, LazyEmbedder  # noqa: E402

DEFAULT_DEALS = REPO.parent / "shared" / "bench" / "deals"


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _texts(deals: Path | None) -> tuple[list[str], dict[str, int]]:
    files = sorted(glob.glob(str(REPO / "retrieval_node" / "sample_data" / "*" / "chunks.jsonl")))
    sources = {"sample_data": 0, "dev_set": 0}
    texts: list[str] = []
    for f in files:
        for line in Path(f).read_text(encoding="utf-8").splitlines():
            if line.strip():
                texts.append(json.loads(line)["content"])
                sources["sample_data"] += 1
    if deals is not None and (deals / "deals").is_dir():
        for f in sorted((deals / "deals").glob("*.jsonl")):
            for line in f.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    texts.append(json.loads(line)["content"])
                    sources["dev_set"] += 1
    return texts, sources


def _eval(backend: str, deals: Path, onnx_dir: str, work: Path) -> dict:
    env = dict(os.environ, RETRIEVAL_NODE_EMBEDDING_BACKEND=backend, RETRIEVAL_NODE_EMBEDDING_ONNX_DIR=onnx_dir,
               PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    store = work / f"store-{backend}"
    before = _load()
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "retrieval_node.cli", "eval", str(deals), "--store", str(store), "--json"],
                          env=env, capture_output=True, text=True, timeout=3600)
    wall = time.perf_counter() - t0
    out: dict = {"backend": backend, "exit": proc.returncode, "wall_s": round(wall, 1), "load_before": before, "load_after": _load(),
                 "command": f"RETRIEVAL_NODE_EMBEDDING_BACKEND={backend} retrieval-node eval {deals} --store {store} --json"}
    if proc.returncode != 0:
        out["stderr"] = proc.stderr[-2000:]
        return out
    report = json.loads(proc.stdout)
    total = report["total"]
    out["total"] = {k: total.get(k) for k in ("recall", "material_recall", "gold_found", "gold", "material_found", "material",
                                              "over_budget", "unreported_missing_zones", "false_missing_zones",
                                              "distractors_packed", "false_material_claims", "clean_intents", "flag_precision",
                                              "errors", "runs")}
    out["score_line"] = report["score_line"]  # as `retrieval-node eval` prints it (labelled_eval's format)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backends", default=",".join(EMBEDDING_BACKENDS), help="comma-separated, torch first (the reference)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--deals", type=Path, default=DEFAULT_DEALS, help="labelled dev set (read only)")
    ap.add_argument("--no-eval", action="store_true", help="skip the retrieval evaluation per backend")
    ap.add_argument("--smoke", action="store_true", help="24 texts, 1 repeat, no eval")
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    if backends[0] != "torch":
        backends = ["torch", *[b for b in backends if b != "torch"]]
    repeats = 1 if args.smoke else args.repeats
    rc = load_config().retrieval
    texts, sources = _texts(None if args.smoke else args.deals)
    if args.smoke:
        texts = texts[:24]
    machine = machine_info()
    onnx_dir = tempfile.mkdtemp(prefix="rn-onnx-")
    embedders: dict[str, LazyEmbedder] = {}
    setup: dict[str, dict] = {}
    for b in backends:
        emb = LazyEmbedder(rc.embedding_model, path=rc.embedding_model_path, batch_size=rc.embedding_batch_size,
                           dimension=rc.embedding_dimension, backend=b, onnx_dir=onnx_dir)
        before = _load()
        t0 = time.perf_counter()
        emb.embed(["warm up the model"])  # export (ONNX, first time) + load
        setup[b] = {"export_and_load_s": round(time.perf_counter() - t0, 2), "load_before": before, "load_after": _load(),
                    "model_key": emb.model_key}
        emb.embed(texts[:8])
        embedders[b] = emb
    spans = [embedders["torch"].window_spans(t, rc.window_tokens, rc.window_overlap_tokens) for t in texts]
    windows = [t[a:b] for t, s in zip(texts, spans, strict=True) for a, b in s]
    passes: dict[str, list[dict]] = {b: [] for b in backends}
    vectors: dict[str, np.ndarray] = {}
    for _ in range(repeats):
        for b in backends:
            emb = embedders[b]
            before = _load()
            t0 = time.perf_counter()
            parts = [emb.embed_windows(windows[i:i + rc.embedding_batch_size]) for i in range(0, len(windows), rc.embedding_batch_size)]
            secs = time.perf_counter() - t0
            vectors[b] = np.vstack(parts)
            passes[b].append({"seconds": round(secs, 2), "chunks_per_s": round(len(texts) / secs, 1), "load_before": before,
                              "load_after": _load()})
    results: dict[str, dict] = {}
    ref = vectors["torch"]
    torch_best = max(p["chunks_per_s"] for p in passes["torch"])
    for b in backends:
        cos = np.sum(vectors[b] * ref, axis=1)
        best = max(p["chunks_per_s"] for p in passes[b])
        results[b] = {"setup": setup[b], "passes": passes[b], "best_chunks_per_s": best,
                      "median_chunks_per_s": float(np.median([p["chunks_per_s"] for p in passes[b]])),
                      "speedup_vs_torch_best": round(best / torch_best, 2),
                      "cosine_vs_torch": {"min": round(float(cos.min()), 4), "p1": round(float(np.percentile(cos, 1)), 4),
                                          "mean": round(float(cos.mean()), 4)}}
    evals: dict[str, dict] = {}
    if not (args.smoke or args.no_eval) and args.deals.is_dir():
        with tempfile.TemporaryDirectory(prefix="rn-embbench-") as work:
            for b in backends:
                evals[b] = _eval(b, args.deals, onnx_dir, Path(work))
    payload = {
        "benchmark": "embedding_backends", "when": now_iso(), "machine": machine,
        "command": "python benchmarks/embedding_backends.py" + (" --smoke" if args.smoke else "") + (" --no-eval" if args.no_eval else ""),
        "settings": {"backends": backends, "repeats": repeats, "batch_size": rc.embedding_batch_size, "window_tokens": rc.window_tokens,
                     "window_overlap_tokens": rc.window_overlap_tokens, "chunks": len(texts), "windows": len(windows), "sources": sources,
                     "onnxruntime": _version("onnxruntime"), "onnx": _version("onnx")},
        "results": results, "eval": evals, "load_average_end": _load(),
    }
    path = write_result(result_path("embedding_backends", args.out, args.smoke), payload)
    rows = [[b, results[b]["setup"]["export_and_load_s"], results[b]["best_chunks_per_s"], results[b]["median_chunks_per_s"],
             results[b]["speedup_vs_torch_best"], results[b]["cosine_vs_torch"]["min"], results[b]["cosine_vs_torch"]["mean"],
             " / ".join(f"{p['load_before'][0]:.1f}" for p in passes[b])] for b in backends]
    print(f"{len(texts)} chunks ({len(windows)} windows), {repeats} interleaved passes per backend, batch {rc.embedding_batch_size}")
    print(table(["backend", "export+load s", "best chunks/s", "median chunks/s", "x torch", "cos min", "cos mean", "load1 per pass"],
                rows, digits=4))
    for b, e in evals.items():
        print(f"{b:<10} {e.get('score_line') or 'exit ' + str(e['exit'])}  ({e['wall_s']} s, load {e['load_before'][0]:.1f})")
    print(f"wrote {path}")
    return 0


def _version(dist: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


if __name__ == "__main__":
    raise SystemExit(main())
