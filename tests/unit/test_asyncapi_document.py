"""The AsyncAPI document is public: it names the NATS server but never its credentials."""

from __future__ import annotations

from shared.asyncapi import document
from shared.settings import Settings


def test_the_server_entry_keeps_host_and_port_and_drops_credentials():
    served = document(Settings(nats_url="nats://relay-user:s3cret@nats.internal:4333"))
    assert served["servers"]["nats"] == {"host": "nats.internal:4333", "protocol": "nats"}
    assert "s3cret" not in str(served)
