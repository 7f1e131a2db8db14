"""`threadline review list|show|accept|reject`: the review API from a terminal."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import httpx2
import typer
from rich.console import Console
from rich.table import Table

from shared.settings import CREDENTIALS_FILE, get_settings

app = typer.Typer(help="Review proposals through the HTTP API.", no_args_is_help=True)
console = Console(width=None if sys.stdout.isatty() else 200)

Url = Annotated[Optional[str], typer.Option("--url", envvar="THREADLINE_URL", help="Gateway URL.")]
Token = Annotated[Optional[str], typer.Option("--token", envvar="THREADLINE_TOKEN",
                                              help="Reviewer token (default: the data dir's credentials).")]
DataDir = Annotated[Optional[Path], typer.Option("--data-dir", help="Data directory (default .threadline).")]
AsJson = Annotated[bool, typer.Option("--json", help="Print the API's JSON.")]


class Api:
    def __init__(self, url: str | None, token: str | None, data_dir: Path | None) -> None:
        settings = get_settings()
        if data_dir is not None:
            settings = settings.model_copy(update={"data_dir": data_dir})
        self.url = (url or settings.resolved_http_url()).rstrip("/")
        if token is None:
            credentials = settings.data_dir / CREDENTIALS_FILE
            if not credentials.exists():
                raise typer.BadParameter("no token: pass --token or set THREADLINE_TOKEN")
            token = json.loads(credentials.read_text())["reviewer"]
        self.client = httpx2.Client(base_url=self.url, headers={"Authorization": f"Bearer {token}"}, timeout=30)

    def __call__(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            response = self.client.request(method, f"/api/v1{path}", **kwargs)
        except httpx2.HTTPError as error:
            console.print(f"[red]cannot reach {self.url}: {error}[/red]")
            raise typer.Exit(2) from None
        body = response.json()
        if response.status_code >= 400:
            error = body.get("error", {})
            console.print(f"[red]error ({error.get('code')}): {error.get('message')}[/red]")
            if error.get("hint"):
                console.print(f"hint: {error['hint']}")
            raise typer.Exit(1)
        return body


@app.command("list")
def list_(
    case: Annotated[Optional[str], typer.Option("--case", help="A case id; without it, list cases.")] = None,
    status: Annotated[str, typer.Option(help="pending | accepted | rejected | decided | all")] = "pending",
    url: Url = None, token: Token = None, data_dir: DataDir = None, as_json: AsJson = False,
) -> None:
    """List cases with pending counts, or one case's proposals."""
    api = Api(url, token, data_dir)
    if case is None:
        cases = api("GET", "/cases")
        if as_json:
            return typer.echo(json.dumps(cases, indent=2))
        table = Table("case", "title", "revision", "pending")
        for c in cases["cases"]:
            table.add_row(c["caseId"], c["title"], str(c["revision"]), str(c["pendingProposals"]))
        return console.print(table)
    listed = api("GET", f"/cases/{case}/proposals", params={"status": status})
    if as_json:
        return typer.echo(json.dumps(listed, indent=2))
    table = Table()
    table.add_column("proposal", no_wrap=True)
    for name in ("kind", "status", "agent", "staged", "items"):
        table.add_column(name)
    for p in listed["proposals"]:
        table.add_row(p["proposalId"], p["kind"], p["status"], p["provenance"]["agent"],
                      p["provenance"]["stagedAt"][:19], ", ".join(f"{i['itemId']} ({i['status']})" for i in p["items"]))
    console.print(table)


@app.command()
def show(proposal: str, url: Url = None, token: Token = None, data_dir: DataDir = None, as_json: AsJson = False) -> None:
    """Show a proposal: its items and what accepting each would change."""
    shown = Api(url, token, data_dir)("GET", f"/proposals/{proposal}")
    if as_json:
        return typer.echo(json.dumps(shown, indent=2))
    console.print(f"[bold]{shown['kind']} proposal {shown['proposalId']}[/bold] — {shown['status']}")
    console.print(f"case {shown['caseId']} at revision {shown['caseRevision']}; staged by "
                  f"{shown['provenance']['agent']} at {shown['provenance']['stagedAt'][:19]}, pinned to "
                  f"{shown['provenance']['pinnedRevision']}")
    for item in shown["items"]:
        console.print(f"\n[bold]{item['itemId']}[/bold] ({item['status']})", markup=True)
        console.print(json.dumps(item["record"], indent=2, ensure_ascii=False), markup=False, highlight=False)
        preview = item.get("wouldChange")
        if preview:
            console.print(f"accepting would: {json.dumps(preview['change'], ensure_ascii=False)}", markup=False)
            for problem in preview["problems"]:
                console.print(f"[red]cannot accept: {problem['field']}: {problem['message']}[/red]")


def _decide(verb: str, proposal: str, items: list[str], note: str | None, expected: int | None,
            url: str | None, token: str | None, data_dir: Path | None, as_json: bool) -> None:
    api = Api(url, token, data_dir)
    shown = api("GET", f"/proposals/{proposal}")
    chosen = items or [i["itemId"] for i in shown["items"] if i["status"] == "pending"]
    body = {verb: chosen, "note": note,
            "expectedRevision": expected if expected is not None else shown["caseRevision"]}
    outcome = api("POST", f"/proposals/{proposal}/decisions", json=body)
    if as_json:
        return typer.echo(json.dumps(outcome, indent=2))
    console.print(f"revision {outcome['revision']}; accepted {outcome['accepted']}; rejected {outcome['rejected']}")
    for refused in outcome["refused"]:
        console.print(f"[red]refused {refused['itemId']}: {refused['reason']}[/red]")
    if outcome["refused"]:
        raise typer.Exit(1)


Items = Annotated[Optional[list[str]], typer.Argument(help="Item ids (default: every pending item).")]
Note = Annotated[Optional[str], typer.Option("--note", help="Why; agents see it in their guidance.")]
Expected = Annotated[Optional[int], typer.Option("--expected-revision",
                                                 help="Refuse if the case moved (default: as shown now).")]


@app.command()
def accept(proposal: str, items: Items = None, note: Note = None, expected_revision: Expected = None,
           url: Url = None, token: Token = None, data_dir: DataDir = None, as_json: AsJson = False) -> None:
    """Accept items of a proposal (all pending ones when none are named)."""
    _decide("accept", proposal, items or [], note, expected_revision, url, token, data_dir, as_json)


@app.command()
def reject(proposal: str, items: Items = None, note: Note = None, expected_revision: Expected = None,
           url: Url = None, token: Token = None, data_dir: DataDir = None, as_json: AsJson = False) -> None:
    """Reject items of a proposal (all pending ones when none are named), with a note for the agents."""
    _decide("reject", proposal, items or [], note, expected_revision, url, token, data_dir, as_json)
