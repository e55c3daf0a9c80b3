"""The named SQL statements: what a comment mentions as a parameter, the statement uses."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from app.sql import SQL_DIR, load

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
    # Reads too live in app/sql/, where every statement can be reviewed in one place.
    app = Path(SQL_DIR).parent
    offenders = [
        f"{path.relative_to(app)}:{text[: m.start()].count(chr(10)) + 1}"
        for path in sorted(app.rglob("*.py"))
        for text in [path.read_text()]
        for m in INLINE_STATEMENT.finditer(text)
    ]
    assert offenders == []


def test_every_statement_is_run_somewhere() -> None:
    # A statement nothing runs still reads as part of how a page or a process works.
    repo = Path(SQL_DIR).parent.parent
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
