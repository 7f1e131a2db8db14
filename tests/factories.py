"""Builders of valid tool arguments and cases for tests."""

from __future__ import annotations

import re
import secrets
from datetime import UTC, datetime
from typing import Any

_TEXT_FRAME = re.compile(r"<<<BEGIN UNTRUSTED TEXT nonce=([0-9a-f]+)>>>(.*)<<<END UNTRUSTED TEXT nonce=\1>>>", re.S)


def unframed(answer: Any) -> Any:
    """An agent's answer as plain values: each framed agent-written text as it was written, no frame notice."""
    if isinstance(answer, str):
        frame = _TEXT_FRAME.fullmatch(answer)
        return frame.group(2) if frame else answer
    if isinstance(answer, dict):
        return {k: unframed(v) for k, v in answer.items() if k != "untrusted"}
    if isinstance(answer, list):
        return [unframed(v) for v in answer]
    return answer


def unique(prefix: str = "case") -> str:
    return f"{prefix}-{secrets.token_hex(4)}"


async def new_case(stack: Any, case_id: str | None = None, question: str = "Is the sky blue?") -> str:
    case_id = case_id or unique()
    async with stack.api("admin") as api:
        created = await api.post("/api/v1/cases", json={"caseId": case_id, "title": "Test case", "question": question})
        assert created.status_code == 201, created.text
    return case_id


def source_item(source_id: str, **overrides: Any) -> dict[str, Any]:
    return {
        "id": source_id,
        "publisher": "Example Agency",
        "title": f"Record {source_id}",
        "url": f"https://example.org/{source_id}",
        "publicationDate": "2024-05-01",
        "snapshotDate": "2026-11-01",
        "type": "primary",
        "authority": "The agency's own measurements.",
        "evidenceText": f"Evidence text of {source_id}.",
        "provenanceNote": "Staged by a test agent; not independently verified.",
        **overrides,
    }


# A year a prediction can name that has not passed, whenever the tests run (the checks flag a passed one).
NEXT_YEAR = datetime.now(UTC).year + 1


def claim_item(claim_id: str, source_ids: list[str], **overrides: Any) -> dict[str, Any]:
    return {
        "id": claim_id,
        "text": f"Claim {claim_id} holds.",
        "kind": "observation",
        "confidence": "supported",
        "sourceIds": source_ids,
        "transformationNote": "Quoted the key figure.",
        "proposalRationale": "Independently reviewable.",
        **overrides,
    }


def relation_item(relation_id: str, source: str, target: str, type_: str = "supports", **overrides: Any) -> dict:
    return {
        "id": relation_id,
        "sourceClaimId": source,
        "targetClaimId": target,
        "type": type_,
        "rationale": "The first bears on the second.",
        **overrides,
    }


def merge_item(group_id: str, members: list[str], **overrides: Any) -> dict[str, Any]:
    return {
        "groupId": group_id,
        "label": f"Group {group_id}",
        "memberClaimIds": members,
        "confidence": "high",
        "rationale": "They restate one measurement.",
        **overrides,
    }


def verdict_claim(claim_id: str, source_ids: list[str], **overrides: Any) -> dict[str, Any]:
    return {
        "id": claim_id,
        "text": "On balance, yes.",
        "kind": "verdict",
        "confidence": "supported",
        "sourceIds": source_ids,
        "transformationNote": "Synthesized from the accepted claims.",
        "lane": "verdict",
        "order": 1,
        **overrides,
    }


class Agent:
    """An agent on its own case, driving the tools through a real MCP client session."""

    def __init__(self, stack: Any, case_id: str, token: str, name: str, mcp: Any) -> None:
        self.stack = stack
        self.case_id = case_id
        self.token = token
        self.name = name
        self.mcp = mcp

    async def call(self, tool: str, arguments: dict[str, Any]) -> Any:
        return await self.mcp.call_tool(tool, arguments)

    async def ok(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """The answer, agent-written texts unframed (tests of the framing itself use `call`)."""
        result = await self.mcp.call_tool(tool, arguments)
        assert not result.is_error, result.content[0].text
        return unframed(result.structured_content)

    async def refused(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        result = await self.mcp.call_tool(tool, arguments)
        assert result.is_error, f"{tool} was accepted: {result.structured_content}"
        error = result.structured_content["error"]
        text = result.content[0].text
        assert error["code"] in text and error["message"] in text
        if error.get("field"):
            assert f"Field: {error['field']}" in text
        return error

    async def revision(self) -> int:
        return (await self.ok("get_workspace", {}))["workspaceRevision"]

    async def stage(self, tool: str, **arguments: Any) -> dict[str, Any]:
        pinned = {"expectedCaseId": self.case_id, "expectedRevision": await self.revision()}
        return await self.ok(tool, {**pinned, **arguments})

    async def accepted(self, tool: str, **arguments: Any) -> dict[str, Any]:
        """Stage, then have a reviewer accept every item; return the decision."""
        staged = await self.stage(tool, **arguments)
        return await decide(self.stack, staged["proposalId"], accept=[i["itemId"] for i in staged["items"]])

    async def proposals(self, status: str = "all") -> list[dict[str, Any]]:
        async with self.stack.api("reviewer") as api:
            listed = await api.get(f"/api/v1/cases/{self.case_id}/proposals", params={"status": status})
            assert listed.status_code == 200, listed.text
            return listed.json()["proposals"]


async def decide(stack: Any, proposal_id: str, *, accept: list[str] = (), reject: list[str] = (),
                 note: str | None = None, expected_revision: int | None = None, role: str = "reviewer",
                 status: int = 200) -> dict[str, Any]:
    body: dict[str, Any] = {"accept": list(accept), "reject": list(reject)}
    if note is None and reject:  # a rejection needs a note; a test of that refusal posts its own body
        note = "rejected by a test"
    if note is not None:
        body["note"] = note
    async with stack.api(role) as api:
        if expected_revision is None:  # decide on the view as it is now, as a reviewer's page would
            shown = await api.get(f"/api/v1/proposals/{proposal_id}")
            expected_revision = shown.json().get("caseRevision", 0) if shown.status_code == 200 else 0
        body["expectedRevision"] = expected_revision
        response = await api.post(f"/api/v1/proposals/{proposal_id}/decisions", json=body)
    assert response.status_code == status, response.text
    return response.json()


def agent_session(stack: Any, name: str | None = None, case_id: str | None = None):
    """`async with agent_session(stack) as agent:` — a new case, an agent assigned to it, an MCP session."""
    from contextlib import asynccontextmanager

    @asynccontextmanager
    async def session():
        case = await new_case(stack, case_id)
        agent_name = name or unique("agent")
        token = await stack.issue_token("agent", agent_name, case_id=case)
        async with stack.agent(token) as mcp:
            agent = Agent(stack, case, token, agent_name, mcp)
            await agent.revision()  # discover the case
            yield agent

    return session()


async def seed(agent: Agent, *, sources: int = 2, claims: int = 0, source_type: str = "primary") -> dict[str, list]:
    """Give the agent's case canonical sources (and claims citing the first source)."""
    source_ids = [f"s{i}-{secrets.token_hex(2)}" for i in range(sources)]
    for start in range(0, len(source_ids), 4):
        await agent.accepted("stage_sources",
                             sources=[source_item(s, type=source_type) for s in source_ids[start:start + 4]])
    claim_ids = [f"c{i}-{secrets.token_hex(2)}" for i in range(claims)]
    for start in range(0, len(claim_ids), 4):
        await agent.accepted("stage_claims", claims=[claim_item(c, [source_ids[0]]) for c in claim_ids[start:start + 4]])
    return {"sources": source_ids, "claims": claim_ids}


async def new_company(stack: Any, ticker: str | None = None) -> dict[str, Any]:
    """A saved company with three thesis claims (one of them retired later by tests) and a source file."""
    ticker = ticker or f"T{secrets.token_hex(3).upper()}"
    async with stack.api("admin") as api:
        company = (await api.post("/api/v1/companies", json={"ticker": ticker, "name": f"{ticker} Holdings"})).json()
        company_id = company["companyId"]
        claims = []
        for text, label, section, url in [
            ("Revenue grows 10% a year.", "INFERRED", "Growth", "https://example.org/plan"),
            ("Margins are stable.", "UNVERIFIED", "Margins", None),
            ("The brand is the moat.", "CONFIRMED", "Moat", "https://example.org/survey"),
        ]:
            body = {"text": text, "label": label, "section": section, **({"sourceUrl": url} if url else {})}
            claims.append((await api.post(f"/api/v1/companies/{company_id}/claims", json=body)).json()["claimId"])
        source = (await api.post(f"/api/v1/companies/{company_id}/source-files", json={
            "title": "Q3 results", "url": f"https://example.org/{ticker}/q3", "text": "Revenue grew 14%."})).json()
    return {"companyId": company_id, "ticker": ticker, "claims": claims, "sourceFileId": source["sourceFileId"],
            "sourceUrl": f"https://example.org/{ticker}/q3"}


def preview_args(company: dict[str, Any], key: str, **overrides: Any) -> dict[str, Any]:
    growth, margins, _ = company["claims"]
    return {
        "mode": "preview",
        "companyId": company["companyId"],
        "sourceFileId": company["sourceFileId"],
        "category": "strengthened",
        "summary": "Q3 revenue grew 14%, ahead of the thesis.",
        "affectedClaimIds": [growth],
        "proposedClaims": [
            {"text": "Revenue grows 14% a year.", "label": "CONFIRMED", "section": "Growth", "action": "update",
             "targetClaimId": growth},
            {"text": "Services attach rate drives growth.", "label": "INFERRED", "section": "Growth",
             "action": "add"},
            {"text": "Superseded by reported margins.", "label": "UNVERIFIED", "section": "Margins",
             "action": "retire", "targetClaimId": margins},
        ],
        "confirms": ["growth"],
        "contradicts": [],
        "newRisks": ["dependence on services"],
        "followUps": ["check Q4 guidance"],
        "idempotencyKey": key,
        **overrides,
    }


async def previewed_and_committed(mcp: Any, args: dict[str, Any]) -> dict[str, Any]:
    """Preview a delta and commit it; return the preview (operationId, commitToken, delta)."""
    preview = await mcp.call_tool("propose_claim_delta_from_source", args)
    assert not preview.is_error, preview.content[0].text
    committed = await mcp.call_tool("propose_claim_delta_from_source", {
        "mode": "commit", "operationId": preview.structured_content["operationId"],
        "commitToken": preview.structured_content["commitToken"]})
    assert not committed.is_error, committed.content[0].text
    return unframed(preview.structured_content)


async def ui_sign_in(http: Any, token: str, next: str = "/ui") -> Any:
    """Sign an HTTP client in to the review UI as a browser does: load the form (its pre-session), post it."""
    form = await http.get("/ui/signin", params={"next": next})
    csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', form.text)
    assert csrf is not None, form.text
    return await http.post("/ui/signin", data={"token": token, "next": next, "csrf": csrf.group(1)})
