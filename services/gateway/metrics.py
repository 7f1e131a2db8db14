"""Prometheus metrics of the gateway (served at /metrics)."""

from __future__ import annotations

from prometheus_client import CONTENT_TYPE_LATEST, Counter, Histogram, generate_latest

from services.gateway.tools import served_tools

# Shown by a gateway only (shared.observability.show: create_app), not by every process `up` forks from its starter.
TOOL_CALLS = Counter("threadline_tool_calls_total", "MCP tool calls", ["tool", "outcome"], registry=None)
TOOL_SECONDS = Histogram(
    "threadline_tool_call_seconds", "MCP tool call latency", ["tool"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10), registry=None,
)
HTTP_REQUESTS = Counter("threadline_http_requests_total", "HTTP API requests", ["method", "route", "status"],
                        registry=None)
METRICS = (TOOL_CALLS, TOOL_SECONDS, HTTP_REQUESTS)
# Labels come from closed sets only: anything a caller makes up is counted under OTHER.
OTHER = "other"
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


def observe_tool(tool: str, outcome: str, seconds: float) -> None:
    tool = tool if tool in served_tools() else OTHER
    TOOL_CALLS.labels(tool=tool, outcome=outcome).inc()
    TOOL_SECONDS.labels(tool=tool).observe(seconds)


def observe_http(method: str, route: str | None, status: int) -> None:
    """`route` is the template of the route the request matched (None when none did)."""
    HTTP_REQUESTS.labels(method=method if method in METHODS else OTHER, route=route or OTHER,
                         status=str(status)).inc()


def exposition() -> tuple[bytes, str]:
    return generate_latest(), CONTENT_TYPE_LATEST
