"""The review web page at /ui: server-rendered, autoescaped, usable without JavaScript.

Signing in opens a stored session (services/gateway/sessions.py) whose random id is the HttpOnly,
SameSite=Strict cookie scoped to /ui; the bearer token never goes back to the browser. Every form carries
a CSRF token derived from that id, which a page on another origin cannot compute; the sign-in form itself
carries one derived from a pre-session cookie, and a sign-in posted from a foreign Origin is refused.
Bidirectional control characters in any text shown are replaced by visible escapes, so agent text
cannot reorder what a reviewer reads.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import unquote, urlencode, urlsplit

import pydantic
from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from jinja2 import Environment, FileSystemLoader, select_autoescape
from markupsafe import Markup

from services.gateway import queue_view, ui_access, ui_text
from services.gateway.argument_map import MapLinks
from services.gateway.auth import Principal
from services.gateway.case_map import map_context
from services.gateway.errors import invalid_argument
from services.gateway.http_api import CaseId, MapFocus
from services.gateway.sessions import SESSION_LIFETIME
from shared import contracts as c
from shared.errors import HTTP_STATUS, Forbidden, InvalidArgument, ThreadlineError, Unauthenticated
from shared.graph_contracts import CaseGraphRef
from shared.history_contracts import CaseAsOf, CaseDiff
from shared.kinds import CLAIMS
from shared.subjects import Command

router = APIRouter(prefix="/ui", include_in_schema=False)
COOKIE = "threadline_session"
SIGNIN_COOKIE = "threadline_signin"  # the pre-session the sign-in form's CSRF token is bound to
REVIEW_ROLES = ("reviewer", "admin")

# Characters that reorder the text around them (embeddings, overrides, isolates, marks).
BIDI_CONTROLS = {ch: f"[U+{ord(ch):04X}]" for ch in
                 "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"}
_BIDI_TABLE = str.maketrans(BIDI_CONTROLS)


def visible_bidi(value: object) -> object:
    """Every value a template prints, with bidirectional controls shown as visible escapes ([U+202E])."""
    if not isinstance(value, str):
        return value
    shown = value.translate(_BIDI_TABLE)
    return Markup(shown) if isinstance(value, Markup) else shown


templates = Environment(
    loader=FileSystemLoader(Path(__file__).parent / "templates"),
    autoescape=select_autoescape(default=True, default_for_string=True),
    trim_blocks=True,
    lstrip_blocks=True,
    finalize=visible_bidi,
)
templates.filters["short"] = lambda value, n=8: str(value)[:n]
templates.filters.update(ui_text.FILTERS)  # `when` (times with their zone), `unframed` (records for people)
templates.globals["may_open"] = ui_access.may_open  # links only to pages the signed-in role may open
templates.globals["grounding_text"] = ui_text.grounding_text  # `primary · 2 origins`
templates.globals["CLAIMS"] = CLAIMS.name  # the kind of a proposal of claims, as proposals name it

# Staged records read best in this order; anything else follows in its stored order.
FIELD_ORDER = [
    "id", "groupId", "claim", "title", "text", "label", "publisher", "url", "type", "kind", "confidence",
    "sourceClaimId", "targetClaimId", "memberClaimIds", "sourceIds", "publicationDate", "snapshotDate",
    "authority", "evidenceText", "transformationNote", "proposalRationale", "rationale", "provenanceNote",
    "lane", "order", "relations",
]


def ordered_fields(record: dict[str, Any]) -> list[tuple[str, Any]]:
    rank = {key: i for i, key in enumerate(FIELD_ORDER)}
    return sorted(record.items(), key=lambda kv: rank.get(kv[0], len(FIELD_ORDER)))


templates.filters["ordered"] = ordered_fields


def csrf_token(session_id: str) -> str:
    return hashlib.sha256(b"threadline-csrf:" + session_id.encode()).hexdigest()[:32]


def render(request: Request, template: str, status: int = 200, **context: Any) -> HTMLResponse:
    principal: Principal | None = getattr(request.state, "principal", None)
    session = request.cookies.get(COOKIE, "")
    html = templates.get_template(template).render(
        principal=principal, csrf=csrf_token(session) if session else "", path=request.url.path, **context
    )
    return HTMLResponse(html, status_code=status, headers={
        "Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                                   "frame-ancestors 'none'; form-action 'self'",
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "same-origin",
        "Cache-Control": "no-store",
    })


async def signed_in(request: Request) -> Principal | None:
    session_id = request.cookies.get(COOKIE)
    if not session_id:
        return None
    principal = await request.app.state.gateway.sessions.principal(session_id)
    if principal is None or principal.role not in REVIEW_ROLES:
        return None
    request.state.principal = principal
    return principal


def safe_next(target: str | None) -> str:
    """Where to go after signing in: a page of this UI, given as a path; anything else goes to /ui."""
    if not target or "\\" in target or any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in target):
        return "/ui"
    parts = urlsplit(target)
    path = unquote(parts.path)
    if parts.scheme or parts.netloc or not (path == "/ui" or path.startswith("/ui/")) or "//" in path:
        return "/ui"
    if any(segment in (".", "..") for segment in path.split("/")):
        return "/ui"
    return parts.path + (f"?{parts.query}" if parts.query else "")


def page_of(request: Request) -> str:
    """The page a request belongs to: itself for a GET; for a form post (`<page>/<action>`), its page."""
    if request.method in ("GET", "HEAD"):
        return request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return request.url.path.rsplit("/", 1)[0] or "/ui"


def to_signin(request: Request) -> RedirectResponse:
    # After signing in the browser GETs `next`: a page, never a form's action (which only takes POSTs).
    return RedirectResponse(f"/ui/signin?{urlencode({'next': safe_next(page_of(request))})}", status_code=303)


class SignInRequired(Exception):  # noqa: N818 - a redirect, not a failure
    """The page needs a signed-in reviewer; the app answers with a redirect to the sign-in page."""


async def reviewer(request: Request) -> Principal:
    """Dependency of every page: the signed-in reviewer or admin."""
    principal = await signed_in(request)
    if principal is None:
        raise SignInRequired
    return principal


Reviewer = Depends(reviewer)


async def call(request: Request, command: Command, message: Any) -> Any:
    return await request.app.state.gateway.client.call(
        command, message, correlation_id=request.state.correlation_id, traceparent=request.state.traceparent
    )


async def form_of(request: Request) -> dict[str, str]:
    form = await request.form()
    session = request.cookies.get(COOKIE, "")
    if not session or not hmac.compare_digest(str(form.get("csrf", "")), csrf_token(session)):
        raise Forbidden("the form expired or came from another site", hint="reload the page and submit again")
    return {key: str(value) for key, value in form.items()}


def status_of(error: ThreadlineError) -> int:
    return HTTP_STATUS.get(error.code, 500)


def problem_of(error: ThreadlineError | pydantic.ValidationError) -> ThreadlineError:
    """What a form's submitter is told: a service's error as it is; a field the contract refused, named."""
    return invalid_argument(error.errors()) if isinstance(error, pydantic.ValidationError) else error


def failure(request: Request, error: ThreadlineError) -> HTMLResponse:
    page = "forbidden.html" if isinstance(error, ui_access.NotForYourRole) else "error.html"
    return render(request, page, status=status_of(error), error=error)


# --- sign-in ----------------------------------------------------------------------------------------


def _signin_form(request: Request, *, next: str, problem: str | None, status: int = 200) -> HTMLResponse:
    """The sign-in form, bound to this browser's pre-session (made here when it has none)."""
    presession = request.cookies.get(SIGNIN_COOKIE) or secrets.token_urlsafe(32)
    response = render(request, "signin.html", status=status, next=next, problem=problem,
                      signin_csrf=csrf_token(presession))
    response.set_cookie(SIGNIN_COOKIE, presession, httponly=True, samesite="strict", path="/ui",
                        secure=request.url.scheme == "https", max_age=3600)
    return response


def _same_origin(request: Request) -> bool:
    """Whether the request came from a page of this site: an Origin, when sent, naming this very host."""
    origin = request.headers.get("origin")
    if origin is None:
        return True  # not sent by every browser on a same-origin POST; the form's token still has to match
    parts = urlsplit(origin)
    return parts.scheme in ("http", "https") and parts.netloc == request.headers.get("host")


@router.get("/signin")
async def signin_page(request: Request, next: str = "/ui") -> Response:
    return _signin_form(request, next=safe_next(next), problem=None)


@router.post("/signin")
async def signin(request: Request) -> Response:
    form = await request.form()
    target = safe_next(str(form.get("next", "/ui")))
    presession = request.cookies.get(SIGNIN_COOKIE, "")
    if not _same_origin(request) or not presession or not hmac.compare_digest(
            str(form.get("csrf", "")), csrf_token(presession)):
        # Login CSRF: a foreign page must not sign this browser in, even with a valid token of its own.
        return _signin_form(request, status=403, next=target,
                            problem="The sign-in form expired or came from another site. Sign in again here.")
    token = str(form.get("token", "")).strip()
    try:
        principal = await request.app.state.gateway.tokens.authenticate(f"Bearer {token}")
    except Unauthenticated:
        return _signin_form(request, status=401, next=target, problem="That token is not valid.")
    if principal.role not in REVIEW_ROLES:
        return _signin_form(request, status=403, next=target,
                            problem=f"{principal.role.capitalize()} tokens cannot review. Sign in with a reviewer "
                                    "or admin token.")
    session_id = await request.app.state.gateway.sessions.open(principal)
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(COOKIE, session_id, httponly=True, samesite="strict", path="/ui",
                        secure=request.url.scheme == "https", max_age=int(SESSION_LIFETIME.total_seconds()))
    response.delete_cookie(SIGNIN_COOKIE, path="/ui")
    return response


@router.post("/signout")
async def signout(request: Request) -> Response:
    await form_of(request)
    await request.app.state.gateway.sessions.close(request.cookies.get(COOKIE, ""))
    response = RedirectResponse("/ui/signin", status_code=303)
    response.delete_cookie(COOKIE, path="/ui")
    return response


# --- cases and proposals ----------------------------------------------------------------------------


@router.get("")
@router.get("/")
async def home(request: Request, principal: Principal = Reviewer) -> Response:
    listed = await call(request, Command.LIST_CASES, c.ListCases(actor=principal.actor()))
    return render(request, "cases.html", cases=listed["cases"])


RECENTLY_DECIDED = 10
HISTORY_PAGE = 50


@router.get("/cases/{case_id}")
async def case_page(request: Request, case_id: CaseId, focus: MapFocus = None, principal: Principal = Reviewer,
                    as_of: Annotated[c.Revision | None, Query(alias="asOf")] = None,
                    since: Annotated[c.Revision | None, Query()] = None) -> Response:
    return await _case(request, principal, case_id, focus=focus, as_of=as_of, since=since)


async def _case(request: Request, principal: Principal, case_id: str, *, problem: ThreadlineError | None = None,
                draft: str = "", focus: str | None = None, as_of: int | None = None,
                since: int | None = None) -> Response:
    actor = principal.actor()
    ledger = await call(request, Command.CASE_LEDGER, CaseAsOf(actor=actor, case_id=case_id, as_of=as_of))
    decided = await call(request, Command.LIST_PROPOSALS, c.ListProposals(
        actor=actor, case_id=case_id, status="decided", limit=RECENTLY_DECIDED))
    drawn = await map_context(request, CaseGraphRef(actor=actor, case_id=case_id, focus=focus, as_of=as_of),
                              MapLinks(case_id, keep=(("asOf", str(as_of)),) if as_of is not None else ()))
    diff = await _changes_since(request, actor, case_id, since, as_of) if since is not None else None
    queue = await queue_view.pending_queue(request, actor, case_id, call) if as_of is None else None
    return render(request, "case.html", status=status_of(problem) if problem else 200, ledger=ledger,
                  claims=ledger["claims"]["items"], sources=ledger["sources"],  # both in the projection's focus order
                  decided=decided["proposals"], problem=problem, draft=draft, as_of=as_of, diff=diff, queue=queue,
                  **drawn)


PAGE_PARAMETERS = {"from": "since", "to": "asOf"}  # the diff's parameters as the case page names them


async def _changes_since(request: Request, actor: Any, case_id: str, since: int, as_of: int | None) -> Any:
    """The diff behind "changes since revision N"; a refusal names this page's parameters (since, asOf), not the
    diff's (from, to)."""
    if as_of is not None and since > as_of:
        raise InvalidArgument(f"since: {since} is after asOf {as_of}", field="since",
                              hint="give since at or before asOf, or leave asOf out to see the changes up to now")
    try:
        return await call(request, Command.CASE_DIFF, CaseDiff(actor=actor, case_id=case_id, from_revision=since,
                                                               to_revision=as_of))
    except InvalidArgument as error:
        if error.field not in PAGE_PARAMETERS:
            raise
        raise on_case_page(error) from None


def on_case_page(error: InvalidArgument) -> InvalidArgument:
    """The diff's refusal of `from` or `to`, told as the case page's `since` or `asOf`."""
    def named(problem: dict[str, Any]) -> dict[str, Any]:
        field = problem.get("field")
        name = PAGE_PARAMETERS.get(field or "", field)
        hint = problem.get("hint")
        return {**problem, "field": name, "hint": hint.replace(f"give {field} ", f"give {name} ") if hint else hint}

    first = named({"field": error.field, "hint": error.hint})
    problems = [named(p) for p in error.problems]
    message = error.message
    if error.field and message.startswith(f"{error.field}: "):
        message = f"{first['field']}: " + message[len(error.field) + 2:]
    return InvalidArgument(message, field=first["field"], hint=first["hint"], problems=problems)


@router.post("/cases/{case_id}/guidance")
async def add_guidance(request: Request, case_id: CaseId, principal: Principal = Reviewer) -> Response:
    form = await form_of(request)
    text = form.get("text", "").strip()
    try:
        await call(request, Command.ADD_GUIDANCE, c.AddGuidance(actor=principal.actor(), case_id=case_id, text=text))
    except (ThreadlineError, pydantic.ValidationError) as error:
        return await _case(request, principal, case_id, problem=problem_of(error), draft=text)
    return RedirectResponse(f"/ui/cases/{case_id}#guidance", status_code=303)


@router.get("/cases/{case_id}/history")
async def history_page(
    request: Request,
    case_id: CaseId,
    before: Annotated[c.Revision | None, Query()] = None,
    principal: Principal = Reviewer,
) -> Response:
    history = await call(request, Command.CASE_HISTORY, c.CaseHistory(
        actor=principal.actor(), case_id=case_id, before=before, limit=HISTORY_PAGE))
    return render(request, "history.html", history=history, first_page=before is None)


@router.get("/proposals/{proposal_id}")
async def proposal_page(request: Request, proposal_id: str, decision: str | None = None,
                        principal: Principal = Reviewer) -> Response:  # `decision`: the one just recorded
    return await _decidable(request, principal, "proposal", proposal_id, outcome=None, problem=None,
                            decided=decision)


# The two records a reviewer decides on a page of their own: the command that reads each and its reference.
_DECIDABLE: dict[str, tuple[Command, Callable[[str, str], Any]]] = {
    "proposal": (Command.GET_PROPOSAL, lambda actor, key: c.ProposalRef(actor=actor, proposal_id=key)),
    "delta": (Command.GET_DELTA, lambda actor, key: c.DeltaRef(actor=actor, operation_id=key)),
}


async def _decidable(request: Request, principal: Principal, record: str, key: str, *, outcome: Any,
                     problem: ThreadlineError | None, draft: str = "", decided: str | None = None) -> Response:
    """A page a reviewer decides on (`record.html`): the record, what the last decision did, or why it was
    refused (with the note they wrote kept in the form)."""
    command, ref = _DECIDABLE[record]
    found = await call(request, command, ref(principal.actor(), key))
    return render(request, f"{record}.html", status=status_of(problem) if problem else 200, outcome=outcome,
                  problem=problem, draft=draft, decided=decided, **{record: found})


# Deciding on a proposal (a duplicate of X included) and the keyboard that does it: services/gateway/queue_ui.py


# --- company theses and their deltas ----------------------------------------------------------------


@router.get("/companies")
async def companies_page(request: Request, principal: Principal = Reviewer) -> Response:
    listed = await call(request, Command.LIST_COMPANIES, c.ListCompanies(actor=principal.actor()))
    return render(request, "companies.html", companies=listed["companies"])


@router.get("/companies/{company_id}")
async def company_page(request: Request, company_id: str, principal: Principal = Reviewer) -> Response:
    company = await call(request, Command.GET_COMPANY, c.CompanyRef(actor=principal.actor(), company_id=company_id))
    deltas = await call(request, Command.LIST_DELTAS,
                        c.ListDeltas(actor=principal.actor(), company_id=company_id, status="all"))
    sections: dict[str, list[dict]] = {}
    for claim in company["claims"]:
        sections.setdefault(claim["section"], []).append(claim)
    return render(request, "company.html", company=company, sections=sections, deltas=deltas["deltas"])


@router.get("/deltas/{operation_id}")
async def delta_page(request: Request, operation_id: str, decided: bool = False,
                     principal: Principal = Reviewer) -> Response:
    return await _decidable(request, principal, "delta", operation_id, outcome=None, problem=None,
                            decided="yes" if decided else None)


@router.post("/deltas/{operation_id}/decide")
async def decide_delta(request: Request, operation_id: str, principal: Principal = Reviewer) -> Response:
    form = await form_of(request)
    note = form.get("note", "").strip()
    try:
        decision = form.get("decision")
        if decision not in ("accept", "reject"):
            raise InvalidArgument("choose accept or reject", field="decision", hint="pick one of the two buttons")
        outcome = await call(request, Command.DECIDE_DELTA, c.DecideDelta(
            actor=principal.actor(), operation_id=operation_id, decision=decision, note=note or None))
    except (ThreadlineError, pydantic.ValidationError) as error:
        return await _decidable(request, principal, "delta", operation_id, outcome=None,
                                problem=problem_of(error), draft=note)
    return RedirectResponse(f"/ui/deltas/{outcome['operationId']}?decided=true#outcome", status_code=303)


# Webhooks (admins): services/gateway/webhooks_ui.py
