"""Judging a large MCP body in a process of its own (intake.py starts it), so that no call can hold the
gateway's event loop.

Parsing a body of a million values takes a C parser a tenth of a second with the interpreter lock held
throughout (four at once held a gateway's loop for 0.26 s even from worker threads), and checking what it
parsed costs as much again. A body the gateway's intake counts too many values in (intake.py) is therefore
sent here, to `python -m services.gateway.judge`, which parses it as the MCP transport would and, for a
tools/call, checks the arguments against the tool's schema. What comes back is small: hand the body on as
it is, hand on the call without its arguments with the problems found in them, or refuse it outright.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

# A body holding at most this many values costs the transport well under a millisecond to parse: it needs
# no judging. No valid call holds as many (tests/unit/test_mcp_intake.py builds the largest of each tool).
INLINE_VALUES = 8192
# What a call carries beside its arguments (id, name, _meta): a few values; more than this is no call.
ENVELOPE_VALUES = 256
PASS, REPLACE, REFUSE = "pass", "replace", "refuse"
INVALID_REQUEST, PARSE_ERROR, INVALID_PARAMS = -32600, -32700, -32602  # JSON-RPC


def values(node: Any, limit: int) -> int:
    """How many JSON values (object keys counted) the node holds, counting no further than past `limit`."""
    count, stack = 0, [node]
    while stack and count <= limit:
        item = stack.pop()
        count += 1
        if isinstance(item, dict):
            count += len(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return count


def judge(body: bytes) -> dict[str, Any]:
    """What the gateway does with a body: `pass` it on, `replace` it (a call without its arguments, and the
    problems found in them), or `refuse` it with a JSON-RPC error."""
    import orjson
    import pydantic_core

    try:
        message = pydantic_core.from_json(body)
    except ValueError as error:
        return {"outcome": REFUSE, "status": 400, "code": PARSE_ERROR, "message": f"Parse error: {error}"}
    if values(message, INLINE_VALUES) <= INLINE_VALUES:
        return {"outcome": PASS}
    request_id = message.get("id") if isinstance(message, dict) else None
    request_id = request_id if isinstance(request_id, (str, int)) and not isinstance(request_id, bool) else None
    params = message.get("params") if isinstance(message, dict) else None
    if not (isinstance(params, dict) and message.get("method") == "tools/call"):
        return {"outcome": REFUSE, "status": 400, "code": INVALID_REQUEST, "id": request_id,
                "message": f"Invalid request: more than {INLINE_VALUES} values, and not in a tools/call's arguments"}
    arguments = params.get("arguments")
    envelope = {**message, "params": {k: v for k, v in params.items() if k != "arguments"}}
    if values(envelope, ENVELOPE_VALUES) > ENVELOPE_VALUES:
        return {"outcome": REFUSE, "status": 400, "code": INVALID_REQUEST, "id": request_id,
                "message": f"Invalid request: more than {ENVELOPE_VALUES} values outside the tool's arguments"}
    if not isinstance(arguments, dict):
        return {"outcome": REFUSE, "status": 400, "code": INVALID_PARAMS, "id": request_id,
                "message": "Invalid params: arguments must be a JSON object of the tool's arguments"}
    problems = _problems(params.get("name"), arguments)
    if problems is None:  # valid (no valid call is this large, but were one so, it goes on as it came)
        return {"outcome": PASS}
    # The call without its arguments: the handler answers it as any other, with the problems found here
    # (none for a tool that does not exist: the handler says so).
    call = {**envelope, "params": {**envelope["params"], "arguments": {}}}
    return {"outcome": REPLACE, "body": orjson.dumps(call).decode(), "problems": problems}


_WHAT = {str: "a string", list: "an array", bool: "a boolean", int: "a number", float: "a number"}


def misshapen(message: Any) -> dict[str, Any] | None:
    """A small tools/call (intake.py) whose arguments are there but neither an object nor null (an object sent as
    its JSON text, a list): the call without them and the problem, so the agent gets a tool error naming arguments,
    not the transport's bare "Invalid request parameters". None for any other message. (A large one is refused
    above as no call.)"""
    import orjson

    params = message.get("params") if isinstance(message, dict) and message.get("method") == "tools/call" else None
    if not isinstance(params, dict) or params.get("arguments") is None or isinstance(params["arguments"], dict):
        return None
    what = _WHAT.get(type(params["arguments"]), "not an object")
    problem = {"field": "arguments", "message": f"is {what}; a tool's arguments are a JSON object",
               "hint": "send the arguments as a JSON object itself, not the JSON text of one nor a list "
                       "({} when the tool needs none)"}
    call = {**message, "params": {**params, "arguments": {}}}
    return {"outcome": REPLACE, "body": orjson.dumps(call).decode(), "problems": [problem]}


def _problems(name: Any, arguments: dict[str, Any]) -> list[dict[str, str]] | None:
    """Every problem of the arguments (None: they are valid; [] when the tool does not exist)."""
    from shared.spec import ArgumentError, all_tools, validate_arguments

    tool = next((t for t in all_tools() if t.name == name), None)
    if tool is None:
        return []
    try:
        validate_arguments(tool, arguments, fast=False)
    except ArgumentError as error:
        return [problem.to_dict() for problem in error.problems]
    return None


def main() -> None:
    """The judging process: length-prefixed bodies on stdin, length-prefixed verdicts on stdout, until EOF."""
    # What is judged here waits; the gateway's loop, NATS and PostgreSQL do not. (The module imports what
    # judging needs only once this is done: importing it is the process's heaviest work.)
    os.nice(10)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C stops the gateway, which closes our stdin
    import orjson
    source, sink = sys.stdin.buffer, sys.stdout.buffer
    while len(header := source.read(4)) == 4:
        verdict = orjson.dumps(judge(source.read(int.from_bytes(header, "big"))))
        sink.write(len(verdict).to_bytes(4, "big") + verdict)
        sink.flush()


if __name__ == "__main__":
    main()
