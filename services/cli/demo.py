"""`threadline demo load`: a demo case with a research loop worth opening, and a demo company thesis; idempotent.

The demo case's loop goes through the paths agents and reviewers use: the operator records two sources
directly (as a reviewer records one they found), then an agent stages more sources, claims, relations, a
merge group and a verdict (the staging service checks each call), a reviewer accepts them
(the review service installs them), retires a source that was withdrawn (its claim and the verdict are
re-rated) and leaves one proposal pending. Each step runs only when its records are not in the ledger yet.
"""

from __future__ import annotations

from typing import Any

from services.cli.demo_case import DEMO_LOOP, LEFT_PENDING, RETIRED
from services.cli.operations import OPERATOR, command, create_case
from shared import kinds
from shared.contracts import (
    Actor,
    AddSourceFile,
    AddThesisClaim,
    CaseHistory,
    CaseRef,
    CompanyRef,
    CreateCase,
    CreateCompany,
    Decide,
    ListProposals,
    RecordRef,
    RecordSources,
    RetireRecords,
    ToolRequest,
)
from shared.errors import AlreadyExists
from shared.settings import Settings
from shared.subjects import Command

DEMO_CASE_ID = "demo-heat-pumps"
DEMO_AGENT = "demo-agent"  # not `up`'s agent token: the user's own agent starts with a record of its own
DEMO_TICKER = "DEMO"

DEMO_SOURCES: list[dict[str, Any]] = [
    {
        "id": "demo-field-trial-2023",
        "publisher": "Example Energy Agency (demo data)",
        "title": "Field trial of air-source heat pumps in 120 cold-climate homes",
        "url": "https://example.org/demo/heat-pump-field-trial-2023",
        "publicationDate": "2023-10-02",
        "snapshotDate": "2026-11-01",
        "type": "official",
        "authority": "Government agency report with measured household energy data (demo record).",
        "evidenceText": (
            "Across 120 homes with winter design temperatures below -15 C, measured seasonal performance "
            "factors averaged 2.6. Compared with the gas boilers they replaced, the heat pumps reduced "
            "heating-related CO2 emissions by 41% on the 2023 grid mix."
        ),
        "provenanceNote": "Demo record shipped with Threadline; not a real publication.",
        "transcriptions": [
            {
                "label": "Figure 3: seasonal performance factor by outdoor temperature",
                "text": "SPF 3.1 above 0 C; 2.4 between -10 C and 0 C; 1.8 below -20 C.",
            }
        ],
    },
    {
        "id": "demo-grid-outlook",
        "publisher": "Example Grid Operator (demo data)",
        "title": "Winter grid carbon intensity outlook",
        "url": "https://example.org/demo/grid-outlook",
        "publicationDate": "living",
        "snapshotDate": "2026-11-01",
        "type": "primary",
        "authority": "The operator's own published carbon-intensity series (demo record).",
        "evidenceText": "Average winter carbon intensity fell from 410 g/kWh in 2019 to 260 g/kWh in 2025.",
        "provenanceNote": "Demo record shipped with Threadline; not a real publication.",
    },
]

DEMO_THESIS = [
    {"text": "Demand for residential heat pumps grows faster than 15% a year through 2028.",
     "label": "INFERRED", "section": "Demand"},
    {"text": "Installed base margins exceed 30% once service contracts are included.",
     "label": "UNVERIFIED", "section": "Margins"},
    {"text": "The company holds the largest installer network in the northern region.",
     "label": "CONFIRMED", "section": "Moat", "sourceUrl": "https://example.org/demo/installer-census"},
]


async def ensure_demo_case(settings: Settings) -> None:
    try:
        await create_case(settings, CreateCase(
            actor=OPERATOR, case_id=DEMO_CASE_ID, title="Heat pumps in cold climates (demo)",
            question="Do residential heat pumps cut household heating emissions in cold climates?",
        ))
    except AlreadyExists:
        pass


REVIEWER = Actor(name="demo-reviewer", role="reviewer")


class ResearchLoop:
    """An agent staging and a reviewer deciding on the demo case, one step at a time."""

    def __init__(self, settings: Settings, agent_name: str) -> None:
        self.settings = settings
        self.agent = Actor(name=agent_name, role="agent")

    async def revision(self) -> int:
        return (await command(self.settings, Command.GET_CASE, CaseRef(actor=REVIEWER, case_id=DEMO_CASE_ID)))[
            "revision"]

    async def known(self) -> dict[str, str]:
        """Every record id the case's ledger ever installed, `retired` or `installed` (from its change log)."""
        found: dict[str, str] = {}
        before = None
        while True:
            page = await command(self.settings, Command.CASE_HISTORY, CaseHistory(
                actor=REVIEWER, case_id=DEMO_CASE_ID, before=before, limit=500))
            for change in page["changes"]:
                for added in ("sourcesAdded", "claimsAdded", "relationsAdded", "groupsAdded"):
                    for record in change["changes"].get(added, []):
                        found.setdefault(record.get("id") or record["groupId"], "installed")
                found.update({r["id"]: "retired" for r in change["changes"].get("retired", [])})
            if (before := page["nextBefore"]) is None:
                return found

    async def stage(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        kind = kinds.BY_TOOL[tool]
        args = kind.arguments.model_validate(
            {"expectedCaseId": DEMO_CASE_ID, "expectedRevision": await self.revision(), **arguments})
        return await command(self.settings, kind.command, ToolRequest[kind.arguments](
            actor=self.agent, args=args, discovered_case_id=DEMO_CASE_ID))

    async def accept(self, staged: dict[str, Any], note: str) -> None:
        await command(self.settings, Command.DECIDE, Decide(
            actor=REVIEWER, proposal_id=staged["proposalId"], accept=[i["itemId"] for i in staged["items"]],
            note=note, expected_revision=await self.revision()))

    async def staged_items(self) -> set[str]:
        """Every item id any proposal of the case holds, pending or decided: one a reviewer rejected stays rejected,
        never staged again by the next `demo load` (or the first `up` of a restored data dir)."""
        found: set[str] = set()
        cursor = None
        while True:
            listed = await command(self.settings, Command.LIST_PROPOSALS, ListProposals(
                actor=REVIEWER, case_id=DEMO_CASE_ID, status="all", limit=500, cursor=cursor))
            found.update(i["itemId"] for p in listed["proposals"] for i in p["items"])
            if (cursor := listed.get("nextCursor")) is None:
                return found

    async def run(self) -> None:
        known = await self.known()
        for tool, first_id, arguments, note in DEMO_LOOP:
            if first_id not in known:
                await self.accept(await self.stage(tool, arguments), note)
        if (await self.known()).get(RETIRED["id"]) == "installed":
            await command(self.settings, Command.RETIRE_RECORDS, RetireRecords(
                actor=REVIEWER, case_id=DEMO_CASE_ID, records=[RecordRef(record="source", id=RETIRED["id"])],
                note=RETIRED["note"]))
        for tool, first_id, arguments in LEFT_PENDING:
            if first_id not in await self.known() and first_id not in await self.staged_items():
                await self.stage(tool, arguments)


async def load_demo(settings: Settings, agent_name: str = DEMO_AGENT) -> dict[str, Any]:
    await ensure_demo_case(settings)
    try:
        await command(
            settings,
            Command.RECORD_SOURCES,
            RecordSources(actor=OPERATOR, case_id=DEMO_CASE_ID, sources=DEMO_SOURCES),
        )
    except AlreadyExists:
        pass
    await ResearchLoop(settings, agent_name).run()
    try:
        company = await command(settings, Command.CREATE_COMPANY,
                                CreateCompany(actor=OPERATOR, ticker=DEMO_TICKER, name="Demo Heat Systems plc"))
        company_id = company["companyId"]
    except AlreadyExists as exists:
        company_id = exists.details["companyId"]
    current = await command(settings, Command.GET_COMPANY, CompanyRef(actor=OPERATOR, company_id=company_id))
    if not current["sourceFiles"]:
        await command(
            settings,
            Command.ADD_SOURCE_FILE,
            AddSourceFile(
                actor=OPERATOR,
                company_id=company_id,
                title="Q3 2026 trading update (demo)",
                url="https://example.org/demo/q3-2026-trading-update",
                text=(
                    "Order intake for residential heat pumps rose 22% year on year. Service-contract attach "
                    "rate reached 48%. Gross margin on installed base including service was 27%."
                ),
            ),
        )
    known = {claim["text"] for claim in current["claims"]}
    for claim in DEMO_THESIS:
        if claim["text"] not in known:
            await command(settings, Command.ADD_THESIS_CLAIM,
                          AddThesisClaim(actor=OPERATOR, company_id=company_id, **_snake(claim)))
    return {"caseId": DEMO_CASE_ID, "companyId": company_id, "ticker": DEMO_TICKER}


def _snake(claim: dict[str, Any]) -> dict[str, Any]:
    return {("source_url" if key == "sourceUrl" else key): value for key, value in claim.items()}
