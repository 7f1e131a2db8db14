"""The ports `up` hands its servers, and what it says when a child exits while starting."""

from __future__ import annotations

import json
import socket

import pytest

from services.cli import embedded
from services.cli.embedded import free_port
from services.cli.supervision import last_error


def ephemeral_range() -> tuple[int, int]:
    low, high = embedded.EPHEMERAL_RANGE.read_text().split()
    return int(low), int(high)


def test_a_free_port_is_drawn_outside_the_ephemeral_range_that_outgoing_connections_take_ports_from():
    low, high = ephemeral_range()
    ports = [free_port() for _ in range(200)]
    assert all(not low <= port <= high for port in ports), [p for p in ports if low <= p <= high][:5]
    assert len(set(ports)) == len(ports), "one process asking again gets another port"
    with socket.socket() as server:  # and a server can listen on it
        server.bind(("127.0.0.1", ports[0]))
        server.listen()


def test_the_preferred_port_when_it_is_free_and_another_when_something_listens_on_it():
    port = free_port()
    assert free_port(preferred=port) == port
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", port))
        taken.listen()
        assert free_port(preferred=port) != port


@pytest.mark.parametrize(("kernel_range", "span"), [
    ("32768\t60999\n", (10_000, 32_767)),
    ("1024 40000", (40_001, 65_535)),
    ("1024 65000", None),  # too little room on either side: the kernel's own choice
    ("", None),
])
def test_the_span_drawn_from_follows_the_kernels_range(tmp_path, monkeypatch, kernel_range, span):
    configured = tmp_path / "ip_local_port_range"
    configured.write_text(kernel_range)
    monkeypatch.setattr(embedded, "EPHEMERAL_RANGE", configured)
    assert embedded._listening_span() == span
    assert 0 < free_port() <= 65_535


def test_a_childs_last_error_is_its_event_and_the_exceptions_last_line(tmp_path):
    log = tmp_path / "gateway.log"
    lines = [
        {"event": "gateway_starting", "level": "info"},
        {"event": "[Errno 98] error while attempting to bind on address ('127.0.0.1', 8700): address already in use",
         "level": "error"},
        {"event": "Application startup failed. Exiting.", "level": "error",
         "exception": "Traceback (most recent call last):\n  ...\nnats.errors.NoServersError: nats: no servers available"},
        {"event": "service_stopped", "level": "info"},
    ]
    log.write_text("\n".join(json.dumps(line) for line in lines) + "\nnot json\n")
    assert last_error(log) == "Application startup failed. Exiting.: nats.errors.NoServersError: nats: no servers available"
    log.write_text("\n".join(json.dumps(line) for line in lines[:2]))
    assert last_error(log) == lines[1]["event"]
    log.write_text(json.dumps({"event": "x" * 1000, "level": "critical"}))
    assert last_error(log) == "x" * 300 + "…"
    log.write_text(json.dumps(lines[0]))
    assert last_error(log) is None
    assert last_error(tmp_path / "missing.log") is None
