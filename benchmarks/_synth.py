"""Synthetic Alberta conveyancing text for the benchmarks (not for quality evaluation).

Chunks are assembled from paragraph templates per (document role, section type)
with random fill-ins (instrument numbers, parties, amounts, dates), so every
chunk is distinct, reads like a deal file and carries the risk vocabulary the
ranker looks for (builders' liens, caveats, special levies, arrears) next to
benign look-alikes (discharged, paid in full, no special levy contemplated).

``paragraphs(...)`` returns the template keys used, so the latency benchmark can
derive each chunk's vector from real MiniLM embeddings of those templates.
"""

from __future__ import annotations

import random
import string
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from typing import Any

# --------------------------------------------------------------------------- fill-ins

_FIRST = ["ANDREW", "PRIYA", "MARIE", "JASON", "WEI", "OLUWASEUN", "KATHERINE", "DMITRI", "HARPREET", "LUCAS", "SOPHIE", "MOHAMMED", "EMILY", "RAJ", "NATALIA"]
_LAST = ["KOWALCHUK", "SINGH", "TREMBLAY", "NGUYEN", "MACDONALD", "OKAFOR", "BEAUCHAMP", "PETROV", "GILL", "FERREIRA", "LAROCHE", "HASSAN", "WONG", "ANDERSEN", "MELNYK"]
_BUILDERS = ["PRAIRIE PEAK HOMES LTD.", "BOW VALLEY MECHANICAL INC.", "CHINOOK ROOFING CORP.", "FOOTHILLS ELECTRIC (2009) LTD.", "NORTHGATE CONCRETE FORMING LTD.", "ASPEN GLAZING SYSTEMS INC."]
_LENDERS = ["ROYAL BANK OF CANADA", "ATB FINANCIAL", "SERVUS CREDIT UNION LTD.", "FIRST NATIONAL FINANCIAL GP CORPORATION", "THE TORONTO-DOMINION BANK", "CONNECT FIRST CREDIT UNION LTD."]
_COMPANIES = ["1987654 ALBERTA LTD.", "WESTRIDGE CAPITAL CORP.", "SUMMIT LAND HOLDINGS INC.", "RIVERBEND DEVELOPMENTS LTD.", "KESTREL EQUITIES INC."]
_FIRMS = ["ASHWORTH CRANE MCLEOD & ELLIS LLP", "BRIGHTWATER LAW", "PARKLAND CONVEYANCING LLP", "HOLLOWAY & RUSSO"]
_UTILITIES = ["ATCO GAS AND PIPELINES LTD", "ENMAX POWER CORPORATION", "EPCOR DISTRIBUTION & TRANSMISSION INC", "TELUS COMMUNICATIONS INC"]
_ENGINEERS = ["Keystone Reserve Planning Ltd.", "Morrison Hershfield", "Tetra Building Science Inc.", "Read Jones Christoffersen"]
_HOAS = ["MAHOGANY HOMEOWNERS ASSOCIATION", "CRANSTON RESIDENTS ASSOCIATION", "SUMMERSIDE LAKE ASSOCIATION"]
_CITIES = ["CALGARY", "EDMONTON", "RED DEER", "LETHBRIDGE", "AIRDRIE", "ST. ALBERT", "COCHRANE", "OKOTOKS"]
_STREETS = ["26 AVENUE SW", "MACLEOD TRAIL SE", "WHYTE AVENUE NW", "GASPE AVENUE", "KENSINGTON ROAD NW", "JASPER AVENUE NW", "ELBOW DRIVE SW"]


def _inst(r: random.Random) -> str:
    return f"{r.randint(1, 26):02d}{r.randint(0, 9)} {r.randint(0, 999):03d} {r.randint(0, 999):03d}"


def _date(r: random.Random) -> str:
    return f"{r.randint(1, 28):02d}/{r.randint(1, 12):02d}/{r.randint(2005, 2026)}"


def _money(r: random.Random, lo: int, hi: int) -> str:
    return f"${r.randint(lo, hi):,}.{r.choice(['00', '00', '50', str(r.randint(10, 99))])}"


def _person(r: random.Random) -> str:
    return f"{r.choice(_FIRST)} {r.choice(_FIRST)[0]}. {r.choice(_LAST)}"


_FIELDS: dict[str, Any] = {
    "inst": _inst, "inst2": _inst, "date": _date, "date2": _date,
    "amount": lambda r: _money(r, 20_000, 950_000), "amount2": lambda r: _money(r, 10_000, 600_000),
    "amount3": lambda r: _money(r, 5_000, 250_000), "amount4": lambda r: _money(r, 1_000, 120_000),
    "small": lambda r: _money(r, 150, 9_500), "small2": lambda r: _money(r, 50, 4_000), "small3": lambda r: _money(r, 50, 2_500),
    "owner": _person, "owner2": _person, "builder": lambda r: r.choice(_BUILDERS), "lender": lambda r: r.choice(_LENDERS),
    "company": lambda r: r.choice(_COMPANIES), "firm": lambda r: r.choice(_FIRMS), "utility": lambda r: r.choice(_UTILITIES),
    "engineer": lambda r: r.choice(_ENGINEERS), "hoa": lambda r: r.choice(_HOAS), "city": lambda r: r.choice(_CITIES),
    "street": lambda r: f"{r.randint(100, 9999)} {r.choice(_STREETS)}", "plan": lambda r: f"{r.randint(700000, 2599999):07d}",
    "unit": lambda r: str(r.randint(1, 240)), "shares": lambda r: str(r.randint(40, 260)),
    "linc": lambda r: f"{r.randint(1, 99):04d} {r.randint(100, 999)} {r.randint(100, 999)}",
    "order": lambda r: str(r.randint(40_000_000, 59_999_999)), "roll": lambda r: f"{r.randint(100, 999)}{r.randint(100000, 999999)}",
    "court": lambda r: f"{r.randint(2001, 2603)} {r.randint(10000, 99999)}", "block": lambda r: str(r.randint(1, 40)), "lot": lambda r: str(r.randint(1, 80)),
    "area": lambda r: f"0.{r.randint(40, 999):03d}",
    "ats": lambda r: f"{r.randint(4, 5)};{r.randint(1, 29)};{r.randint(1, 60)};{r.randint(1, 36)};{r.choice(['NE', 'NW', 'SE', 'SW'])}",
    "stall": lambda r: str(r.randint(1, 180)), "sec": lambda r: f"{r.randint(1, 80)}.{r.randint(1, 9)}", "pct": lambda r: str(r.randint(8, 97)),
    "n": lambda r: str(r.randint(2, 25)), "n2": lambda r: str(r.randint(3, 30)), "months": lambda r: str(r.choice([3, 6, 12])),
    "year": lambda r: str(r.randint(2018, 2026)), "time": lambda r: f"{r.randint(7, 9)}:{r.choice(['05', '20', '35', '50'])} p.m.",
    "file": lambda r: f"2026-{r.choice(['ACME', 'BRTW', 'PRKL'])}-{r.randint(1, 9999):04d}",
}


def fill(r: random.Random, fields: Iterable[str] | None = None) -> dict[str, str]:
    """Fresh random values for one paragraph (only ``fields`` when given)."""
    return {k: _FIELDS[k](r) for k in (fields if fields is not None else _FIELDS)}


def render(template: str, r: random.Random) -> str:
    """``template`` with fresh random values for the fields it names."""
    return template.format(**fill(r, _fields_of(template)))


@cache
def _fields_of(template: str) -> tuple[str, ...]:
    return tuple(sorted({name for _, name, _, _ in string.Formatter().parse(template) if name}))


# --------------------------------------------------------------------------- templates

TEMPLATES: dict[str, list[str]] = {
    "TITLE_SUMMARY": [
        "LAND TITLE CERTIFICATE\nLINC {linc}   SHORT LEGAL {plan};{unit}   TITLE NUMBER {inst} +{unit}\nESTATE: FEE SIMPLE\nMUNICIPALITY: CITY OF {city}\nREFERENCE NUMBER: {inst2}\n",
        "REGISTERED OWNER(S)\nREGISTRATION {inst}  {date}  TRANSFER OF LAND  VALUE {amount}  CONSIDERATION {amount}\nOWNERS\n{owner}\nOF {street}, {city}, ALBERTA\n",
        "SEARCH PARTICULARS\nSEARCH DATE: {date}  ORDER NUMBER: {order}\nCUSTOMER FILE NUMBER: {file}\nREQUESTED BY: {firm}\nPENDING REGISTRATION QUEUE: NO DOCUMENTS PENDING AS AT SEARCH DATE\nNUMBER OF CURRENT INSTRUMENTS ON TITLE: 00{n}\n",
        "The certificate confirms {owner} as registered owner in fee simple of the unit and its share in the common property. The title was last transferred on {date} for a declared value of {amount}; no pending registrations were disclosed at the search date.\n",
    ],
    "INSTRUMENTS_REGISTER": [
        "{inst}  {date}  MORTGAGE\n  MORTGAGEE - {lender}\n  ORIGINAL PRINCIPAL AMOUNT: {amount}\n",
        "{inst}  {date}  CAVEAT\n  RE : LIEN UNDER THE CONDOMINIUM PROPERTY ACT\n  CAVEATOR - CONDOMINIUM CORPORATION NO. {plan}\n  AGENT - {firm}\n",
        "{inst}  {date}  BUILDERS' LIEN\n  LIENOR - {builder}\n  AMOUNT: {amount3}\n  RE: SUPPLY AND INSTALLATION OF MECHANICAL SYSTEMS TO THE UNIT\n",
        "{inst}  {date}  UTILITY RIGHT OF WAY\n  GRANTEE - {utility}\n  AS TO PORTION OR PLAN: {plan}\n",
        "{inst}  {date}  DISCHARGE OF MORTGAGE {inst2}\n  DISCHARGED BY {lender}. PAID IN FULL.\n",
        "{inst}  {date}  RESTRICTIVE COVENANT\n  RE: ARCHITECTURAL CONTROLS, BUILDING MATERIALS AND SETBACKS BENEFITTING THE LOTS IN PLAN {plan}\n",
        "{inst}  {date}  WRIT OF ENFORCEMENT\n  CREDITOR - {company}\n  DEBTOR - {owner}\n  AMOUNT: {amount4} AND COSTS\n",
    ],
    "CAVEATS_SECTION": [
        "CAVEAT {inst} registered {date} by {company} claims an interest as purchaser under an agreement for sale dated {date2}. The caveat has not been withdrawn and must be withdrawn or postponed on closing.\n",
        "Caveat re: homeowners association encumbrance in favour of {hoa}, registered {date} as {inst}, securing annual fees of {small} per lot.\n",
        "No caveats registered against the title other than those listed in the register; caveat {inst} was withdrawn by instrument {inst2} on {date}.\n",
        "CAVEAT RE: OPTION TO PURCHASE\n  CAVEATOR - {company}\n  The option is exercisable until {date} at a price of {amount}. Counsel should confirm that the option has lapsed.\n",
        "Caveat {inst} re lis pendens: certificate of lis pendens filed in Court of King's Bench action {court} between {company} and {owner}, claiming an interest in the lands.\n",
    ],
    "LEGAL_DESCRIPTION": [
        "LEGAL DESCRIPTION\nCONDOMINIUM PLAN {plan}\nUNIT {unit}\nAND {shares} UNDIVIDED ONE TEN THOUSANDTH SHARES IN THE COMMON PROPERTY\nEXCEPTING THEREOUT ALL MINES AND MINERALS\n",
        "PLAN {plan}\nBLOCK {block}\nLOT {lot}\nEXCEPTING THEREOUT ALL MINES AND MINERALS\nAREA: {area} HECTARES MORE OR LESS\n",
        "MUNICIPAL ADDRESS (NOT PART OF THE TITLE): {street}, {city}, ALBERTA. ATS REFERENCE: {ats}. Parking stall {stall} and storage locker {stall} are common property assigned to the unit and pass by assignment under the bylaws.\n",
    ],
    "CONDO_BYLAWS": [
        "{sec} An owner shall not make any structural alteration to the unit or the common property without the prior written consent of the Board, which may require the owner to carry insurance and indemnify the Corporation.\n",
        "{sec} The Board may by resolution levy a contribution assessment against owners in proportion to unit factors where the reserve fund is insufficient to meet a required expenditure.\n",
        "{sec} No animal shall be kept in a unit without Board approval; approval may be withdrawn if the animal becomes a nuisance to other owners.\n",
        "{sec} No unit shall be leased for a term of less than {months} months. An owner who leases a unit shall deliver a deposit of {small} to the Corporation under section 53 of the Condominium Property Act.\n",
        "{sec} Contributions are due on the first day of each month. Arrears bear interest at {pct}% per annum and the Corporation may register a caveat against the title of a unit in arrears.\n",
    ],
    "CONDO_MINUTES": [
        "Minutes of the Board meeting held {date}. Present: {n} directors; quorum confirmed. The property manager reported that water ingress at the parkade membrane has recurred and {builder} quoted {amount3} for repairs.\n",
        "Motion to approve the {year} operating budget with a {pct}% increase in condominium fees; moved by {owner}, seconded by {owner2}, carried.\n",
        "The Board discussed a special levy of {amount2} to fund balcony and envelope repairs; owners will vote at a special general meeting on {date}.\n",
        "Correspondence: an owner complained about noise from unit {unit}; the manager will send a bylaw reminder. No further business; the meeting adjourned at {time}\n",
        "The Board reviewed the insurance renewal: premiums rose {pct}% and the water damage deductible increased to {amount4}; owners should confirm that their unit policies cover the insurance deductible.\n",
        "Litigation update: the statement of claim against {builder} for construction deficiencies is proceeding; legal fees to date are {amount4}.\n",
    ],
    "RESERVE_FUND_REPORT": [
        "The reserve fund study prepared by {engineer} as of {date} recommends a closing balance of {amount} for fiscal {year}. The actual balance is {amount3}, a funding level of {pct}% of the recommended balance.\n",
        "Component: roofing membrane. Remaining life {n} years; replacement cost {amount2}. The study recommends annual contributions of {amount4} increasing at 3% per year.\n",
        "The study identifies a reserve fund shortfall that cannot be closed by regular contributions; the engineer recommends a special assessment or a loan of {amount2}.\n",
        "Component: elevators and mechanical. The study notes building envelope failure at the north elevation and estimates {amount2} for remediation over {n} years.\n",
        "The reserve fund is adequately funded; no special levy is contemplated in the 25-year plan and annual contributions of {amount4} are sufficient.\n",
    ],
    "FINANCIAL_STATEMENTS": [
        "STATEMENT OF OPERATIONS for the year ended {date}: condominium fees {amount}; insurance {amount3}; utilities {amount4}; excess of expenses over revenue {small}.\n",
        "Reserve fund: opening balance {amount2}, contributions {amount4}, interest {small}, expenditures {amount3}, closing balance {amount2}.\n",
        "Note {n}: the Corporation has a loan payable to {lender} of {amount3} at {pct}% repayable over {n2} years, secured by a general security agreement.\n",
        "Accounts receivable include owner arrears of {small}; the Corporation has registered caveats against {n} units.\n",
        "The operating fund ended the year with a deficit of {amount4}, which the Board intends to recover through a fee increase.\n",
    ],
    "SPECIAL_RESOLUTIONS": [
        "SPECIAL RESOLUTION passed {date} by owners holding {pct}% of unit factors: BE IT RESOLVED that a special levy of {amount2} be assessed against all units in proportion to unit factors, payable in {n} instalments.\n",
        "SPECIAL RESOLUTION: the Corporation is authorised to borrow up to {amount2} from {lender} to repair structural deficiencies in the parkade slab.\n",
        "SPECIAL RESOLUTION to amend bylaw {sec} to prohibit rentals of less than {months} months; carried with {pct}% of unit factors in favour.\n",
    ],
    "TAX_ARREARS": [
        "TAX CERTIFICATE\nROLL NUMBER {roll}\nCURRENT YEAR LEVY {year}: {amount4}\nARREARS FROM PRIOR YEARS: {small}\nPENALTIES TO DATE: {small2}\nTOTAL OUTSTANDING: {small3}\n",
        "The City of {city} confirms that taxes for {year} are paid in full and there are no arrears or penalties on roll {roll}.\n",
        "A tax notification was registered on title on {date} under the Tax Recovery Act for arrears of {amount4}; the property will be offered at public auction if the arrears remain unpaid.\n",
        "The owner is enrolled in the tax instalment payment plan; monthly payments of {small} are current as of {date}.\n",
    ],
    "GENERAL/TAX_CERTIFICATE": [
        "This certificate is issued under section 299 of the Municipal Government Act for roll {roll}. Local improvement charges of {small} per year apply until {year}.\n",
        "Assessment for {year}: {amount}; residential mill rate applied; school and municipal portions shown separately on the notice mailed {date}.\n",
    ],
    "GENERAL/PURCHASE_AGREEMENT": [
        "The Buyer agrees to buy and the Seller agrees to sell the Property for a purchase price of {amount}, with a deposit of {small} payable to {firm} in trust within 24 hours of acceptance.\n",
        "Completion Day is {date}. The Seller shall deliver title free of all encumbrances except those permitted by this contract, including utility rights of way and restrictive covenants.\n",
        "Conditions: the Buyer's financing condition and the review of condominium documents expire on {date}; the Buyer may waive either condition by written notice.\n",
        "Adjustments for taxes, condominium fees and utilities shall be made as of Completion Day. The Seller warrants there are no unpaid special levies other than those disclosed in the estoppel certificate.\n",
    ],
    "GENERAL/LENDER_INSTRUCTIONS": [
        "{lender} instructions: register a first mortgage for {amount} at {pct}% for a {n}-year term; title insurance is required and any builders' lien must be discharged before funding.\n",
        "The solicitor shall confirm that taxes are paid to date, that there are no arrears of condominium contributions, and shall provide a final report within {n} days of funding.\n",
    ],
    "GENERAL/STATEMENT_OF_ADJUSTMENTS": [
        "STATEMENT OF ADJUSTMENTS AS AT {date}\nPURCHASE PRICE {amount}\nLESS DEPOSIT {small}\nPROPERTY TAXES {year} ADJUSTED: CREDIT VENDOR {small2}\nCONDOMINIUM FEES ADJUSTED: CREDIT PURCHASER {small3}\nBALANCE DUE ON CLOSING {amount2}\n",
    ],
}


#: Templates whose text carries a material risk (lien, caveat, writ, levy, shortfall, arrears, ...);
#: the others are routine or benign look-alikes (discharged, paid in full, no levy contemplated).
RISKY: dict[str, frozenset[int]] = {
    "INSTRUMENTS_REGISTER": frozenset({1, 2, 6}),
    "CAVEATS_SECTION": frozenset({0, 1, 3, 4}),
    "CONDO_BYLAWS": frozenset({1}),
    "CONDO_MINUTES": frozenset({0, 2, 5}),
    "RESERVE_FUND_REPORT": frozenset({2, 3}),
    "FINANCIAL_STATEMENTS": frozenset({4}),
    "SPECIAL_RESOLUTIONS": frozenset({0, 1}),
    "TAX_ARREARS": frozenset({0, 2}),
}


def template_key(role: str, section: str) -> str:
    return f"GENERAL/{role}" if section == "GENERAL" else section


def template_ids(role: str, section: str) -> list[tuple[str, int]]:
    key = template_key(role, section)
    return [(key, i) for i in range(len(TEMPLATES[key]))]


# --------------------------------------------------------------------------- deal layout

#: Share of a deal's chunks per (document role, section type), roughly like a condo purchase file:
#: condo documents dominate, the title search is a few pages, the tax certificate one or two.
SECTION_MIX: list[tuple[str, str, float]] = [
    ("TITLE_SEARCH", "TITLE_SUMMARY", 0.03),
    ("TITLE_SEARCH", "INSTRUMENTS_REGISTER", 0.10),
    ("TITLE_SEARCH", "CAVEATS_SECTION", 0.05),
    ("TITLE_SEARCH", "LEGAL_DESCRIPTION", 0.02),
    ("CONDO_DOCS", "CONDO_BYLAWS", 0.15),
    ("CONDO_DOCS", "CONDO_MINUTES", 0.20),
    ("CONDO_DOCS", "RESERVE_FUND_REPORT", 0.10),
    ("CONDO_DOCS", "FINANCIAL_STATEMENTS", 0.10),
    ("CONDO_DOCS", "SPECIAL_RESOLUTIONS", 0.04),
    ("TAX_CERTIFICATE", "TAX_ARREARS", 0.02),
    ("TAX_CERTIFICATE", "GENERAL", 0.01),
    ("PURCHASE_AGREEMENT", "GENERAL", 0.10),
    ("PURCHASE_AGREEMENT", "LEGAL_DESCRIPTION", 0.01),
    ("STATEMENT_OF_ADJUSTMENTS", "GENERAL", 0.02),
    ("LENDER_INSTRUCTIONS", "GENERAL", 0.04),
    ("TRANSFER_OF_LAND", "LEGAL_DESCRIPTION", 0.01),
]

_DOC_NAMES = {
    "TITLE_SEARCH": "title-search", "CONDO_DOCS": "condo-documents", "TAX_CERTIFICATE": "tax-certificate",
    "PURCHASE_AGREEMENT": "purchase-agreement", "STATEMENT_OF_ADJUSTMENTS": "statement-of-adjustments",
    "LENDER_INSTRUCTIONS": "lender-instructions", "TRANSFER_OF_LAND": "transfer-of-land",
}

ENTITIES = ["builder:prairie-peak-homes", "builder:bow-valley-mechanical", "lender:atb-financial", "condo-corp:0712345", "municipality:calgary"]


@dataclass(slots=True)
class ChunkSpec:
    """Everything needed to build one chunk (content comes from :func:`paragraphs`)."""

    deal_id: str
    document_id: str
    role: str
    section: str
    page_start: int
    page_end: int
    ocr_confidence: float
    metadata: dict


def deal_layout(deal_id: str, n_chunks: int, r: random.Random) -> list[ChunkSpec]:
    """``n_chunks`` chunk slots for one deal spread over its documents by :data:`SECTION_MIX`."""
    counts = [max(1, round(share * n_chunks)) for _, _, share in SECTION_MIX]
    while sum(counts) > n_chunks:  # small deals: trim the largest sections first
        counts[counts.index(max(counts))] -= 1
    i = 0
    while sum(counts) < n_chunks:
        counts[i % len(counts)] += 1
        i += 1
    specs: list[ChunkSpec] = []
    pages: dict[str, int] = {}
    created = f"2026-{r.randint(1, 3):02d}-{r.randint(1, 28):02d}T09:{r.randint(10, 59)}:00Z"
    for (role, section, _), count in zip(SECTION_MIX, counts, strict=True):
        # large sections are split over several documents (board minutes of several years, ...)
        n_docs = 1 if count < 60 else 1 + count // 120
        for k in range(count):
            doc = f"{deal_id}/{_DOC_NAMES[role]}" + (f"-{k % n_docs + 1}" if n_docs > 1 else "") + ".pdf"
            start = pages.get(doc, 0) + 1
            end = start + (1 if r.random() < 0.15 else 0)
            pages[doc] = end
            meta: dict = {"sensitivity": "confidential", "created_at": created}
            if role == "TAX_CERTIFICATE" and r.random() < 0.5:
                meta["zones"] = ["municipal_arrears", "tax_certificate", "tax_liens"] if section == "TAX_ARREARS" else ["tax_certificate", "tax_liens"]
            if r.random() < 0.2:
                meta["entity_ids"] = sorted(r.sample(ENTITIES, r.randint(1, 2)))
            specs.append(ChunkSpec(deal_id, doc, role, section, start, end, round(r.uniform(0.78, 0.99), 2), meta))
    return specs


def paragraphs(role: str, section: str, target_chars: int, r: random.Random, *, risk_rate: float | None = None) -> tuple[str, list[tuple[str, int]]]:
    """Content of about ``target_chars`` characters and the template keys it was built from.

    ``risk_rate``: probability that a paragraph is drawn from the section's risky templates
    (None: every template equally likely).
    """
    key = template_key(role, section)
    pool = TEMPLATES[key]
    risky = sorted(RISKY.get(key, ()))
    benign = [i for i in range(len(pool)) if i not in RISKY.get(key, ())]

    def pick() -> int:
        if risk_rate is None or not risky or not benign:
            return r.randrange(len(pool))
        return r.choice(risky) if r.random() < risk_rate else r.choice(benign)

    parts: list[str] = []
    used: list[tuple[str, int]] = []
    length = 0
    limit = int(target_chars * 1.25)
    while length < target_chars:
        for _attempt in range(4):  # prefer a paragraph that keeps the chunk under 1.25 x target
            i = pick()
            text = render(pool[i], r)
            if not parts or length + len(text) + 1 <= limit:
                break
        else:
            break
        parts.append(text)
        used.append((key, i))
        length += len(text) + 1
    return "\n".join(parts).strip() + "\n", used
