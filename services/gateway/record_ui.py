"""The review page of one agent's track record (`/ui/agents/{name}`), and the link to it every page that names
an agent draws (`agent_link`)."""

from __future__ import annotations

from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.responses import Response
from markupsafe import Markup, escape

from services.gateway.auth import Principal
from services.gateway.http_api import AgentName
from services.gateway.ui import Reviewer, call, render, templates
from shared.resolution_contracts import AgentRecordRef
from shared.subjects import Command
from shared.track_record import PROBABILITY

router = APIRouter(prefix="/ui", include_in_schema=False)


def agent_link(name: str | None) -> Markup:
    """The agent's name, linked to its track record."""
    if not name:
        return Markup("")
    return Markup(f'<a class="agent-link" href="/ui/agents/{quote(str(name), safe="")}" '
                  f'title="track record of {escape(name)}">{escape(name)}</a>')


def linked_summary(summary: str, staged_by: str | None) -> Markup:
    """A change log summary ("… of proposal P staged by A") with the staging agent linked to its track record."""
    tail = f" staged by {staged_by}"
    if not staged_by or not summary.endswith(tail):
        return Markup(escape(summary))
    return Markup(f"{escape(summary[:-len(tail)])} staged by {agent_link(staged_by)}")


templates.globals["agent_link"] = agent_link
templates.globals["linked_summary"] = linked_summary


@router.get("/agents/{name:path}")
async def agent_page(request: Request, name: AgentName, principal: Principal = Reviewer) -> Response:
    found = await call(request, Command.AGENT_RECORD, AgentRecordRef(actor=principal.actor(), agent=name))
    return render(request, "agent.html", record=found, probability=PROBABILITY)
