"""Where `export -o` and `backup` write: a regular file replaced whole, a symlink followed and kept, a device or FIFO
written in place, a file in a directory that refuses new files filled from a partial file elsewhere."""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from pathlib import Path

import pytest

from services.cli.running import Refused, written_whole

NOBODY = 65534


def write(target: Path, text: str) -> None:
    with written_whole(target, "the export", "-o") as partial, open(partial, "w") as out:
        out.write(text)


def test_a_regular_file_is_replaced_whole_and_a_failed_write_leaves_it_as_it_was(tmp_path):
    target = tmp_path / "x.json"
    target.write_text("earlier")
    with pytest.raises(RuntimeError), written_whole(target, "the export") as partial:
        partial.write_text("half")
        raise RuntimeError("the server went away")
    assert target.read_text() == "earlier" and sorted(p.name for p in tmp_path.iterdir()) == ["x.json"]
    write(target, "whole")
    assert target.read_text() == "whole" and sorted(p.name for p in tmp_path.iterdir()) == ["x.json"]


def test_a_symlink_is_followed_the_file_it_points_to_replaced_and_the_link_kept(tmp_path):
    (tmp_path / "exports").mkdir()
    real = tmp_path / "exports" / "latest.json"
    real.write_text("earlier")
    link = tmp_path / "latest.json"
    link.symlink_to(real)
    write(link, "whole")
    assert link.is_symlink() and link.resolve() == real and real.read_text() == "whole"
    assert sorted(p.name for p in real.parent.iterdir()) == ["latest.json"]

    dangling = tmp_path / "next.json"
    dangling.symlink_to(tmp_path / "exports" / "next.json")
    write(dangling, "new")
    assert dangling.is_symlink() and (tmp_path / "exports" / "next.json").read_text() == "new"


def test_dev_null_is_written_in_place():
    write(Path("/dev/null"), "discarded")
    assert Path("/dev/null").is_char_device()


def test_a_fifo_is_written_in_place(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    read: list[str] = []
    reader = threading.Thread(target=lambda: read.append(fifo.read_text()))
    reader.start()
    write(fifo, "through the pipe")
    reader.join(timeout=10)
    assert read == ["through the pipe"] and fifo.is_fifo()


def test_a_file_whose_directory_refuses_the_partial_file_is_filled_once_whole(tmp_path):
    """A name that leaves no room for `.NAME.partial` (255 bytes at most): the directory refuses the partial file
    as a read-only one does, for root too."""
    target = tmp_path / ("x" * 250)
    target.write_text("earlier")
    with pytest.raises(RuntimeError), written_whole(target, "the export") as partial:
        partial.write_text("half")
        raise RuntimeError("the server went away")
    assert target.read_text() == "earlier"
    write(target, "whole")
    assert target.read_text() == "whole" and [p.name for p in tmp_path.iterdir()] == [target.name]


def test_a_writable_file_in_a_directory_the_user_cannot_write_is_filled():
    """In a process of a user other than root (root writes in any directory): `nobody` when the tests run as root."""
    locked = Path(tempfile.mkdtemp(prefix="threadline-locked-"))
    target = locked / "x.json"
    target.write_text("earlier")
    target.chmod(0o666)
    locked.chmod(0o555)
    try:
        child = os.fork()
        if child == 0:
            code = 1
            try:
                if os.geteuid() == 0:
                    os.setgid(NOBODY)
                    os.setuid(NOBODY)
                write(target, "whole")
                code = 0
            finally:
                os._exit(code)
        _, status = os.waitpid(child, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert target.read_text() == "whole" and [p.name for p in locked.iterdir()] == ["x.json"]
    finally:
        locked.chmod(0o755)
        shutil.rmtree(locked)


def test_a_directory_or_a_place_no_file_can_be_made_is_refused(tmp_path):
    with pytest.raises(Refused, match="it is a directory"):
        write(tmp_path, "x")
    with pytest.raises(Refused, match="No such file or directory"):
        write(tmp_path / "missing" / "x.json", "x")
