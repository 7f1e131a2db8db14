"""What every operator command shares: the settings for a data dir, and running a coroutine with its
errors printed as a person reads them (code, message, hint) instead of a traceback."""

from __future__ import annotations

from collections.abc import Coroutine
from pathlib import Path
from typing import Any, NoReturn

import pydantic
import typer

from shared.settings import Settings, get_settings


def settings_for(data_dir: Path | None = None) -> Settings:
    settings = get_settings()
    if data_dir is not None:
        settings = settings.model_copy(update={"data_dir": data_dir})
    return settings


def run(coroutine: Coroutine[Any, Any, Any]) -> Any:
    from shared import event_loop  # here, not at the top: `threadline --help` stays quick
    from shared.errors import ThreadlineError

    try:
        return event_loop.run(coroutine)
    except ThreadlineError as error:
        typer.secho(f"error ({error.code}): {error.message}", fg="red", err=True)
        if error.hint:
            typer.echo(f"hint: {error.hint}", err=True)
        raise typer.Exit(1) from None


def refuse_options(error: pydantic.ValidationError, options: dict[str, str]) -> NoReturn:
    """What a message built from command-line options broke, said as the API says it (`error (invalid_argument):
    …` and the fix) but naming the option (`--id`) instead of the contract's field; exit 2, as a bad option."""
    from shared.problems import from_pydantic

    for problem in from_pydantic(error.errors(include_url=False, include_input=False)):
        typer.secho(f"error (invalid_argument): {options.get(problem.field, problem.field)}: {problem.message}",
                    fg="red", err=True)
        typer.echo(f"hint: {problem.hint}", err=True)
    raise typer.Exit(2)
