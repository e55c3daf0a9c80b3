"""Mutation testing of the pure modules: do the unit tests notice when the code changes?

    nice -n 10 .venv/bin/python -m tests.mutation app/scheduling/cron.py
    app/scheduling/fire_decisions.py

For each module, every mutant (one small change to its source) is loaded in place of the
module in a forked child, which runs the module's fast unit tests; a mutant the tests still
pass with has survived. The operators: flip a comparison (its negation and its off-by-one
neighbour), shift a number by one, drop one member of a set literal, drop a statement,
`return None`, swap `and` and `or`, negate an `if` or `while` condition. Decorator
arguments (cache sizes) are not mutated.

Mutants judged equivalent (no behaviour can tell them from the original) are listed in
`tests/mutation_equivalent.txt` with their reason and left out of the score (`--list`
prints their keys; a twin, the same change to equal code again in one function, ends in
` #2`, ` #3`...). The command
exits 1 when a module scores below `--min-score` (90 % by default).

The forked child imports the mutated module fresh, so `functools.lru_cache` and the
modules that import names from it see the mutant too.
"""

from __future__ import annotations

import argparse
import ast
import copy
import os
import re
import select
import signal
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
EQUIVALENT_FILE = Path(__file__).with_name("mutation_equivalent.txt")
UNIT = "tests/unit/"
# The fast, database-free tests that stand behind each pure module.
TESTS_FOR = {
    "app/scheduling/cron.py": [UNIT + "test_cron.py", UNIT + "test_cron_policies.py"],
    "app/scheduling/cron_expressions.py": [
        UNIT + "test_cron.py",
        UNIT + "test_cron_fields.py",
        UNIT + "test_cron_policies.py",
    ],
    "app/scheduling/zones.py": [UNIT + "test_cron.py", UNIT + "test_zone_names.py"],
    "app/scheduling/fire_decisions.py": [UNIT + "test_cron_policies.py"],
    "app/core/backoff.py": [UNIT + "test_backoff.py"],
    "app/runs/states.py": [UNIT + "test_state_machine.py"],
    "app/runs/limit_fit.py": [UNIT + "test_limit_fit.py"],
}
# Imported once before forking so each child only pays for the tests themselves.
WARM_IMPORTS = ("croniter", "zoneinfo", "hashlib", "random", "re", "calendar", "heapq")

FLIPS: dict[type[ast.cmpop], tuple[type[ast.cmpop], ...]] = {
    ast.Lt: (ast.GtE, ast.LtE),
    ast.LtE: (ast.Gt, ast.Lt),
    ast.Gt: (ast.LtE, ast.GtE),
    ast.GtE: (ast.Lt, ast.Gt),
    ast.Eq: (ast.NotEq,),
    ast.NotEq: (ast.Eq,),
    ast.Is: (ast.IsNot,),
    ast.IsNot: (ast.Is,),
    ast.In: (ast.NotIn,),
    ast.NotIn: (ast.In,),
}


@dataclass(frozen=True)
class Mutant:
    path: str
    line: int
    function: str
    change: str  # `before` -> `after`, in source form
    original: ast.Module
    site: ast.AST
    replacement: ast.AST
    occurrence: int = 1  # the n-th mutant with this description in its function

    def tree(self) -> ast.Module:
        return _rebuild(self.original, self.site, self.replacement)

    @property
    def key(self) -> str:
        """How the equivalent list names it: stable when lines move. Twins (the same
        change to equal code twice in one function) get ` #2`, ` #3`... in source order."""
        twin = f" #{self.occurrence}" if self.occurrence > 1 else ""
        return f"{self.path} | {self.function} | {self.change}{twin}"


def _short(node: ast.AST) -> str:
    text = ast.unparse(node).splitlines()[0]
    return text if len(text) <= 70 else text[:67] + "..."


def _describe(before: ast.AST, after: ast.AST) -> str:
    if isinstance(before, ast.Set) and isinstance(after, ast.Set):
        kept = {ast.unparse(e) for e in after.elts}
        dropped = next(ast.unparse(e) for e in before.elts if ast.unparse(e) not in kept)
        members = ", ".join(sorted(ast.unparse(e) for e in before.elts))
        return f"`{{{members}}}` drops `{dropped}`"
    return f"`{_short(before)}` -> `{_short(after)}`"


class _Site:
    """One place in the tree and the replacements it allows."""

    def __init__(self, function: str, node: ast.AST, variants: list[tuple[ast.AST, str]]):
        self.function = function
        self.node = node
        self.variants = variants


def _number(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Constant)
        and isinstance(node.value, int | float)
        and not isinstance(node.value, bool)
    )


def _expression_variants(node: ast.AST) -> list[ast.AST]:
    if isinstance(node, ast.Compare):
        variants: list[ast.AST] = []
        for i, op in enumerate(node.ops):
            for flip in FLIPS.get(type(op), ()):
                ops = list(node.ops)
                ops[i] = flip()
                variants.append(ast.Compare(node.left, ops, node.comparators))
        return variants
    if _number(node):
        value = node.value  # type: ignore[attr-defined]
        return [ast.Constant(value + 1), ast.Constant(value - 1)]
    if isinstance(node, ast.Set) and len(node.elts) > 1:  # a set of states: drop each one
        return [ast.Set(node.elts[:i] + node.elts[i + 1 :]) for i in range(len(node.elts))]
    if isinstance(node, ast.BoolOp):
        swapped = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        return [ast.BoolOp(swapped, node.values)]
    return []


def _statement_variants(stmt: ast.stmt) -> list[ast.stmt]:
    variants: list[ast.stmt] = []
    docstring = isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)
    defines = isinstance(stmt, ast.FunctionDef | ast.ClassDef | ast.Import | ast.ImportFrom)
    if not docstring and not defines:
        variants.append(ast.Pass())
    if isinstance(stmt, ast.Return) and not (
        stmt.value is None or (isinstance(stmt.value, ast.Constant) and stmt.value.value is None)
    ):
        variants.append(ast.Return(ast.Constant(None)))
    if isinstance(stmt, ast.If | ast.While):
        negated = copy.copy(stmt)
        negated.test = ast.UnaryOp(ast.Not(), stmt.test)
        variants.append(negated)
    return variants


def _sites(tree: ast.Module) -> Iterator[_Site]:
    """Every mutable place, with the qualified name of the function holding it."""

    def walk(node: ast.AST, scope: str, in_body: bool, statement: ast.AST) -> Iterator[_Site]:
        for field, value in ast.iter_fields(node):
            if field in ("decorator_list", "returns", "annotation"):
                continue
            children = value if isinstance(value, list) else [value]
            for child in children:
                if not isinstance(child, ast.AST):
                    continue
                inner = scope
                body = in_body
                if isinstance(child, ast.FunctionDef | ast.ClassDef):
                    inner = f"{scope}.{child.name}" if scope != "<module>" else child.name
                    body = isinstance(child, ast.FunctionDef) or body
                if isinstance(child, ast.stmt) and in_body:
                    variants = [(v, _describe(child, v)) for v in _statement_variants(child)]
                    if variants:
                        yield _Site(scope, child, variants)  # type: ignore[arg-type]
                elif isinstance(child, ast.expr):
                    where = f" in `{_short(statement)}`"  # tells apart equal expressions
                    variants = [
                        (v, _describe(child, v) + where) for v in _expression_variants(child)
                    ]
                    if variants:
                        yield _Site(scope, child, variants)  # type: ignore[arg-type]
                inner_statement = child if isinstance(child, ast.stmt) else statement
                yield from walk(child, inner, body, inner_statement)

    yield from walk(tree, "<module>", False, tree)


def _replace(tree: ast.Module, target: ast.AST, replacement: ast.AST) -> ast.Module:
    """A copy of `tree` with the node `target` swapped for `replacement`."""

    class Swap(ast.NodeTransformer):
        def visit(self, node: ast.AST) -> ast.AST:
            if node is target:
                return ast.copy_location(replacement, node)
            return super().visit(node)

    return ast.fix_missing_locations(Swap().visit(tree))  # type: ignore[no-any-return]


def mutants(path: str) -> list[Mutant]:
    tree = ast.parse((REPO / path).read_text())
    seen: dict[tuple[str, str], int] = {}
    found = []
    for site in _sites(tree):
        for new, change in site.variants:
            n = seen[site.function, change] = seen.get((site.function, change), 0) + 1
            line = getattr(site.node, "lineno", 0)
            found.append(Mutant(path, line, site.function, change, tree, site.node, new, n))
    return found


def _rebuild(tree: ast.Module, target: ast.AST, replacement: ast.AST) -> ast.Module:
    # deep copy, then find the copy of `target` by position in a parallel walk
    twin = copy.deepcopy(tree)
    for original, copied in zip(ast.walk(tree), ast.walk(twin), strict=True):
        if original is target:
            return _replace(twin, copied, copy.deepcopy(replacement))
    raise AssertionError("mutation site not found in its own tree")


# ---- running the tests against one mutant ------------------------------------------------


def _module_name(path: str) -> str:
    return path.removesuffix(".py").replace("/", ".")


def _silence() -> None:
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)


def _run_in_child(mutant: Mutant, tests: list[str]) -> int:
    """In the forked child: install the mutant as the module, run the tests, exit."""
    _silence()
    code = compile(mutant.tree(), str(REPO / mutant.path), "exec")
    name = _module_name(mutant.path)

    class MutantLoader:
        def create_module(self, spec: object) -> None:
            return None

        def exec_module(self, module: object) -> None:
            exec(code, module.__dict__)  # the mutant under test

    class MutantFinder:
        def find_spec(self, fullname: str, path: object, target: object = None) -> object:
            if fullname != name:
                return None
            from importlib.machinery import ModuleSpec

            spec = ModuleSpec(fullname, MutantLoader(), origin=str(REPO / mutant.path))
            spec.has_location = True
            return spec

    sys.meta_path.insert(0, MutantFinder())
    args = ["-x", "-q", "-p", "no:cacheprovider", "--noconftest", *tests]
    return int(pytest.main(args))


def run_mutant(mutant: Mutant, tests: list[str], timeout: float) -> str:
    """`killed`, `survived` or `timeout`."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        try:
            status = _run_in_child(mutant, tests)
        except BaseException:
            status = 3
        os._exit(status)
    os.close(write_end)
    # the pipe closes when the child exits: wait on it with the timeout
    ready, _, _ = select.select([read_end], [], [], timeout)
    os.close(read_end)
    if not ready:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        return "timeout"
    _, status = os.waitpid(pid, 0)
    return "survived" if os.waitstatus_to_exitcode(status) == 0 else "killed"


def baseline_seconds(tests: list[str]) -> float:
    """Time the tests on the unmutated code; they must pass."""
    started = time.monotonic()
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        _silence()
        os._exit(int(pytest.main(["-x", "-q", "-p", "no:cacheprovider", "--noconftest", *tests])))
    os.close(write_end)
    _, status = os.waitpid(pid, 0)
    os.close(read_end)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"the tests fail on the unmutated code: {' '.join(tests)}")
    return time.monotonic() - started


def load_equivalent() -> dict[str, str]:
    """Key -> reason, from `path | function | change | reason` lines."""
    equivalent = {}
    for line in EQUIVALENT_FILE.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        path, function, change, reason = (part.strip() for part in line.split(" | ", 3))
        equivalent[f"{path} | {function} | {change}"] = reason
    return equivalent


def mutate_module(
    path: str,
    equivalent: dict[str, str],
    timeout_factor: float,
    only: list[tuple[str, int, str]] | None = None,
) -> float:
    tests = TESTS_FOR[path]
    timeout = max(10.0, timeout_factor * baseline_seconds(tests))
    results: dict[str, list[Mutant]] = {"killed": [], "survived": [], "timeout": []}
    skipped = 0
    for mutant in mutants(path):
        if mutant.key in equivalent:
            skipped += 1
            continue
        if only is not None and not any(
            (mutant.path, mutant.line) == (p, n) and mutant.change.startswith(c) for p, n, c in only
        ):
            continue
        results[run_mutant(mutant, tests, timeout)].append(mutant)
    counted = sum(len(group) for group in results.values())
    caught = len(results["killed"]) + len(results["timeout"])
    score = 100.0 * caught / counted if counted else 100.0
    print(
        f"{path}: {counted + skipped} mutants, {skipped} equivalent, {len(results['killed'])} "
        f"killed, {len(results['survived'])} survived, {len(results['timeout'])} timed out; "
        f"score {score:.1f} %"
    )
    for mutant in results["survived"]:
        print(f"  survived {mutant.path}:{mutant.line} ({mutant.function}) {mutant.change}")
        print(f"    key: {mutant.key}")
    sys.stdout.flush()
    return score


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.mutation", description=__doc__)
    parser.add_argument("modules", nargs="*", default=list(TESTS_FOR), help="default: all of them")
    parser.add_argument("--min-score", type=float, default=90.0)
    parser.add_argument(
        "--timeout-factor",
        type=float,
        default=5.0,
        help="a mutant times out after this many times the tests' normal time",
    )
    parser.add_argument("--list", action="store_true", help="print the mutants, run nothing")
    parser.add_argument(
        "--again",
        type=Path,
        metavar="OUTPUT",
        help="run only the mutants a previous run's saved output lists as survivors",
    )
    args = parser.parse_args(argv)
    unknown = [m for m in args.modules if m not in TESTS_FOR]
    if unknown:
        parser.error(f"no unit tests are set up for {', '.join(unknown)}; use {list(TESTS_FOR)}")
    os.chdir(REPO)
    sys.path.insert(0, str(REPO))
    if args.list:
        for path in args.modules:
            for mutant in mutants(path):
                print(f"{mutant.path}:{mutant.line}  {mutant.key}")
        return 0
    for name in WARM_IMPORTS:
        __import__(name)
    equivalent = load_equivalent()
    only = None
    if args.again:  # lines `  survived PATH:LINE (FUNCTION) CHANGE`
        survived = re.compile(r"^  survived (\S+):(\d+) \(\S+\) (.*)$")
        matches = map(survived.match, args.again.read_text().splitlines())
        only = [(m[1], int(m[2]), m[3]) for m in matches if m]
    scores = [mutate_module(path, equivalent, args.timeout_factor, only) for path in args.modules]
    return 0 if all(score >= args.min_score for score in scores) else 1


if __name__ == "__main__":
    sys.exit(main())
