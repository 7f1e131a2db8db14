"""What a restore tells to run next: the plain `threadline up` only when it starts the data dir just filled."""

from __future__ import annotations

from pathlib import Path

from services.cli.backup import start_command


def test_a_restore_into_the_default_data_dir_says_plain_threadline_up():
    assert start_command(Path("/work/.threadline"), Path("/work/.threadline")) == "threadline up"


def test_a_restore_into_another_data_dir_names_it_in_the_command():
    assert start_command(Path("/work/restored"), Path("/work/.threadline")) == \
        "threadline up --data-dir /work/restored"


def test_a_data_dir_a_shell_would_split_is_quoted():
    assert start_command(Path("/work/my data"), Path("/work/.threadline")) == \
        "threadline up --data-dir '/work/my data'"
