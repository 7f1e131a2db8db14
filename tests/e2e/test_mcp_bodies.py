"""MCP bodies at /mcp: over the call limit they are refused by their declared length before a byte is read, or
cut off once the bytes read pass it; an MCP client reads the refusal as a JSON-RPC error naming the size."""

from __future__ import annotations

import asyncio
from urllib.parse import urlsplit

import httpx2
import orjson
import pytest
from mcp.shared.exceptions import MCPError

from services.gateway.intake import Intake
from services.gateway.limits import MAX_CALL_BYTES
from tests.factories import agent_session

TEN_MB = 10 * 1024 * 1024
HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
           "MCP-Protocol-Version": "2025-06-18"}


async def test_a_body_declared_over_the_limit_is_refused_before_any_of_it_is_sent(stack):
    url = urlsplit(stack.http_url)
    reader, writer = await asyncio.open_connection(url.hostname, url.port)
    try:
        writer.write((f"POST /mcp HTTP/1.1\r\nHost: {url.netloc}\r\nAuthorization: Bearer {stack.tokens['agent']}\r\n"
                      f"Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
                      f"Content-Length: {TEN_MB}\r\n\r\n").encode())
        await writer.drain()  # the headers only: not one byte of the body
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout=10)
        length = int(next(line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")))
        answer = orjson.loads(await reader.readexactly(length))
    finally:
        writer.close()
    assert head.startswith(b"HTTP/1.1 413")
    assert answer["jsonrpc"] == "2.0" and answer["id"] is None
    assert answer["error"]["message"].startswith(f"the request body is {TEN_MB} bytes; a call may be at most "
                                                 f"{MAX_CALL_BYTES} bytes (fix: ")
    assert answer["error"]["data"]["code"] == "payload_too_large" and answer["error"]["data"]["field"] == "(body)"


async def test_a_chunked_body_is_cut_off_once_the_bytes_read_pass_the_limit(stack):
    sent = 0

    async def chunks():  # no Content-Length: only the bytes read can tell
        nonlocal sent
        for _ in range(10):
            sent += 1
            yield b" " * (1024 * 1024)

    async with httpx2.AsyncClient(base_url=stack.http_url, timeout=30) as http:
        answer = await http.post("/mcp", content=chunks(),
                                 headers={**HEADERS, "Authorization": f"Bearer {stack.tokens['agent']}"})
    assert answer.status_code == 413
    assert answer.json()["error"]["message"].startswith(f"the request body is over {MAX_CALL_BYTES} bytes")


async def test_an_mcp_client_sending_a_call_over_the_limit_reads_why_as_its_error(stack):
    async with agent_session(stack) as agent:
        with pytest.raises(MCPError) as refused:
            await agent.call("inspect_sources", {"expectedCaseId": agent.case_id, "sourceIds": ["x" * MAX_CALL_BYTES]})
        assert f"a call may be at most {MAX_CALL_BYTES} bytes" in str(refused.value)
        assert (await agent.ok("get_workspace", {}))["caseId"] == agent.case_id  # the session goes on


async def test_a_get_or_delete_at_mcp_is_405_at_once_the_gateway_being_stateless(stack):
    # A stateless gateway sends nothing but answers to POSTs: a GET's event stream would stay open and empty for
    # as long as the caller held it (a transport and its task each), and there is no session to DELETE. The MCP
    # specification's answer to both: 405, which its clients take as "no such stream".
    async with httpx2.AsyncClient(base_url=stack.http_url, timeout=5) as http:
        for method in ("GET", "DELETE"):
            for token in (stack.tokens["agent"], None):
                answer = await http.request(method, "/mcp", headers={
                    **HEADERS, **({"Authorization": f"Bearer {token}"} if token else {})})
                assert answer.status_code == 405, (method, answer.status_code)
                assert answer.headers["allow"] == "POST"
                assert answer.json()["error"]["message"].startswith(
                    f"{method} /mcp: this gateway is stateless (no session, no event stream of its own); "
                    "send each JSON-RPC message as a POST")
    async with agent_session(stack) as agent:  # the official client does not depend on either
        assert (await agent.ok("get_workspace", {}))["caseId"] == agent.case_id


async def test_the_judging_process_is_replaced_when_it_dies_and_ends_with_the_gateway():
    intake = Intake()
    body = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                         "params": {"name": "inspect_sources", "arguments": {"sourceIds": [0] * 20_000}}})
    try:
        first = await intake.judge.verdict(body)
        process = intake.judge._process
        process.kill()
        await process.wait()
        again = await intake.judge.verdict(body)
        assert first == again and first["problems"][0]["field"] == "sourceIds"
        assert intake.judge._process is not process
    finally:
        await intake.judge.close()
    assert intake.judge._process is None and process.returncode is not None
