"""The `threadline` command."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from services.cli.review import app as review_app
from shared.settings import ConfigurationError, Settings, get_settings
from shared.subjects import Service

app = typer.Typer(help="Threadline: agents stage research, humans decide what becomes canonical.",
                  no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)
token_app = typer.Typer(help="Bearer tokens.", no_args_is_help=True)
case_app = typer.Typer(help="Cases.", no_args_is_help=True)
demo_app = typer.Typer(help="Demo data.", no_args_is_help=True)
app.add_typer(token_app, name="token")
app.add_typer(case_app, name="case")
app.add_typer(demo_app, name="demo")
app.add_typer(review_app, name="review")


def _settings(data_dir: Path | None = None) -> Settings:
    settings = get_settings()
    if data_dir is not None:
        settings = settings.model_copy(update={"data_dir": data_dir})
    return settings


def _run(coroutine) -> object:  # noqa: ANN001
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


DataDir = Annotated[Optional[Path], typer.Option("--data-dir", help="Data directory (default .threadline).")]


@app.command()
def up(
    data_dir: DataDir = None,
    demo: Annotated[bool, typer.Option("--demo/--no-demo", help="Load the demo case and company.")] = True,
) -> None:
    """Run the whole system in the foreground (embedded NATS and PostgreSQL unless URLs are set)."""
    from services.cli.up import up as run_up
    from shared.logging import configure_logging

    settings = _settings(data_dir)
    configure_logging("up", settings.log_level, settings.log_format)
    raise typer.Exit(_run(run_up(settings, settings.data_dir, demo)))


@app.command()
def serve(
    service: Annotated[str, typer.Argument(help="gateway | staging | review | thesis-delta | projection")],
    stdio: Annotated[bool, typer.Option("--stdio", help="Gateway only: MCP over stdin/stdout.")] = False,
    token: Annotated[Optional[str], typer.Option(envvar="THREADLINE_TOKEN", help="Agent token for --stdio.")] = None,
) -> None:
    """Run one service (what a container runs). Scale by running more processes."""
    try:
        which = Service(service)
    except ValueError:
        raise typer.BadParameter(f"unknown service {service!r}; use one of {[s.value for s in Service]}") from None
    settings = _settings()
    if which is Service.GATEWAY:
        from services.gateway.app import main
        _run(main(settings, stdio=stdio, token=token))
        return
    if stdio:
        raise typer.BadParameter("--stdio applies to the gateway only")
    from services.registry import app_module

    _run(app_module(which).main(settings))


@app.command()
def migrate(data_dir: DataDir = None) -> None:
    """Apply database migrations (Alembic) and provision the JetStream stream."""
    from shared.bootstrap import prepare

    _run(prepare(_settings(data_dir)))
    typer.echo("migrated")


@token_app.command("create")
def token_create(
    role: Annotated[str, typer.Option(help="agent | reviewer | admin")],
    name: Annotated[str, typer.Option(help="The agent's or person's name.")],
    case: Annotated[Optional[str], typer.Option("--case", help="Agent tokens: the agent's active case.")] = None,
    data_dir: DataDir = None,
) -> None:
    """Print a new bearer token (shown once; stored hashed)."""
    from services.cli.operations import issue_token

    issued = _run(issue_token(_settings(data_dir), role=role, name=name, case_id=case))
    typer.echo(issued["token"])


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


def main() -> None:
    app()


if __name__ == "__main__":
    sys.exit(main())
