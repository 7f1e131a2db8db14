"""The commit-token secret generated into the data dir: one full value for every concurrent reader."""

from __future__ import annotations

import multiprocessing
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from pydantic import SecretStr

from shared.settings import SECRET_FILE, ConfigurationError, Settings

THREADS = 24
ROUNDS = 40


def _resolve_together(data_dir: Path, count: int) -> list[bytes | BaseException]:
    settings = Settings(data_dir=data_dir)
    start = threading.Barrier(count)

    def resolve() -> bytes | BaseException:
        start.wait()
        try:
            return settings.resolved_secret()
        except BaseException as error:  # noqa: BLE001 - a crash is what the test looks for
            return error

    with ThreadPoolExecutor(count) as pool:
        return list(pool.map(lambda _: resolve(), range(count)))


def test_threads_racing_to_create_the_secret_all_read_the_same_full_value(tmp_path):
    for round_ in range(ROUNDS):
        data_dir = tmp_path / f"round-{round_}" / "data"  # the data dir does not exist yet either
        results = _resolve_together(data_dir, THREADS)
        errors = [r for r in results if isinstance(r, BaseException)]
        assert not errors, f"round {round_}: {errors[0]!r}"
        assert len(set(results)) == 1, f"round {round_}: {len(set(results))} different secrets were read"
        assert len(results[0]) >= 32
        assert (data_dir / SECRET_FILE).read_bytes().strip() == results[0]
        assert [p.name for p in data_dir.iterdir()] == [SECRET_FILE]  # no temporary file left behind
        assert (data_dir / SECRET_FILE).stat().st_mode & 0o077 == 0


def _resolve_in_process(data_dir: str, start, results) -> None:  # noqa: ANN001
    start.wait()
    try:
        results.put(Settings(data_dir=Path(data_dir)).resolved_secret())
    except BaseException as error:  # noqa: BLE001
        results.put(repr(error))


def test_processes_racing_to_create_the_secret_all_read_the_same_full_value(tmp_path):
    context = multiprocessing.get_context("fork")
    count = 8
    for round_ in range(5):
        data_dir = tmp_path / f"round-{round_}"
        start, results = context.Barrier(count), context.Queue()
        workers = [context.Process(target=_resolve_in_process, args=(str(data_dir), start, results))
                   for _ in range(count)]
        for worker in workers:
            worker.start()
        read = [results.get(timeout=30) for _ in workers]
        for worker in workers:
            worker.join(timeout=30)
        assert all(isinstance(r, bytes) and len(r) >= 32 for r in read), read
        assert len(set(read)) == 1


def test_an_existing_secret_is_kept(tmp_path):
    (tmp_path / SECRET_FILE).write_text("kept-secret-value\n")
    assert Settings(data_dir=tmp_path).resolved_secret() == b"kept-secret-value"


def test_an_empty_secret_is_refused_not_used_as_an_hmac_key(tmp_path):
    (tmp_path / SECRET_FILE).write_text("  \n")
    with pytest.raises(ConfigurationError, match="empty"):
        Settings(data_dir=tmp_path).resolved_secret()
    with pytest.raises(ConfigurationError, match="THREADLINE_SECRET"):
        Settings(data_dir=tmp_path / "unused", secret=SecretStr("")).resolved_secret()
