"""Deciding on a proposal from its page: each item accepted, rejected, rejected as a duplicate of a record the
reviewer names (prefilled from what staging flagged), or left for later; the keys that do it are
static/review-keys.js, served by the gateway itself under the page's Content-Security-Policy."""

from __future__ import annotations

from urllib.parse import urlencode

import pydantic
from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response

from services.gateway.auth import Principal
from services.gateway.ui import Reviewer, _decidable, call, form_of, problem_of
from shared import contracts as c
from shared.errors import InvalidArgument, ThreadlineError
from shared.subjects import Command

router = APIRouter(prefix="/ui", include_in_schema=False)


def chosen(form: dict[str, str], choice: str) -> list[str]:
    """The items the form's radios set to `choice`, in the form's order."""
    return [key.removeprefix("item:") for key, value in form.items() if key.startswith("item:") and value == choice]


def duplicates_of(form: dict[str, str]) -> list[c.DuplicateOf]:
    """Each item chosen as a duplicate, with the record its `of:<item>` box names."""
    found = []
    for i, item_id in enumerate(chosen(form, "duplicate")):
        of = form.get(f"of:{item_id}", "").strip()
        if not of:
            raise InvalidArgument(f"say which record {item_id!r} duplicates", field=f"duplicates[{i}].of",
                                  hint="type the id of the canonical or pending claim or source it restates")
        found.append(c.DuplicateOf(item_id=item_id, of=of))
    return found


@router.post("/proposals/{proposal_id}/decide")
async def decide(request: Request, proposal_id: str, principal: Principal = Reviewer) -> Response:
    form = await form_of(request)
    note = form.get("note", "").strip()
    try:
        outcome = await call(request, Command.DECIDE, c.Decide(
            actor=principal.actor(), proposal_id=proposal_id, accept=chosen(form, "accept"),
            reject=chosen(form, "reject"), duplicates=duplicates_of(form), note=note or None,
            expected_revision=_expected_revision(form)))
    except (ThreadlineError, pydantic.ValidationError) as error:
        return await _decidable(request, principal, "proposal", proposal_id, outcome=None,
                                problem=problem_of(error), draft=note)
    if outcome.get("recorded"):  # post/redirect/get: a refresh shows the decision, it does not post it again
        return RedirectResponse(f"/ui/proposals/{outcome['proposalId']}?{urlencode({'decision': outcome['decisionId']})}"
                                "#outcome", status_code=303)
    # Nothing was recorded (every chosen item refused), the note included: the page offers it again.
    return await _decidable(request, principal, "proposal", proposal_id, outcome=outcome, problem=None, draft=note)


def _expected_revision(form: dict[str, str]) -> int:
    expected = form.get("expectedRevision", "")
    if not expected.isdigit():
        raise InvalidArgument("the form does not say which revision of the case you reviewed",
                              field="expectedRevision", hint="reload the proposal and decide again")
    return int(expected)
