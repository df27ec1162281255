"""Does the material flag hold when the same words come in another layout? A dev-set folder's chunks re-laid out.

Stage 0's text is OCR with its lines, but where the lines break depends on the PDF, the extractor and the page width. This
script reads every chunk of a dev-set folder (``../shared/bench/deals`` or a ``generate.py --seed N`` set: ``deals/*.jsonl``,
``gold/*.json``) as it is and in each layout below, and compares the material flag (``risk.risk_signal``) per chunk and
risk domain (title, tax, condo):

* ``crlf``: every line ending ``\\r\\n``;
* ``prose-joined``: a line break between two words of running prose (a lower-case letter or a comma before it, a
  lower-case letter after it) read as a space: wrapped paragraphs reflowed;
* ``prose-wrapped-40``: the prose reflowed as above, then each line that is not a row (no column gap, pipe, dotted
  leaders or ``label:`` at its start) wrapped at 40 columns: a narrow column of the same prose;
* ``paragraphs-joined``: every single line break read as a space, blank lines kept (a table's rows joined too);
* ``flat``: every line break read as a space (a text layer without line breaks).

Per layout it counts the gold material chunks of each domain the flag finds (as laid out and originally), the other
chunks it flags, and names every chunk whose flag changed. The gold is read only to count; the flag never sees it.
No model, no store (~20 s on the 587 chunks of the standard set)::

    python benchmarks/risk_layouts.py --set-dir ../shared/bench/deals
    python benchmarks/risk_layouts.py --set-dir /tmp/seed-7 --layouts flat prose-joined
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import REPO, run_benchmark, table  # noqa: E402

NAME = "risk_layouts"
DOMAINS = ("title", "tax", "condo")
#: the dev set's intents that read each risk domain (its gold names their material chunks)
INTENT_DOMAIN = {"title_risk_scan_v1": "title", "tax_arrears_check_v1": "tax", "condo_reserve_fund_health_v1": "condo"}
_ROW = re.compile(r"\S  +\S|\||\.{3,}|^\s*[^.:\n]{1,40}:", re.M)


def _prose_joined(text: str) -> str:
    return re.sub(r"(?<=[a-z,])\n(?=[a-z])", " ", text)


def _rewrap(text: str, width: int) -> str:
    """The prose reflowed (:func:`_prose_joined`), then each line of it that is not a row wrapped at ``width``."""
    return "\n".join(line if _ROW.search(line) or len(line) <= width else "\n".join(textwrap.wrap(line, width, break_long_words=False, break_on_hyphens=False))
                     for line in _prose_joined(text).split("\n"))


LAYOUTS: dict[str, Callable[[str], str]] = {
    "crlf": lambda t: t.replace("\n", "\r\n"),
    "prose-joined": _prose_joined,
    "prose-wrapped-40": lambda t: _rewrap(t, 40),
    "paragraphs-joined": lambda t: re.sub(r"(?<!\n)\n(?!\n)", " ", t),
    "flat": lambda t: t.replace("\n", " "),
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--set-dir", type=Path, default=REPO.parent / "shared" / "bench" / "deals", help="folder with deals/*.jsonl and gold/*.json")
    ap.add_argument("--layouts", nargs="+", choices=sorted(LAYOUTS), default=list(LAYOUTS), help="layouts to read (default: all)")
    ap.add_argument("--config-dir", default=None, help="config directory (default: the package's configs)")
    ap.add_argument("--out", default=None, help="JSON result path (default benchmarks/results/risk_layouts.json)")
    ap.add_argument("--smoke", action="store_true", help="write the result as a smoke run's (figures are those of --set-dir)")
    args = ap.parse_args(argv)
    if not (args.set_dir / "deals").is_dir() or not (args.set_dir / "gold").is_dir():
        ap.error(f"--set-dir {args.set_dir}: needs deals/ and gold/")
    return args


def _chunks(set_dir: Path) -> list[dict[str, Any]]:
    out = []
    for path in sorted((set_dir / "deals").glob("*.jsonl")):
        out += [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return out


def _gold_material(set_dir: Path) -> set[tuple[str, str]]:
    """(chunk id, domain) of every chunk the gold marks material for an intent reading that domain."""
    found: set[tuple[str, str]] = set()
    for path in sorted((set_dir / "gold").glob("*.json")):
        for intent, spec in json.loads(path.read_text(encoding="utf-8")).get("intents", {}).items():
            if intent in INTENT_DOMAIN:
                found |= {(cid, INTENT_DOMAIN[intent]) for cid in spec.get("material_chunk_ids", [])}
    return found


def run(args: argparse.Namespace) -> dict[str, Any]:
    from retrieval_node.config import load_config
    from retrieval_node.risk import risk_signals

    lexicon = load_config(args.config_dir).risk_signals
    if lexicon is None:
        raise SystemExit("the configuration has no risk lexicon")
    chunks = _chunks(args.set_dir)
    gold = _gold_material(args.set_dir)

    settings = [(lexicon, [d]) for d in DOMAINS]

    def flags(text: str) -> dict[str, bool]:  # the three domains read at once: what they share is read once
        return {d: sig.material for d, sig in zip(DOMAINS, risk_signals(text, settings), strict=True)}

    original = {c["chunk_id"]: flags(c["content"]) for c in chunks}
    rows = []
    for name in args.layouts:
        t0 = time.perf_counter()
        lost, gained, changed_text = [], [], 0
        found = flagged_other = 0
        for c in chunks:
            laid = LAYOUTS[name](c["content"])
            changed_text += laid != c["content"]
            now = flags(laid)
            for d in DOMAINS:
                key = (c["chunk_id"], d)
                where = {"chunk_id": c["chunk_id"], "deal": c["deal_id"], "document": c["document_id"], "pages": [c["page_start"], c["page_end"]], "domain": d,
                         "gold_material": key in gold}
                found += key in gold and now[d]
                flagged_other += key not in gold and now[d]
                if original[c["chunk_id"]][d] and not now[d]:
                    lost.append(where)
                elif now[d] and not original[c["chunk_id"]][d]:
                    gained.append(where)
        rows.append({
            "layout": name, "chunks_changed": changed_text, "seconds": round(time.perf_counter() - t0, 2),
            "gold_material": len(gold), "gold_found": found,
            "gold_found_original": sum(1 for cid, d in gold if original.get(cid, {}).get(d)),
            "other_flagged": flagged_other,
            "other_flagged_original": sum(1 for c in chunks for d in DOMAINS if (c["chunk_id"], d) not in gold and original[c["chunk_id"]][d]),
            "flags_lost": lost, "flags_gained": gained,
        })
    return {"set_dir": str(args.set_dir), "chunks": len(chunks), "rows": rows}


def report(results: dict[str, Any], args: argparse.Namespace) -> None:
    print(f"\nthe material flag per chunk and domain ({', '.join(DOMAINS)}), {results['chunks']} chunks of {results['set_dir']}")
    print(table(["layout", "chunks changed", "gold material found (original)", "other chunks flagged (original)", "flags lost", "flags gained"],
                [[r["layout"], r["chunks_changed"], f"{r['gold_found']}/{r['gold_material']} ({r['gold_found_original']})",
                  f"{r['other_flagged']} ({r['other_flagged_original']})", len(r["flags_lost"]), len(r["flags_gained"])] for r in results["rows"]]))
    for r in results["rows"]:  # the JSON names every change; here the gold material ones
        for x in r["flags_lost"]:
            if x["gold_material"]:
                print(f"  {r['layout']}: gold material no longer flagged: {x['document']} p{x['pages'][0]}-{x['pages'][1]} [{x['domain']}]")


def main(argv: list[str] | None = None) -> int:
    run_benchmark(NAME, parse_args(argv), run, report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
