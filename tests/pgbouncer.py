"""A PgBouncer in transaction mode in front of the tests' PostgreSQL (Debian's `pgbouncer`)."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import asyncpg
from sqlalchemy.engine import make_url

from services.cli.embedded import free_port

SERVER_CONNECTIONS = 4  # per database and user: far fewer than the services open as clients


class PgBouncer:
    def __init__(self, direct_url: str) -> None:
        self.direct = make_url(direct_url)
        # Not under pytest's tmp_path: PgBouncer refuses to run as root, drops to `nobody`, and must reach it.
        self.workdir = Path(tempfile.mkdtemp(prefix="threadline-pgbouncer-"))
        self.port = free_port()
        self.process: subprocess.Popen | None = None

    @staticmethod
    def binary() -> str | None:
        return shutil.which("pgbouncer") or next(
            (p for p in ("/usr/sbin/pgbouncer", "/usr/bin/pgbouncer") if Path(p).exists()), None)

    def url(self) -> str:
        """The direct URL with PgBouncer's address instead of PostgreSQL's."""
        return self.direct.set(host="127.0.0.1", port=self.port, query={}).render_as_string(hide_password=False)

    async def start(self) -> PgBouncer:
        self.workdir.chmod(0o777)
        socket_dir = self.direct.query.get("host")
        host = socket_dir if socket_dir else (self.direct.host or "127.0.0.1")
        config = self.workdir / "pgbouncer.ini"
        config.write_text(
            "[databases]\n"
            f"* = host={host} port={self.direct.port or 5432}\n"
            "[pgbouncer]\n"
            f"listen_addr = 127.0.0.1\nlisten_port = {self.port}\nunix_socket_dir =\n"
            "auth_type = trust\n"
            f"auth_file = {self.workdir / 'users.txt'}\n"
            "pool_mode = transaction\n"
            f"default_pool_size = {SERVER_CONNECTIONS}\nmax_client_conn = 500\n"
            # What SQLAlchemy's asyncpg dialect asks of a pooler: drop each client's prepared statements.
            "server_reset_query = DISCARD ALL\nserver_reset_query_always = 1\n"
            f"logfile = {self.workdir / 'pgbouncer.log'}\npidfile = {self.workdir / 'pgbouncer.pid'}\n"
        )
        user = self.direct.username or "postgres"
        (self.workdir / "users.txt").write_text(f'"{user}" ""\n')
        command = [self.binary(), str(config)]
        if os.geteuid() == 0:
            command[1:1] = ["-u", "nobody"]
        with open(self.workdir / "pgbouncer.out", "wb") as out:
            self.process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
        for _ in range(100):
            if self.process.poll() is not None:
                raise RuntimeError(f"pgbouncer exited ({self.process.returncode}): {self.log()}")
            try:
                connection = await asyncpg.connect(self.url(), statement_cache_size=0, timeout=1)
            except (OSError, asyncpg.PostgresError, TimeoutError):
                await asyncio.sleep(0.1)
                continue
            await connection.close()
            return self
        raise RuntimeError(f"pgbouncer did not accept connections: {self.log()}")

    def log(self) -> str:
        return "".join(p.read_text()[-3000:] for p in (self.workdir / "pgbouncer.out", self.workdir / "pgbouncer.log")
                       if p.exists())

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.workdir, ignore_errors=True)
