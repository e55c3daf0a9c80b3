"""Lists paged by name (jobs, schedules): keyset paging over a unique name index, so a
later page costs what the first does, with the count of everything the filter matches.

A page statement takes `%(after)s` (None: from the start) and `%(limit)s`, and returns rows
with a `name` in name order; its count statement takes the same filter parameters and
returns `n`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from app.core.db import Conn

LIST_PAGE = 100  # rows on one page


@dataclass(frozen=True, slots=True)
class NamePage:
    rows: list[dict[str, Any]]
    total: int  # rows matching the filter, on every page
    next_after: str | None  # the last name on this page when there is a next one

    def links(self, path: str, kept: dict[str, str], after: str | None) -> dict[str, Any]:
        """The page's count and its pager links for `path` (`total`, `next_url`,
        `first_url`): `kept` are the filters every link keeps, `after` the name this page
        started after (a later page links back to the first)."""
        return {
            "total": self.total,
            "next_url": (
                f"{path}?{urlencode({**kept, 'after': self.next_after})}"
                if self.next_after
                else None
            ),
            "first_url": f"{path}?{urlencode(kept)}" if after else None,
        }


def page_by_name(
    conn: Conn,
    page_sql: str,
    count_sql: str,
    params: dict[str, Any],
    after: str | None,
    limit: int | None = None,
) -> NamePage:
    """One page of the rows `page_sql` lists after the name `after`, and their count."""
    size = limit or LIST_PAGE
    rows = conn.execute(page_sql, {**params, "after": after, "limit": size + 1}).fetchall()
    counted = conn.execute(count_sql, params).fetchone()
    more = len(rows) > size
    rows = rows[:size]
    return NamePage(rows, counted["n"] if counted else 0, rows[-1]["name"] if more else None)
