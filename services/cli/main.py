"""The `threadline` command."""

from __future__ import annotations

import asyncio
import json
import sys
from datetime import datetime
from pathlib import Path
from typing import Annotated

import typer

from services.cli.review import app as review_app
from services.cli.webhooks import app as webhooks_app
from shared.settings import ConfigurationError, Settings, get_settings
from shared.subjects import Service

app = typer.Typer(help="Threadline: agents stage research, humans decide what becomes canonical.",
                  no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)
token_app = typer.Typer(help="Bearer tokens.", no_args_is_help=True)
case_app = typer.Typer(help="Cases.", no_args_is_help=True)
demo_app = typer.Typer(help="Demo data.", no_args_is_help=True)
events_app = typer.Typer(help="Change events on the event stream.", no_args_is_help=True)
projection_app = typer.Typer(help="The projection's read models.", no_args_is_help=True)
docs_app = typer.Typer(help="Generated documentation.", no_args_is_help=True)
bench_app = typer.Typer(help="Benchmarks against a running system (figures, not pass/fail).", no_args_is_help=True)
app.add_typer(token_app, name="token")
app.add_typer(case_app, name="case")
app.add_typer(demo_app, name="demo")
app.add_typer(review_app, name="review")
app.add_typer(events_app, name="events")
app.add_typer(projection_app, name="projection")
app.add_typer(docs_app, name="docs")
app.add_typer(bench_app, name="bench")
app.add_typer(webhooks_app, name="webhooks")


def _settings(data_dir: Path | None = None) -> Settings:
    settings = get_settings()
    if data_dir is not None:
        settings = settings.model_copy(update={"data_dir": data_dir})
    return settings


def _run(coroutine) -> object:
    from shared.errors import ThreadlineError

    try:
        return asyncio.run(coroutine)
    except ThreadlineError as error:
        typer.secho(f"error ({error.code}): {error.message}", fg="red", err=True)
        if error.hint:
            typer.echo(f"hint: {error.hint}", err=True)
        raise typer.Exit(1) from None
    except ConfigurationError as error:
        typer.secho(f"error: {error}", fg="red", err=True)
        raise typer.Exit(2) from None


DataDir = Annotated[Path | None, typer.Option("--data-dir", help="Data directory (default .threadline).")]


@app.command()
def up(
    data_dir: DataDir = None,
    demo: Annotated[bool, typer.Option("--demo/--no-demo", help="Load the demo case and company.")] = True,
) -> None:
    """Run the whole system in the foreground (embedded NATS and PostgreSQL unless URLs are set)."""
    from services.cli.up import StartupError
    from services.cli.up import up as run_up
    from shared.logging import configure_logging

    settings = _settings(data_dir)
    configure_logging("up", settings.log_level, settings.log_format)
    try:
        code = _run(run_up(settings, settings.data_dir, demo))
    except StartupError as error:
        typer.secho(f"threadline up could not start: {error}", fg="red", err=True)
        raise typer.Exit(1) from None
    raise typer.Exit(code)


@app.command()
def serve(
    service: Annotated[str, typer.Argument(
        help="gateway | staging | review | thesis-delta | projection | relay | webhooks")],
    stdio: Annotated[bool, typer.Option("--stdio", help="Gateway only: MCP over stdin/stdout.")] = False,
    token: Annotated[str | None, typer.Option(help="Agent token for --stdio (default: THREADLINE_TOKEN).")] = None,
    data_dir: DataDir = None,
) -> None:
    """Run one service (what a container runs). Scale by running more processes."""
    try:
        which = Service(service)
    except ValueError:
        raise typer.BadParameter(f"unknown service {service!r}; use one of {[s.value for s in Service]}") from None
    settings = _settings(data_dir)
    if which is Service.GATEWAY:
        from services.gateway.app import main
        if token is None and settings.token is not None:
            token = settings.token.get_secret_value()
        _run(main(settings, stdio=stdio, token=token))
        return
    if stdio:
        raise typer.BadParameter("--stdio applies to the gateway only")
    from services.registry import app_module

    _run(app_module(which).main(settings))


@app.command()
def migrate(data_dir: DataDir = None) -> None:
    """Apply database migrations (Alembic) and provision the JetStream stream and its consumers."""
    from shared.bootstrap import migrate_database, provision_streams

    settings = _settings(data_dir)
    _run(migrate_database(settings.resolved_database_url()))
    typer.echo("database migrated")
    try:
        settings.resolved_nats_url()
    except ConfigurationError as missing:
        # The schema does not need NATS; the stream does, and `up` or the next `migrate` will provision it.
        typer.secho(f"event stream not provisioned: {missing}", fg="yellow", err=True)
        return
    _run(provision_streams(settings))
    typer.echo(f"event stream {settings.stream_name} provisioned")


@token_app.command("create")
def token_create(
    role: Annotated[str, typer.Option(help="agent | reviewer | admin | subscriber")],
    name: Annotated[str, typer.Option(help="The agent's or person's name.")],
    case: Annotated[str | None, typer.Option("--case", help="Agent tokens: the agent's active case.")] = None,
    data_dir: DataDir = None,
) -> None:
    """Print a new bearer token (shown once; stored hashed)."""
    from services.cli.operations import issue_token

    issued = _run(issue_token(_settings(data_dir), role=role, name=name, case_id=case))
    typer.echo(issued["token"])


@token_app.command("list")
def token_list(data_dir: DataDir = None) -> None:
    """List tokens (names, roles, when issued and revoked; never the tokens themselves)."""
    from services.cli.operations import list_tokens

    for token in _run(list_tokens(_settings(data_dir))):
        typer.echo(json.dumps(token))


@token_app.command("revoke")
def token_revoke(token_id: Annotated[str, typer.Argument(help="The tokenId (see `token list`).")],
                 data_dir: DataDir = None) -> None:
    """Revoke a token: every gateway refuses it within THREADLINE_AUTH_CACHE_SECONDS."""
    from services.cli.operations import revoke_token

    typer.echo(json.dumps(_run(revoke_token(_settings(data_dir), token_id))))


@case_app.command("create")
def case_create(
    case_id: Annotated[str, typer.Option("--id", help="Slug: lowercase letters, digits, hyphens.")],
    title: Annotated[str, typer.Option(help="Short title.")],
    question: Annotated[str, typer.Option(help="The question the case answers.")],
    data_dir: DataDir = None,
) -> None:
    """Create a case (the services must be running)."""
    from services.cli.operations import create_case

    typer.echo(json.dumps(_run(create_case(_settings(data_dir), case_id, title, question)), indent=2))


@demo_app.command("load")
def demo_load(data_dir: DataDir = None) -> None:
    """Load the demo case and the demo company thesis (idempotent; the services must be running)."""
    from services.cli.demo import load_demo

    typer.echo(json.dumps(_run(load_demo(_settings(data_dir))), indent=2))


@app.command()
def relay(data_dir: DataDir = None) -> None:
    """Run an outbox relay in the foreground (what `serve relay` runs, without the health subject)."""
    from services.relay.relay import OutboxRelay
    from shared.logging import configure_logging

    settings = _settings(data_dir)
    configure_logging("relay", settings.log_level, settings.log_format)

    async def run() -> None:
        import signal

        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await OutboxRelay(settings).run(stop)

    _run(run())


@events_app.command("tail")
def events_tail(
    case: Annotated[str | None, typer.Option("--case", help="Only this case's events.")] = None,
    from_start: Annotated[bool, typer.Option("--from-start", help="Replay from the first event.")] = False,
    from_seq: Annotated[int | None, typer.Option("--from-seq", help="Start at this stream sequence.")] = None,
    since: Annotated[datetime | None, typer.Option("--since", help="Start at this time (ISO 8601).")] = None,
    output: Annotated[str, typer.Option("--format", help="json (one JSON per line) or line (readable)")] = "auto",
    count: Annotated[int | None, typer.Option("--count", help="Exit after this many events.")] = None,
    idle_exit: Annotated[float | None, typer.Option("--idle-exit", help="Exit after N quiet seconds.")] = None,
    data_dir: DataDir = None,
) -> None:
    """Print change events as they arrive (JSON lines carry the stream sequence, for resuming)."""
    from services.cli.events import run_tail

    if sum(bool(x) for x in (from_start, from_seq is not None, since is not None)) > 1:
        raise typer.BadParameter("choose one of --from-start, --from-seq, --since")
    as_json = output == "json" or (output == "auto" and not sys.stdout.isatty())
    try:
        run_tail(_settings(data_dir), case_id=case, from_start=from_start, from_seq=from_seq,
                 since=since.astimezone() if since else None, as_json=as_json, count=count, idle_timeout=idle_exit)
    except ConfigurationError as error:
        typer.secho(f"error: {error}", fg="red", err=True)
        raise typer.Exit(2) from None


@projection_app.command("rebuild")
def projection_rebuild(data_dir: DataDir = None) -> None:
    """Recompute every read model from the ledger."""
    from services.projection.read_models import rebuild
    from services.projection.repository import SqlProjectionUnitOfWork
    from shared.db.session import Database
    from shared.events import Origin
    from shared.subjects import Subjects

    settings = _settings(data_dir)

    async def run() -> int:
        db = Database.from_url(settings.resolved_database_url(), pool_size=2, application_name="threadline-cli")
        try:
            return await rebuild(SqlProjectionUnitOfWork(db, Origin(Subjects(settings.nats_prefix), "cli")))
        finally:
            await db.dispose()

    typer.echo(f"rebuilt the read models of {_run(run())} case(s)")


@bench_app.command("events")
def bench_events(
    decisions: Annotated[int, typer.Option(help="Decisions per phase.")] = 200,
    reviewers: Annotated[int, typer.Option(help="Concurrent reviewers in the loaded phase.")] = 32,
    data_dir: DataDir = None,
) -> None:
    """Commit-to-subscriber latency of change events, at rest and under concurrent decisions."""
    from services.cli.bench import Bench

    results = _run(Bench(_settings(data_dir)).run(decisions, reviewers))
    for result in results:
        typer.echo(json.dumps(result))


@docs_app.command("asyncapi")
def docs_asyncapi(data_dir: DataDir = None) -> None:
    """Print the AsyncAPI document of every command and event subject."""
    from shared.asyncapi import document

    typer.echo(json.dumps(document(_settings(data_dir)), indent=2))


def main() -> None:
    from shared.logging import configure_logging

    # Operator commands log warnings to stderr only, keeping stdout for their output; `up` and `serve`
    # configure their own logging.
    configure_logging("cli", "WARNING", get_settings().log_format)
    app()


if __name__ == "__main__":
    sys.exit(main())
