"""The one map from service errors to what gateway callers see: HTTP JSON errors and MCP tool errors."""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types
from pydantic.alias_generators import to_camel
from pydantic_core import ErrorDetails
from starlette.responses import JSONResponse

from shared.contracts import SLUG_PATTERN
from shared.errors import HTTP_STATUS, InvalidArgument, ThreadlineError
from shared.messaging import contract_hint, field_path

# Where a value arrived, in FastAPI's error locations: not part of the field's name.
_LOCATIONS = ("path", "query", "body", "header", "cookie", "form")


def http_error(error: ThreadlineError, correlation_id: str | None = None) -> JSONResponse:
    headers = {"X-Correlation-Id": correlation_id} if correlation_id else None
    if error.code == "unauthenticated":
        headers = {**(headers or {}), "WWW-Authenticate": 'Bearer realm="threadline"'}
    return JSONResponse({"error": error.to_dict()}, status_code=HTTP_STATUS.get(error.code, 500), headers=headers)


def invalid_argument(errors: list[ErrorDetails] | list[dict[str, Any]]) -> InvalidArgument:
    """A request or a contract built from it failed validation: name the first field at fault and its fix."""
    first = errors[0]
    loc = list(first.get("loc", ()))
    if loc and loc[0] in _LOCATIONS:
        loc = loc[1:]
    where = field_path([to_camel(p) if isinstance(p, str) else p for p in loc])
    return InvalidArgument(f"{where}: {first['msg']}", field=where, hint=_fix(first, where))


# Fixes worth more than the generic ones, for fields whose right value is found elsewhere.
_FIELD_FIXES = {
    "expectedRevision": "send the case revision you reviewed (a whole number): caseRevision of "
                        "GET /api/v1/proposals/{proposalId}",
}


def _fix(error: ErrorDetails | dict[str, Any], where: str) -> str:
    ctx = error.get("ctx") or {}
    kind = error.get("type", "")
    if ctx.get("hint"):
        return str(ctx["hint"])
    if where in _FIELD_FIXES:
        return _FIELD_FIXES[where]
    if kind == "string_pattern_mismatch" and ctx.get("pattern") == SLUG_PATTERN:
        return "use a slug: lowercase letters, digits and hyphens, starting with a letter (at most 96 characters)"
    return contract_hint(kind, ctx)


def tool_error(error: ThreadlineError) -> types.CallToolResult:
    """A tool error an agent can act on: the text names the code, the field and the fix."""
    parts = [f"Error {error.code}: {error.message}"]
    if error.field:
        parts.append(f"Field: {error.field}")
    if error.hint:
        parts.append(f"Fix: {error.hint}")
    problems = error.details.get("problems") if error.details else None
    if problems and len(problems) > 1:
        parts.append("All problems: " + "; ".join(f"{p['field']}: {p['message']}" for p in problems))
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
