"""One agent call is one trace: the gateway's HTTP span, the service's NATS spans, its PostgreSQL statements,
and the relay's publish of the event it caused."""

from __future__ import annotations

import asyncio

import pytest
from opentelemetry.instrumentation.asyncpg import AsyncPGInstrumentor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from shared.observability import configure_tracing
from tests.events import wait_until_published
from tests.factories import new_case, source_item
from tests.support import Stack, new_deployment, remove_deployment


@pytest.fixture
async def traced_stack(servers):
    exporter = InMemorySpanExporter()
    settings = await new_deployment(servers)
    assert configure_tracing("tests", settings, exporter=exporter), "tracing was configured earlier in this process"
    stack = await Stack(settings).start()
    try:
        yield stack, exporter
    finally:
        await stack.stop()
        # The tracer provider stays for the rest of the session (it is global); the rest records nothing.
        exporter.shutdown()
        AsyncPGInstrumentor().uninstrument()
        await remove_deployment(servers, settings)


async def spans_of_trace(exporter: InMemorySpanExporter, wanted, timeout: float = 20.0):  # noqa: ANN001
    """The finished spans once `wanted(spans)` holds (spans end asynchronously, after the reply)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        spans = exporter.get_finished_spans()
        if wanted(spans) or asyncio.get_running_loop().time() > deadline:
            return spans
        await asyncio.sleep(0.1)


async def test_an_mcp_call_is_one_trace_from_the_gateway_through_nats_to_postgres_and_the_event(traced_stack):
    stack, exporter = traced_stack
    prefix = stack.settings.nats_prefix
    case_id = await new_case(stack)
    agent = await stack.issue_token("agent", f"agent-{case_id}", case_id=case_id)
    async with stack.agent(agent) as mcp:
        workspace = (await mcp.call_tool("get_workspace", {})).structured_content
        exporter.clear()
        staged = await mcp.call_tool("stage_sources", {
            "expectedCaseId": case_id, "expectedRevision": workspace["workspaceRevision"],
            "sources": [source_item("traced-source")]})
    assert not staged.is_error, staged
    await wait_until_published(stack.db)
    command = f"{prefix}.cmd.staging.stage_sources"

    def gateway_span(spans):  # noqa: ANN001, ANN202
        return next((s for s in spans if s.kind is SpanKind.SERVER and s.attributes.get("http.route") == "/mcp"
                     or s.kind is SpanKind.SERVER and "/mcp" in s.name), None)

    def complete(spans) -> bool:  # noqa: ANN001
        root = gateway_span(spans)
        if root is None:
            return False
        ours = [s for s in spans if s.context.trace_id == root.context.trace_id]
        return (any(s.name == f"{command} process" for s in ours)
                and any(s.name.startswith(f"{prefix}.events.") and s.name.endswith(" publish") for s in ours))

    spans = await spans_of_trace(exporter, complete)
    root = gateway_span(spans)
    assert root is not None, sorted({s.name for s in spans})
    trace = [s for s in spans if s.context.trace_id == root.context.trace_id]
    names = sorted({s.name for s in trace})
    scopes = {s.instrumentation_scope.name for s in trace}

    assert any(s.name == f"{command} publish" and s.kind is SpanKind.PRODUCER for s in trace), names  # gateway → NATS
    handled = next(s for s in trace if s.name == f"{command} process")
    assert handled.kind is SpanKind.CONSUMER  # the staging service, in the gateway's trace
    statements = [s for s in trace if s.attributes.get("db.system") in ("postgresql", "postgres")]
    assert statements, f"no PostgreSQL span in the trace: {names}"
    assert any("outbox" in (s.attributes.get("db.statement") or s.name).lower() for s in statements), names
    assert any(s.parent is not None and s.parent.span_id == handled.context.span_id for s in trace), \
        "the service's work hangs under its NATS span"
    relayed = [s for s in trace if s.name.startswith(f"{prefix}.events.case.{case_id}.") and s.name.endswith(" publish")]
    assert relayed, f"the relay's publish of the event is not in the trace: {names}"
    assert {"opentelemetry.instrumentation.fastapi", "opentelemetry.instrumentation.asyncpg"} <= scopes | {
        s.instrumentation_scope.name.replace("asgi", "fastapi") for s in trace}, scopes
