"""Version history of anything people edit, read from the audit log, with rollback.

Every change a person makes is audited with an after-snapshot, so a target's versions are
those snapshots, oldest to newest. A target is asked for by its name but its history is
keyed by its stable id (the audit row's `subject_id`): a job renamed keeps its versions,
and a new one under an old name starts its own. Each kind of target (schedule, job,
workflow) registers which audit actions make a version, how to find its id by name, and
how to apply an old snapshot: through its own domain update function, so a rollback is
validated, locked and audited like any edit (action `<type>.rollback`).

    register(Kind("schedule", ("schedule.create", "schedule.update"), apply,
                  ("schedules", "schedule_by_name")))
    rollback(conn, "schedule", "nightly", version_id=42, actor="alice")
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from app.core.db import Conn
from app.core.errors import UsageError
from app.core.sql import query

HISTORY_LIMIT = 200  # versions shown per target, newest first


class VersionError(UsageError):
    """A version cannot be read or restored as asked; the message says why."""


class Apply(Protocol):
    def __call__(
        self, conn: Conn, target_id: str, snapshot: Mapping[str, Any], /, *, actor: str, action: str
    ) -> None: ...


@dataclass(frozen=True, slots=True)
class Kind:
    """A kind of versioned target: its audit `target_type`, the actions whose after-snapshot
    is a new version (the first of them starts a history), how to apply an old snapshot,
    and the named query (file, name) that finds a target's row, with its `id`, by name."""

    target_type: str
    actions: tuple[str, ...]
    apply: Apply
    by_name: tuple[str, str]
    # Snapshot fields that are state, not definition (a pause): neither compared nor restored.
    ignored: frozenset[str] = frozenset()
    # Actions whose after-snapshot holds only the fields they changed (older rows of a kind
    # that now records everything): read as the version before with those fields changed.
    partial: frozenset[str] = frozenset()
    # Fields recorded only since some release, with what a person calls them: a version
    # without one cannot restore it, and is neither compared on it nor blamed for it.
    recorded_later: Mapping[str, str] = field(default_factory=dict)

    @property
    def rollback_action(self) -> str:
        return f"{self.target_type}.rollback"


_KINDS: dict[str, Kind] = {}


def register(kind: Kind) -> None:
    """Make `kind.target_type` versioned (a module registers its own kind at import)."""
    _KINDS[kind.target_type] = kind


def kind_of(target_type: str) -> Kind:
    try:
        return _KINDS[target_type]
    except KeyError:
        raise VersionError(f"{target_type} changes have no version history") from None


@dataclass(frozen=True, slots=True)
class Change:
    field: str
    before: Any
    after: Any


@dataclass(frozen=True, slots=True)
class Version:
    id: int  # the audit row's id
    number: int  # 1 for the first version
    at: datetime
    actor: str
    action: str
    snapshot: dict[str, Any]
    changes: list[Change]  # against the version before it (everything for the first)
    current: bool
    # What this version did not record (recorded later), as a person calls it: a rollback
    # to it leaves those as they are.
    unrecorded: tuple[str, ...] = ()


def diff(before: Mapping[str, Any] | None, after: Mapping[str, Any]) -> list[Change]:
    """Field-by-field differences, in the after-snapshot's field order (then removed ones).
    Against nothing (`before` None, the first version) every field set is a change."""
    old = before or {}
    fields = [*after, *(f for f in old if f not in after)]
    return [
        Change(f, old.get(f), after.get(f))
        for f in fields
        if _same(old.get(f)) != _same(after.get(f))
    ]


def _same(value: Any) -> str:
    # Snapshots come back from JSON: compare their text form, as it was stored.
    return json.dumps(value, default=str, sort_keys=True)


def history(conn: Conn, target_type: str, name: str) -> list[Version]:
    """The versions of the target named `name` now, newest first, each with its diff
    against the one before (those made under an earlier name included)."""
    kind = kind_of(target_type)
    target = conn.execute(query(*kind.by_name), {"name": name}).fetchone()
    if target is None:
        raise VersionError(f"there is no {target_type} named {name!r}")
    rows = conn.execute(
        query("versions", "version_list"),
        {"target_type": target_type, "subject_id": target["id"], "actions": list(kind.actions),
         "rollback": kind.rollback_action, "limit": HISTORY_LIMIT},
    ).fetchall()  # fmt: skip
    rows.reverse()
    starts = [i for i, r in enumerate(rows) if r["action"] == kind.actions[0]]
    rows = rows[starts[-1] :] if starts else rows
    versions: list[Version] = []
    previous: dict[str, Any] | None = None
    for number, row in enumerate(rows, start=1):
        after = {k: v for k, v in row["details"]["after"].items() if k not in kind.ignored}
        compared = previous
        if row["action"] in kind.partial and previous is not None:
            after = {**previous, **after}
            # What the change found is in its own before, recorded or not in the version before.
            compared = {**previous, **(row["details"].get("before") or {})}
        missing = tuple(label for f, label in kind.recorded_later.items() if f not in after)
        versions.append(
            Version(row["id"], number, row["at"], row["actor"], row["action"], after,
                    _diff_recorded(kind, compared, after), current=number == len(rows),
                    unrecorded=missing)
        )  # fmt: skip
        previous = after
    versions.reverse()
    return versions


def _diff_recorded(
    kind: Kind, before: Mapping[str, Any] | None, after: Mapping[str, Any]
) -> list[Change]:
    """`diff`, leaving out a later-recorded field that either side did not record: its
    value there is unknown, not absent."""
    unknown = {
        f for f in kind.recorded_later
        if f not in after or (before is not None and f not in before)
    }  # fmt: skip
    return [c for c in diff(before, after) if c.field not in unknown]


def rollback(conn: Conn, target_type: str, name: str, version_id: int, *, actor: str) -> Version:
    """Apply version `version_id` of the target named `name` again (its name stays),
    audited as `<type>.rollback`."""
    kind = kind_of(target_type)
    with conn.transaction():
        chosen = [v for v in history(conn, target_type, name) if v.id == version_id]
        if not chosen:
            raise VersionError(f"{target_type} {name!r} has no version {version_id}")
        kind.apply(conn, name, chosen[0].snapshot, actor=actor, action=kind.rollback_action)
    return chosen[0]
