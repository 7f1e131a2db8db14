"""The bearer tokens `threadline up` makes on a data dir's first start: one per role a newcomer needs."""

from __future__ import annotations

from services.cli.demo import DEMO_CASE_ID, ensure_demo_case
from services.cli.operations import issue_token
from shared.settings import Settings

CREATED_BY = "threadline up"
FIRST_ROLES = ("admin", "reviewer", "agent", "subscriber")  # credentials.json names each one's token


async def issue_first_credentials(settings: Settings, *, demo: bool) -> dict[str, str]:
    """An admin, a reviewer, an agent (assigned to the demo case when there is one) and a subscriber (reads
    the event feed, as a downstream system does) token."""
    if demo:
        await ensure_demo_case(settings)
    issued = {}
    for role in FIRST_ROLES:
        case_id = DEMO_CASE_ID if demo and role == "agent" else None
        issued[role] = (await issue_token(settings, role=role, name=role, case_id=case_id,
                                          created_by=CREATED_BY))["token"]
    return {**issued, "agentName": "agent"}
