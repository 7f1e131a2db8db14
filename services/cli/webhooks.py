"""`threadline webhooks list|deliveries|redeliver`: operate webhooks from a terminal (over NATS)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import pydantic
import typer
from rich.console import Console
from rich.table import Table

from services.cli.review import when
from services.cli.running import refuse_options, run, settings_for
from shared import webhook_contracts as wc
from shared.subjects import Command

app = typer.Typer(help="Webhooks: HTTP receivers of change events.", no_args_is_help=True)
# Every string printed comes from the system (URLs, errors receivers sent): printed as is, never as markup.
console = Console(width=None if sys.stdout.isatty() else 200, markup=False, highlight=False)

DataDir = Annotated[Path | None, typer.Option("--data-dir", help="Data directory (default .threadline).")]
AsJson = Annotated[bool, typer.Option("--json", help="Print the JSON the service answered.")]


# The service's hints name the HTTP API; from a terminal, the command that does the same.
TERMINAL_HINTS = {"webhookId": "list them with threadline webhooks list",
                  "eventId": "list its deliveries with threadline webhooks deliveries WEBHOOK_ID"}


def _call(data_dir: Path | None, command: Command, message: Any) -> Any:
    from services.cli.operations import command as send
    from shared.errors import NotFound

    async def sent() -> Any:
        try:
            return await send(settings_for(data_dir), command, message)
        except NotFound as missing:
            missing.hint = TERMINAL_HINTS.get(missing.field or "", missing.hint)
            raise

    return run(sent())


# The contracts' fields as the commands name them.
OPTIONS = {"webhook_id": "WEBHOOK_ID", "event_id": "EVENT_ID", "status": "--status", "limit": "--limit"}


def _message(model: type[pydantic.BaseModel], **fields: Any) -> Any:
    try:
        return model(**fields)
    except pydantic.ValidationError as error:
        refuse_options(error, OPTIONS)


def _scope(webhook: dict[str, Any]) -> str:
    if webhook["caseId"]:
        return f"case {webhook['caseId']}"
    if webhook["companyId"]:
        return f"company {webhook['companyId']}"
    return "every event"


@app.command("list")
def list_(data_dir: DataDir = None, as_json: AsJson = False) -> None:
    """List webhooks with their status and delivery counts."""
    from services.cli.operations import OPERATOR

    listed = _call(data_dir, Command.LIST_WEBHOOKS, wc.ListWebhooks(actor=OPERATOR))
    if as_json:
        return typer.echo(json.dumps(listed, indent=2))
    table = Table("webhook", "url", "receives", "status", "pending", "delivered", "failed", "last delivered")
    for w in listed["webhooks"]:
        types = f" ({', '.join(w['types'])})" if w["types"] else ""
        table.add_row(w["webhookId"], w["url"], _scope(w) + types, w["status"], str(w["deliveries"]["pending"]),
                      str(w["deliveries"]["delivered"]), str(w["deliveries"]["failed"]),
                      when(w["lastDeliveredAt"]))
    console.print(table)


@app.command("deliveries")
def deliveries(
    webhook_id: Annotated[str, typer.Argument(help="The webhook, or a unique prefix of its id (see `webhooks list`).")],
    status: Annotated[str, typer.Option(help="pending | delivered | failed | all")] = "all",
    limit: Annotated[int, typer.Option(help="At most this many, newest event first.")] = 50,
    data_dir: DataDir = None,
    as_json: AsJson = False,
) -> None:
    """A webhook's delivery log: each event's attempts, status, response code, latency and last error."""
    from services.cli.operations import OPERATOR

    listed = _call(data_dir, Command.LIST_DELIVERIES,
                   _message(wc.ListDeliveries, actor=OPERATOR, webhook_id=webhook_id, status=status, limit=limit))
    if as_json:
        return typer.echo(json.dumps(listed, indent=2))
    table = Table("event", "type", "rev", "status", "attempts", "code", "ms", "last error", "delivered")
    for d in listed["deliveries"]:
        table.add_row(d["eventId"], d["eventType"].removeprefix("threadline."),
                      "" if d["revision"] is None else str(d["revision"]), d["status"], str(d["attempts"]),
                      str(d["responseCode"] or ""), "" if d["latencyMs"] is None else str(d["latencyMs"]),
                      d["lastError"] or "", when(d["deliveredAt"]))
    console.print(table)


@app.command("redeliver")
def redeliver(
    webhook_id: Annotated[str, typer.Argument(help="The webhook (or a unique prefix of its id).")],
    event_id: Annotated[str, typer.Argument(help="The event, or a unique prefix of its id among the webhook's "
                                                 "deliveries (see `webhooks deliveries`).")],
    data_dir: DataDir = None,
) -> None:
    """Send an event to a webhook again now (a failing webhook resumes, the rest following in order)."""
    from services.cli.operations import OPERATOR

    delivery = _call(data_dir, Command.REDELIVER,
                     _message(wc.Redeliver, actor=OPERATOR, webhook_id=webhook_id, event_id=event_id))
    typer.echo(json.dumps(delivery))
