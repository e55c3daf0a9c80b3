"""Reconnect timing against a server that is not there (a closed local port)."""

from __future__ import annotations

import logging

import pytest

from app.services.reconnecting import DB_ERRORS, RETRY_CAP_SECONDS, Reconnecting

NOWHERE = "postgresql://sundial@127.0.0.1:1/none"


def test_reconnect_attempts_stay_at_most_a_second_apart_while_warnings_thin_out(
    caplog: pytest.LogCaptureFixture,
) -> None:
    delays: list[float] = []
    conn = Reconnecting(NOWHERE, "test", lambda: len(delays) >= 30, wait=delays.append)
    with caplog.at_level(logging.WARNING), pytest.raises(DB_ERRORS):
        conn.call(lambda c: None)
    assert len(delays) == 30
    assert all(0 < d <= RETRY_CAP_SECONDS for d in delays)  # a 10 s cap used to delay claims
    warnings = [r for r in caplog.records if "database unavailable" in r.getMessage()]
    assert 1 <= len(warnings) < len(delays)
    assert conn.failing


def test_open_and_check_try_once_without_waiting() -> None:
    waited: list[float] = []
    conn = Reconnecting(NOWHERE, "test", lambda: False, wait=waited.append)
    with pytest.raises(DB_ERRORS):
        conn.open()
    assert conn.check(lambda c: None) is False
    assert waited == [] and conn.failing
