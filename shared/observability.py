"""Metrics and traces of every process: Prometheus instruments, FastStream's middlewares, OpenTelemetry."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from faststream.nats.opentelemetry import NatsTelemetryMiddleware
from faststream.nats.prometheus import NatsPrometheusMiddleware
from opentelemetry import context, propagate, trace
from opentelemetry.instrumentation.asyncpg import AsyncPGInstrumentor
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, Counter, Gauge, Histogram, generate_latest

from shared.logging import get_logger
from shared.settings import Settings

log = get_logger(__name__)

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)

COMMAND_SECONDS = Histogram(
    "threadline_command_seconds", "Time a service took to handle one command, by service and command",
    ["service", "command"], buckets=LATENCY_BUCKETS,
)
COMMANDS_EXPIRED = Counter(
    "threadline_commands_expired", "Commands a service did not handle because their caller had stopped waiting, "
    "by service and command", ["service", "command"],
)

_provider: TracerProvider | None = None
_tracer = trace.get_tracer("threadline")


def observe_command(subject: str, seconds: float) -> None:
    """`<prefix>.cmd.<service>.<command>` handled in `seconds`."""
    parts = subject.split(".")
    if len(parts) >= 4:
        COMMAND_SECONDS.labels(service=parts[-2], command=parts[-1]).observe(seconds)


def broker_middlewares(app_name: str) -> list[Any]:
    """FastStream's own instruments for a broker: a span per message sent and handled (context carried in
    the `traceparent` header) and Prometheus counters and histograms per subscriber."""
    prometheus = NatsPrometheusMiddleware(registry=REGISTRY, app_name=app_name, metrics_prefix="threadline_nats")
    # Spans cost a share of every message even when nothing records them: only where tracing is on.
    return [NatsTelemetryMiddleware(), prometheus] if tracing_enabled() else [prometheus]


def tracing_enabled() -> bool:
    return _provider is not None


_shown: set[Any] = set()


def service_gauge(name: str, documentation: str, labels: tuple[str, ...] = ()) -> Gauge:
    """A gauge only one service keeps, not shown until that service's process `show`s it."""
    return Gauge(name, documentation, labels, registry=None)


def show(*metrics: Any) -> None:
    """Serve a service's own metrics at this process's /metrics from now on (again is harmless). Each is made with
    `registry=None` and shown by the service that keeps it, as it starts: `up` forks every service from one process
    that imported all their code (services/cli/starter.py), and a staging process must not show a relay's gauges,
    at 0, beside the relay's own."""
    for metric in metrics:
        if metric not in _shown:
            REGISTRY.register(metric)
            _shown.add(metric)


def exposition() -> tuple[bytes, str]:
    """This process's metrics in the Prometheus text format."""
    return generate_latest(REGISTRY), CONTENT_TYPE_LATEST


def configure_tracing(service: str, settings: Settings, exporter: SpanExporter | None = None) -> bool:
    """Record spans when an OTLP endpoint is configured (OTEL_EXPORTER_OTLP_ENDPOINT; the exporter reads
    the other OTEL_* variables itself) or an exporter is given; otherwise tracing stays a no-op.

    Once per process: the tracer provider is global, and so is the asyncpg instrumentation.
    """
    global _provider
    if _provider is not None:
        return True
    if exporter is None and not settings.otel_exporter_otlp_endpoint:
        return False
    if exporter is None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        processor: Any = BatchSpanProcessor(OTLPSpanExporter())
    else:
        processor = SimpleSpanProcessor(exporter)
    _provider = TracerProvider(resource=Resource.create({SERVICE_NAME: f"threadline-{service}"}))
    _provider.add_span_processor(processor)
    trace.set_tracer_provider(_provider)
    AsyncPGInstrumentor().instrument(tracer_provider=_provider)
    log.info("tracing_enabled", exporter=type(exporter).__name__ if exporter else "otlp")
    return True


def shutdown_tracing() -> None:
    """Export what is still buffered (a process that ends without this loses its last spans)."""
    if _provider is not None:
        _provider.force_flush(timeout_millis=5000)


def instrument_http(app: Any) -> None:
    """A server span per HTTP request of a FastAPI app (probes and scrapes left out); the context of an
    incoming `traceparent` is continued."""
    from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor

    FastAPIInstrumentor.instrument_app(app, excluded_urls="healthz,readyz,metrics", exclude_spans=["receive", "send"])


@contextmanager
def message_span(subject: str, action: str, headers: dict[str, str], **attributes: Any) -> Iterator[None]:
    """A span for a message sent or handled outside FastStream (the relay's publish, the projection's
    apply), continuing the trace its `traceparent` header names; for a publish the header is then
    rewritten so that whoever reads the message continues from this span."""
    kind = trace.SpanKind.PRODUCER if action == "publish" else trace.SpanKind.CONSUMER
    with _tracer.start_as_current_span(f"{subject} {action}", context=propagate.extract(headers), kind=kind,
                                       attributes={"messaging.system": "nats", "messaging.operation": action,
                                                   "messaging.destination.name": subject, **attributes}):
        if action == "publish":
            propagate.inject(headers)
        yield


@contextmanager
def batch_span(name: str, carriers: list[dict[str, str]], **attributes: Any) -> Iterator[None]:
    """One span for messages handled together (a consumer's batch in one transaction), linked to the trace
    each message's `traceparent` continues; nothing when tracing is off."""
    if not tracing_enabled():
        yield
        return
    links = [trace.Link(c) for c in (trace.get_current_span(propagate.extract(h)).get_span_context()
                                     for h in carriers) if c.is_valid]
    with _tracer.start_as_current_span(name, kind=trace.SpanKind.CONSUMER, links=links,
                                       attributes={"messaging.system": "nats", "messaging.operation": "process",
                                                   "messaging.batch.message_count": len(carriers), **attributes}):
        yield


def current_traceparent() -> str | None:
    """The W3C `traceparent` of the span in progress, when one is (tracing on)."""
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return carrier.get("traceparent")


@contextmanager
def continued(traceparent: str | None) -> Iterator[None]:
    """Make `traceparent` the current trace context inside the block: for work that runs in another
    task than the request that carries it (the MCP transport hands each call to its own task)."""
    if not traceparent or _provider is None:  # nothing records spans: no context to carry
        yield
        return
    token = context.attach(propagate.extract({"traceparent": traceparent}))
    try:
        yield
    finally:
        context.detach(token)
