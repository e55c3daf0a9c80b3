"""The sentence that refuses a workflow whose steps wait for each other in a loop."""

from __future__ import annotations

import itertools

from app.catalog.workflows import cycle_message


def test_the_edge_pointing_back_up_the_list_is_named_with_the_whole_loop() -> None:
    steps = ["load", "transform", "report"]
    edges = [("report", "load"), ("load", "transform"), ("transform", "report")]
    assert cycle_message(steps, edges) == (
        "step `load` cannot run after `report`: `report` already runs after `load` "
        "(load → transform → report → load)"
    )


def test_the_shortest_loop_through_the_closing_edge_is_shown() -> None:
    steps = ["a", "b", "c", "d"]
    edges = [("a", "b"), ("b", "c"), ("c", "d"), ("a", "d"), ("d", "a")]
    assert cycle_message(steps, edges) == (
        "step `a` cannot run after `d`: `d` already runs after `a` (a → d → a)"
    )


def test_a_step_after_itself_and_dags_without_loops() -> None:
    assert cycle_message(["a"], [("a", "a")]) == "step `a` cannot run after itself"
    diamond = [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")]
    assert cycle_message(["a", "b", "c", "d"], diamond) is None
    assert cycle_message(["a"], [("a", "ghost")]) is None  # refused elsewhere, by name
    chain = [f"s{i}" for i in range(3000)]
    assert cycle_message(chain, list(itertools.pairwise(chain))) is None
