"""Whether a database's schema is the one this version needs, without loading Alembic.

Every service checks its schema at start (`app.cli.db.service_database`); importing
Alembic and SQLAlchemy for that cost a worker more than all the rest of its start-up. The
quick check reads the head revision from the migration files' `revision` and
`down_revision` lines and the database's revision with psycopg. It only ever confirms:
whatever it cannot (an empty or outdated database, files it cannot read) goes on to
`app.core.migrate.ensure_current`, which says what is wrong.

    if not schema_is_current(url):  # also raises DatabaseUnavailable, like check_database
        ensure_current(url)
"""

from __future__ import annotations

import re
from functools import cache

import psycopg

from app.core.db import connect
from app.core.resources import MIGRATIONS_DIR
from app.core.sql import query

_REVISION = re.compile(r'^revision(?::[^=]*)?= *"([^"]+)"', re.MULTILINE)
_DOWN_REVISION = re.compile(r'^down_revision(?::[^=]*)?= *(?:"([^"]+)"|None)', re.MULTILINE)


@cache
def head_revision() -> str | None:
    """The one head of the migrations in `migrations/versions`, or None if the files do
    not say plainly (several heads, a revision spelled another way)."""
    down_of: dict[str, str | None] = {}
    for path in (MIGRATIONS_DIR / "versions").glob("*.py"):
        text = path.read_text()
        revision, down = _REVISION.search(text), _DOWN_REVISION.search(text)
        if revision is None or down is None:
            return None
        down_of[revision.group(1)] = down.group(1)
    heads = set(down_of) - set(down_of.values())
    return heads.pop() if len(heads) == 1 else None


def schema_is_current(url: str) -> bool:
    """True if the database answers and its schema is at the head revision; False if this
    check cannot tell. Raises DatabaseUnavailable when the database cannot be reached."""
    head = head_revision()
    with connect(url, autocommit=True) as conn:
        try:
            rows = conn.execute(query("database", "database_revision")).fetchall()
        except psycopg.errors.UndefinedTable:  # no schema yet
            return False
    return head is not None and [r["version_num"] for r in rows] == [head]
