"""Where things live, kept: the packages of `app/` import downwards only, and no modules
import each other in a circle (imports inside functions count: they hide a cycle, they do
not remove it)."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
APP = REPO / "app"

# Top to bottom: a package may import the packages below its own layer, never above, and
# not the other packages of its layer (they are independent of each other).
LAYERS: list[set[str]] = [
    {"cli", "client"},  # the command line and the Python client
    {"web"},  # pages and the JSON API (web/api)
    {"services"},  # the worker, trigger and reaper processes
    {"notify"},  # notification channels, rules, and the outbox the reaper delivers
    {"models"},  # the tables, over each domain's fields
    {"executors", "observability", "catalog"},
    {"scheduling"},  # rules, fire decisions, the trigger's writes, calendars
    {"dags"},  # DAG shapes, DAG submission and pictures
    {"runs"},  # states, transitions, submission, logs, dead letters
    {"handlers", "people"},  # what runs jobs; users, tokens, audit
    {"core"},  # config, database, SQL, limits, errors
]
LAYER_OF = {package: depth for depth, layer in enumerate(LAYERS) for package in layer}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in APP.rglob("*.py")}


def imported(module: str, path: Path) -> Iterator[str]:
    """The app modules `module` imports, anywhere in its file."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            names = [
                f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names
            ]
        else:
            continue
        yield from (name for name in names if name in MODULES and name != module)


GRAPH = {module: set(imported(module, path)) for module, path in MODULES.items()}


def package_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def test_every_package_has_a_layer() -> None:
    packages = {package_of(m) for m in MODULES} - {None}
    assert packages == set(LAYER_OF), "add the package to LAYERS (or drop the stale entry)"


def test_packages_import_only_downwards() -> None:
    upward = sorted(
        f"{source} -> {target}"
        for source, targets in GRAPH.items()
        for target in targets
        if (a := package_of(source)) and (b := package_of(target)) and a != b
        if LAYER_OF[b] <= LAYER_OF[a]
    )
    assert upward == []


def test_no_modules_import_each_other_in_a_circle() -> None:
    cycles = [sorted(c) for c in strongly_connected(GRAPH) if len(c) > 1]
    assert cycles == []


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative (deep import chains must not hit the recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                found.append(component)
    return found


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert [sorted(c) for c in strongly_connected(graph) if len(c) > 1] == [["a", "b", "c"]]


def test_the_paths_the_docs_name_exist() -> None:
    # The README's map of where things live, and every page of docs/, stays true.
    for doc in (REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))):
        named = set(re.findall(r"`(app/[\w/.-]*)`", doc.read_text()))
        missing = sorted(path for path in named if not (REPO / path).exists())
        assert missing == [], (doc.name, missing)
    assert "`app/web/schedules.py`" in (REPO / "README.md").read_text()


def test_test_modules_share_code_through_helpers_only() -> None:
    # A test module importing another one (or a conftest) runs that module's setup twice and
    # ties the two together; what several need lives in tests/helpers/.
    tests = REPO / "tests"
    crossing = sorted(
        f"{path.relative_to(REPO)}: {node.module}"
        for path in tests.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("tests.")
        if re.search(r"(^|\.)(test_\w+|conftest)$", node.module)
    )
    assert crossing == []
