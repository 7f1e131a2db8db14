"""An option the command cannot use is refused in a line or two naming the option and its rule, exit 2, before any
server is reached: never a traceback from the message, the broker or the file system underneath.

Run as a person runs them, through the installed `threadline` script in a process of its own: what is checked is
the exit code and the two streams the shell sees, which the entry point (not the command's function) decides."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.processes import clean_environment, threadline

UNREACHED = "http://127.0.0.1:1"


@pytest.mark.parametrize(("options", "said", "hint"), [
    (["--id", "Bad Id", "--title", "T"], "--id: String should match pattern '^[a-z][a-z0-9-]*$'",
     "use a slug matching the pattern ^[a-z][a-z0-9-]*$"),
    (["--id", "a" * 200, "--title", "T"], "--id: String should have at most 96 characters",
     "shorten the text to at most 96 characters"),
    (["--id", "fine", "--title", ""], "--title: String should have at least 1 character",
     "send a text of at least 1 character"),
])
def test_case_create_names_the_option_whose_value_breaks_the_rule(options, said, hint, tmp_path):
    done = threadline("case", "create", "--data-dir", str(tmp_path / "data"), *options, "--question", "Q",
                      cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    refusal, fix = done.stderr.splitlines()
    assert refusal == f"error (invalid_argument): {said}" and fix.startswith(f"hint: {hint}"), done.stderr


@pytest.mark.parametrize(("options", "said"), [
    (["--from-seq", "0"], "Invalid value for '--from-seq'"),
    (["--from-seq", "-5"], "Invalid value for '--from-seq'"),
    (["--case", "Bad Id"], "error (invalid_argument): --case: String should match pattern '^[a-z][a-z0-9-]*$'"),
    (["--count", "0"], "Invalid value for '--count'"),  # it printed nothing and exited 0, as if the stream were empty
    (["--count", "-3"], "Invalid value for '--count'"),
    (["--idle-exit", "-1"], "Invalid value for '--idle-exit'"),  # it exited at once, silently
    (["--idle-exit", "0"], "Invalid value for '--idle-exit'"),  # it never exited: 0 read as "no idle exit"
    (["--format", "xml"], "Invalid value for '--format'"),  # it printed readable lines, as if asked for `line`
])
def test_events_tail_refuses_a_sequence_or_case_the_stream_cannot_take_before_subscribing(options, said, tmp_path):
    done = threadline("events", "tail", "--data-dir", str(tmp_path / "data"), "--idle-exit", "1", *options,
                      cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert said in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert "no NATS server" not in done.stderr  # refused before it looked for one


@pytest.mark.parametrize("where", ["missing/dir/x.dump", "/proc/x.dump"])
def test_backup_to_a_place_no_file_can_be_made_names_it_and_why(where, tmp_path):
    target = tmp_path / where if not where.startswith("/") else Path(where)
    environment = clean_environment(THREADLINE_DATABASE_URL="postgresql://postgres@127.0.0.1:1/unreached")
    done = threadline("backup", "--data-dir", str(tmp_path / "data"), str(target), cwd=tmp_path,
                      env=environment)  # refused before any dump
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [
        f"error: cannot write the backup to {target}: No such file or directory",
        "hint: name a file in a directory that exists and that you can write to"], done.stderr


@pytest.mark.parametrize(("where", "why"), [("missing/x.json", "No such file or directory"), (".", "it is a directory")])
def test_export_to_a_place_no_file_can_be_made_names_it_and_why(where, why, tmp_path):
    target = tmp_path / where
    done = threadline("export", "some-case", "--format", "aif-json", "-o", str(target), "--url", UNREACHED,
                      "--token", "unused", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [
        f"error: cannot write the export to {target}: {why}",
        "hint: name a file (-o) in a directory that exists and that you can write to"], done.stderr


def test_a_failed_export_leaves_the_file_it_would_have_replaced_as_it_was(tmp_path):
    kept = tmp_path / "x.json"
    kept.write_text('{"an": "earlier export"}')
    done = threadline("export", "nope", "--format", "aif-json", "-o", str(kept), "--url", UNREACHED, "--token", "t",
                      cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert kept.read_text() == '{"an": "earlier export"}'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.json"]  # no partial file left beside it


def test_an_export_to_standard_output_says_why_it_failed_on_standard_error_only(tmp_path):
    """`threadline export … > out.ttl` must not leave the error in out.ttl, looking like an export."""
    done = threadline("export", "nope", "--format", "prov-turtle", "--url", UNREACHED, "--token", "t", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    assert done.stderr.startswith(f"cannot export from {UNREACHED}: "), done.stderr


@pytest.mark.parametrize(("args", "said", "hint"), [
    (["deliveries", "abcd1234", "--limit", "0"], "--limit: Input should be greater than or equal to 1",
     "send a number of at least 1"),
    (["deliveries", "abcd1234", "--status", "lost"], "--status: Input should be 'pending', 'delivered', 'failed' or "
                                                     "'all'", "use one of:"),
    (["redeliver", "abcd1234", ""], "EVENT_ID: String should have at least 1 character", "send a text"),
])
def test_webhooks_names_the_option_or_argument_whose_value_breaks_the_rule(args, said, hint, tmp_path):
    done = threadline("webhooks", *args, "--data-dir", str(tmp_path / "data"), cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    refusal, fix = done.stderr.splitlines()
    assert refusal == f"error (invalid_argument): {said}" and fix.startswith(f"hint: {hint}"), done.stderr


@pytest.mark.parametrize("options", [["--status", "rejected"], ["--kind", "claims"], ["--agent", "scout"],
                                     ["--text", "heat"], ["--duplicates"], ["--sort", "newest"], ["--cursor", "c"]])
def test_review_list_without_a_case_refuses_the_filters_of_a_cases_proposals(options, tmp_path):
    """Without --case it lists cases, which these filters do not apply to: it printed every case, as if unfiltered."""
    done = threadline("review", "list", *options, "--url", UNREACHED, "--token", "t", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert f"{options[0]} filters one case's proposals: add --case ID" in done.stderr, done.stderr
    assert "cannot reach" not in done.stderr and "Traceback" not in done.stderr  # refused before any request
