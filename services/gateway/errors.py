"""The one map from service errors to what gateway callers see: HTTP JSON errors and MCP tool errors."""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types
from pydantic.alias_generators import to_camel
from pydantic_core import ErrorDetails
from starlette.responses import JSONResponse

from shared import problems
from shared.errors import (
    HTTP_STATUS,
    InvalidArgument,
    MalformedRequest,
    MethodNotAllowed,
    NotFound,
    PayloadTooLarge,
    ThreadlineError,
)


def http_error(error: ThreadlineError, correlation_id: str | None = None) -> JSONResponse:
    headers = {"X-Correlation-Id": correlation_id} if correlation_id else None
    if error.code == "unauthenticated":
        headers = {**(headers or {}), "WWW-Authenticate": 'Bearer realm="threadline"'}
    return JSONResponse({"error": error.to_dict()}, status_code=HTTP_STATUS.get(error.code, 500), headers=headers)


def invalid_argument(errors: list[ErrorDetails] | list[dict[str, Any]]) -> ThreadlineError:
    """A request, or a contract built from it, failed validation: every field at fault with its fix.

    A body that is not JSON at all has no fields to name: it is malformed (400), said with where it broke.
    """
    unreadable = next((e for e in errors if e.get("type") == "json_invalid"), None)
    if unreadable is not None:
        at = next((part for part in unreadable.get("loc", ())[1:] if isinstance(part, int)), None)
        where = f" at character {at}" if at is not None else ""
        return MalformedRequest(f"the body is not valid JSON{where}", field="(body)",
                                hint="send one complete JSON object with Content-Type: application/json")
    return InvalidArgument.of(problems.from_pydantic(errors, camel=to_camel, field_fixes=problems.API_FIELD_FIXES))


def too_large(message: str = "the request body is too large") -> PayloadTooLarge:
    return PayloadTooLarge(message, field="(body)", hint="send less per request: split the items over several calls")


def routing_error(status: int, method: str, path: str, allow: str | None, detail: str = "") -> ThreadlineError:
    """What FastAPI or Starlette refused before any handler ran (no route, wrong method, unreadable body)."""
    if status == 404:
        return NotFound(f"there is nothing at {problems.excerpt(path)}",
                        hint="the API's paths are listed in /api/v1/openapi.json")
    if status == 405:
        return MethodNotAllowed(f"{problems.excerpt(method)} is not allowed here", field="(method)",
                                hint=f"use {allow}" if allow else "see /api/v1/openapi.json")
    if status == 413:
        return too_large(detail or "the request body is too large")
    return MalformedRequest("the request could not be read", field="(body)",
                            hint="send a JSON object with Content-Type: application/json")


def tool_error(error: ThreadlineError) -> types.CallToolResult:
    """A tool error an agent can act on: the text names the code, the field and the fix."""
    parts = [f"Error {error.code}: {error.message}"]
    if error.field:
        parts.append(f"Field: {error.field}")
    if error.hint:
        parts.append(f"Fix: {error.hint}")
    if len(error.problems) > 1:
        parts.append("Every problem of the call:")
        parts += [f"- {p['field']}: {p['message']} (fix: {p['hint']})" for p in error.problems]
    return types.CallToolResult(
        content=[types.TextContent(type="text", text="\n".join(parts))],
        structured_content={"error": error.to_dict()},
        is_error=True,
    )


def tool_result(result: dict[str, Any]) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=json.dumps(result, ensure_ascii=False))],
        structured_content=result,
    )
