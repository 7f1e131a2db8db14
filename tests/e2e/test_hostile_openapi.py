"""The OpenAPI document tells the truth: schemathesis finds no answer outside it and no 5xx (a bounded run)."""

from __future__ import annotations

import asyncio
import re
import sys
from pathlib import Path

import httpx2
import pytest

from tests.support import Stack, new_deployment, remove_deployment

SCHEMATHESIS = Path(sys.executable).parent / "schemathesis"
CHECKS = ("not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance,"
          "response_headers_conformance")
DOCUMENTED_ERRORS = {"401", "403", "404", "409", "413", "422", "503"}


async def test_every_operation_has_a_bearer_scheme_a_response_model_and_the_documented_errors(stack):
    async with httpx2.AsyncClient(base_url=stack.http_url) as http:
        document = (await http.get("/api/v1/openapi.json")).json()
    assert document["components"]["securitySchemes"]["HTTPBearer"] == document["components"]["securitySchemes"][
        "HTTPBearer"] | {"type": "http", "scheme": "bearer"}
    operations = [(path, method, op) for path, item in document["paths"].items() for method, op in item.items()]
    assert len(operations) >= 23
    for path, method, operation in operations:
        where = f"{method.upper()} {path}"
        assert operation.get("security") == [{"HTTPBearer": []}], where
        assert DOCUMENTED_ERRORS <= set(operation["responses"]), where
        assert operation["responses"]["422"]["content"]["application/json"]["schema"] == {
            "$ref": "#/components/schemas/ErrorEnvelope"}, where
        success = next(operation["responses"][s] for s in ("200", "201") if s in operation["responses"])
        assert success["content"]["application/json"]["schema"] != {}, where  # a model, not `Any`


@pytest.mark.slow
async def test_schemathesis_finds_no_undocumented_answer_and_no_server_error(servers, tmp_path):
    # A deployment of its own: the run creates cases, tokens and assignments no other test should meet.
    settings = await new_deployment(servers)
    fuzzed = await Stack(settings).start()
    try:
        run = await asyncio.create_subprocess_exec(
            str(SCHEMATHESIS), "run", f"{fuzzed.http_url}/api/v1/openapi.json",
            "--checks", CHECKS, "--phases", "examples,coverage,fuzzing", "--max-examples", "5", "--seed", "16",
            "--exclude-path", "/api/v1/events",  # a stream that never ends by itself
            # Registering makes the webhooks service look up (and later call) the fuzzed hosts: loopback only here.
            "--exclude-operation-id", "register_webhook_api_v1_webhooks_post",
            "--header", f"Authorization: Bearer {fuzzed.tokens['admin']}", "--request-timeout", "10",
            "--workers", "1", "--no-shrink", "--warnings", "off",
            cwd=tmp_path, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        )
        output, _ = await asyncio.wait_for(run.communicate(), timeout=240)
    finally:
        await fuzzed.stop()
        await remove_deployment(servers, settings)
    report = output.decode(errors="replace")
    assert run.returncode == 0, report[-6000:]
    selected = re.search(r"(\d+) selected / (\d+) total", report)
    assert selected, report[-3000:]
    # Every operation ran but the two excluded (the event stream, registering a webhook), and cases were generated.
    assert int(selected[1]) == int(selected[2]) - 2 and " generated, " in report, report[-3000:]
