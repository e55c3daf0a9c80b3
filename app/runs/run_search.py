"""A search of runs by what they carried, as a person types it: `customer_id = 42`,
`order.region = eu`, several joined by `and`. Pure: text in, containment documents out
(`args @> doc`), which the runs list (`app.runs.run_list`) hands to the index on
`job_runs.args`.

    >>> parse("customer_id = 42 and order.region = eu").args
    [{'customer_id': 42, 'order': {'region': 'eu'}},
     {'customer_id': '42', 'order': {'region': 'eu'}}]

What a value matches:
- `42`, `-1.5`, `1e3` (a JSON number): the number, or the same text as a string, so
  `customer_id = 42` finds runs submitted with `42` and with `"42"`. Numbers compare by
  value: `42` also finds `42.0`. `007` is not a JSON number: only the string `"007"`.
- `true`, `false`, `null`: that JSON value, or the word as a string.
- `"42"` (in double quotes, JSON escapes allowed): only that string. Quotes also keep
  ` and ` or `=` inside a value: `name = "Tom and Jerry"`.
- anything else: that string, exactly (case and all).
A field holding a list is not searched inside (`tags = x` does not find `["x"]`).

Fields are the run's arguments; `result.total = 3` searches the run's result instead, and
`result = ok` a result that is the value itself. `args.result = 1` names an argument that
is itself called `result`.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

from app.core.errors import UsageError

MAX_SEARCH_LENGTH = 500
MAX_CONDITIONS = 5  # each number or word may be two values: at most 2**5 documents
HOW = "Write the search as field = value, for example customer_id = 42"
KEY = re.compile(r"[\w-]+")
JSON_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?")
WORDS = {"true": True, "false": False, "null": None}
AND = re.compile(r"\s+and(?:\s+|$)", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Search:
    """Runs match when their args contain any of `args` (empty: any args) and their result
    any of `result` (empty: any result)."""

    args: list[Any] = field(default_factory=list)
    result: list[Any] = field(default_factory=list)


def parse(text: str) -> Search:
    """The search `text` as containment documents; UsageError (field `search`) in words."""
    text = text.strip()
    if not text:
        raise UsageError(HOW, "search")
    if len(text) > MAX_SEARCH_LENGTH:
        raise UsageError(f"a search is at most {MAX_SEARCH_LENGTH} characters", "search")
    conditions = [_condition(part) for part in _parts(text)]
    if len(conditions) > MAX_CONDITIONS:
        raise UsageError(f"a search has at most {MAX_CONDITIONS} conditions", "search")
    found: dict[str, list[tuple[list[str], list[Any]]]] = {"args": [], "result": []}
    for where, path, values in conditions:
        found[where].append((path, values))
    return Search(_documents(found["args"]), _documents(found["result"]))


def _parts(text: str) -> list[str]:
    """`a = 1 and b = "x and y"` -> [`a = 1`, `b = "x and y"`]: `and` outside quotes."""
    parts, start, quoted, escaped = [], 0, False, False
    pieces = []  # (start, end) of the text outside quotes
    for i, char in enumerate(text):
        if escaped:
            escaped = False
        elif quoted and char == "\\":
            escaped = True
        elif char == '"':
            if not quoted:
                pieces.append((start, i))
            else:
                start = i + 1
            quoted = not quoted
    if quoted:
        raise UsageError('a quoted value is missing its closing "', "search")
    pieces.append((start, len(text)))
    cut = 0
    for begin, end in pieces:
        for match in AND.finditer(text, begin, end):
            parts.append(text[cut : match.start()])
            cut = match.end()
    parts.append(text[cut:])
    return parts


def _condition(part: str) -> tuple[str, list[str], list[Any]]:
    """`order.region = eu` -> ("args", ["order", "region"], ["eu"])."""
    name, equals, value = part.partition("=")
    name, value = name.strip(), value.strip()
    if not equals or not name or not value:
        raise UsageError(f"{HOW} (not {part.strip()!r})", "search")
    path = name.split(".")
    if not all(KEY.fullmatch(key) for key in path):
        raise UsageError(
            f"{name!r} is not a field: use letters, digits, - and _, with dots between "
            "nested fields (order.region)",
            "search",
        )
    where = "args"
    if path[0] in ("args", "result") and (len(path) > 1 or path[0] == "result"):
        where, path = path[0], path[1:]
    return where, path, _values(value)


def _values(text: str) -> list[Any]:
    """What a typed value may match, as JSON values."""
    if text.startswith('"'):
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            raise UsageError(
                f'{text} is not one quoted value (put \\ before a " inside it)', "search"
            ) from None
        if not isinstance(value, str):
            raise UsageError(f"{text} is not one quoted value", "search")
        return [value]
    if JSON_NUMBER.fullmatch(text):
        number = json.loads(text)
        if isinstance(number, float) and not math.isfinite(number):
            return [text]
        return [number, text]
    if text.lower() in WORDS:
        return [WORDS[text.lower()], text]
    return [text]


def _documents(conditions: list[tuple[list[str], list[Any]]]) -> list[Any]:
    """Every combination of the conditions' values, each as one nested document."""
    if not conditions:
        return []
    return [
        _document([path for path, _ in conditions], list(choice))
        for choice in itertools.product(*(values for _, values in conditions))
    ]


def _document(paths: list[list[str]], values: list[Any]) -> Any:
    if paths == [[]]:
        return values[0]  # `result = ok`: the whole value
    document: dict[str, Any] = {}
    for path, value in zip(paths, values, strict=True):
        dotted = ".".join(path)
        if not path:
            raise UsageError(
                "search the result as a whole once, and not together with its fields", "search"
            )
        node = document
        for depth, key in enumerate(path[:-1]):
            child = node.setdefault(key, {})
            if not isinstance(child, dict):
                raise UsageError(
                    f"{'.'.join(path[: depth + 1])} is given a value and fields at once",
                    "search",
                )
            node = child
        if path[-1] in node:
            raise UsageError(f"{dotted} is named twice; give one value for it", "search")
        node[path[-1]] = value
    return document
