"""Version history pages of jobs, workflows and schedules: shared by `app.web.jobs`,
`app.web.workflows` and `app.web.schedules` (each adds its two routes: `…/history` and
`…/rollback`).

The versions come from `app.people.versions` (the audit log's after-snapshots); a kind may pass
`readable`, which turns a snapshot into one line per thing a person recognises (a step,
not a nested JSON object), and the diff is taken between those.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from app.core.db import Conn
from app.core.limits import whole_id
from app.people import versions

Readable = Callable[[Mapping[str, Any]], dict[str, Any]]


@dataclass(frozen=True, slots=True)
class Entry:
    id: int
    number: int
    at: datetime
    actor: str
    action: str
    current: bool
    changes: list[versions.Change]
    snapshot: Mapping[str, Any]
    unrecorded: tuple[str, ...] = ()  # what this version cannot restore: it was not recorded


def entries(
    conn: Conn, target_type: str, name: str, readable: Readable | None = None
) -> list[Entry]:
    """The target's versions, newest first, each with what it changed."""
    found = versions.history(conn, target_type, name)
    result: list[Entry] = []
    previous: dict[str, Any] | None = None
    for v in reversed(found):
        shape = readable(v.snapshot) if readable else v.snapshot
        changes = versions.diff(previous, shape) if readable else _worded(v.changes)
        result.append(
            Entry(
                v.id,
                v.number,
                v.at,
                v.actor,
                v.action,
                v.current,
                changes,
                v.snapshot,
                v.unrecorded,
            )
        )
        previous = shape
    return result[::-1]


def _worded(changes: list[versions.Change]) -> list[versions.Change]:
    """Field names as words: `timeout_seconds` -> `timeout seconds`."""
    return [versions.Change(c.field.replace("_", " "), c.before, c.after) for c in changes]


def rollback(conn: Conn, target_type: str, name: str, version: str, actor: str) -> None:
    """Roll back to the version with audit id `version` (text from a form)."""
    chosen = whole_id(version)
    if chosen is None:
        raise versions.VersionError("choose a version to roll back to")
    versions.rollback(conn, target_type, name, chosen, actor=actor)


def shown(value: Any) -> str:
    """A snapshot value as a person reads it in a diff."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)
