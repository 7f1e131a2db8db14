"""`threadline export CASE_ID --format …`: a case's ledger in a standard format, streamed from the HTTP API."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, BinaryIO, Literal

import httpx2
import typer

from services.cli.review import Api, DataDir, Token, Url
from services.cli.running import refusing, written_whole

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
    api = Api(url, token, data_dir)
    params = {"format": format, **({"asOf": as_of} if as_of is not None else {})}
    if output is None:
        return _stream(api, case_id, params, sys.stdout.buffer)
    # The export goes beside the file and replaces it once whole: a failed one leaves the file as it was.
    with refusing(), written_whole(output, "the export", "-o") as partial, open(partial, "wb") as target:
        _stream(api, case_id, params, target)


def _stream(api: Api, case_id: str, params: dict, target: BinaryIO) -> None:
    """Write what the API serves to `target`; an error goes to standard error, never among the export."""
    try:
        with api.client.stream("GET", f"/api/v1/cases/{case_id}/export", params=params, timeout=None) as response:
            if response.status_code >= 400:
                response.read()
                api.answer(response, {"asOf": "--as-of"})  # prints the error and exits
            for data in response.iter_bytes():
                target.write(data)
    except httpx2.HTTPError as error:
        typer.secho(f"cannot export from {api.url}: {error}", fg="red", err=True)
        raise typer.Exit(2) from None
