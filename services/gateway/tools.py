"""The MCP tools the gateway serves: the spec's, verbatim, and which service command answers each."""

from __future__ import annotations

from functools import lru_cache

import mcp_types as types

from shared.kinds import KINDS
from shared.spec import ToolSpec, all_tools
from shared.subjects import Command

# The stage_* tools come from the kinds of staged item, each of which names its tool and command.
COMMAND_OF_TOOL: dict[str, Command] = {
    "get_workspace": Command.GET_WORKSPACE,
    "inspect_sources": Command.INSPECT_SOURCES,
    **{kind.tool: kind.command for kind in KINDS.values()},
    "set_focus": Command.SET_FOCUS,
    "propose_claim_delta_from_source": Command.PROPOSE_CLAIM_DELTA,
    "get_company_context": Command.GET_COMPANY_CONTEXT,
    "search_workspace": Command.SEARCH_WORKSPACE,
    "inspect_claims": Command.INSPECT_CLAIMS,
}


@lru_cache(maxsize=1)
def served_tools() -> dict[str, ToolSpec]:
    return {tool.name: tool for tool in all_tools()}


def mcp_tool(spec: ToolSpec) -> types.Tool:
    annotations = types.ToolAnnotations(
        read_only_hint=spec.read_only,
        destructive_hint=False if not spec.read_only else None,
        idempotent_hint=spec.idempotent,
        open_world_hint=False,
    )
    meta = {"threadline/family": spec.family, "threadline/kind": spec.kind}
    if spec.notes:
        meta["threadline/registryNotes"] = spec.notes
    return types.Tool(
        name=spec.name,
        title=spec.title,
        description=spec.description,
        input_schema=spec.input_schema,
        annotations=annotations,
        meta=meta,
    )


@lru_cache(maxsize=1)
def mcp_tools() -> list[types.Tool]:
    return [mcp_tool(spec) for spec in served_tools().values()]
