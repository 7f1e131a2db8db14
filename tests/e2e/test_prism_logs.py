"""The commit token is a bearer secret: no log line of the gateway or the services ever carries it."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager

from shared.logging import configure_logging
from tests.factories import new_company, preview_args, unique
from tests.support import TEST_LOG_LEVEL


@contextmanager
def json_logs() -> Iterator[io.StringIO]:
    """Every log line of this process (gateway and services run in it), as production writes them:
    structlog JSON, here at DEBUG, the most any deployment would log."""
    configure_logging("tests", "DEBUG", "json")
    captured = io.StringIO()
    logging.getLogger().handlers[0].setStream(captured)
    try:
        yield captured
    finally:
        configure_logging("tests", TEST_LOG_LEVEL, "console")


async def test_preview_and_commit_never_log_the_commit_token(stack):
    company = await new_company(stack)
    with json_logs() as captured:
        async with stack.agent() as mcp:
            previewed = await mcp.call_tool("propose_claim_delta_from_source", preview_args(company, unique()))
            preview = previewed.structured_content
            token, operation = preview["commitToken"], preview["operationId"]
            forged = token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")
            refused = await mcp.call_tool("propose_claim_delta_from_source",
                                          {"mode": "commit", "operationId": operation, "commitToken": forged})
            committed = await mcp.call_tool("propose_claim_delta_from_source",
                                            {"mode": "commit", "operationId": operation, "commitToken": token})
            again = await mcp.call_tool("propose_claim_delta_from_source",
                                        {"mode": "commit", "operationId": operation, "commitToken": token})
    assert refused.is_error and not committed.is_error and not again.is_error
    assert committed.structured_content["status"] == "committed"

    text = captured.getvalue()
    lines = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
    events = [line["event"] for line in lines]
    # The capture saw the calls: the gateway's tool calls and the service's handled commands and refusal.
    assert events.count("tool_call") >= 4
    assert sum(1 for line in lines if line["event"] == "command_handled"
               and line.get("subject", "").endswith("propose_claim_delta")) >= 4
    assert any(line["event"] == "command_refused" and line.get("field") == "commitToken" for line in lines)
    assert token not in text and forged not in text
