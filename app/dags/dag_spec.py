"""A DAG written as JSON, as people and programs submit it, checked into runs and edges.

    {
      "nodes": {
        "extract":   {"handler": "http", "args": {"url": "https://…"}},
        "transform": {"handler": "sleep", "args": {"seconds": 1}, "after": ["extract"]},
        "load":      {"handler": "noop", "execution_model": "thread"}
      },
      "edges": [["transform", "load"]]
    }

Each node takes the options of a single run (handler, args, priority, timeout,
max_retries, execution_model, delay); dependencies are given as `edges`
([upstream, downstream] pairs), as `after` lists on the nodes, or both.
"""

from __future__ import annotations

from typing import Any

from app.core import limits
from app.core.errors import UsageError
from app.runs.run_inserts import NewRun

NODE_KEYS = {
    "handler",
    "args",
    "priority",
    "timeout",
    "max_retries",
    "execution_model",
    "delay",
    "after",
}


class DagSpecError(UsageError):
    """The DAG document is malformed; the message points at the offending part."""


def parse_dag(doc: Any) -> tuple[dict[str, NewRun], list[tuple[str, str]]]:
    """Nodes by name and (upstream, downstream) edges; raises DagSpecError."""
    if not isinstance(doc, dict):
        raise DagSpecError('a DAG must be a JSON object with "nodes" (and optionally "edges")')
    unknown = set(doc) - {"nodes", "edges"}
    if unknown:
        raise DagSpecError(f"unknown key {sorted(unknown)[0]!r} in the DAG (use nodes, edges)")
    raw_nodes = doc.get("nodes")
    if not isinstance(raw_nodes, dict) or not raw_nodes:
        raise DagSpecError('"nodes" must be a non-empty object of node name -> node')
    nodes: dict[str, NewRun] = {}
    edges: list[tuple[str, str]] = []
    for name, node in raw_nodes.items():
        run, after = _parse_node(name, node)
        nodes[name] = run
        edges += [(upstream, name) for upstream in after]
    edges += _parse_edges(doc.get("edges", []))
    return nodes, edges


def _parse_node(name: str, node: Any) -> tuple[NewRun, list[str]]:
    where = f"node {name!r}"
    if not name.strip():
        raise DagSpecError("node names cannot be empty")
    with limits.refused_as(DagSpecError):
        limits.check_name("a node name", name)
    if not isinstance(node, dict):
        raise DagSpecError(f'{where} must be an object like {{"handler": "noop"}}')
    unknown = set(node) - NODE_KEYS
    if unknown:
        known = ", ".join(sorted(NODE_KEYS))
        raise DagSpecError(f"{where} has an unknown key {sorted(unknown)[0]!r} (known: {known})")
    handler = node.get("handler")
    if not isinstance(handler, str) or not handler:
        raise DagSpecError(f'{where} needs a "handler" name')
    after = node.get("after", [])
    if not isinstance(after, list) or not all(isinstance(a, str) for a in after):
        raise DagSpecError(f'{where}: "after" must be a list of node names')
    args = node.get("args", {})
    if not isinstance(args, dict):
        raise DagSpecError(f'{where}: "args" must be a JSON object')
    try:
        run = NewRun(
            handler=handler,
            args=args,
            priority=_int(node, "priority", 1, where),
            timeout_seconds=_int(node, "timeout", 300, where),
            max_retries=_int(node, "max_retries", 3, where),
            execution_model=str(node.get("execution_model", "async")),
            delay=_number(node, "delay", where),
        )
        run.validate()
    except UsageError as exc:
        raise DagSpecError(f"{where}: {exc}") from None
    return run, after


def _parse_edges(raw: Any) -> list[tuple[str, str]]:
    if not isinstance(raw, list):
        raise DagSpecError('"edges" must be a list of [upstream, downstream] pairs')
    edges = []
    for edge in raw:
        if not (
            isinstance(edge, list) and len(edge) == 2 and all(isinstance(e, str) for e in edge)
        ):
            raise DagSpecError(f'edge {edge!r} must be a pair of node names like ["a", "b"]')
        edges.append((edge[0], edge[1]))
    return edges


def _int(node: dict[str, Any], key: str, default: int, where: str) -> int:
    value = node.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool):
        raise DagSpecError(f'{where}: "{key}" must be a whole number')
    return value


def _number(node: dict[str, Any], key: str, where: str) -> float | None:
    value = node.get(key)
    if value is None:
        return None
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise DagSpecError(f'{where}: "{key}" must be a number of seconds')
    return float(value)
