"""What `up` prints: server URLs without their passwords."""

from __future__ import annotations

from services.cli.up import redacted


def test_a_password_is_masked_and_a_url_without_one_is_left_as_it_is():
    assert redacted("postgresql://app:hunter2@db:5432/threadline") == "postgresql://app:***@db:5432/threadline"
    assert redacted("nats://127.0.0.1:4222") == "nats://127.0.0.1:4222"
    embedded = "postgresql://postgres:@/threadline?host=/data/postgres"
    assert redacted(embedded) == embedded
