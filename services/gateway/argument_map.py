"""The argument map: the graph response's model, its layered layout (grandalf's Sugiyama), and its inline SVG.

The SVG is drawn at its natural size (text 12 px and up, never shrunk to fit), needs no script and no inline
style, so it renders under the UI's Content-Security-Policy as a plain scrollable drawing; static/argument-map.js
adds pan and zoom. Relation types differ in dash pattern, arrow marker and a text label, never in colour alone;
merge groups are drawn as one cluster; every claim links to its focus view, every node to its row on the page.
The layout and the drawing are functions of the graph alone, whatever revision or source it was read from.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, field
from html import escape
from typing import Literal
from urllib.parse import urlencode

from grandalf.graphs import Edge, Graph, Vertex
from grandalf.layouts import SugiyamaLayout
from markupsafe import Markup
from pydantic import Field

from shared.contracts import Contract

# --- the response ----------------------------------------------------------------------------------


class LostRef(Contract):
    record: Literal["source", "claim", "relation"]
    id: str


VERDICT_NODE = "verdict"  # the map's node kinds are source, claim and verdict (not the staged item kinds)


class NodeGrounding(Contract):
    grounding: Literal["primary", "secondary", "social-only", "none"]
    independent_origins: int


class NodeResolution(Contract):
    outcome: Literal["true", "false", "void"]
    resolved_on: str
    source_id: str


class GraphNode(Contract):
    id: str
    kind: Literal["source", "claim", "verdict"]
    label: str = Field(description="A claim's text or a source's title (long ones cut).")
    status: str = Field(description="`active`, or `retired` for a cited source that was retired.")
    confidence: str | None = Field(description="A claim's confidence; null for sources.")
    health: Literal["supported", "unsupported", "weakened"] | None = Field(
        description="Evidence health of a claim or the verdict; null for sources.")
    lost: list[LostRef] = Field(default=[], description="What a re-rated claim or verdict lost (bounded).")
    publisher: str | None = None
    source_type: str | None = None
    relations_omitted: int = Field(default=0, description="A claim's relations to claims the map does not draw.")
    grounding: NodeGrounding | None = Field(default=None, description="A claim's grounding from its active sources.")
    resolution: NodeResolution | None = Field(default=None, description="A resolved prediction's latest outcome.")


class GraphEdge(Contract):
    id: str
    source: str = Field(description="The claim the relation runs from, or the citing claim.")
    target: str = Field(description="The claim it runs to, or the cited source.")
    type: Literal["supports", "contradicts", "qualifies", "amplifies", "cites"]
    verdict_basis: bool = False


class GraphGroup(Contract):
    group_id: str
    label: str
    members: list[str]
    members_omitted: int = 0


class GraphHealth(Contract):
    unsupported: list[str] = Field(description="Claims none of whose cited sources is active any more.")
    weakened: list[str] = Field(description="The verdict, when a basis lost its support.")


class GraphCut(Contract):
    nodes_total: int
    nodes_omitted: int
    edges_total: int
    edges_omitted: int
    note: str


class GraphFocus(Contract):
    """The centre of a neighbourhood map: the claims it is drawn around and why those."""

    claim_ids: list[str]
    hops: int = Field(description="The map holds the claims this many relations away from the centre.")
    reason: Literal["requested", "verdict", "most_connected"] = Field(
        description="`requested` (focus=), else the verdict or the most connected claims of a case too large "
                    "to draw whole.")


class CaseGraph(Contract):
    """The argument map of a case: bounded; `focus` says what a neighbourhood map is centred on, `cut` what a
    focus view or a case too large to draw whole left out."""

    case_id: str
    revision: int
    focus: GraphFocus | None = None
    nodes: list[GraphNode]
    edges: list[GraphEdge]
    groups: list[GraphGroup]
    health: GraphHealth
    cut: GraphCut | None = None


# --- layout ----------------------------------------------------------------------------------------

NODE_W = 232
LINE_H = 18  # one line of text: labels at 13 px, the lines around them at 12 px (static/ui.css)
WRAP = 29  # label characters a line holds at 13 px in a box NODE_W wide
MONO = 28  # characters a monospaced 12 px line holds in the same box
CHAR_W = 7.4  # the width of one such monospaced character
MAX_LINES = 4
PAD = 10
MARGIN = 16
COMPONENT_GAP = 48
LEGEND_H = 40
LEGEND_STEP = 160


@dataclass
class _Box:
    """A node's rectangle once laid out (centre x, y; size w, h)."""

    node: GraphNode
    lines: list[str]
    facts: list[tuple[str, str]]
    w: float = NODE_W
    h: float = 0.0
    x: float = 0.0
    y: float = 0.0


@dataclass
class _Block:
    """What the layout places: one node, or a merge group's members stacked in one cluster."""

    boxes: list[_Box]
    groups: list[GraphGroup] = field(default_factory=list)

    # A cluster's members sit side by side, so an edge leaving one member never runs through another.
    @property
    def w(self) -> float:
        inner = sum(b.w for b in self.boxes) + PAD * (len(self.boxes) - 1)
        return inner + (2 * PAD if self.groups else 0)

    @property
    def h(self) -> float:
        return max(b.h for b in self.boxes) + (2 * PAD + LINE_H if self.groups else 0)


class _View:
    def __init__(self, w: float, h: float) -> None:
        self.w, self.h, self.xy = w, h, (0.0, 0.0)
        self.points: list[tuple[float, float]] = []

    def setpath(self, points: list[tuple[float, float]]) -> None:
        self.points = points


def _fit(text: str, chars: int) -> str:
    return text if len(text) <= chars else text[: chars - 1].rstrip() + "…"


def _lines(node: GraphNode) -> list[str]:
    """The label in lines of at most WRAP characters; a long one cut after MAX_LINES (the full text is in the
    node's title, shown on hover and focus, and in its row)."""
    return textwrap.wrap(node.label, WRAP, max_lines=MAX_LINES, placeholder=" …") or [""]


def _blocks(graph: CaseGraph) -> tuple[list[_Block], dict[str, _Box], dict[str, _Block]]:
    """Every node in its block: merge groups that share a member form one cluster (union of overlaps)."""
    boxes = {n.id: _Box(n, _lines(n), facts(n)) for n in graph.nodes}
    for box in boxes.values():
        box.h = (1 + len(box.lines) + len(box.facts)) * LINE_H + PAD
    parent: dict[str, str] = {}

    def root(x: str) -> str:
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x

    for group in graph.groups:
        members = [m for m in group.members if m in boxes]
        for other in members[1:]:
            parent[root(other)] = root(members[0])
    clusters: dict[str, tuple[list[str], list[GraphGroup]]] = {}
    for group in graph.groups:
        members = [m for m in group.members if m in boxes]
        if members:
            cluster = clusters.setdefault(root(members[0]), ([], []))
            cluster[0].extend(m for m in members if m not in cluster[0])
            cluster[1].append(group)
    block_of: dict[str, _Block] = {}
    blocks: list[_Block] = []
    for members, groups in clusters.values():
        if members:
            block = _Block([boxes[m] for m in members], groups)
            blocks.append(block)
            block_of.update({m: block for m in members})
    for node_id, box in boxes.items():
        if node_id not in block_of:
            block_of[node_id] = _Block([box])
            blocks.append(block_of[node_id])
    return blocks, boxes, block_of


def layout(graph: CaseGraph) -> tuple[dict[str, _Box], list[_Block], dict[str, list[tuple[float, float]]], float, float]:
    """Lay the map out in layers, the verdict on top: claims below what they support, sources at the foot."""
    blocks, boxes, block_of = _blocks(graph)
    vertices = {id(b): Vertex(b) for b in blocks}
    for block in blocks:
        vertices[id(block)].view = _View(block.w, block.h)
    layout_edges: dict[tuple[int, int], Edge] = {}
    for e in graph.edges:
        # Layers run downward from the verdict: a relation's target above its source, a claim above its sources.
        upper, lower = (block_of[e.target], block_of[e.source]) if e.type != "cites" else (
            block_of[e.source], block_of[e.target])
        key = (id(upper), id(lower))
        if upper is not lower and key not in layout_edges:
            layout_edges[key] = Edge(vertices[key[0]], vertices[key[1]])
            layout_edges[key].view = _View(0, 0)
    g = Graph(list(vertices.values()), list(layout_edges.values()))
    tops = {n.id for n in graph.nodes if n.kind == VERDICT_NODE} or set(graph.focus.claim_ids if graph.focus else ())
    roots_of = {id(block_of[n]) for n in tops if n in block_of}
    components = sorted(g.C, key=lambda c: (not any(id(v.data) in roots_of for v in c.sV), -len(c.sV)))
    left = MARGIN
    height = 0.0
    for component in components:
        sugiyama = SugiyamaLayout(component)
        sugiyama.xspace, sugiyama.yspace = 24, 64
        sugiyama.dw, sugiyama.dh = 8, 8  # a long edge passes through a layer as a narrow gap, not a box
        roots = [v for v in component.sV if id(v.data) in roots_of and not v.e_in()] or None
        sugiyama.init_all(roots=roots)
        sugiyama.draw()
        placed = list(component.sV)
        x0 = min(v.view.xy[0] - v.view.w / 2 for v in placed)
        y0 = min(v.view.xy[1] - v.view.h / 2 for v in placed)
        dx, dy = left - x0, MARGIN - y0
        for v in placed:
            v.view.xy = (v.view.xy[0] + dx, v.view.xy[1] + dy)
        for e in component.sE:
            e.view.points = [(px + dx, py + dy) for px, py in e.view.points]
        left = max(v.view.xy[0] + v.view.w / 2 for v in placed) + COMPONENT_GAP
        height = max(height, max(v.view.xy[1] + v.view.h / 2 for v in placed))
    for vertex in vertices.values():
        _place(vertex.data, vertex.view.xy)
    routes = {}
    for e in graph.edges:
        upper, lower = (block_of[e.target], block_of[e.source]) if e.type != "cites" else (
            block_of[e.source], block_of[e.target])
        routed = layout_edges.get((id(upper), id(lower)))
        middle = routed.view.points[1:-1] if routed is not None else []
        start, end = boxes[e.source], boxes[e.target]
        if e.type != "cites":
            middle = middle[::-1]  # drawn from the source claim to the claim it bears on
        routes[e.id] = _clipped([(start.x, start.y), *middle, (end.x, end.y)], start, end)
    return boxes, blocks, routes, left - COMPONENT_GAP + MARGIN, height + MARGIN


def _place(block: _Block, centre: tuple[float, float]) -> None:
    top = centre[1] - block.h / 2 + (PAD + LINE_H if block.groups else 0)
    left = centre[0] - block.w / 2 + (PAD if block.groups else 0)
    for box in block.boxes:
        box.x, box.y = left + box.w / 2, top + box.h / 2
        left += box.w + PAD


def _border(box: _Box, toward: tuple[float, float]) -> tuple[float, float]:
    dx, dy = toward[0] - box.x, toward[1] - box.y
    if dx == 0 and dy == 0:
        return box.x, box.y
    t = min(box.w / 2 / abs(dx) if dx else float("inf"), box.h / 2 / abs(dy) if dy else float("inf"))
    return box.x + dx * t, box.y + dy * t


def _clipped(points: list[tuple[float, float]], start: _Box, end: _Box) -> list[tuple[float, float]]:
    """The path from box border to box border (so the arrow marker sits on the target's edge)."""
    return [_border(start, points[1]), *points[1:-1], _border(end, points[-2])]


# --- SVG -------------------------------------------------------------------------------------------

STYLE = {  # dash pattern and marker per edge type: distinguishable without colour
    "supports": ("", "m-supports"),
    "contradicts": ("9 5", "m-contradicts"),
    "qualifies": ("2 4", "m-qualifies"),
    "amplifies": ("12 3 2 3", "m-amplifies"),
    "cites": ("1 3", "m-cites"),
}
MARKERS = """<defs>
<marker id="m-supports" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="9" markerHeight="9" orient="auto"><path d="M0,0 L10,5 L0,10 z" class="mk"/></marker>
<marker id="m-contradicts" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="10" markerHeight="10" orient="auto"><path d="M8,0 L8,10 M0,1 L6,9 M0,9 L6,1" class="mk-line"/></marker>
<marker id="m-qualifies" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="9" markerHeight="9" orient="auto"><path d="M0,5 L5,0 L10,5 L5,10 z" class="mk-open"/></marker>
<marker id="m-amplifies" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="9" markerHeight="9" orient="auto"><path d="M0,0 L5,5 L0,10 M5,0 L10,5 L5,10" class="mk-line"/></marker>
<marker id="m-cites" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto"><path d="M0,0 L10,5 L0,10" class="mk-line"/></marker>
</defs>"""


def _attr(value: object) -> str:
    return escape(str(value), quote=True)


@dataclass(frozen=True)
class MapLinks:
    """Where the map's links lead: a claim's focus view, and a record's row on the page the map is on. `keep`
    holds the page's other query parameters, which every focus link carries on (an as-of view its revision)."""

    case_id: str
    keep: tuple[tuple[str, str], ...] = ()

    def focus(self, claim_id: str | None = None) -> str:
        query = urlencode([*self.keep, *([("focus", claim_id)] if claim_id else [])])
        return f"/ui/cases/{self.case_id}{'?' if query else ''}{query}#argument-map"

    @staticmethod
    def row(node: GraphNode) -> str:
        return "#" + (VERDICT_NODE if node.kind == VERDICT_NODE else f"{node.kind}-{node.id}")


WARNINGS = {"unsupported": "⚠ UNSUPPORTED: sources retired", "weakened": "⚠ WEAKENED: basis lost support"}


def _state(node: GraphNode) -> str:
    if node.kind == "source":
        return f"{node.source_type} · {node.status}" if node.status != "active" else str(node.source_type)
    return f"confidence: {node.confidence}"


def facts(node: GraphNode) -> list[tuple[str, str]]:
    """The lines under a node's label, each (class, text): its state, a re-rating, the relations not drawn.
    Whatever else a node comes to carry (grounding, a prediction's outcome) is one more line here."""
    lines = [("nstate", _state(node))]
    if warning := WARNINGS.get(node.health or ""):
        lines.append(("nwarn", warning))
    if node.grounding is not None:
        origins = node.grounding.independent_origins
        lines.append(("nground", f"[{node.grounding.grounding}] {origins} origin{'' if origins == 1 else 's'}"))
    if node.resolution is not None:
        lines.append(("nresolved", f"resolved {node.resolution.outcome.upper()} · {node.resolution.resolved_on}"))
    if node.relations_omitted:
        lines.append(("nmore", f"+{node.relations_omitted} relation{'s' if node.relations_omitted > 1 else ''}"
                               " not drawn"))
    return lines


def _node_svg(box: _Box, links: MapLinks, centre: bool) -> str:
    n = box.node
    classes = " ".join([k for k in ("node", n.kind, n.status, n.health or "", "centre" if centre else "") if k])
    x, y = box.x - box.w / 2, box.y - box.h / 2
    header = _fit(f"{'◎ ' if centre else ''}{n.kind} {n.id}", MONO)
    text = [f'<text x="{x + PAD:.1f}" y="{y + LINE_H:.1f}" class="nid">{_attr(header)}</text>']
    for i, line in enumerate(box.lines, 2):
        text.append(f'<text x="{x + PAD:.1f}" y="{y + i * LINE_H:.1f}" class="nlabel">{_attr(line)}</text>')
    for i, (kind, line) in enumerate(box.facts, len(box.lines) + 2):
        text.append(f'<text x="{x + PAD:.1f}" y="{y + i * LINE_H:.1f}" class="{kind}">{_attr(line)}</text>')
    ring = (f'<rect x="{x - 5:.1f}" y="{y - 5:.1f}" width="{box.w + 10:.1f}" height="{box.h + 10:.1f}" rx="10" '
            f'class="ring"/>') if centre else ""
    own = links.row(n) if n.kind == "source" else links.focus(n.id)
    drawn = (f'<a href="{_attr(own)}" class="map-node" data-node="{_attr(n.id)}" data-kind="{_attr(n.kind)}">'
             f'<title>{_attr(n.kind)} {_attr(n.id)}: {_attr(n.label)}</title><g class="{_attr(classes)}">{ring}'
             f'<rect x="{x:.1f}" y="{y:.1f}" width="{box.w:.1f}" height="{box.h:.1f}" rx="6"/>{"".join(text)}</g></a>')
    if n.kind == "source":
        return drawn
    # A claim's box opens its focus view; this link beside it leads to its row (the full text, its sources).
    return (f'{drawn}<a href="{_attr(links.row(n))}" class="map-row" data-row="{_attr(n.id)}">'
            f'<title>{_attr(n.kind)} {_attr(n.id)} on this page</title><text x="{x + box.w - PAD:.1f}" '
            f'y="{y + (len(box.lines) + 2) * LINE_H:.1f}" text-anchor="end">row ↓</text></a>')


def _edge_svg(edge: GraphEdge, points: Sequence[tuple[float, float]]) -> str:
    dash, marker = STYLE[edge.type]
    path = " ".join(f"{'M' if i == 0 else 'L'}{px:.1f},{py:.1f}" for i, (px, py) in enumerate(points))
    drawn = (f'<path d="{path}" class="edge {edge.type}" marker-end="url(#{marker})"'
             + (f' stroke-dasharray="{dash}"' if dash else "") + "/>")
    said = f"<title>{_attr(edge.source)} {_attr(edge.type)} {_attr(edge.target)}</title>"
    if edge.type == "cites":
        return f'<g data-edge="{_attr(edge.id)}">{said}{drawn}</g>'
    (ax, ay), (bx, by) = points[len(points) // 2 - 1], points[len(points) // 2]
    label = f'<text x="{(ax + bx) / 2:.1f}" y="{(ay + by) / 2 - 4:.1f}" class="elabel">{_attr(edge.type)}</text>'
    return f'<g data-edge="{_attr(edge.id)}" data-type="{_attr(edge.type)}">{said}{drawn}{label}</g>'


def _cluster_svg(block: _Block) -> str:
    top = min(b.y - b.h / 2 for b in block.boxes) - PAD - LINE_H
    bottom = max(b.y + b.h / 2 for b in block.boxes) + PAD
    x = block.boxes[0].x - block.boxes[0].w / 2 - PAD
    names = ", ".join(f"{g.label} ({g.group_id})" for g in block.groups)
    title = _fit(f"merge group: {names}", int((block.w - 2 * PAD) / CHAR_W))
    omitted = sum(g.members_omitted for g in block.groups)
    beyond = f" ({omitted} more member{'s' if omitted > 1 else ''} not drawn)" if omitted else ""
    return (f'<g class="cluster" data-group="{_attr(" ".join(g.group_id for g in block.groups))}">'
            f'<title>merge group: {_attr(names)}{beyond}</title>'
            f'<rect x="{x:.1f}" y="{top:.1f}" width="{block.w:.1f}" height="{bottom - top:.1f}" rx="10"/>'
            f'<text x="{x + PAD:.1f}" y="{top + LINE_H:.1f}" class="nid">{_attr(title)}</text></g>')


def _legend(y: float) -> str:
    parts, x = [], MARGIN
    for kind, (dash, marker) in STYLE.items():
        parts.append(f'<path d="M{x},{y:.1f} L{x + 44},{y:.1f}" class="edge {kind}" marker-end="url(#{marker})"'
                     + (f' stroke-dasharray="{dash}"' if dash else "") + "/>")
        parts.append(f'<text x="{x + 52}" y="{y + 4:.1f}" class="elabel">{kind}</text>')
        x += LEGEND_STEP
    return f'<g class="legend">{"".join(parts)}</g>'


def render_svg(graph: CaseGraph, links: MapLinks | None = None) -> Markup:
    """The whole map as one inline `<svg>` at its natural size (every text escaped)."""
    if not graph.nodes:
        return Markup("")
    links = links or MapLinks(graph.case_id)
    centre = set(graph.focus.claim_ids) if graph.focus else set()
    boxes, blocks, routes, width, height = layout(graph)
    width = max(width, MARGIN * 2 + LEGEND_STEP * len(STYLE))
    body = [_cluster_svg(b) for b in blocks if b.groups]
    body += [_edge_svg(e, routes[e.id]) for e in graph.edges]
    body += [_node_svg(box, links, box.node.id in centre) for box in boxes.values()]
    total = height + LEGEND_H
    return Markup(
        f'<svg xmlns="http://www.w3.org/2000/svg" class="argument-map" viewBox="0 0 {width:.0f} {total:.0f}" '
        f'width="{width:.0f}" height="{total:.0f}" role="img" aria-labelledby="map-title" '
        f'data-centre="{_attr(" ".join(sorted(centre)))}">'
        f'<title id="map-title">Argument map of {_attr(graph.case_id)} at revision {graph.revision}</title>'
        f'{MARKERS}{"".join(body)}{_legend(height + LEGEND_H / 2)}</svg>'
    )
