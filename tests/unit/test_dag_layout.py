"""The DAG picture's layout: layers follow edges, few crossings, same input same picture,
and fast enough for the largest DAGs Sundial accepts."""

from __future__ import annotations

import itertools

import pytest

from app.dags.dag_layout import NODE_HEIGHT, LayoutError, layout


def _crossings(picture_edges: list[tuple[float, float, float, float]]) -> int:
    """Pairs of single-layer edges (x_top, y, x_bottom) that cross between the same layers."""
    total = 0
    for i, (a1, ay, a2, _) in enumerate(picture_edges):
        for b1, by, b2, _ in picture_edges[i + 1 :]:
            if ay == by and (a1 - b1) * (a2 - b2) < 0:
                total += 1
    return total


def test_every_edge_goes_down_at_least_one_layer() -> None:
    edges = [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d"), ("a", "d"), ("d", "e")]
    picture = layout(["a", "b", "c", "d", "e"], edges)
    layer = {n.name: n.layer for n in picture.nodes}
    assert layer == {"a": 0, "b": 1, "c": 1, "d": 2, "e": 3}  # longest path
    box = {n.name: n for n in picture.nodes}
    for e in picture.edges:
        assert layer[e.upstream] < layer[e.downstream]
        up, down = box[e.upstream], box[e.downstream]
        assert e.points[0] == (up.cx, up.y + NODE_HEIGHT)
        assert e.points[-1] == (down.cx, down.y)
        assert e.path.startswith(f"M{up.cx:g},{up.y + NODE_HEIGHT:g}")
    # a -> d spans two layers: it bends through one point on layer 1
    (long_edge,) = [e for e in picture.edges if (e.upstream, e.downstream) == ("a", "d")]
    assert len(long_edge.points) == 3
    assert picture.layers == 4


def test_boxes_fit_the_picture_and_never_overlap() -> None:
    names = [f"s{i}" for i in range(12)]
    edges = [(f"s{i}", f"s{j}") for i in range(12) for j in range(i + 1, 12) if (i * j) % 5 == 1]
    picture = layout(names, edges)
    for n in picture.nodes:
        assert 0 <= n.x and n.x + n.width <= picture.width
        assert 0 <= n.y and n.y + n.height <= picture.height
    for i, a in enumerate(picture.nodes):
        for b in picture.nodes[i + 1 :]:
            apart = a.x + a.width <= b.x or b.x + b.width <= a.x
            assert apart or a.y != b.y, (a, b)


def test_barycentre_sweeps_untangle_crossed_pairs() -> None:
    # Given in an order that crosses every edge: a1 b2, a2 b1 ... the sweeps fix it.
    names = ["a1", "a2", "a3", "b3", "b2", "b1"]
    edges = [("a1", "b1"), ("a2", "b2"), ("a3", "b3")]
    picture = layout(names, edges)
    segments = [(e.points[0][0], e.points[0][1], e.points[1][0], 0.0) for e in picture.edges]
    assert _crossings(segments) == 0


def test_same_input_same_picture_and_no_duplicates() -> None:
    edges = [("x", "y"), ("x", "z"), ("y", "w"), ("z", "w"), ("x", "y")]
    first = layout(["x", "y", "z", "w", "x"], edges)
    assert first == layout(["x", "y", "z", "w"], edges[:4])
    assert len(first.nodes) == 4 and len(first.edges) == 4


def test_a_single_step_and_no_steps() -> None:
    one = layout(["only"], [])
    assert one.layers == 1 and one.nodes[0].x >= 0 and one.edges == ()
    empty = layout([], [])
    assert empty.nodes == () and empty.layers == 0


@pytest.mark.parametrize(
    ("edges", "message"),
    [
        ([("a", "nope")], "unknown step 'nope'"),
        ([("a", "b"), ("b", "a")], "cycle"),
        ([("a", "a")], "cycle"),
    ],
)
def test_refuses_what_is_not_a_dag(edges: list[tuple[str, str]], message: str) -> None:
    with pytest.raises(LayoutError, match=message):
        layout(["a", "b"], edges)


def test_a_thousand_step_chain_and_a_thousand_wide_fan_out_are_laid_out() -> None:
    """How fast: `python -m bench.dag_layout`."""
    chain = [f"c{i}" for i in range(1000)]
    fan = ["root", *(f"f{i}" for i in range(1000))]
    long = layout(chain, list(itertools.pairwise(chain)))
    wide = layout(fan, [("root", f) for f in fan[1:]])
    assert long.layers == 1000 and wide.layers == 2
    assert wide.width > 1000 * 100  # one row, scrolls sideways


def test_a_dense_dag_draws_long_edges_straight_past_the_bend_budget() -> None:
    names = [f"n{i}" for i in range(300)]
    edges = [(names[i], names[j]) for i in range(300) for j in range(i + 1, 300)]
    picture = layout(names, edges)
    assert all(len(e.points) == 2 for e in picture.edges)
