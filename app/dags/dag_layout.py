"""Where to draw a DAG: a layered (Sugiyama-style) layout, pure and deterministic.

Steps flow top to bottom: each node sits on the layer after its deepest upstream
(longest-path layering), an edge that spans several layers bends through invisible points
on the layers between, a few barycentre sweeps order each layer to cut crossings, and
every layer is centred. The result is plain numbers that a template turns into SVG
(`templates/shared/_dag.html`).

    picture = layout(["extract", "load"], [("extract", "load")])
    picture.width, picture.height, picture.nodes[0].x, picture.edges[0].path

The same input always gives the same picture: ties keep the order the nodes were given in.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

NODE_WIDTH = 168
NODE_HEIGHT = 44
NODE_GAP = 24  # between neighbours on one layer
LAYER_GAP = 48  # between layers: room for the arrows
MARGIN = 12
BEND_WIDTH = 8  # an edge passing through a layer takes this much of it
SWEEPS = 4  # barycentre passes (down, up, down, up)
# Long edges bend through one point per layer they cross; past this many points in all
# (a dense DAG of thousands of steps) they are drawn straight instead, to stay fast.
MAX_BENDS = 20_000


class LayoutError(ValueError):
    """The edges do not form a DAG over the nodes (unknown node, or a cycle)."""


@dataclass(frozen=True, slots=True)
class NodeBox:
    name: str
    layer: int
    x: float  # top-left corner
    y: float
    width: float
    height: float

    @property
    def cx(self) -> float:
        return self.x + self.width / 2

    @property
    def cy(self) -> float:
        return self.y + self.height / 2


@dataclass(frozen=True, slots=True)
class EdgePath:
    upstream: str
    downstream: str
    points: tuple[tuple[float, float], ...]  # from upstream's bottom to downstream's top
    path: str  # SVG path data: smooth curves through the points


@dataclass(frozen=True, slots=True)
class Layout:
    nodes: tuple[NodeBox, ...]
    edges: tuple[EdgePath, ...]
    width: float
    height: float
    layers: int

    def upstreams(self) -> dict[str, list[str]]:
        """Each node's upstream names, in edge order (the picture's text alternative)."""
        result: dict[str, list[str]] = {n.name: [] for n in self.nodes}
        for edge in self.edges:
            result[edge.downstream].append(edge.upstream)
        return result


def layout(nodes: Sequence[str], edges: Sequence[tuple[str, str]]) -> Layout:
    """Boxes for `nodes` and curves for `edges` (upstream, downstream); LayoutError when
    an edge names an unknown node or the edges make a cycle."""
    names = list(dict.fromkeys(nodes))
    index = {name: i for i, name in enumerate(names)}
    pairs = list(dict.fromkeys((u, d) for u, d in edges))
    for up, down in pairs:
        for name in (up, down):
            if name not in index:
                raise LayoutError(f"edge {up!r} -> {down!r} names an unknown step {name!r}")
    layer_of = _layers(names, index, [(index[u], index[d]) for u, d in pairs])
    return _place(names, layer_of, [(index[u], index[d]) for u, d in pairs])


def _layers(names: list[str], index: dict[str, int], pairs: list[tuple[int, int]]) -> list[int]:
    """Longest-path layering in topological order (Kahn); a cycle leaves nodes unvisited."""
    downstream: list[list[int]] = [[] for _ in names]
    waiting = [0] * len(names)
    for up, down in pairs:
        downstream[up].append(down)
        waiting[down] += 1
    layer = [0] * len(names)
    ready = [i for i in range(len(names)) if waiting[i] == 0]
    seen = 0
    while seen < len(ready):
        node = ready[seen]
        seen += 1
        for down in downstream[node]:
            layer[down] = max(layer[down], layer[node] + 1)
            waiting[down] -= 1
            if waiting[down] == 0:
                ready.append(down)
    if seen < len(names):
        stuck = next(names[i] for i in range(len(names)) if waiting[i])
        raise LayoutError(f"the steps form a cycle (through {stuck!r})")
    return layer


def _place(names: list[str], layer_of: list[int], pairs: list[tuple[int, int]]) -> Layout:
    count = len(names)
    depth = max(layer_of, default=-1) + 1
    # Chains of points: real nodes are 0..count-1, bends of long edges come after.
    chains: list[list[int]] = []
    point_layer = list(layer_of)
    bends = sum(layer_of[d] - layer_of[u] - 1 for u, d in pairs)
    for up, down in pairs:
        chain = [up]
        if bends <= MAX_BENDS:
            for step in range(layer_of[up] + 1, layer_of[down]):
                chain.append(len(point_layer))
                point_layer.append(step)
        chain.append(down)
        chains.append(chain)
    rows: list[list[int]] = [[] for _ in range(depth)]
    for point, row in enumerate(point_layer):
        rows[row].append(point)
    above: list[list[int]] = [[] for _ in point_layer]
    below: list[list[int]] = [[] for _ in point_layer]
    for chain in chains:
        for a, b in itertools.pairwise(chain):
            below[a].append(b)
            above[b].append(a)
    _order(rows, above, below, len(point_layer))
    return _coordinates(names, rows, chains, pairs, count, depth)


def _order(
    rows: list[list[int]], above: list[list[int]], below: list[list[int]], points: int
) -> None:
    """Barycentre sweeps: sort each layer by the mean position of its neighbours on the
    layer just swept; points without such neighbours keep their place."""
    position = [0.0] * points
    for row in rows:
        for i, point in enumerate(row):
            position[point] = i
    for sweep in range(SWEEPS):
        downward = sweep % 2 == 0
        sequence = rows[1:] if downward else rows[-2::-1]
        for row in sequence:
            keys: list[tuple[float, int]] = []
            for i, point in enumerate(row):
                neighbours = above[point] if downward else below[point]
                centre = sum(position[n] for n in neighbours) / len(neighbours) if neighbours else i
                keys.append((centre, i))
            order = sorted(range(len(row)), key=keys.__getitem__)
            row[:] = [row[i] for i in order]
            for i, point in enumerate(row):
                position[point] = i


def _coordinates(
    names: list[str],
    rows: list[list[int]],
    chains: list[list[int]],
    pairs: list[tuple[int, int]],
    count: int,
    depth: int,
) -> Layout:
    def width_of(point: int) -> float:
        return NODE_WIDTH if point < count else BEND_WIDTH

    row_widths = [sum(width_of(p) for p in row) + NODE_GAP * max(len(row) - 1, 0) for row in rows]
    inner = max(row_widths, default=0.0)
    centre_x: dict[int, float] = {}
    top_y = [float(MARGIN + r * (NODE_HEIGHT + LAYER_GAP)) for r in range(depth)]
    for r, row in enumerate(rows):
        x = MARGIN + (inner - row_widths[r]) / 2
        for point in row:
            centre_x[point] = x + width_of(point) / 2
            x += width_of(point) + NODE_GAP
    layer_of_point = {p: r for r, row in enumerate(rows) for p in row}
    boxes = tuple(
        NodeBox(
            name=names[i],
            layer=layer_of_point[i],
            x=centre_x[i] - NODE_WIDTH / 2,
            y=top_y[layer_of_point[i]],
            width=NODE_WIDTH,
            height=NODE_HEIGHT,
        )
        for i in range(count)
    )
    paths = []
    for (up, down), chain in zip(pairs, chains, strict=True):
        points: list[tuple[float, float]] = [
            (centre_x[up], top_y[layer_of_point[up]] + NODE_HEIGHT)
        ]
        points += [(centre_x[p], top_y[layer_of_point[p]] + NODE_HEIGHT / 2) for p in chain[1:-1]]
        points.append((centre_x[down], top_y[layer_of_point[down]]))
        paths.append(EdgePath(names[up], names[down], tuple(points), _curve(points)))
    height = MARGIN * 2 + depth * NODE_HEIGHT + max(depth - 1, 0) * LAYER_GAP
    return Layout(boxes, tuple(paths), inner + MARGIN * 2, height, depth)


def _curve(points: list[tuple[float, float]]) -> str:
    """Vertical-tangent cubic curves through the points, as SVG path data."""
    x0, y0 = points[0]
    parts = [f"M{x0:g},{y0:g}"]
    for (ax, ay), (bx, by) in itertools.pairwise(points):
        mid = (ay + by) / 2
        parts.append(f"C{ax:g},{mid:g} {bx:g},{mid:g} {bx:g},{by:g}")
    return " ".join(parts)
