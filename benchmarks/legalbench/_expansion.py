"""Hand-written query expansion for MAUD's category-label questions.

Most MAUD questions are labels of a deal-point category ("Where is the No-Shop
Clause", "What is the Type of Consideration"), and the clause that answers them
shares few words with the label: a no-shop clause says "shall not ... solicit,
initiate or knowingly encourage ... any Acquisition Proposal" and never "no-shop".
Each :class:`Profile` below restates one label the way merger agreements draft it,
written from general M&A drafting knowledge (the usual wording of US public-company
merger agreements) — **not** from the benchmark's gold answers, and not changed after
looking at them:

* ``terms`` — words and phrases added to the BM25 query;
* ``clauses`` — one or two short pseudo-clauses in typical drafting language; the
  dense score of a chunk is combined with its MiniLM similarity to them (like HyDE,
  but written by hand instead of generated);
* ``headings`` — a pattern for the section titles such a clause usually sits under
  ("No Solicitation", "Conduct of Business Pending the Merger"); chunks whose
  section (or article) title matches can get a boost.

A question matching no profile is ranked as before. The same table is used for
every document; nothing is learned from data.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Profile:
    name: str
    question: re.Pattern[str]
    terms: str
    clauses: tuple[str, ...]
    headings: re.Pattern[str] | None = None


def _re(p: str) -> re.Pattern[str]:
    return re.compile(p, re.IGNORECASE)


_NO_SHOP_HEADINGS = r"solicitation|no[- ]shop|go[- ]shop|acquisition proposals?|takeover proposals?|alternative (?:acquisition )?proposals?|competing (?:transactions?|proposals?)|exclusivity|other offers"
_CONDITIONS = r"conditions? (?:to|of|precedent)|closing conditions?"
_TERMINATION = r"terminat"
_DEFINITIONS = r"definitions?|defined terms|certain terms|interpretation"

PROFILES: tuple[Profile, ...] = (
    Profile(
        "knowledge_definition",
        _re(r"definition of .knowledge"),
        "Knowledge means actual knowledge after reasonable inquiry of the individuals officers listed set forth in Section of the Company Disclosure Letter",
        ("“Knowledge” of the Company means the actual knowledge, after reasonable inquiry of their direct reports, of the individuals listed in Section 1.1 of the Company Disclosure Letter.",),
        _re(_DEFINITIONS),
    ),
    Profile(
        "superior_proposal_definition",
        _re(r"definition of .superior proposal"),
        "Superior Proposal means bona fide written Acquisition Proposal Board good faith more favorable stockholders financial point of view reasonably capable of being consummated 50%",
        ("“Superior Proposal” means a bona fide written Acquisition Proposal that the Company Board determines in good faith, after consultation with its financial advisor and outside legal counsel, is more favorable to the Company’s stockholders from a financial point of view than the Merger and is reasonably likely to be consummated, taking into account all legal, financial and regulatory aspects; references to 20% shall be deemed references to 50%.",),
        _re(_DEFINITIONS),
    ),
    Profile(
        "intervening_event_definition",
        _re(r"definition of .interv[ea]?i?ning event"),
        "Intervening Event means material event development change effect circumstance not known reasonably foreseeable Board date of this Agreement does not relate to Acquisition Proposal",
        ("“Intervening Event” means any material event, development, change or circumstance that was not known or reasonably foreseeable to the Company Board as of the date of this Agreement and does not relate to any Acquisition Proposal.",),
        _re(_DEFINITIONS),
    ),
    Profile(
        "mae_definition",
        _re(r"definition of .material adverse effect"),
        "Material Adverse Effect means event change effect development individually aggregate material adverse effect business financial condition results of operations taken as a whole provided none of the following disproportionate",
        ("“Company Material Adverse Effect” means any event, change, development or effect that, individually or in the aggregate, has had or would reasonably be expected to have a material adverse effect on the business, financial condition or results of operations of the Company and its Subsidiaries, taken as a whole; provided, however, that none of the following shall be taken into account: changes in general economic conditions, in the industry, in Law or GAAP, pandemics, acts of war or terrorism, except to the extent disproportionately affecting the Company.",),
        _re(_DEFINITIONS),
    ),
    Profile(
        "type_of_consideration",
        _re(r"type of consideration"),
        "converted into the right to receive Merger Consideration per share in cash without interest Exchange Ratio shares of Parent Common Stock issued and outstanding immediately prior to the Effective Time Per Share Price Offer Price",
        ("Each share of Company Common Stock issued and outstanding immediately prior to the Effective Time shall be converted automatically into the right to receive $ in cash, without interest (the “Merger Consideration”).",
         "Each share of Company Common Stock shall be converted into the right to receive a number of validly issued, fully paid and nonassessable shares of Parent Common Stock equal to the Exchange Ratio, and cash in lieu of fractional shares."),
        _re(r"effect (?:of the merger )?on (?:the )?(?:capital stock|securities|shares)|conversion of (?:securities|shares|capital stock|company)|merger consideration|effect of the merger|consideration"),
    ),
    Profile(
        "covenant_compliance_condition",
        _re(r"closing condition: compliance with covenants"),
        "performed complied in all material respects covenants agreements obligations required to be performed complied with by it under this Agreement at or prior to the Closing",
        ("The Company shall have performed and complied in all material respects with the covenants and agreements required by this Agreement to be performed or complied with by it at or prior to the Closing.",),
        _re(_CONDITIONS),
    ),
    Profile(
        "ordinary_course_covenants",
        _re(r"ordinary course of business covenants"),
        "conduct its business in the ordinary course of business consistent with past practice preserve intact business organization goodwill relationships commercially reasonable efforts from the date of this Agreement until the Effective Time except consent of Parent not unreasonably withheld",
        ("From the date of this Agreement until the Effective Time, except as required by applicable Law or consented to in writing by Parent (which consent shall not be unreasonably withheld), the Company shall, and shall cause each of its Subsidiaries to, conduct its business in the ordinary course of business consistent with past practice and use commercially reasonable efforts to preserve intact its business organization, assets and relationships with customers, suppliers and employees.",),
        _re(r"conduct of (?:the )?(?:business|company|operations)|interim operations|conduct (?:of business )?(?:pending|prior)|operation of (?:the )?business|covenants (?:relating to|regarding) conduct|conduct of business"),
    ),
    Profile(
        "specific_performance",
        _re(r"specific performance"),
        "irreparable damage harm monetary damages not adequate remedy entitled to injunction injunctions specific performance equitable relief prevent breaches enforce specifically terms without posting bond",
        ("The parties agree that irreparable damage would occur, for which monetary damages would not be an adequate remedy, if any provision of this Agreement were not performed in accordance with its specific terms, and that the parties shall be entitled to an injunction, specific performance and other equitable relief to prevent breaches and to enforce specifically its terms, without proof of damages or posting any bond.",),
        _re(r"specific (?:performance|enforcement)|enforcement|equitable relief|remedies"),
    ),
    Profile(
        "fiduciary_termination_triggers",
        _re(r"fiduciary termination right"),
        "terminated by the Company prior to obtaining Stockholder Approval in order to enter into definitive agreement Superior Proposal pays Termination Fee by Parent Adverse Recommendation Change Change of Recommendation withdrawn",
        ("This Agreement may be terminated by the Company at any time prior to obtaining the Company Stockholder Approval in order to enter into a definitive agreement providing for a Superior Proposal, provided that the Company pays the Termination Fee; or by Parent if the Company Board shall have made an Adverse Recommendation Change.",),
        _re(_TERMINATION),
    ),
    Profile(
        "regulatory_approvals_condition",
        _re(r"closing conditions?: regulatory approvals"),
        "waiting period applicable under the HSR Act shall have expired or been terminated approvals clearances consents Antitrust Laws Governmental Authority shall have been obtained Requisite Regulatory Approvals in full force and effect",
        ("The waiting period (and any extension thereof) applicable to the Merger under the HSR Act shall have expired or been terminated, and all consents and approvals required under any other Antitrust Laws shall have been obtained.",
         "All regulatory approvals required to consummate the Merger, including from the Federal Reserve Board, shall have been obtained and shall remain in full force and effect and all statutory waiting periods in respect thereof shall have expired."),
        _re(_CONDITIONS),
    ),
    Profile(
        "no_shop",
        _re(r"where is the no-shop clause"),
        "shall not directly or indirectly solicit initiate knowingly encourage facilitate inquiry proposal offer Acquisition Proposal Takeover Proposal engage in discussions negotiations furnish non-public information Representatives cease terminate existing discussions",
        ("The Company shall not, and shall cause its Subsidiaries and Representatives not to, directly or indirectly, solicit, initiate, knowingly encourage or knowingly facilitate any inquiry, proposal or offer that constitutes or would reasonably be expected to lead to an Acquisition Proposal, or engage in any discussions or negotiations with, or furnish any non-public information to, any Person relating to an Acquisition Proposal.",),
        _re(_NO_SHOP_HEADINGS),
    ),
    Profile(
        "no_shop_fiduciary_exception",
        _re(r"fiduciary exception to the no-shop"),
        "Notwithstanding prior to obtaining Stockholder Approval unsolicited bona fide written Acquisition Proposal did not result from breach Board determines in good faith after consultation outside legal counsel financial advisor constitutes reasonably expected to lead to Superior Proposal failure inconsistent with fiduciary duties furnish information Acceptable Confidentiality Agreement engage in discussions negotiations",
        ("Notwithstanding the foregoing, if prior to obtaining the Company Stockholder Approval the Company receives an unsolicited bona fide written Acquisition Proposal that the Company Board determines in good faith, after consultation with its financial advisor and outside legal counsel, constitutes or would reasonably be expected to lead to a Superior Proposal, and that failure to act would be inconsistent with its fiduciary duties, the Company may furnish information under an Acceptable Confidentiality Agreement and engage in discussions or negotiations with such Person.",),
        _re(_NO_SHOP_HEADINGS),
    ),
    Profile(
        "tail_provision",
        _re(r"tail provision"),
        "terminated Acquisition Proposal publicly announced made known not withdrawn within twelve 12 months after termination enters into definitive agreement consummates Company shall pay Termination Fee references to 20% deemed 50%",
        ("If this Agreement is terminated and prior to such termination an Acquisition Proposal shall have been publicly announced and not withdrawn, and within twelve (12) months after such termination the Company enters into a definitive agreement with respect to or consummates any Acquisition Proposal, then the Company shall pay the Termination Fee; for this purpose references to 20% in the definition of Acquisition Proposal shall be deemed to be references to 50%.",),
        _re(r"termination fees?|fees and expenses|expenses|effect of termination|termination payments?|break-?up fee"),
    ),
    Profile(
        "no_mae_representation",
        _re(r"representation & warranty of no material adverse effect"),
        "Since the date of the Balance Sheet December 31 there has not been any Company Material Adverse Effect event change effect development individually or in the aggregate Absence of Certain Changes",
        ("Since December 31, 2020, there has not been any event, change, effect or development that, individually or in the aggregate, has had or would reasonably be expected to have a Company Material Adverse Effect.",),
        _re(r"absence of (?:certain )?changes|no material adverse (?:effect|change)|absence of (?:a |any )?(?:company )?material adverse"),
    ),
    Profile(
        "antitrust_efforts_limitations",
        _re(r"limitations on antitrust efforts"),
        "Notwithstanding nothing in this Agreement shall require Parent to propose negotiate commit to effect consent decree hold separate sale divestiture license disposition of assets businesses restriction on conduct of business litigate Burdensome Condition Antitrust Laws",
        ("Notwithstanding anything to the contrary, nothing in this Agreement shall require Parent or any of its Affiliates to propose, negotiate, commit to or effect, by consent decree, hold separate order or otherwise, any sale, divestiture, license or other disposition of any assets or businesses, or any restriction on the conduct of its business, or to litigate any action under the Antitrust Laws, or to accept any Burdensome Condition.",),
        _re(r"efforts|regulatory|antitrust|filings|hsr|approvals|further assurances"),
    ),
    Profile(
        "breach_of_no_shop",
        _re(r"breach of no-shop"),
        "terminated by Parent Company shall have breached material respect obligations under Section No Solicitation Acquisition Proposal pay Termination Fee willful and material breach",
        ("This Agreement may be terminated by Parent if the Company shall have willfully and materially breached its obligations under the no solicitation covenant, in which case the Company shall pay Parent the Termination Fee.",),
        _re(_TERMINATION + "|" + _NO_SHOP_HEADINGS),
    ),
    Profile(
        "breach_of_meeting_covenant",
        _re(r"breach of shareholder meeting covenant"),
        "terminated by Parent Company shall have breached material respect obligations to call give notice convene hold Stockholders Meeting include Board Recommendation Proxy Statement pay Termination Fee",
        ("This Agreement may be terminated by Parent if the Company shall have materially breached its obligations to call, give notice of, convene and hold the Company Stockholders Meeting or to include the Company Board Recommendation in the Proxy Statement, in which case the Company shall pay the Termination Fee.",),
        _re(_TERMINATION + r"|stockholders? meeting|shareholders? meeting"),
    ),
    Profile(
        "accuracy_of_reps_condition",
        _re(r"closing condition: accuracy of target"),
        "representations and warranties of the Company set forth in Article shall be true and correct as of the date of this Agreement and as of the Closing Date as though made except failure would not have Company Material Adverse Effect de minimis Fundamental Representations",
        ("The representations and warranties of the Company set forth in this Agreement shall be true and correct as of the date of this Agreement and as of the Closing Date as though made on such date, except where the failure to be so true and correct would not have a Company Material Adverse Effect.",),
        _re(_CONDITIONS),
    ),
    Profile(
        "no_litigation_condition",
        _re(r"closing condition: no litigation"),
        "no Governmental Authority of competent jurisdiction shall have enacted issued promulgated enforced entered Law Order injunction judgment restraining enjoining prohibiting consummation of the Merger no Legal Restraint",
        ("No Governmental Authority of competent jurisdiction shall have enacted, issued or entered any Law or Order, whether temporary, preliminary or permanent, that is in effect and restrains, enjoins or otherwise prohibits the consummation of the Merger.",),
        _re(_CONDITIONS),
    ),
)


def profile_for(question: str) -> Profile | None:
    """The first profile whose pattern the question matches."""
    for p in PROFILES:
        if p.question.search(question):
            return p
    return None


__all__ = ["PROFILES", "Profile", "profile_for"]
