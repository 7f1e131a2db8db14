"""`threadline review list|show|accept|reject`: the review API from a terminal."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import httpx2
import typer
from rich.console import Console
from rich.table import Table

from shared.settings import CREDENTIALS_FILE, get_settings

app = typer.Typer(help="Review proposals through the HTTP API.", no_args_is_help=True)
# Markup and highlighting off: every string printed comes from the API (agents' text among it) and must
# print as is; `[/note]` in a claim is text, not a closing tag.
console = Console(width=None if sys.stdout.isatty() else 200, markup=False, highlight=False)
errors = Console(stderr=True, soft_wrap=True, markup=False, highlight=False)  # refusals: never in a redirected --json output

Url = Annotated[str | None, typer.Option("--url", help="Gateway URL (default: THREADLINE_URL, else the data dir's).")]
Token = Annotated[str | None, typer.Option(
    "--token", help="Reviewer token (default: THREADLINE_TOKEN, else the data dir's credentials).")]
DataDir = Annotated[Path | None, typer.Option("--data-dir", help="Data directory (default .threadline).")]
AsJson = Annotated[bool, typer.Option("--json", help="Print the API's JSON.")]


def _an_id(listed_by: str) -> Callable[[str], str]:
    """A check that an id argument names something: an empty one would reach the API as a path of its own."""

    def named(value: str) -> str:
        if not value.strip():
            raise typer.BadParameter(f"give an id, or its first characters as `{listed_by}` shows them "
                                     "(the review pages show 8)")
        return value

    return named


# The review pages and `review list` show this many characters of an id; any unique start of one names it.
SHOWN_ID = 8

ProposalId = Annotated[str, typer.Argument(
    metavar="PROPOSAL", help="The proposal's id, or a unique start of it.",
    callback=_an_id("threadline review list --case CASE"))]
OperationId = Annotated[str, typer.Argument(
    metavar="OPERATION", help="The delta's operation id, or a unique start of it.", callback=_an_id("threadline review deltas"))]


def when(value: str | None) -> str:
    """An API time as a person reads it, with its zone: `2026-11-01 10:32:05 UTC`."""
    if not value:
        return ""
    moment = datetime.fromisoformat(value)
    return (moment.astimezone(UTC) if moment.tzinfo else moment.replace(tzinfo=UTC)).strftime("%Y-%m-%d %H:%M:%S UTC")


class Api:
    def __init__(self, url: str | None, token: str | None, data_dir: Path | None) -> None:
        settings = get_settings()
        if data_dir is not None:
            settings = settings.model_copy(update={"data_dir": data_dir})
        self.url = (url or settings.url or settings.resolved_http_url()).rstrip("/")
        if token is None and settings.token is not None:
            token = settings.token.get_secret_value()
        if token is None:
            credentials = settings.data_dir / CREDENTIALS_FILE
            if not credentials.exists():
                raise typer.BadParameter(f"no token: pass --token, set THREADLINE_TOKEN, or pass --data-dir with the "
                                         f"data directory `threadline up` wrote its {CREDENTIALS_FILE} to "
                                         f"(none at {credentials})")
            token = json.loads(credentials.read_text())["reviewer"]
        self.client = httpx2.Client(base_url=self.url, headers={"Authorization": f"Bearer {token}"}, timeout=30)

    def __call__(self, method: str, path: str, options: dict[str, str] | None = None, **kwargs: Any) -> Any:
        try:
            response = self.client.request(method, f"/api/v1{path}", **kwargs)
        except httpx2.HTTPError as error:
            errors.print(f"cannot reach {self.url}: {error}", style="red")
            raise typer.Exit(2) from None
        return self.answer(response, options)

    def answer(self, response: httpx2.Response, options: dict[str, str] | None = None) -> Any:
        """A response's JSON; a refusal, or an answer that is not the gateway's JSON (a proxy's error page), is
        printed on standard error and ends the command; `options` names the command's option for an API field
        (`{"asOf": "--as-of"}`), as the user typed it."""
        try:
            body = response.json()
        except ValueError:  # not the gateway's JSON: a proxy's error page, or another server on that port
            errors.print(f"{self.url} answered {response.status_code} without JSON: is it Threadline's gateway?",
                         style="red")
            raise typer.Exit(2) from None
        if response.status_code >= 400:
            error = body.get("error", {}) if isinstance(body, dict) else {}
            problems = error.get("problems") or []
            if len(problems) < 2:  # the message names the first problem only, and says "see problems"
                problems = [{"message": error.get("message"), "hint": error.get("hint")}]
            for problem in problems:
                named = f"{problem['field']}: " if problem.get("field") else ""
                said = f"error ({error.get('code')}): {named}{problem.get('message')}"
                hint = problem.get("hint") or ""
                for field, option in (options or {}).items():
                    said, hint = (re.sub(rf"\b{re.escape(field)}\b", option, text) for text in (said, hint))
                errors.print(said, style="red")
                if hint:
                    errors.print(f"hint: {hint}")
            raise typer.Exit(1)
        return body


@app.command("list")
def list_(
    case: Annotated[str | None, typer.Option("--case", help="A case id; without it, list cases.")] = None,
    status: Annotated[str | None, typer.Option(help="pending | accepted | rejected | decided | all "
                                                    "(default: pending)")] = None,
    kind: Annotated[str | None, typer.Option(help="sources | claims | relations | merge | verdict")] = None,
    agent: Annotated[str | None, typer.Option(help="Only this agent's proposals.")] = None,
    text: Annotated[str | None, typer.Option("--text", help="Words that must appear in the items.")] = None,
    duplicates: Annotated[bool, typer.Option("--duplicates", help="Only proposals with a possible duplicate.")] = False,
    sort: Annotated[str | None, typer.Option(help="oldest | newest (by when staged)")] = None,
    cursor: Annotated[str | None, typer.Option(help="The next page: the cursor the previous page printed.")] = None,
    url: Url = None, token: Token = None, data_dir: DataDir = None, as_json: AsJson = False,
) -> None:
    """List cases with pending counts, or one case's proposals (filtered, ordered, a page at a time)."""
    asked = {"status": status, "kind": kind, "agent": agent, "text": text, "duplicates": duplicates or None,
             "sort": sort, "cursor": cursor}
    if case is None and (given := next((name for name, value in asked.items() if value is not None), None)):
        raise typer.BadParameter(f"--{given} filters one case's proposals: add --case ID")  # else every case, unfiltered
    status = status or "pending"
    api = Api(url, token, data_dir)
    if case is None:
        cases = api("GET", "/cases")
        if as_json:
            return typer.echo(json.dumps(cases, indent=2))
        table = Table("case", "title", "revision", "pending")
        for c in cases["cases"]:
            table.add_row(c["caseId"], c["title"], str(c["revision"]), str(c["pendingProposals"]))
        return console.print(table)
    asked = {"kind": kind, "agent": agent, "q": text, "duplicates": "true" if duplicates else None, "sort": sort,
             "cursor": cursor}
    listed = api("GET", f"/cases/{case}/proposals",
                 params={"status": status, **{k: v for k, v in asked.items() if v is not None}})
    if as_json:
        return typer.echo(json.dumps(listed, indent=2))
    if not listed["proposals"]:
        return console.print(_none_listed(case, status, asked))
    table = Table()
    table.add_column("proposal", no_wrap=True)
    for name in ("kind", "status", "agent", "staged", "items"):
        table.add_column(name)
    for p in listed["proposals"]:
        table.add_row(p["proposalId"][:SHOWN_ID], p["kind"], p["status"], p["provenance"]["agent"],
                      when(p["provenance"]["stagedAt"]),
                      ", ".join(f"{i['itemId']} ({i['status']}{', possible duplicate' if _still_open(i) else ''})"
                                for i in p["items"]))
    console.print(table)
    if listed.get("nextCursor"):
        console.print(f"more: --cursor {listed['nextCursor']}", markup=False, highlight=False)


def _none_listed(case: str, status: str, asked: dict[str, str | None]) -> str:
    """The line an empty page prints instead of a bare table header, naming the filters it was asked with."""
    filters = [f"{name} {asked[key]}" for name, key in (("kind", "kind"), ("agent", "agent"), ("text", "q"),
                                                         ("sort", "sort")) if asked[key] is not None]
    if asked["duplicates"]:
        filters.append("with a possible duplicate")
    if asked["cursor"]:
        filters.append("after the cursor given")
    return f"no {'' if status == 'all' else status + ' '}proposals in case {case}" + (
        f" ({', '.join(filters)})" if filters else "")


def _still_open(item: dict[str, Any]) -> bool:
    """A pending item with a possible duplicate still canonical or pending (one rejected or retired since is none)."""
    return item["status"] == "pending" and any(d["open"] for d in item.get("possibleDuplicates", []))


@app.command()
def show(proposal: ProposalId, url: Url = None, token: Token = None, data_dir: DataDir = None, as_json: AsJson = False) -> None:
    """Show a proposal: its items and what accepting each would change."""
    shown = Api(url, token, data_dir)("GET", f"/proposals/{proposal}")
    if as_json:
        return typer.echo(json.dumps(shown, indent=2))
    console.print(f"{shown['kind']} proposal {shown['proposalId']} — {shown['status']}", style="bold")
    console.print(f"case {shown['caseId']} at revision {shown['caseRevision']}; staged by "
                  f"{shown['provenance']['agent']} at {when(shown['provenance']['stagedAt'])}, pinned to "
                  f"{shown['provenance']['pinnedRevision']}")
    for item in shown["items"]:
        console.print(f"\n{item['itemId']} ({item['status']})", style="bold")
        console.print(json.dumps(item["record"], indent=2, ensure_ascii=False))
        if item.get("grounding"):
            console.print(f"grounding: {_grounding(item['grounding'])}")
        for check in item.get("reviewChecks", []):
            message = " ".join(check["message"].split())
            console.print(f"check {check['check']} ({check['severity']}): {message}",
                          style="yellow" if check["severity"] == "warning" else None)
        for similar in item.get("possibleDuplicates", []):
            of = similar["of"]
            if similar.get("restatedLater"):
                said = f"restated later by pending {of['kind']} {of['id']}"
            elif similar["open"]:
                said = f"possible duplicate of {of['status']} {of['kind']} {of['id']}"
            else:
                said = f"resembles {of['kind']} {of['id']}, since {of['status']}"
            console.print(f"{said} (similarity {similar['similarity']:.2f})", style="yellow", markup=False)
        preview = item.get("wouldChange")
        if preview:
            console.print(f"accepting would: {json.dumps(preview['change'], ensure_ascii=False)}")
            for problem in preview["problems"]:
                console.print(f"cannot accept: {problem['field']}: {problem['message']}", style="red")
    for decision in shown.get("decisions", []):
        console.print(f"\ndecided by {decision['reviewer']} at {when(decision['decidedAt'])}", style="bold")
        for verb in ("accepted", "rejected"):
            if decision[verb]:
                console.print(f"{verb}: {', '.join(decision[verb])}")
        for refused in decision["refused"]:
            console.print(f"refused {refused['itemId']}: {refused['reason']}", style="red")
        console.print(f"note: {decision['note']}" if decision["note"] else "no note")


def _grounding(grounding: dict[str, Any]) -> str:
    """A claim's grounding (`primary, 2 independent origins`), or a relation's, one per end."""
    def one(g: dict[str, Any]) -> str:
        n = g["independentOrigins"]
        return f"{g['grounding']}, {n} independent origin{'' if n == 1 else 's'}"

    if "grounding" in grounding:
        return one(grounding)
    return "; ".join(f"{end} claim {one(g)}" for end, g in sorted(grounding.items()))


def _decide(verb: str, proposal: str, items: list[str], note: str | None, expected: int | None,
            url: str | None, token: str | None, data_dir: Path | None, as_json: bool) -> None:
    api = Api(url, token, data_dir)
    shown = api("GET", f"/proposals/{proposal}")  # a unique prefix of the id names it too
    chosen = items or [i["itemId"] for i in shown["items"] if i["status"] == "pending"]
    if not chosen:
        console.print(f"proposal {shown['proposalId']} is already decided; nothing to {verb}:", style="red")
        for item in shown["items"]:
            console.print(f"  {item['itemId']} {item['status']} by {item.get('decidedBy')} at "
                          f"{when(item.get('decidedAt'))}")
        raise typer.Exit(1)
    body = {verb: chosen, "note": note,
            "expectedRevision": expected if expected is not None else shown["caseRevision"]}
    outcome = api("POST", f"/proposals/{shown['proposalId']}/decisions", json=body)
    if as_json:
        return typer.echo(json.dumps(outcome, indent=2))
    if outcome.get("recorded", True):
        console.print("; ".join([f"revision {outcome['revision']}",
                                 *(f"{verb} {', '.join(outcome[verb])}" for verb in ("accepted", "rejected")
                                   if outcome[verb])]))
    else:
        console.print(f"nothing recorded: every item was refused, so no decision and no note were stored; "
                      f"the case stays at revision {outcome['revision']}", style="red")
    for refused in outcome["refused"]:
        console.print(f"refused {refused['itemId']}: {refused['reason']}", style="red")
    if outcome["refused"]:
        raise typer.Exit(1)


Items = Annotated[list[str] | None, typer.Argument(metavar="ITEMS", help="Item ids (default: every pending item).")]
Note = Annotated[str | None, typer.Option("--note", help="Why; agents see it in their guidance.")]
Expected = Annotated[int | None, typer.Option("--expected-revision",
                                                 help="Refuse if the case moved (default: as shown now).")]


@app.command()
def accept(proposal: ProposalId, items: Items = None, note: Note = None, expected_revision: Expected = None,
           url: Url = None, token: Token = None, data_dir: DataDir = None, as_json: AsJson = False) -> None:
    """Accept items of a proposal (all pending ones when none are named)."""
    _decide("accept", proposal, items or [], note, expected_revision, url, token, data_dir, as_json)


RejectionNote = Annotated[str, typer.Option("--note", help="Why (required); the agent sees it.")]


@app.command()
def reject(proposal: ProposalId, note: RejectionNote, items: Items = None, expected_revision: Expected = None,
           url: Url = None, token: Token = None, data_dir: DataDir = None, as_json: AsJson = False) -> None:
    """Reject items of a proposal (all pending ones when none are named), with a note (required) the agents
    see in their guidance."""
    if not note.strip():
        raise typer.BadParameter("say why the items are rejected; the agent reads it", param_hint="--note")
    _decide("reject", proposal, items or [], note, expected_revision, url, token, data_dir, as_json)


@app.command()
def duplicate(proposal: ProposalId, item: Annotated[str, typer.Argument(metavar="ITEM", help="The item that restates a record.")],
              of: Annotated[str, typer.Option("--of", help="The canonical or pending claim or source it duplicates.")],
              note: Note = None, expected_revision: Expected = None, url: Url = None, token: Token = None,
              data_dir: DataDir = None, as_json: AsJson = False) -> None:
    """Reject an item as a duplicate of a record of the case; the agent's guidance names that record."""
    api = Api(url, token, data_dir)
    shown = api("GET", f"/proposals/{proposal}")
    body = {"duplicates": [{"itemId": item, "of": of}], "note": note,
            "expectedRevision": expected_revision if expected_revision is not None else shown["caseRevision"]}
    outcome = api("POST", f"/proposals/{shown['proposalId']}/decisions", json=body,
                  options={"duplicates[0].of": "--of", "duplicates[0].itemId": "ITEM"})
    if as_json:
        return typer.echo(json.dumps(outcome, indent=2))
    for refused in outcome["refused"]:
        console.print(f"refused {refused['itemId']}: {refused['reason']}", style="red", markup=False)
    if outcome["refused"]:
        raise typer.Exit(1)
    console.print(f"rejected {item} as a duplicate of {of}; the case stays at revision {outcome['revision']}",
                  markup=False)


# --- thesis deltas ----------------------------------------------------------------------------------


@app.command()
def deltas(
    company: Annotated[str | None, typer.Option("--company", help="A company id.")] = None,
    ticker: Annotated[str | None, typer.Option("--ticker", help="A company ticker.")] = None,
    status: Annotated[str, typer.Option(help="committed | accepted | rejected | previewed | all")] = "committed",
    url: Url = None, token: Token = None, data_dir: DataDir = None, as_json: AsJson = False,
) -> None:
    """List companies with deltas to review, or one company's deltas."""
    api = Api(url, token, data_dir)
    if company is None and ticker is None:
        listed = api("GET", "/companies")
        if as_json:
            return typer.echo(json.dumps(listed, indent=2))
        table = Table("ticker", "company", "revision", "to review")
        table.columns[0].no_wrap = True
        for c in listed["companies"]:
            table.add_row(c["ticker"], f"{c['name']} ({c['companyId']})", str(c["thesisRevision"]),
                          str(c["committedDeltas"]))
        return console.print(table)
    if company is None:
        found = api("GET", "/companies", params={"ticker": ticker})["companies"]
        if not found:
            console.print(f"no saved company with ticker {ticker}", style="red")
            raise typer.Exit(1)
        company = found[0]["companyId"]
    listed = api("GET", f"/companies/{company}/deltas", params={"status": status})
    if as_json:
        return typer.echo(json.dumps(listed, indent=2))
    table = Table()
    table.add_column("operation", no_wrap=True)
    for name in ("status", "category", "summary", "agent"):
        table.add_column(name)
    for d in listed["deltas"]:
        table.add_row(d["operationId"], d["status"], d["delta"]["category"], d["delta"]["summary"][:80], d["caller"])
    console.print(table)


@app.command()
def delta(operation: OperationId, url: Url = None, token: Token = None, data_dir: DataDir = None,
          as_json: AsJson = False) -> None:
    """Show a delta as a diff of the thesis."""
    shown = Api(url, token, data_dir)("GET", f"/deltas/{operation}")
    if as_json:
        return typer.echo(json.dumps(shown, indent=2))
    d = shown["delta"]
    console.print(f"{d['category']} delta {shown['operationId']} — {shown['status']} "
                  f"({shown['ticker']}, previewed on revision {shown['baseRevision']}, now {shown['thesisRevision']})")
    console.print(d["summary"])
    for claim in d["claims"]["added"]:
        console.print(f"  + add [{claim['label']}, {claim['section']}] {claim['text']}")
    for claim in d["claims"]["updated"]:
        console.print(f"  ~ update {claim['claimId']}: {claim['before']['text']} → {claim['after']['text']}")
    for claim in d["claims"]["retired"]:
        console.print(f"  - retire {claim['claimId']}: {claim['before']['text']}")
    if shown.get("refusal"):
        console.print(f"{shown['refusal']}", style="red")


def _decide_delta(decision: str, operation: str, note: str | None, url: str | None, token: str | None,
                  data_dir: Path | None, as_json: bool) -> None:
    outcome = Api(url, token, data_dir)("POST", f"/deltas/{operation}/decision",
                                        json={"decision": decision, "note": note})
    if as_json:
        return typer.echo(json.dumps(outcome, indent=2))
    console.print(f"delta {outcome['status']}; thesis revision {outcome['thesisRevision']}")


@app.command("accept-delta")
def accept_delta(operation: OperationId, note: Note = None, url: Url = None, token: Token = None,
                 data_dir: DataDir = None, as_json: AsJson = False) -> None:
    """Accept a committed delta: apply every claim change to the thesis at once."""
    _decide_delta("accept", operation, note, url, token, data_dir, as_json)


@app.command("reject-delta")
def reject_delta(operation: OperationId, note: RejectionNote, url: Url = None, token: Token = None,
                 data_dir: DataDir = None, as_json: AsJson = False) -> None:
    """Reject a committed delta, with a note (required) the agent sees in get_company_context."""
    if not note.strip():
        raise typer.BadParameter("say why the delta is rejected", param_hint="--note")
    _decide_delta("reject", operation, note, url, token, data_dir, as_json)
