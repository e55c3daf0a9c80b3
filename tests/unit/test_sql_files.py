"""The named SQL statements: what a comment mentions as a parameter, the statement uses."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from app.core.sql import SQL_DIR, load, query

PARAMETER = re.compile(r"%\((\w+)\)s")


@pytest.mark.parametrize("file", sorted(p.stem for p in Path(SQL_DIR).glob("*.sql")))
def test_no_comment_names_a_parameter_its_statement_does_not_take(file: str) -> None:
    # psycopg reads %(name)s in comments too: a stray one makes every call of that
    # statement fail for a missing parameter.
    for name, statement in load(file).items():
        lines = statement.splitlines()
        in_comments = {p for line in lines if line.lstrip().startswith("--")
                       for p in PARAMETER.findall(line)}  # fmt: skip
        in_code = {p for line in lines if not line.lstrip().startswith("--")
                   for p in PARAMETER.findall(line)}  # fmt: skip
        assert in_comments <= in_code, f"{file}.sql {name}: {sorted(in_comments - in_code)}"


# A string that opens with a statement keyword, written in capitals as all of Sundial's SQL
# is: `"SELECT …"`, `f'UPDATE …'`, `"""WITH …`.
INLINE_STATEMENT = re.compile(
    r"""[frb]?("|'){1,3}\s*(SELECT|WITH|INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s"""
)


def test_no_module_holds_a_query_in_a_python_string() -> None:
    # Reads too live in app/core/sql/, where every statement can be reviewed in one place.
    app = Path(SQL_DIR).parents[1]
    offenders = [
        f"{path.relative_to(app)}:{text[: m.start()].count(chr(10)) + 1}"
        for path in sorted(app.rglob("*.py"))
        for text in [path.read_text()]
        for m in INLINE_STATEMENT.finditer(text)
    ]
    assert offenders == []


def test_every_statement_is_run_somewhere() -> None:
    # A statement nothing runs still reads as part of how a page or a process works.
    repo = Path(SQL_DIR).parents[2]
    code = "\n".join(
        path.read_text() for folder in ("app", "bench") for path in (repo / folder).rglob("*.py")
    )
    unused = [
        f"{path.stem}.sql {name}"
        for path in sorted(Path(SQL_DIR).glob("*.sql"))
        for name in load(path.stem)
        if f'"{name}"' not in code
    ]
    assert unused == []


# psycopg keeps the parsed form of statements up to this many bytes; a longer one is parsed
# again on every call (0.1 ms for the finish statement, once 5.6 KB with its comments).
PSYCOPG_PARSE_CACHE_BYTES = 4096


def test_every_statement_as_sent_fits_the_drivers_parse_cache() -> None:
    too_long = [
        f"{path.stem}.sql {name}: {len(query(path.stem, name).encode()):,} bytes"
        for path in sorted(Path(SQL_DIR).glob("*.sql"))
        for name in load(path.stem)
        if len(query(path.stem, name).encode()) > PSYCOPG_PARSE_CACHE_BYTES
    ]
    assert too_long == []


def test_statements_are_sent_without_their_comment_lines() -> None:
    sent = query("runs", "run_complete_many")
    assert sent.startswith("-- runs.run_complete_many\n")
    assert "\n--" not in sent and "\n    --" not in sent
    written = load("runs")["run_complete_many"]
    code = [line for line in written.splitlines() if not line.lstrip().startswith("--")]
    assert sent.splitlines()[1:] == code
