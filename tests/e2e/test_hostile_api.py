"""Hostile HTTP input: every refusal in the error envelope, bodies bounded, strict types, labels from closed sets."""

from __future__ import annotations

import secrets
import uuid

import httpx2
import pytest
from mcp.shared.exceptions import MCPError

from services.gateway.limits import MAX_BODY_BYTES
from tests.factories import agent_session, source_item

TEN_MB = 10 * 1024 * 1024


def envelope(response: httpx2.Response) -> dict:
    body = response.json()
    assert set(body) == {"error"}, body
    assert {"code", "message"} <= set(body["error"]), body
    return body["error"]


async def test_a_10_mb_body_is_refused_with_413_in_the_envelope_by_length_and_by_bytes_read(stack):
    async with stack.api("admin") as api:
        declared = await api.post("/api/v1/cases", content=b"{" + b" " * TEN_MB + b"}",
                                  headers={"Content-Type": "application/json"})
        assert declared.status_code == 413
        assert envelope(declared)["code"] == "payload_too_large"
        assert f"larger than {MAX_BODY_BYTES} bytes" in envelope(declared)["message"]

        async def chunks():  # no Content-Length: only the bytes read can tell
            for _ in range(10):
                yield b" " * (1024 * 1024)

        streamed = await api.post("/api/v1/cases", content=chunks(), headers={"Content-Type": "application/json"})
        assert streamed.status_code == 413
        assert envelope(streamed)["code"] == "payload_too_large"


async def test_routing_and_parsing_refusals_answer_in_the_envelope(stack):
    async with stack.api("admin") as api:
        missing = await api.get("/api/v1/no-such-thing")
        assert missing.status_code == 404 and envelope(missing)["code"] == "not_found"
        wrong_method = await api.patch("/api/v1/cases")
        assert wrong_method.status_code == 405 and envelope(wrong_method)["code"] == "method_not_allowed"
        assert set(wrong_method.headers["allow"].replace(" ", "").split(",")) == {"GET", "POST"}
        truncated = await api.post("/api/v1/cases", content=b'{"caseId": "a", "title": "t',
                                   headers={"Content-Type": "application/json"})
        assert truncated.status_code == 400
        error = envelope(truncated)
        assert error["code"] == "malformed_request" and error["field"] == "(body)" and "character" in error["message"]
        form = await api.post("/api/v1/cases", content=b"caseId=a", headers={"Content-Type": "application/json"})
        assert form.status_code == 400 and envelope(form)["code"] == "malformed_request"


async def test_expected_revision_true_or_fractional_is_refused_naming_the_field_and_nothing_is_decided(stack):
    async with agent_session(stack) as agent:
        staged = await agent.stage("stage_sources", sources=[source_item("strict-one")])
        async with stack.api() as api:
            for wrong in (True, "0", 0.5):
                sent = await api.post(f"/api/v1/proposals/{staged['proposalId']}/decisions",
                                      json={"accept": ["strict-one"], "expectedRevision": wrong})
                assert sent.status_code == 422, (wrong, sent.text)
                error = envelope(sent)
                assert error["field"] == "expectedRevision", error
            proposal = (await api.get(f"/api/v1/proposals/{staged['proposalId']}")).json()
        assert proposal["status"] == "pending" and not proposal["decisions"]


async def test_expected_revision_as_a_whole_number_with_a_fraction_part_is_the_integer_as_json_schema_reads_it(
        stack):
    async with agent_session(stack) as agent:
        staged = await agent.stage("stage_sources", sources=[source_item("whole-one")])
        revision = await agent.revision()
        async with stack.api() as api:
            sent = await api.post(f"/api/v1/proposals/{staged['proposalId']}/decisions",
                                  json={"accept": ["whole-one"], "expectedRevision": float(revision)})
            assert sent.status_code == 200, sent.text
            assert sent.json()["accepted"] == ["whole-one"] and sent.json()["revision"] == revision + 1


async def test_a_401_carries_one_correlation_id(stack):
    async with httpx2.AsyncClient(base_url=stack.http_url) as http:
        for path in ("/api/v1/cases", "/mcp"):
            refused = await http.post(path, json={}, headers={"X-Correlation-Id": "hostile-check-1"})
            assert refused.status_code == 401
            assert refused.headers.get_list("x-correlation-id") == ["hostile-check-1"], path


GATEWAY_FAMILIES = ("threadline_http_requests", "threadline_tool_call")


def series(exposition: str) -> set[str]:
    return {line.rsplit(" ", 1)[0] for line in exposition.splitlines() if line and not line.startswith("#")}


async def test_random_paths_methods_and_tool_names_add_no_metric_series(stack):
    async with httpx2.AsyncClient(base_url=stack.http_url, timeout=30) as http, stack.agent() as mcp:
        async def burst(paths: int, methods: int, tools: int) -> None:
            for _ in range(paths):
                await http.get(f"/card-{secrets.token_hex(6)}")
            for _ in range(methods):
                await http.request(f"X{secrets.token_hex(3).upper()}", "/api/v1/cases")
            for _ in range(tools):
                with pytest.raises(MCPError):
                    await mcp.call_tool(f"tool_{secrets.token_hex(4)}", {})

        await burst(1, 1, 1)  # the `other` series, and /metrics' own, exist from here on
        await http.get("/metrics")
        before = series((await http.get("/metrics")).text)
        await burst(2000, 500, 500)
        after = series((await http.get("/metrics")).text)
    # The gateway's own families: background work of other tests may add series of known labels elsewhere.
    added = {s for s in after - before if s.startswith(GATEWAY_FAMILIES)}
    assert not added, sorted(added)[:20]
    assert not any("card-" in s or 'tool="tool_' in s for s in after)


async def test_a_webhook_url_whose_host_no_resolver_can_be_asked_about_is_refused_naming_it(stack):
    async with stack.api("admin") as api:
        for url in ("https://\u00b4\u009c/hook", "https://exa mple.org/hook", "https://"):
            refused = await api.post("/api/v1/webhooks", json={"url": url})
            assert refused.status_code == 422, (url, refused.text)
            assert envelope(refused)["field"] == "url"


async def test_a_query_parameter_the_operation_does_not_take_is_refused_naming_it_on_every_operation(stack):
    """A misspelt `asOf` would otherwise answer the case as it is now, as if it were the case then."""
    async with stack.api("admin") as admin:
        operations = (await admin.get("/api/v1/openapi.json")).json()["paths"]
    assert len(operations) > 20
    for path, methods in operations.items():
        concrete = path.replace("{caseId}", "no-such-case").replace("{proposalId}", str(uuid.uuid4()))
        for method in methods:
            for role in ("admin", "reviewer", "subscriber"):
                async with stack.api(role) as api:
                    sent = await api.request(method.upper(), concrete, params={"notAParameter": "1"})
                if sent.status_code != 403:
                    break
            assert sent.status_code == 422, (method, path, sent.text)
            error = envelope(sent)
            assert error["field"] == "notAParameter", (method, path, error)
            assert error["message"] == "notAParameter: is not a parameter of this route", error


async def test_a_misspelt_query_parameter_is_named_with_the_one_meant_and_a_stranger_learns_nothing_of_them(stack):
    async with stack.api() as api:
        misspelt = await api.get("/api/v1/cases/no-such-case/ledger", params={"asof": "3", "as_of": "3"})
        assert misspelt.status_code == 422, misspelt.text
        problems = envelope(misspelt)["problems"]
        assert [(p["field"], p["hint"]) for p in problems] == [
            ("asof", "did you mean asOf? (names are case-sensitive)"),
            ("as_of", "did you mean asOf? (names are case-sensitive)")]
        listed = await api.get("/api/v1/cases", params={"limit": "5", "sort": "new"})
        assert listed.status_code == 422 and envelope(listed)["hint"] == "this route takes no query parameters"
        paged = await api.get("/api/v1/cases/no-such-case/history", params={"limt": "5"})
        assert envelope(paged)["hint"] == "this route takes before, limit"
    async with stack.api(token="not-a-token") as stranger:
        refused = await stranger.get("/api/v1/cases/no-such-case/ledger", params={"asof": "3"})
    assert refused.status_code == 401 and "asOf" not in refused.text


async def test_a_company_id_that_is_no_uuid_is_told_what_a_company_id_is(stack):
    async with stack.api() as api:
        events = await api.get("/api/v1/events", params={"companyId": "acme", "format": "json"})
    error = events.json()["error"]
    assert events.status_code == 422 and error["field"] == "companyId", error
    assert "GET /api/v1/companies" in error["hint"] and "characters" not in error["hint"], error
