"""Dead letters pages through the real application: groups, the dry-run count before a
group retry, reasons required to resolve, operators only for changes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg
from psycopg.rows import dict_row
from starlette.testclient import TestClient

from app.core.config import Settings
from app.runs import submission, transitions
from app.runs.fingerprints import fingerprint_of
from app.services.reaper import Reaper
from tests.helpers.dead_letters import TRACE, declined
from tests.helpers.people import csrf_of


def _declined(db_url: str, orders: range) -> str:
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
        for order in orders:
            declined(conn, order)
    return fingerprint_of("PaymentDeclined: card for order 0 declined", TRACE.format(0)).key


def _statuses(db_url: str) -> list[Any]:
    with psycopg.connect(db_url) as conn:
        return [r[0] for r in conn.execute("SELECT status FROM job_runs ORDER BY id")]


def test_group_retry_counts_only_what_a_retry_reaches(
    as_role: Callable[[str], TestClient], db_url: str
) -> None:
    key = _declined(db_url, range(3))
    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
        later = conn.execute("SELECT now() + interval '8 days' AS t").fetchone()
        assert later is not None
        assert Reaper(Settings.from_env({})).move_to_history(conn, later["t"]).runs == 3
        declined(conn, 3)  # one more, hot
    client = as_role("operator")
    confirm = client.get(f"/dead-letters/{key}/retry", headers={"HX-Request": "true"})
    assert "Retry 1 run?" in confirm.text
    assert "3 more ended long enough ago to be in the history" in confirm.text
    token = csrf_of(client, f"/dead-letters/{key}")
    client.post(f"/dead-letters/{key}/retry", data={"csrf_token": token})
    assert _statuses(db_url) == ["pending"]  # the hot one; the three moved stay as they were
    nothing = client.get(f"/dead-letters/{key}/retry", headers={"HX-Request": "true"})
    assert "Nothing to retry: the group's 3 open runs ended long enough ago" in nothing.text
    assert "confirm-retry" not in nothing.text


def test_a_viewer_sees_groups_but_cannot_retry(
    as_role: Callable[[str], TestClient], db_url: str
) -> None:
    key = _declined(db_url, range(3))
    client = as_role("viewer")
    page = client.get("/dead-letters")
    assert "PaymentDeclined: card for order &lt;id&gt; declined" in page.text
    assert f'href="/dead-letters/{key}"' in page.text
    shown = client.get(f"/dead-letters/{key}")
    assert "Retry selected" not in shown.text and "<svg" in shown.text
    token = csrf_of(client, "/dead-letters")
    refused = client.post(f"/dead-letters/{key}/retry", data={"csrf_token": token})
    assert refused.status_code == 403
    assert _statuses(db_url) == ["failed"] * 3


def test_group_retry_shows_the_count_then_requeues_it(
    as_role: Callable[[str], TestClient], db_url: str
) -> None:
    key = _declined(db_url, range(4))
    client = as_role("operator")
    confirm = client.get(f"/dead-letters/{key}/retry", headers={"HX-Request": "true"})
    assert "Retry 4 runs?" in confirm.text and "<html" not in confirm.text
    token = csrf_of(client, f"/dead-letters/{key}")
    done = client.post(
        f"/dead-letters/{key}/retry", data={"csrf_token": token}, follow_redirects=True
    )
    assert "Re-queued 4 runs." in done.text
    assert _statuses(db_url) == ["pending"] * 4
    assert client.get(f"/dead-letters/{key}").status_code == 404


def test_resolving_needs_a_reason_next_to_its_field(
    as_role: Callable[[str], TestClient], db_url: str
) -> None:
    key = _declined(db_url, range(2))
    client = as_role("operator")
    token = csrf_of(client, f"/dead-letters/{key}")
    empty = client.post(
        f"/dead-letters/{key}/resolve",
        data={"csrf_token": token, "action": "discarded", "reason": ""},
        headers={"HX-Request": "true"},
    )
    assert empty.status_code == 422 and 'id="reason-error"' in empty.text
    saved = client.post(
        f"/dead-letters/{key}/resolve",
        data={"csrf_token": token, "action": "discarded", "reason": "test cards"},
        follow_redirects=True,
    )
    assert "2 runs discarded: test cards" in saved.text
    assert "operator" in saved.text and "No dead letters" in saved.text


def test_edit_args_refuses_what_is_not_a_json_object(
    as_role: Callable[[str], TestClient], db_url: str
) -> None:
    _declined(db_url, range(1))
    client = as_role("operator")
    form = client.get("/dead-letters/runs/1/edit")
    assert "&#34;order&#34;: 1" in form.text
    token = csrf_of(client, "/dead-letters/runs/1/edit")
    bad = client.post("/dead-letters/runs/1/retry", data={"csrf_token": token, "args": "{oops"})
    assert bad.status_code == 422 and "not valid JSON" in bad.text
    good = client.post(
        "/dead-letters/runs/1/retry",
        data={"csrf_token": token, "args": '{"order": 5}'},
        follow_redirects=True,
    )
    assert "Run 1 re-queued with the new args." in good.text
    assert client.get("/dead-letters/runs/99/edit").status_code == 404


def test_a_rows_retry_button_retries_that_run_alone(
    as_role: Callable[[str], TestClient], db_url: str
) -> None:
    key = _declined(db_url, range(3))
    client = as_role("operator")
    token = csrf_of(client, f"/dead-letters/{key}")
    done = client.post(
        "/dead-letters/retry",
        data={"csrf_token": token, "fingerprint": key, "run_ids": ["1", "2"], "only": "3"},
        follow_redirects=True,
    )
    assert "Re-queued 1 run." in done.text
    assert _statuses(db_url) == ["failed", "failed", "pending"]
    both = client.post(
        "/dead-letters/retry",
        data={"csrf_token": token, "fingerprint": key, "run_ids": ["1", "2"]},
        follow_redirects=True,
    )
    assert "Re-queued 2 runs." in both.text and "No dead letters" in both.text


def test_a_quarantined_run_is_shown_as_such_with_its_crash_count(
    as_role: Callable[[str], TestClient], db_url: str
) -> None:
    from datetime import timedelta

    from app.runs.fingerprints import QUARANTINED
    from app.runs.run_inserts import NewRun
    from tests.helpers.processes import QUARANTINE_DEATHS, one_crash_from_quarantine
    from tests.helpers.waits import db_now

    with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
        run_id = submission.submit(conn, NewRun("noop")).id
        one_crash_from_quarantine(conn, run_id)
        transitions.claim(conn, "worker-a", 1, 30)
        transitions.reap(conn, now=db_now(conn) + timedelta(minutes=5))
    client = as_role("viewer")
    groups = client.get("/dead-letters")
    assert "quarantined: the process running it died too many times" in groups.text
    group = client.get(f"/dead-letters/{QUARANTINED}")
    assert "quarantined</span>" in group.text
    assert f"after {QUARANTINE_DEATHS} crashes" in group.text
    page = client.get(f"/runs/{run_id}")
    assert "quarantined</span>" in page.text
    assert f"Quarantined: the program running it stopped {QUARANTINE_DEATHS} times" in page.text
