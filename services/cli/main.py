"""The `threadline` command."""

from __future__ import annotations

import asyncio
import json
import sys
from datetime import datetime
from pathlib import Path
from typing import Annotated, Literal

import pydantic
import typer

from services.cli import backup
from services.cli.bench.scaleout_command import register as register_scaleout
from services.cli.export import export as export_command
from services.cli.review import app as review_app
from services.cli.running import refuse_options
from services.cli.running import run as _run
from services.cli.running import settings_for as _settings
from services.cli.webhooks import app as webhooks_app
from shared.settings import ConfigurationError, Settings, environment_problems, get_settings
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
backup.register(app)  # `backup FILE`, `restore FILE`
app.command("export")(export_command)


DataDir = Annotated[Path | None, typer.Option("--data-dir", help="Data directory (default .threadline).")]


@app.command()
def up(
    data_dir: DataDir = None,
    demo: Annotated[bool, typer.Option("--demo/--no-demo", help="Load the demo case and company.")] = True,
    replicas: Annotated[str | None, typer.Option(
        "--replicas", help="Processes per service, e.g. staging=2,gateway=2 (default: THREADLINE_REPLICAS, "
        "else what suits the machine).")] = None,
) -> None:
    """Run the whole system in the foreground (embedded NATS and PostgreSQL unless URLs are set)."""
    from services.cli.supervision import ReplicasError, default_replicas, parse_replicas
    from services.cli.up import StartupError
    from services.cli.up import up as run_up
    from shared.logging import configure_logging

    settings = _settings(data_dir)
    configure_logging("up", settings.log_level, settings.log_format)
    wanted = replicas if replicas is not None else settings.replicas
    try:
        counts = parse_replicas(wanted) if wanted is not None else default_replicas()
    except ReplicasError as error:
        if replicas is None:  # the environment's, not an option the operator gave
            raise ConfigurationError(f"THREADLINE_REPLICAS: {error}") from None
        raise typer.BadParameter(str(error), param_hint="--replicas") from None
    try:
        code = _run(run_up(settings, settings.data_dir, demo, counts))
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
    if which is Service.GATEWAY and stdio:
        # Not services.gateway.app: an agent host waits for the HTTP stack's imports at every start otherwise.
        from services.gateway.stdio import main as serve_stdio
        if token is None and settings.token is not None:
            token = settings.token.get_secret_value()
        _run(serve_stdio(settings, token))
        return
    if which is Service.GATEWAY:
        from services.gateway.app import main
        _run(main(settings))
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
def token_list(data_dir: DataDir = None, as_json: Annotated[bool, typer.Option(
        "--json", help="Print one JSON object a token, a line each.")] = False) -> None:
    """List tokens (names, roles, when issued and revoked; never the tokens themselves)."""
    from rich.table import Table

    from services.cli.operations import list_tokens
    from services.cli.review import SHOWN_ID, console, when

    listed = _run(list_tokens(_settings(data_dir)))
    if as_json:
        for token in listed:  # none: no output, not an empty line
            typer.echo(json.dumps(token))
        return
    table = Table("token", "name", "role", "created by", "created", "revoked")
    table.columns[0].no_wrap = True
    for t in listed:
        table.add_row(t["tokenId"][:SHOWN_ID], t["name"], t["role"], t["createdBy"] or "", when(t["createdAt"]),
                      when(t["revokedAt"]))
    console.print(table)


def _a_token_id(value: str) -> str:
    if not value.strip():
        raise typer.BadParameter("give a tokenId, or its first characters, as `threadline token list` shows them")
    return value


@token_app.command("revoke")
def token_revoke(token_id: Annotated[str, typer.Argument(help="The tokenId (see `token list`), or a unique start of it.",
                                                         callback=_a_token_id)],
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
    from services.cli.operations import OPERATOR, create_case
    from shared.contracts import CreateCase

    try:
        case = CreateCase(actor=OPERATOR, case_id=case_id, title=title, question=question)
    except pydantic.ValidationError as error:
        refuse_options(error, {"case_id": "--id", "title": "--title", "question": "--question"})
    typer.echo(json.dumps(_run(create_case(_settings(data_dir), case)), indent=2))


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


def _seconds(value: float | None) -> float | None:
    if value is not None and not value > 0:  # 0 waited for ever, a negative number exited at once
        raise typer.BadParameter("give a number of seconds above 0")
    return value


@events_app.command("tail")
def events_tail(
    case: Annotated[str | None, typer.Option("--case", help="Only this case's events.")] = None,
    from_start: Annotated[bool, typer.Option("--from-start", help="Replay from the first event.")] = False,
    from_seq: Annotated[int | None, typer.Option("--from-seq", min=1, help="Start at this stream sequence "
                                                                          "(the first is 1; at most the last + 1).")] = None,
    since: Annotated[datetime | None, typer.Option("--since", help="Start at this time (ISO 8601).")] = None,
    output: Annotated[Literal["auto", "json", "line"], typer.Option(
        "--format", help="json (one JSON per line), line (readable), or auto: line on a terminal, else json")] = "auto",
    count: Annotated[int | None, typer.Option("--count", min=1, help="Exit after this many events.")] = None,
    idle_exit: Annotated[float | None, typer.Option("--idle-exit", callback=_seconds,
                                                    help="Exit after N quiet seconds (more than 0).")] = None,
    data_dir: DataDir = None,
) -> None:
    """Print change events as they arrive (JSON lines carry the stream sequence, for resuming)."""
    from services.cli.events import run_tail

    if sum(bool(x) for x in (from_start, from_seq is not None, since is not None)) > 1:
        raise typer.BadParameter("choose one of --from-start, --from-seq, --since")
    if case is not None:
        from shared.contract_base import Slug

        try:
            pydantic.TypeAdapter(Slug).validate_python(case)
        except pydantic.ValidationError as error:  # else NATS refuses the subject it makes, with a traceback
            refuse_options(error, {"(root)": "--case"})
    as_json = output == "json" or (output == "auto" and not sys.stdout.isatty())
    run_tail(_settings(data_dir), case_id=case, from_start=from_start, from_seq=from_seq,
             since=since.astimezone() if since else None, as_json=as_json, count=count, idle_timeout=idle_exit)


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
        db = Database.from_url(settings.resolved_database_url(), pool_size=2, application_name="threadline-cli",
                               transaction_pooler=settings.database_transaction_pooler)
        try:
            return await rebuild(SqlProjectionUnitOfWork(db, Origin(Subjects(settings.nats_prefix), "cli")))
        finally:
            await db.dispose()

    typer.echo(f"rebuilt the read models of {_run(run())} case(s)")


AsJson = Annotated[bool, typer.Option("--json", help="Print the report as JSON on stdout (progress stays on stderr).")]


@bench_app.command("events")
def bench_events(
    decisions: Annotated[int, typer.Option(min=1, help="Decisions per phase.")] = 200,
    reviewers: Annotated[int, typer.Option(min=1, help="Concurrent reviewers in the loaded phase.")] = 32,
    as_json: AsJson = False,
    data_dir: DataDir = None,
) -> None:
    """Commit-to-subscriber latency of change events, at rest and under concurrent decisions."""
    from rich.console import Console

    from services.cli.bench.events import run_events
    from services.cli.bench.report import events_table

    report = _run(run_events(_settings(data_dir), decisions, reviewers, Console(stderr=True)))
    _report(report, as_json, [events_table(report)])


def _report(report: dict, as_json: bool, tables: list) -> None:
    from rich.console import Console

    if as_json:
        typer.echo(json.dumps(report, indent=2))
        return
    console = Console(width=None if sys.stdout.isatty() else 160)
    for table in tables:
        console.print(table)


def _counts(text: str, option: str) -> tuple[int, ...]:
    from services.cli.bench.stats import parse_counts

    try:
        return tuple(parse_counts(text))
    except ValueError as error:
        raise typer.BadParameter(str(error), param_hint=option) from None


@bench_app.command("stage")
def bench_stage(
    agents: Annotated[int, typer.Option(min=1, help="Concurrent agents (official MCP client).")] = 64,
    seconds: Annotated[float, typer.Option(min=0.1, help="Seconds per run.")] = 15.0,
    rounds: Annotated[int, typer.Option(min=1, help="Rounds; each measures every target once.")] = 3,
    claims: Annotated[int, typer.Option("--claims-per-call", min=1, max=4, help="Claims in each call.")] = 1,
    plot: Annotated[Path | None, typer.Option("--plot", help="Draw calls/s and p99 against agents (PNG).")] = None,
    sweep: Annotated[str | None, typer.Option(help="Agent counts for the plot (default 1,16,64); one round "
                                                   "each, except --agents, which reuses the rounds.")] = None,
    settle: Annotated[float, typer.Option(min=0, help="Before each run, wait up to this many seconds for the "
                                                      "machine to go near idle.")] = 15.0,
    as_json: AsJson = False,
    data_dir: DataDir = None,
) -> None:
    """stage_claims calls/s and p99 on Threadline against an echo and a direct anchor, in the same run."""
    from rich.console import Console

    from services.cli.bench.report import stage_tables
    from services.cli.bench.stage import StageOptions, run_stage

    counts = _counts(sweep or "1,16,64", "--sweep") if (plot is not None or sweep) else ()
    options = StageOptions(agents=agents, seconds=seconds, rounds=rounds, claims_per_call=claims, sweep=counts,
                           plot=plot, settle=settle)
    report = _run(run_stage(_settings(data_dir), options, Console(stderr=True)))
    _report(report, as_json, stage_tables(report))
    if plot is not None and not as_json:
        typer.echo(f"plot: {report['plot']}")


@bench_app.command("scale")
def bench_scale(
    claims: Annotated[int, typer.Option(min=4, help="Claims to fill the case to.")] = 3000,
    step: Annotated[str, typer.Option(help="Sizes to report at on the way (comma-separated).")] = "100,300,1000",
    probes: Annotated[int, typer.Option(min=1, help="Reads timed, and decisions taken, at each size.")] = 9,
    as_json: AsJson = False,
    data_dir: DataDir = None,
) -> None:
    """Fill one case by stage + accept and report summary, scope=claims and decision costs at each size."""
    from rich.console import Console

    from services.cli.bench.report import scale_tables
    from services.cli.bench.scale import ScaleOptions, run_scale

    options = ScaleOptions(claims=claims, steps=_counts(step, "--step"), probes=probes)
    report = _run(run_scale(_settings(data_dir), options, Console(stderr=True)))
    _report(report, as_json, scale_tables(report))


@bench_app.command("search")
def bench_search(
    claims: Annotated[int, typer.Option(min=100, max=200_000, help="Claims in the largest case (also 100, 3,000).")] = 30_000,
    samples: Annotated[int, typer.Option(min=10, max=2000, help="Claims sampled for queries and duplicates.")] = 200,
    keep: Annotated[bool, typer.Option("--keep", help="Keep the bench's cases afterwards.")] = False,
    as_json: AsJson = False,
    data_dir: DataDir = None,
) -> None:
    """Search latency by kind of query, recall@3 and possible-duplicate detection on cases of 100, 3,000 and N claims."""
    from rich.console import Console

    from services.cli.bench.search_bench import SearchOptions, run_search, search_tables

    report = _run(run_search(_settings(data_dir), SearchOptions(claims=claims, samples=samples, keep=keep),
                             Console(stderr=True)))
    _report(report, as_json, search_tables(report))


@bench_app.command("agents")
def bench_agents(
    agents: Annotated[int, typer.Option(min=1, help="Agents reading, thinking and staging.")] = 8,
    think: Annotated[float, typer.Option(min=0, help="Seconds between get_workspace and stage_claims.")] = 1.5,
    seconds: Annotated[float, typer.Option(min=0.1, help="Seconds to run (agents finish their last call).")] = 25.0,
    reviewers: Annotated[int, typer.Option(min=1, help="Reviewers accepting everything pending.")] = 2,
    repeat: Annotated[float, typer.Option(min=0, max=1, help="Chance an agent resends a stored call identically "
                                                            "(as after a lost answer).")] = 0.0,
    as_json: AsJson = False,
    data_dir: DataDir = None,
) -> None:
    """Thinking agents beside busy reviewers: stage calls stored, refused as stale, replayed, other."""
    from rich.console import Console

    from services.cli.bench.agents import AgentsOptions, run_agents
    from services.cli.bench.report import agents_table

    options = AgentsOptions(agents=agents, think=think, seconds=seconds, reviewers=reviewers, repeat=repeat)
    report = _run(run_agents(_settings(data_dir), options, Console(stderr=True)))
    _report(report, as_json, [agents_table(report)])


register_scaleout(bench_app)


@docs_app.command("asyncapi")
def docs_asyncapi(data_dir: DataDir = None) -> None:
    """Print the AsyncAPI document of every command and event subject."""
    from shared.asyncapi import document

    typer.echo(json.dumps(document(_settings(data_dir)), indent=2))


def main() -> None:
    from shared.logging import configure_logging

    try:
        # Operator commands log warnings to stderr only, keeping stdout for their output; `up` and `serve`
        # configure their own logging.
        configure_logging("cli", "WARNING", get_settings().log_format)
        app()
    except ConfigurationError as error:  # whichever command met it: what to set, never a traceback
        typer.secho(f"error: {error}", fg="red", err=True)
        sys.exit(2)
    except pydantic.ValidationError as error:
        if error.title != Settings.__name__:
            raise
        for problem in environment_problems(error):  # a THREADLINE_* variable every command reads
            typer.secho(f"error: {problem}", fg="red", err=True)
        sys.exit(2)


if __name__ == "__main__":
    sys.exit(main())
