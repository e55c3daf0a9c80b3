"""Every runtime SQL statement, loaded by name from the `.sql` files beside this module.

Each statement is headed by `-- name: <name>` and a line saying what it does (for run
transitions: `from -> to`). Keeping SQL out of Python strings makes every statement that
touches a run reviewable in one place.
"""

from __future__ import annotations

import re
from enum import StrEnum
from functools import cache
from pathlib import Path
from typing import LiteralString, cast

SQL_DIR = Path(__file__).resolve().parent
_HEADER = re.compile(r"^-- name: (\w+)\s*$", re.MULTILINE)
_COMMENT_LINE = re.compile(r"^[ \t]*--.*\n?", re.MULTILINE)


@cache
def load(file: str) -> dict[str, LiteralString]:
    """Statements of `<file>.sql`, by name."""
    text = (SQL_DIR / f"{file}.sql").read_text()
    parts = _HEADER.split(text)
    queries: dict[str, LiteralString] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        if name in queries:
            raise ValueError(f"{file}.sql defines {name!r} twice")
        queries[name] = cast(LiteralString, body.strip().rstrip(";"))
    return queries


@cache
def query(file: str, name: str) -> LiteralString:
    """The statement as sent: its comment lines, written for the reader, left out (they
    had made one statement longer than the 4 KB psycopg caches parsed, so that every call
    parsed it again, 0.1 ms each), and its name on top, for pg_stat_activity."""
    return f"-- {file}.{name}\n" + _COMMENT_LINE.sub("", load(file)[name])


def like_literal(text: str) -> str:
    """`text` for a LIKE/ILIKE pattern, matching itself: `50% off` -> `50\\% off`."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def sql_in(values: frozenset[str] | list[str] | type[StrEnum]) -> str:
    """`'a', 'b'` for a CHECK constraint over `values`, in a stable order."""
    items = [str(v) for v in values]
    return ", ".join(f"'{v}'" for v in sorted(items))
