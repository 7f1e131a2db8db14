"""What every operator command shares: the settings for a data dir, running a coroutine with its errors printed
as a person reads them (code, message, hint) instead of a traceback, refusals, and writing a file whole."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Coroutine, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn

import pydantic
import typer

from shared.settings import ConfigurationError, Settings, get_settings

BAD_ARGUMENT = 2  # what a bad option or argument exits with, as typer's own refusals do


class Refused(Exception):
    """What stops a command, and what to do about it; `code` is the exit code."""

    def __init__(self, message: str, hint: str, code: int = 1) -> None:
        super().__init__(message)
        self.message, self.hint, self.code = message, hint, code


@contextmanager
def refusing() -> Iterator[None]:
    """Print a refusal (or a configuration error) on standard error and exit with its code."""
    try:
        yield
    except (Refused, ConfigurationError) as refused:
        message, hint, code = (refused.message, refused.hint, refused.code) if isinstance(refused, Refused) \
            else (str(refused), None, 1)
        typer.secho(f"error: {message}", fg="red", err=True)
        if hint:
            typer.echo(f"hint: {hint}", err=True)
        raise typer.Exit(code) from None


def cannot_write(what: str, target: Path, why: str, option: str = "") -> Refused:
    named = f" ({option})" if option else ""
    return Refused(f"cannot write {what} to {target}: {why}",
                   f"name a file{named} in a directory that exists and that you can write to", BAD_ARGUMENT)


@contextmanager
def written_whole(target: Path, what: str, option: str = "", mode: int = 0o666) -> Iterator[Path]:
    """An empty file beside `target` (`.NAME.partial`, made with `mode`) to write `what` into, put in `target`'s
    place only once the block ends without an error: a failed write neither leaves a file that looks whole nor
    truncates the one that was there.

    A symlink is followed: the file it points to is replaced, the link kept. A target that is no regular file
    (/dev/null, a FIFO, /dev/stdout on a pipe) is written in place: there is nothing to replace. A file in a
    directory that cannot be written is filled, once `what` is whole, from a partial file in the temporary
    directory."""
    if target.is_dir():
        raise cannot_write(what, target, "it is a directory", option)
    if target.exists() and not target.is_file():
        if not os.access(target, os.W_OK):
            raise cannot_write(what, target, "Permission denied", option)
        yield target
        return
    target = Path(os.path.realpath(target)) if target.is_symlink() else target
    partial = target.with_name(f".{target.name}.partial")
    try:
        partial.unlink(missing_ok=True)
        os.close(os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode))
    except OSError as error:
        if not (target.is_file() and os.access(target, os.W_OK)):
            raise cannot_write(what, target, error.strerror or str(error), option) from None
        # The directory refuses a file beside it, the file itself takes writes: copied into it once whole.
        descriptor, name = tempfile.mkstemp(prefix="threadline-", suffix=".partial")  # mode 0600
        os.close(descriptor)
        partial = Path(name)
    try:
        yield partial
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    if partial.parent == target.parent:
        os.replace(partial, target)
        return
    try:
        shutil.copyfile(partial, target)
    finally:
        partial.unlink(missing_ok=True)


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
    raise typer.Exit(BAD_ARGUMENT)
