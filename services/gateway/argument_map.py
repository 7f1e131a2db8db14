"""The argument map: the graph response's model, its layered layout (grandalf's Sugiyama), and its inline SVG.

The SVG needs no script and no inline style, so it renders under the UI's Content-Security-Policy. Relation
types differ in dash pattern, arrow marker and a text label, never in colour alone; merge groups are drawn
as one cluster; every node links to its record on the case page.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, field
from html import escape
from typing import Literal

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


class CaseGraph(Contract):
    """The argument map of a case: bounded; `cut` says what a case too large to draw whole left out."""

    case_id: str
    revision: int
    nodes: list[GraphNode]
    edges: list[GraphEdge]
    groups: list[GraphGroup]
    health: GraphHealth
    cut: GraphCut | None = None


# --- layout ----------------------------------------------------------------------------------------

NODE_W = 210
LINE_H = 14
WRAP = 34
MAX_LINES = 4
PAD = 10
MARGIN = 24
COMPONENT_GAP = 40
LEGEND_H = 36


@dataclass
class _Box:
    """A node's rectangle once laid out (centre x, y; size w, h)."""

    node: GraphNode
    lines: list[str]
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


def _lines(node: GraphNode) -> list[str]:
    wrapped = textwrap.wrap(node.label, WRAP) or [""]
    if len(wrapped) > MAX_LINES:
        wrapped = wrapped[:MAX_LINES]
        wrapped[-1] = wrapped[-1][: WRAP - 1] + "…"
    return wrapped


def _blocks(graph: CaseGraph) -> tuple[list[_Block], dict[str, _Box], dict[str, _Block]]:
    """Every node in its block: merge groups that share a member form one cluster (union of overlaps)."""
    boxes = {n.id: _Box(n, _lines(n)) for n in graph.nodes}
    for box in boxes.values():
        box.h = (len(box.lines) + 2 + bool(_warning(box.node))) * LINE_H + PAD
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
    verdicts = {id(block_of[n.id]) for n in graph.nodes if n.kind == VERDICT_NODE}
    components = sorted(g.C, key=lambda c: (not any(id(v.data) in verdicts for v in c.sV), -len(c.sV)))
    left = MARGIN
    height = 0.0
    for component in components:
        sugiyama = SugiyamaLayout(component)
        sugiyama.xspace, sugiyama.yspace = 28, 56
        roots = [v for v in component.sV if id(v.data) in verdicts] or None
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


def _href(case_id: str, node: GraphNode) -> str:
    anchor = VERDICT_NODE if node.kind == VERDICT_NODE else f"{node.kind}-{node.id}"
    return f"/ui/cases/{case_id}#{anchor}"


WARNINGS = {"unsupported": "⚠ UNSUPPORTED: sources retired", "weakened": "⚠ WEAKENED: basis lost support"}


def _state(node: GraphNode) -> str:
    if node.kind == "source":
        return f"{node.source_type} · {node.status}" if node.status != "active" else str(node.source_type)
    return f"confidence: {node.confidence}"


def _warning(node: GraphNode) -> str:
    return WARNINGS.get(node.health or "", "")


def _node_svg(case_id: str, box: _Box) -> str:
    n = box.node
    classes = " ".join(["node", n.kind, n.status, n.health or ""]).strip()
    x, y = box.x - box.w / 2, box.y - box.h / 2
    text = [f'<text x="{x + PAD:.1f}" y="{y + LINE_H:.1f}" class="nid">{_attr(n.kind)} {_attr(n.id)}</text>']
    for i, line in enumerate(box.lines, 2):
        text.append(f'<text x="{x + PAD:.1f}" y="{y + i * LINE_H:.1f}">{_attr(line)}</text>')
    text.append(f'<text x="{x + PAD:.1f}" y="{y + (len(box.lines) + 2) * LINE_H:.1f}" class="nstate">'
                f'{_attr(_state(n))}</text>')
    if warning := _warning(n):
        text.append(f'<text x="{x + PAD:.1f}" y="{y + (len(box.lines) + 3) * LINE_H:.1f}" class="nwarn">'
                    f'{_attr(warning)}</text>')
    return (f'<a href="{_attr(_href(case_id, n))}" class="map-node" data-node="{_attr(n.id)}">'
            f'<title>{_attr(n.kind)} {_attr(n.id)}: {_attr(n.label)}</title><g class="{_attr(classes)}">'
            f'<rect x="{x:.1f}" y="{y:.1f}" width="{box.w:.1f}" height="{box.h:.1f}" rx="6"/>{"".join(text)}</g></a>')


def _edge_svg(edge: GraphEdge, points: Sequence[tuple[float, float]]) -> str:
    dash, marker = STYLE[edge.type]
    path = " ".join(f"{'M' if i == 0 else 'L'}{px:.1f},{py:.1f}" for i, (px, py) in enumerate(points))
    drawn = (f'<path d="{path}" class="edge {edge.type}" marker-end="url(#{marker})"'
             + (f' stroke-dasharray="{dash}"' if dash else "") + "/>")
    if edge.type == "cites":
        return f'<g data-edge="{_attr(edge.id)}">{drawn}</g>'
    (ax, ay), (bx, by) = points[len(points) // 2 - 1], points[len(points) // 2]
    label = f'<text x="{(ax + bx) / 2:.1f}" y="{(ay + by) / 2 - 3:.1f}" class="elabel">{_attr(edge.type)}</text>'
    return f'<g data-edge="{_attr(edge.id)}" data-type="{_attr(edge.type)}">{drawn}{label}</g>'


def _cluster_svg(block: _Block) -> str:
    top = min(b.y - b.h / 2 for b in block.boxes) - PAD - LINE_H
    bottom = max(b.y + b.h / 2 for b in block.boxes) + PAD
    x = block.boxes[0].x - block.boxes[0].w / 2 - PAD
    names = ", ".join(f"{g.label} ({g.group_id})" for g in block.groups)
    return (f'<g class="cluster" data-group="{_attr(" ".join(g.group_id for g in block.groups))}">'
            f'<rect x="{x:.1f}" y="{top:.1f}" width="{block.w:.1f}" height="{bottom - top:.1f}" rx="10"/>'
            f'<text x="{x + PAD:.1f}" y="{top + LINE_H:.1f}" class="nid">merge group: {_attr(names)}</text></g>')


def _legend(y: float) -> str:
    parts, x = [], MARGIN
    for kind, (dash, marker) in STYLE.items():
        parts.append(f'<path d="M{x},{y:.1f} L{x + 44},{y:.1f}" class="edge {kind}" marker-end="url(#{marker})"'
                     + (f' stroke-dasharray="{dash}"' if dash else "") + "/>")
        parts.append(f'<text x="{x + 52}" y="{y + 4:.1f}" class="elabel">{kind}</text>')
        x += 150
    return f'<g class="legend">{"".join(parts)}</g>'


def render_svg(graph: CaseGraph) -> Markup:
    """The whole map as one inline `<svg>` (every text escaped)."""
    if not graph.nodes:
        return Markup("")
    boxes, blocks, routes, width, height = layout(graph)
    width = max(width, MARGIN * 2 + 150 * len(STYLE))
    body = [_cluster_svg(b) for b in blocks if b.groups]
    body += [_edge_svg(e, routes[e.id]) for e in graph.edges]
    body += [_node_svg(graph.case_id, box) for box in boxes.values()]
    total = height + LEGEND_H
    return Markup(
        f'<svg xmlns="http://www.w3.org/2000/svg" class="argument-map" viewBox="0 0 {width:.0f} {total:.0f}" '
        f'width="{width:.0f}" height="{total:.0f}" role="img" aria-labelledby="map-title">'
        f'<title id="map-title">Argument map of {_attr(graph.case_id)} at revision {graph.revision}</title>'
        f'{MARKERS}{"".join(body)}{_legend(height + LEGEND_H / 2)}</svg>'
    )
