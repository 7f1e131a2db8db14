"""The case page's argument map: the graph around the claim the page focuses on (or the case's own view of
it), drawn, with the links its section offers. A focus on a claim the map cannot centre on falls back to
the case's own view and says so, rather than failing the whole page."""

from __future__ import annotations

from typing import Any

from fastapi import Request

from services.gateway.argument_map import CaseGraph, MapLinks, render_svg
from services.gateway.http_api import call
from shared.errors import NotFound
from shared.graph_contracts import CaseGraphRef
from shared.subjects import Command


async def map_context(request: Request, ref: CaseGraphRef, links: MapLinks | None = None) -> dict[str, Any]:
    """What the map section of case.html (case_map.html) reads: the graph, its drawing and links."""
    unfocused = None
    try:
        found = await call(request, Command.CASE_GRAPH, ref)
    except NotFound as error:
        if ref.focus is None or error.field != "focus":
            raise
        unfocused = error
        found = await call(request, Command.CASE_GRAPH, ref.model_copy(update={"focus": None}))
    graph = CaseGraph.model_validate(found)
    links = links or MapLinks(graph.case_id)
    return {"graph": graph, "argument_map": render_svg(graph, links), "map_links": links,
            "map_unfocused": unfocused, "health_of": {n.id: n for n in graph.nodes}}
