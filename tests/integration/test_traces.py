"""One agent call is one trace: the gateway's HTTP span, the service's NATS spans, its PostgreSQL statements,
and the relay's publish of the event it caused (captured with an in-memory exporter, in a process of its own:
see tests/tracing_probe.py)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def traced_spans(servers) -> list[dict]:  # noqa: ANN001
    result = subprocess.run([sys.executable, "-m", "tests.tracing_probe", servers.nats_url,
                             servers.admin_database_url, str(servers.nats_dir)], cwd=ROOT, capture_output=True, text=True, timeout=180,
                            env={k: v for k, v in os.environ.items() if not k.startswith(("THREADLINE_", "OTEL_"))})
    assert result.returncode == 0, result.stderr[-3000:]
    return [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]


async def test_an_mcp_call_is_one_trace_from_the_gateway_through_nats_to_postgres_and_the_event(servers):
    spans = await asyncio.to_thread(traced_spans, servers)
    assert spans, "no span was recorded"
    prefix, case_id = spans[0]["prefix"], spans[0]["case"]
    command = f"{prefix}.cmd.staging.stage_sources"
    roots = [s for s in spans if s["kind"] == "SERVER" and "/mcp" in s["name"]]
    assert len(roots) >= 1, sorted({s["name"] for s in spans})
    root = roots[0]
    trace = [s for s in spans if s["trace"] == root["trace"]]
    names = sorted({s["name"] for s in trace})

    assert root["scope"].startswith("opentelemetry.instrumentation.")  # the gateway's FastAPI span
    assert any(s["name"] == f"{command} publish" and s["kind"] == "PRODUCER" for s in trace), names
    (handled,) = [s for s in trace if s["name"] == f"{command} process"]  # the staging service
    assert handled["kind"] == "CONSUMER"
    statements = [s for s in trace if s["attributes"].get("db.system") in ("postgresql", "postgres")]
    assert statements, f"no PostgreSQL span in the trace: {names}"
    assert any(s["scope"] == "opentelemetry.instrumentation.asyncpg" for s in statements)
    # The proposal and its outbox row are written by one statement: staging's threadline_stage() call.
    written = [str(s["attributes"].get("db.statement", s["name"])).lower() for s in statements]
    assert any("outbox" in w or "threadline_stage" in w for w in written), written
    assert any(s["parent"] == handled["span"] for s in statements), "the service's statements hang under its span"
    relayed = [s for s in trace if s["name"].startswith(f"{prefix}.events.case.{case_id}.") and s["kind"] == "PRODUCER"]
    assert relayed, f"the relay's publish of the event is not in the trace: {names}"
