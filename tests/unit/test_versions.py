"""Versions: a readable field-by-field diff of two snapshots, and the kinds registry."""

from __future__ import annotations

import pytest

from app.people import versions
from app.people.versions import Change, VersionError, diff
from app.scheduling import schedules


def test_a_diff_lists_changed_fields_in_the_after_order_then_removed_ones() -> None:
    before = {"cron": "30 2 * * *", "timezone": "UTC", "catchup": False, "old": 1}
    after = {"cron": "0 4 * * *", "timezone": "UTC", "catchup": True, "new": [1, 2]}
    assert diff(before, after) == [
        Change("cron", "30 2 * * *", "0 4 * * *"),
        Change("catchup", False, True),
        Change("new", None, [1, 2]),
        Change("old", 1, None),
    ]


def test_the_first_version_shows_every_field_it_sets() -> None:
    assert diff(None, {"cron": "0 9 * * 1-5", "end_at": None, "spread_seconds": 0}) == [
        Change("cron", None, "0 9 * * 1-5"),
        Change("spread_seconds", None, 0),
    ]


def test_values_compare_as_stored_so_equal_snapshots_have_no_diff() -> None:
    snapshot = {"start_at": "2026-01-01 00:00:00+00:00", "args": {"b": 1, "a": 2}}
    assert diff(snapshot, {"args": {"a": 2, "b": 1}, "start_at": snapshot["start_at"]}) == []


def test_schedules_register_their_kind_and_an_unknown_kind_is_refused() -> None:
    kind = versions.kind_of("schedule")
    assert kind.apply is schedules.apply_snapshot
    assert kind.rollback_action == "schedule.rollback"
    with pytest.raises(VersionError, match="gadget changes have no version history"):
        versions.kind_of("gadget")
