"""`threadline export` against a real HTTP server that is not the gateway: an HTML error page (a proxy's 502) is
said in one line on standard error, never a traceback; an export goes to /dev/stdout and /dev/null as to a file."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.processes import threadline

EXPORTED = b'{"nodes": [], "edges": []}'
ERROR_PAGE = b"<html><body><h1>502 Bad Gateway</h1></body></html>"


class Answers(BaseHTTPRequestHandler):
    """A case's export for /api/v1/cases/served/export, a proxy's HTML 502 for anything else."""

    def do_GET(self) -> None:  # noqa: N802 - the standard library's name
        served = self.path.startswith("/api/v1/cases/served/export")
        body = EXPORTED if served else ERROR_PAGE
        self.send_response(200 if served else 502)
        self.send_header("Content-Type", "application/json" if served else "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    http = ThreadingHTTPServer(("127.0.0.1", 0), Answers)
    thread = threading.Thread(target=http.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{http.server_address[1]}"
    http.shutdown()
    http.server_close()


def export(server: str, case: str, *output: str, cwd: Path):
    return threadline("export", case, "--format", "aif-json", *output, "--url", server, "--token", "t", cwd=cwd)


def test_an_html_error_page_is_one_line_on_standard_error_with_its_status(server, tmp_path):
    done = export(server, "behind-a-proxy", cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == "", done.stderr
    assert done.stderr.splitlines() == [f"{server} answered 502 without JSON: is it Threadline's gateway?"]

    kept = tmp_path / "x.json"
    kept.write_text("earlier")
    done = export(server, "behind-a-proxy", "-o", str(kept), cwd=tmp_path)
    assert done.returncode == 2 and "answered 502 without JSON" in done.stderr and "Traceback" not in done.stderr
    assert kept.read_text() == "earlier" and [p.name for p in tmp_path.iterdir()] == ["x.json"]


@pytest.mark.parametrize("device", ["/dev/stdout", "/dev/null"])
def test_an_export_to_a_device_is_written_in_place(device, server, tmp_path):
    done = export(server, "served", "-o", device, cwd=tmp_path)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert done.stdout == (EXPORTED.decode() if device == "/dev/stdout" else "")
    assert list(tmp_path.iterdir()) == []
