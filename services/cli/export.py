"""`threadline export CASE_ID --format …`: a case's ledger in a standard format, streamed from the HTTP API."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Literal, NoReturn

import httpx2
import typer

from services.cli.review import Api, DataDir, Token, Url, console

Format = Literal["prov-jsonld", "prov-turtle", "nanopub-trig", "aif-json"]


def export(
    case_id: Annotated[str, typer.Argument(help="The case's id.")],
    format: Annotated[Format, typer.Option("--format", help="prov-jsonld | prov-turtle | nanopub-trig | aif-json")],
    as_of: Annotated[int | None, typer.Option("--as-of", min=0, help="A revision (default: the case now).")] = None,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write here (default: standard output).")] = None,
    url: Url = None, token: Token = None, data_dir: DataDir = None,
) -> None:
    """Export a case's ledger (every record canonical by the revision, with its status then): W3C PROV-O as
    JSON-LD or Turtle, nanopublications as TriG, or AIF JSON."""
    if output is not None and output.is_dir():
        _cannot_write(output, "it is a directory")
    api = Api(url, token, data_dir)
    params = {"format": format, **({"asOf": as_of} if as_of is not None else {})}
    try:
        target = output.open("wb") if output is not None else sys.stdout.buffer
    except OSError as error:
        _cannot_write(output, error.strerror)
    try:
        with api.client.stream("GET", f"/api/v1/cases/{case_id}/export", params=params, timeout=None) as response:
            if response.status_code >= 400:
                response.read()
                error = response.json().get("error", {})
                console.print(f"error ({error.get('code')}): {error.get('message')}", style="red")
                if error.get("hint"):
                    console.print(f"hint: {error['hint']}")
                raise typer.Exit(1)
            for data in response.iter_bytes():
                target.write(data)
    except httpx2.HTTPError as error:
        console.print(f"cannot export from {api.url}: {error}", style="red")
        raise typer.Exit(2) from None
    finally:
        if output is not None:
            target.close()


def _cannot_write(output: Path, why: str) -> NoReturn:
    typer.secho(f"error: cannot write the export to {output}: {why}", fg="red", err=True)
    typer.echo("hint: name a file (-o) in a directory that exists and that you can write to", err=True)
    raise typer.Exit(2)
