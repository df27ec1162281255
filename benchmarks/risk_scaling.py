"""Time of a chunk's risk findings against its length, with its line breaks and without them.

Ingest works out every chunk's risk findings (:func:`retrieval_node.risk.risk_findings`, under each risk setting the
configured profiles read with). Many rules read a mention's line: a table row is read as a row. A PDF's text layer
often comes without line breaks, and then a whole page, or a whole document, is one line. This script shows how the
time grows with the chunk's length in both layouts: linear growth keeps the cost per thousand characters flat.

Two texts: ``deal``, the ingest benchmark's synthetic deal text (``_synth``: register rows, levies, arrears, discharges
and their benign look-alikes), joined with line breaks up to each length; and ``dense``, a text where every line names
a risk (register rows with pipes, leaders, registration numbers and amounts, and phrases of risk words with no full
stop), the worst case for the rules that read a mention's whole sentence or line. The flat layout is the same text with
every line break read as a space. Each figure is the best of ``--repeats`` timings of one call (the first call, which
fills the module's caches, is not timed).

    python benchmarks/risk_scaling.py                          # 2k .. 300k characters, both texts
    python benchmarks/risk_scaling.py --sizes 2000 100000 --repeats 5 --texts dense
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Phase, run_benchmark, table  # noqa: E402
from _synth import SECTION_MIX, paragraphs  # noqa: E402

NAME = "risk_scaling"
DEFAULT_SIZES = (2_000, 10_000, 30_000, 100_000, 300_000)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--sizes", type=int, nargs="+", default=list(DEFAULT_SIZES), help="chunk lengths in characters (default 2k 10k 30k 100k 300k)")
    ap.add_argument("--repeats", type=int, default=3, help="timed calls per length and layout; the best is kept (default 3)")
    ap.add_argument("--seed", type=int, default=20261129)
    ap.add_argument("--texts", nargs="+", choices=("deal", "dense"), default=["deal", "dense"], help="which texts (default both)")
    ap.add_argument("--config-dir", default=None, help="config directory (default: the package's configs)")
    ap.add_argument("--out", default=None, help="JSON result path (default benchmarks/results/risk_scaling.json)")
    ap.add_argument("--smoke", action="store_true", help="tiny run for CI: checks the script works, figures are not meaningful")
    args = ap.parse_args(argv)
    if args.smoke:
        args.sizes = [1_000, 4_000]
        args.repeats = 1
    if args.repeats < 1:
        ap.error("--repeats must be at least 1")
    if any(n < 1 for n in args.sizes):
        ap.error("--sizes must be positive")
    return args


def deal_text(n_chars: int, seed: int) -> str:
    """At least ``n_chars`` characters of synthetic deal text, paragraphs of every section joined by line breaks, cut to
    ``n_chars`` at a line break where there is one."""
    r = random.Random(seed)
    parts: list[str] = []
    total = 0
    while total < n_chars:
        role, section, _ = SECTION_MIX[r.randrange(len(SECTION_MIX))]
        content, _ = paragraphs(role, section, r.randint(400, 1600), r)
        parts.append(content)
        total += len(content) + 1
    text = "\n".join(parts)[:n_chars]
    cut = text.rfind("\n")
    return text[:cut] if cut > n_chars // 2 else text


#: the lines of the dense text: each names a risk, with the numbers, amounts and cells the rules read around a mention
_DENSE_LINES = (
    "| Builders' lien 25{d} 118 407 | Tamarack Drywall Ltd. | $48,2{d}0.00 |", "| Tax arrears | $1,{d}04.18 | unpaid |",
    "| Penalty | - | - |", "| Caveat 212 3{d}0 111 re: option to purchase | Discharged? | NO |",
    "| Special levy | $3,{d}00 per unit | approved |", "Unit {d}0{d} owes $2,{d}00 in arrears to the corporation",
    "Lot {d}4 caveat 242 11{d} 009 discharged", "water damage deductible $10{d},000 charged back to the owner",
    "Arrears ........ $ {d},204.18", "the owners approved a special levy of $1{d},500 per unit",
    "lien caveat writ of enforcement tax arrears and penalty {d}", "Roll 40{d}0114011 penalty 0.00 outstanding nil",
)


def dense_text(n_chars: int, seed: int) -> str:
    """At least ``n_chars`` characters of :data:`_DENSE_LINES` in random order, cut to ``n_chars`` at a line break."""
    r = random.Random(seed)
    lines: list[str] = []
    total = 0
    while total < n_chars:
        lines.append(r.choice(_DENSE_LINES).format(d=r.randint(0, 9)))
        total += len(lines[-1]) + 1
    text = "\n".join(lines)[:n_chars]
    return text[:text.rfind("\n")] if "\n" in text else text


TEXTS = {"deal": deal_text, "dense": dense_text}


def run(args: argparse.Namespace) -> dict[str, Any]:
    from retrieval_node.config import load_config
    from retrieval_node.precompute import SHORTFALL_RATIO, risk_settings
    from retrieval_node.risk import risk_findings

    settings = [(s.lexicon, s.domains, s.excerpt_chars) for s in risk_settings(load_config(args.config_dir))]
    rows = []
    for kind, n in [(kind, n) for kind in args.texts for n in args.sizes]:
        text = TEXTS[kind](n, args.seed)
        for layout, body in (("lines", text), ("flat", text.replace("\n", " "))):
            risk_findings(body, settings, shortfall_ratio=SHORTFALL_RATIO)  # fills the module's caches (compiled patterns)
            times, other = [], []
            for _ in range(args.repeats):
                with Phase() as ph:
                    found = risk_findings(body, settings, shortfall_ratio=SHORTFALL_RATIO)
                times.append(ph.seconds)
                other.append(ph.other_cores if ph.seconds >= 0.5 else None)  # a shorter call is below the clock's tick
            best = min(times)
            rows.append({
                "text": kind, "chars": len(body), "layout": layout, "lines": body.count("\n") + 1, "ms": round(1000 * best, 2),
                "ms_per_1k_chars": round(1000 * best / max(1, len(body)) * 1000, 3),
                "material_settings": sum(1 for sig, _ in found if sig.material),
                "runs_s": [round(t, 4) for t in times], "other_cores": max((o for o in other if o is not None), default=None),
            })
    return {"settings": len(settings), "rows": rows}


def report(results: dict[str, Any], args: argparse.Namespace) -> None:
    print(f"\nrisk findings of one chunk under {results['settings']} risk settings, best of {args.repeats}")
    print(table(["text", "characters", "layout", "lines", "ms", "ms per 1k chars", "material settings"],
                [[r["text"], r["chars"], r["layout"], r["lines"], r["ms"], r["ms_per_1k_chars"], r["material_settings"]] for r in results["rows"]], digits=2))
    noisy = [r for r in results["rows"] if (r.get("other_cores") or 0) > 0.25]
    if noisy:
        print(f"note: other processes kept up to {max(r['other_cores'] for r in noisy):.2f} cores busy during {len(noisy)} timed row(s)")
    if args.smoke:
        print("(smoke run: too small for the figures to mean anything)")


def main(argv: list[str] | None = None) -> int:
    run_benchmark(NAME, parse_args(argv), run, report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
