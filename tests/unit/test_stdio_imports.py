"""`threadline serve gateway --stdio` imports the MCP side of the gateway only: an agent host waits for every
module it imports at each start, and the HTTP stack (FastAPI, the API, the UI, the argument map) took most of it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# uvicorn is not among them: the MCP SDK's own server imports it (mcp.server.streamable_http, sse_starlette).
HTTP_ONLY = ("fastapi", "grandalf", "jinja2", "services.gateway.app", "services.gateway.http_api",
             "services.gateway.feed", "services.gateway.ui", "services.gateway.argument_map")


def imported_by(module: str) -> set[str]:
    """The modules a fresh interpreter holds after importing `module` of this tree (`-c` looks in cwd first)."""
    listing = f"import sys, {module}; print('\\n'.join(sys.modules))"
    done = subprocess.run([sys.executable, "-c", listing], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          check=True)
    return set(done.stdout.split())


def test_the_stdio_gateway_imports_nothing_of_the_http_stack():
    loaded = imported_by("services.gateway.stdio")
    assert "services.gateway.mcp_server" in loaded  # the check looks at the modules the import brought in
    assert sorted(loaded.intersection(HTTP_ONLY)) == []


def test_the_check_sees_the_http_stack_where_it_is_imported():
    assert set(HTTP_ONLY) <= imported_by("services.gateway.app")
