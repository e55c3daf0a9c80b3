"""The shape of a DAG, checked before anything is written: its nodes are named within
limits, its edges name known nodes, and it has no cycle. Workflow definitions are checked
here when saved, and `app.runs.transitions` checks every DAG here before inserting its runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from app.core import limits
from app.runs.run_inserts import NewRun, SubmitError

MAX_DAG_NODES = 10_000


class DagError(SubmitError):
    """A DAG cannot be submitted as given (unknown node, cycle, …)."""


def check_dag(nodes: Mapping[str, NewRun], edges: Sequence[tuple[str, str]]) -> None:
    if not nodes:
        raise DagError("a DAG needs at least one node")
    if len(nodes) > MAX_DAG_NODES:
        raise DagError(f"a DAG may have at most {MAX_DAG_NODES:,} nodes, got {len(nodes):,}")
    downstream: dict[str, list[str]] = {name: [] for name in nodes}
    for name in nodes:
        limits.check_name("a DAG step name", name)
    for upstream, down in edges:
        for name in (upstream, down):
            if name not in nodes:
                raise DagError(f"edge {upstream!r} -> {down!r} names an unknown node {name!r}")
        if upstream == down:
            raise DagError(f"node {upstream!r} cannot depend on itself")
        downstream[upstream].append(down)
    cycle = _find_cycle(downstream)
    if cycle:
        raise DagError("the DAG has a cycle: " + " -> ".join(cycle))


def _find_cycle(downstream: Mapping[str, list[str]]) -> list[str] | None:
    """One cycle as a path of node names (first node repeated at the end), or None.

    Iterative depth-first search, so a 10,000-node chain cannot hit the recursion limit.
    """
    ON_PATH, DONE = 1, 2
    state: dict[str, int] = {}
    for start in downstream:
        if start in state:
            continue
        path = [start]
        state[start] = ON_PATH
        stack = [iter(downstream[start])]
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                stack.pop()
                state[path.pop()] = DONE
            elif state.get(nxt) == ON_PATH:
                return [*path[path.index(nxt) :], nxt]
            elif nxt not in state:
                state[nxt] = ON_PATH
                path.append(nxt)
                stack.append(iter(downstream[nxt]))
    return None
