"""Run in a process of its own by tests/integration/test_traces.py: one traced MCP call on a fresh stack.

Tracing is global to a process (one tracer provider, asyncpg instrumented for good), so the test that turns
it on runs here and leaves the test session untraced. Prints the finished spans as JSON lines.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from shared.observability import configure_tracing
from tests.events import wait_until_published
from tests.factories import new_case, source_item
from tests.support import Servers, Stack, new_deployment, remove_deployment

SPAN_WAIT_SECONDS = 20.0


async def traced_call(nats_url: str, admin_database_url: str, nats_dir: str) -> list[dict]:
    servers = Servers(nats_url, admin_database_url, Path(nats_dir))  # the worker's NATS: users are registered there
    exporter = InMemorySpanExporter()
    settings = await new_deployment(servers)
    configure_tracing("tests", settings, exporter=exporter)
    stack = await Stack(settings).start()
    try:
        case_id = await new_case(stack)
        agent = await stack.issue_token("agent", f"agent-{case_id}", case_id=case_id)
        async with stack.agent(agent) as mcp:
            workspace = (await mcp.call_tool("get_workspace", {})).structured_content
            exporter.clear()
            staged = await mcp.call_tool("stage_sources", {
                "expectedCaseId": case_id, "expectedRevision": workspace["workspaceRevision"],
                "sources": [source_item("traced-source")]})
        assert not staged.is_error, staged.content
        await wait_until_published(stack.db)
        deadline = asyncio.get_running_loop().time() + SPAN_WAIT_SECONDS
        relayed = f"{settings.nats_prefix}.events.case.{case_id}."
        # Spans end after the replies they belong to: wait for the relay's publish of the event.
        while not any(s.name.startswith(relayed) for s in exporter.get_finished_spans()):
            if asyncio.get_running_loop().time() > deadline:
                break
            await asyncio.sleep(0.1)
        return [{"name": s.name, "kind": s.kind.name, "trace": s.context.trace_id, "span": s.context.span_id,
                 "parent": s.parent.span_id if s.parent else None, "scope": s.instrumentation_scope.name,
                 "prefix": settings.nats_prefix, "case": case_id,
                 "attributes": {k: v for k, v in (s.attributes or {}).items() if isinstance(v, str | int)}}
                for s in exporter.get_finished_spans()]
    finally:
        await stack.stop()
        await remove_deployment(servers, settings)


if __name__ == "__main__":
    for span in asyncio.run(traced_call(sys.argv[1], sys.argv[2], sys.argv[3])):
        print(json.dumps(span))
