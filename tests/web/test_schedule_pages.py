"""The schedule pages against a real database: create from a preset, live preview, edit,
pause / resume / run now / delete, the ledger, versions and rollback; roles, CSRF, bad
input next to its field with nothing written, and every change audited."""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from starlette.testclient import TestClient

from app.catalog import job_definitions, workflows
from app.catalog.job_definitions import JobSpec
from app.core.config import Settings
from app.dags import workflow_shapes
from app.scheduling import calendars, schedule_reads, schedules
from app.scheduling.calendars import CalendarSpec
from app.scheduling.fire_decisions import OverlapPolicy
from app.scheduling.schedule_spec import ScheduleSpec
from app.services.trigger import Trigger
from tests.helpers.databases import count
from tests.helpers.schedule_pages import FORM
from tests.helpers.web import post

Conn = psycopg.Connection[Any]


def actions(conn: Conn) -> list[tuple[str, str]]:
    rows = conn.execute(
        "SELECT actor, action FROM audit_log WHERE target_type = 'schedule' ORDER BY id"
    ).fetchall()
    return [(r["actor"], r["action"]) for r in rows]


@pytest.fixture
def job(conn: Conn) -> str:
    job_definitions.create(conn, JobSpec(name="report", handler="noop"), actor="test")
    return "report"


def test_an_editor_creates_a_schedule_from_a_preset_and_edits_it(
    as_role: Callable[[str], TestClient], conn: Conn, job: str
) -> None:
    client = as_role("editor")
    form = client.get("/schedules/new").text
    assert 'list="zones"' in form and '<option value="Europe/Berlin">' in form
    created = post(client, "/schedules", FORM)
    assert created.status_code == 303
    assert created.headers["location"] == "/schedules/morning%20report?done=created"
    row = conn.execute("SELECT * FROM schedules").fetchone()
    assert (row["cron"], row["timezone"], row["exact_minute"]) == ("0 9 * * 1-5", "Europe/Berlin",
                                                                   False)  # fmt: skip
    page = client.get(created.headers["location"]).text
    assert "At 09:00, Monday through Friday" in page and "Schedule created." in page
    assert "09:00 CET" in page or "09:00 CEST" in page

    edit = client.get("/schedules/morning%20report/edit").text
    assert 'value="weekdays" selected' in edit and 'value="09:00"' in edit
    edited = {k: v for k, v in FORM.items() if k not in ("name", "job")}
    shown = post(client, "/schedules/preview", {**edited, "editing": "morning report",
                                               "preset": "daily", "at": "07:30"}).text  # fmt: skip
    assert "At 07:30" in shown and "error" not in shown
    saved = post(client, "/schedules/morning%20report/edit", {**FORM, "preset": "daily",
                                                               "at": "07:30"})  # fmt: skip
    assert saved.status_code == 303
    row = conn.execute("SELECT cron FROM schedules").fetchone()
    assert row["cron"] == "30 7 * * *"
    assert actions(conn) == [("editor", "schedule.create"), ("editor", "schedule.update")]
    update = conn.execute(
        "SELECT details FROM audit_log WHERE action = 'schedule.update'"
    ).fetchone()["details"]
    assert (update["before"]["cron"], update["after"]["cron"]) == ("0 9 * * 1-5", "30 7 * * *")


def test_the_preview_shows_the_sentence_and_next_fires_in_both_zones_with_dst_notes(
    as_role: Callable[[str], TestClient], job: str
) -> None:
    client = as_role("editor")
    shown = post(
        client, "/schedules/preview",
        {**FORM, "preset": "daily", "at": "02:30", "timezone": "Europe/Berlin",
         "viewer_zone": "America/New_York"},
        **{"HX-Request": "true"},
    ).text  # fmt: skip
    assert "At 02:30" in shown and "30 2 * * *" in shown
    assert shown.count("<tr") == 11  # the header and ten fires
    assert "Your time (America/New_York)" in shown and ("EST" in shown or "EDT" in shown)
    # 28 March 2027 is the spring-forward night in Berlin
    spring = post(
        client, "/schedules/preview",
        {**FORM, "preset": "custom", "cron": "30 2 28 3 *", "timezone": "Europe/Berlin"},
    ).text  # fmt: skip
    assert "02:30 does not exist on 28 Mar (the clocks jump forward); runs at 03:00" in spring


def test_the_preview_flags_the_next_clock_change_beyond_the_fires_it_lists(
    as_role: Callable[[str], TestClient], job: str
) -> None:
    """Ten fires of a daily rule reach ten days ahead; the next clock change in the zone is
    said, with what it does to this rule, however far ahead it is."""
    client = as_role("editor")

    def change_note(**form: str) -> str:
        shown = post(client, "/schedules/preview", {**FORM, **form}).text
        found = re.search(r'id="preview-clock-change">(.*?)</p>', shown, re.S)
        return html.unescape(found[1]) if found else ""

    night = change_note(preset="daily", at="02:30", timezone="Europe/Berlin")
    assert "Next clock change:" in night and "the clocks in Europe/Berlin go" in night
    # spring or autumn, whichever comes first: 02:30 is skipped or happens twice
    assert "02:30 does not exist on" in night or "02:30 happens twice on" in night
    morning = change_note(preset="daily", at="09:00", timezone="America/New_York")
    assert "It does not move this schedule's times." in morning
    every = change_note(preset="interval", every="30", unit="minutes", timezone="Europe/Berlin")
    assert "Runs keep their spacing in elapsed time" in every
    assert change_note(preset="daily", at="02:30", timezone="Asia/Tokyo") == ""


def test_a_schedule_names_an_exclusion_calendar_saved_shown_and_prefilled(
    as_role: Callable[[str], TestClient], conn: Conn, job: str
) -> None:
    calendars.create(conn, CalendarSpec(name="Germany", country="DE"), actor="test")
    client = as_role("editor")
    form = client.get("/schedules/new").text
    assert '<label for="calendar">Exclusion calendar</label>' in form
    assert '<option value="Germany" >Germany</option>' in form
    created = post(client, "/schedules", {**FORM, "calendar": "Germany"})
    assert created.status_code == 303
    row = conn.execute(
        "SELECT c.name FROM schedules s JOIN exclusion_calendars c ON c.id = s.calendar_id"
    ).fetchone()
    assert row["name"] == "Germany"
    assert actions(conn) == [("editor", "schedule.create"), ("editor", "schedule.calendar")]
    page = client.get(created.headers["location"]).text
    assert 'href="/calendars/Germany">Germany</a>' in page
    edit = client.get("/schedules/morning%20report/edit").text
    assert '<option value="Germany" selected>' in edit
    # saving the edit with no calendar clears it, in the same change
    saved = post(client, "/schedules/morning%20report/edit", {**FORM, "calendar": ""})
    assert saved.status_code == 303
    assert conn.execute("SELECT calendar_id FROM schedules").fetchone()["calendar_id"] is None
    assert "none: it runs on every day" in client.get("/schedules/morning%20report").text


def test_an_unknown_calendar_is_refused_next_to_its_field_and_nothing_is_written(
    as_role: Callable[[str], TestClient], conn: Conn, job: str
) -> None:
    client = as_role("editor")
    refused = post(client, "/schedules", {**FORM, "calendar": "Atlantis"})
    assert refused.status_code == 422
    assert 'id="calendar-error"' in refused.text and "no calendar named" in refused.text
    assert count(conn, "schedules") == 0 and actions(conn) == []
    preview = post(client, "/schedules/preview", {**FORM, "calendar": "Atlantis"}).text
    assert "no calendar named" in preview


def test_the_preview_crosses_out_fires_the_calendar_excludes(
    as_role: Callable[[str], TestClient], conn: Conn, job: str
) -> None:
    calendars.create(conn, CalendarSpec(name="Germany", country="DE"), actor="test")
    client = as_role("editor")
    # every Christmas Day at noon: the next fire is always a German public holiday
    shown = post(
        client, "/schedules/preview",
        {**FORM, "preset": "custom", "cron": "0 12 25 12 *", "calendar": "Germany"},
    ).text  # fmt: skip
    assert shown.count('<tr class="excluded">') == 10
    assert shown.count("<del>") == 20
    assert "public holiday in DE: Christmas Day" in shown
    plain = post(client, "/schedules/preview", {**FORM, "preset": "custom",
                                                 "cron": "0 12 25 12 *"}).text  # fmt: skip
    assert "<del>" not in plain and "excluded" not in plain


def test_the_editor_embeds_the_load_forecast_of_the_rule_being_typed(
    as_role: Callable[[str], TestClient], job: str
) -> None:
    client = as_role("editor")
    form = client.get("/schedules/new").text
    assert 'id="load-forecast"' in form and 'hx-post="/schedules/forecast"' in form
    shown = post(client, "/schedules/forecast", {**FORM, "preset": "hourly", "minute": "5"})
    assert shown.status_code == 200
    assert "This schedule fires 24 times in the next 24 hours." in shown.text
    broken = post(client, "/schedules/forecast", {**FORM, "preset": "custom", "cron": "nope"})
    assert broken.status_code == 200 and "appears here once the rule works" in broken.text


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        ({"preset": "custom", "cron": "61 * * * *"}, "cron", "not a valid cron expression"),
        ({"preset": "custom", "cron": "0 0 30 2 *"}, "cron", "never fires"),
        ({"timezone": "Mars/Olympus"}, "timezone", "unknown time zone"),
        ({"at": "9 o'clock"}, "at", "not a time of day"),
        ({"preset": "weekly", "days": []}, "days", "at least one day"),
        ({"job": ""}, "job", "choose the job"),
        ({"name": ""}, "name", "give the schedule a name"),
        ({"spread_seconds": "lots"}, "spread_seconds", "whole number"),
        ({"catchup": "sometimes"}, "catchup", "catch-up must be"),
        ({"expire_after_minutes": "soon"}, "expire_after_minutes", "the minutes a run may wait"),
        ({"expire_after_minutes": "0"}, "expire_after_minutes", "at least 1 second"),
        (
            {"target_kind": "new", "handler": "noop", "args": "{oops"},
            "args",
            "args are not valid JSON",
        ),
        (
            {"target_kind": "new", "handler": "noop", "args": "[1]"},
            "args",
            "args must be a JSON object",
        ),
        ({"target_kind": "new", "handler": ""}, "handler", "choose the handler"),
        ({"target_kind": "new", "handler": "shell"}, "handler", "only an admin may"),
        ({"target_kind": "workflow", "workflow": "nope"}, "workflow", "no workflow named"),
    ],
)
def test_bad_input_gets_its_message_next_to_the_field_and_nothing_is_saved(
    as_role: Callable[[str], TestClient],
    conn: Conn,
    job: str,
    change: dict[str, Any],
    field: str,
    message: str,
) -> None:
    client = as_role("editor")
    preview = post(client, "/schedules/preview", {**FORM, **change}).text
    # the preview is about the rule; its name and target are checked on saving
    assert (message in preview) == (field not in ("name", "job", "handler", "args", "workflow"))
    refused = post(client, "/schedules", {**FORM, **change}, **{"HX-Request": "true"})
    assert refused.status_code == 422
    assert f'id="{field}-error"' in refused.text and message in refused.text
    assert count(conn, "schedules") == 0 and actions(conn) == []


def test_a_schedule_skips_runs_not_started_within_its_minutes(
    as_role: Callable[[str], TestClient], conn: Conn, job: str
) -> None:
    client = as_role("editor")
    assert post(client, "/schedules", {**FORM, "expire_after_minutes": "1.5"}).status_code == 303
    row = conn.execute("SELECT expire_after_seconds AS s FROM schedules").fetchone()
    assert row == {"s": 90}
    page = client.get("/schedules/morning%20report")
    assert "skipped when not started within" in page.text
    assert 'value="1.5"' in client.get("/schedules/morning%20report/edit").text


def test_a_schedule_may_make_its_own_job_from_a_handler_and_arguments(
    as_role: Callable[[str], TestClient], conn: Conn
) -> None:
    data = {**FORM, "target_kind": "new", "handler": "noop", "args": '{"to": "ops"}', "job": ""}
    assert post(as_role("editor"), "/schedules", data).status_code == 303
    job = conn.execute("SELECT name, handler, args FROM job_definitions").fetchone()
    assert job == {"name": "morning report", "handler": "noop", "args": {"to": "ops"}}
    assert conn.execute("SELECT owns_job FROM schedules").fetchone()["owns_job"] is True


def test_a_duplicate_name_is_refused_next_to_the_name(
    as_role: Callable[[str], TestClient], conn: Conn, job: str
) -> None:
    schedules.create_schedule(conn, ScheduleSpec(name="morning report", cron="0 8 * * *", job=job))
    refused = post(as_role("editor"), "/schedules", FORM)
    assert refused.status_code == 422 and 'id="name-error"' in refused.text
    assert "already exists" in refused.text and count(conn, "schedules") == 1


def test_names_with_markup_render_as_text(
    as_role: Callable[[str], TestClient], conn: Conn, job: str
) -> None:
    schedules.create_schedule(
        conn, ScheduleSpec(name="<script>x</script>", cron="0 8 * * *", job=job)
    )
    client = as_role("viewer")
    for path in ("", "/fires", "/history"):
        page = client.get("/schedules/%3Cscript%3Ex%3C%2Fscript%3E" + path).text
        assert "&lt;script&gt;x&lt;/script&gt;" in page and "<script>x" not in page


def test_operators_pause_resume_and_run_now_and_each_step_is_audited(
    as_role: Callable[[str], TestClient], conn: Conn, job: str
) -> None:
    schedules.create_schedule(conn, ScheduleSpec(name="nightly", cron="30 2 * * *", job=job,
                                                 timezone="Europe/Berlin"))  # fmt: skip
    client = as_role("operator")
    url = "/schedules/nightly"
    assert post(client, url + "/pause", {"note": "quarter close", "until": "2099-01-02T03:00"}
                ).status_code == 303  # fmt: skip
    row = conn.execute("SELECT active, paused_note, paused_until FROM schedules").fetchone()
    assert (row["active"], row["paused_note"]) == (False, "quarter close")
    assert row["paused_until"].isoformat() == "2099-01-02T02:00:00+00:00"
    assert "quarter close" in client.get(url).text
    assert post(client, url + "/resume", {}).status_code == 303
    assert conn.execute("SELECT active FROM schedules").fetchone()["active"] is True
    ran = post(client, url + "/run", {})
    assert ran.status_code == 303
    run = conn.execute("SELECT id, status FROM job_runs").fetchone()
    assert ran.headers["location"].endswith(f"?done=ran&run={run['id']}")
    assert (
        f'<a href="/runs/{run["id"]}">Open run {run["id"]}</a>'
        in client.get(ran.headers["location"]).text
    )
    # what the query string says is only ever a link to a run or a DAG run
    for odd in ("run=abc", "run=1e9", "dag_run=%3Cscript%3E", "run=99999999999999999999"):
        assert "Open " not in client.get(f"{url}?done=ran&{odd}").text, odd
    assert f"run {run['id']}" in client.get(url + "/last-run").text
    ledger = client.get(url + "/fires").text
    assert f'href="/runs/{run["id"]}"' in ledger and "run now" in ledger
    run_page = client.get(f"/runs/{run['id']}").text
    assert '<a href="/schedules/nightly">nightly</a>' in run_page
    assert actions(conn) == [
        ("system", "schedule.create"),
        ("operator", "schedule.pause"),
        ("operator", "schedule.resume"),
        ("operator", "schedule.run_now"),
    ]
    refused = post(client, url + "/pause", {"note": "x", "until": "2001-01-01T00:00"})
    assert refused.status_code == 422 and 'id="until-error"' in refused.text
    unreadable = post(client, url + "/pause", {"note": "x", "until": "next tuesday"})
    assert unreadable.status_code == 422 and 'id="until-error"' in unreadable.text
    long_note = post(client, url + "/pause", {"note": "x" * 10_001, "until": ""})
    assert long_note.status_code == 422 and 'id="note-error"' in long_note.text
    assert conn.execute("SELECT active FROM schedules").fetchone()["active"] is True


def test_delete_needs_confirmation_and_says_what_goes_with_it(
    as_role: Callable[[str], TestClient], conn: Conn
) -> None:
    schedules.create_schedule(conn, ScheduleSpec(name="cleanup", every_seconds=600, handler="noop"))
    client = as_role("editor")
    page = client.get("/schedules/cleanup").text
    assert "Its job <strong>cleanup</strong> was created with it and is deleted too" in page
    assert post(client, "/schedules/cleanup/delete", {}).status_code == 422
    assert count(conn, "schedules") == 1
    assert post(client, "/schedules/cleanup/delete", {"confirm": "yes"}).status_code == 303
    assert count(conn, "schedules") == 0 and count(conn, "job_definitions") == 0
    assert actions(conn)[-1] == ("editor", "schedule.delete")


def test_history_shows_each_change_and_rollback_restores_the_old_rule(
    as_role: Callable[[str], TestClient], conn: Conn, job: str
) -> None:
    schedules.create_schedule(conn, ScheduleSpec(name="nightly", cron="30 2 * * *", job=job))
    schedules.pause(conn, "nightly", note="quiet")  # not a version
    changes = {"cron": "0 4 * * *", "overlap": OverlapPolicy.QUEUE}
    schedules.update_schedule(conn, "nightly", changes, actor="alice")
    client = as_role("editor")
    page = client.get("/schedules/nightly/history").text
    assert "Version 2 (current)" in page and "update by alice" in page
    assert "<del>30 2 * * *</del>" in page and "<ins>0 4 * * *</ins>" in page
    assert "<del>skip</del>" in page and "paused note" not in page
    first = conn.execute("SELECT id FROM audit_log WHERE action = 'schedule.create'").fetchone()[
        "id"
    ]
    rolled = post(client, "/schedules/nightly/rollback", {"version": str(first)})
    assert rolled.headers["location"] == "/schedules/nightly?done=rolled-back"
    row = conn.execute("SELECT cron, overlap, active FROM schedules").fetchone()
    assert (row["cron"], row["overlap"], row["active"]) == ("30 2 * * *", "skip", False)
    assert actions(conn)[-1] == ("editor", "schedule.rollback")
    assert "Version 3 (current)" in client.get("/schedules/nightly/history").text
    missing = post(client, "/schedules/nightly/rollback", {"version": "999999"})
    assert missing.status_code == 422 and "has no version 999999" in missing.text


def calendar_of(conn: Conn) -> str | None:
    row = conn.execute(
        "SELECT c.name FROM schedules s LEFT JOIN exclusion_calendars c ON c.id = s.calendar_id"
    ).fetchone()
    return row["name"]


def version_ids(conn: Conn) -> list[int]:
    rows = conn.execute(
        "SELECT id FROM audit_log WHERE target_type = 'schedule' AND action <> 'schedule.pause'"
        " ORDER BY id"
    ).fetchall()
    return [r["id"] for r in rows]


def test_rollback_restores_the_exclusion_calendar_of_that_version(
    as_role: Callable[[str], TestClient], conn: Conn, job: str
) -> None:
    for country in ("DE", "FR"):
        calendars.create(conn, CalendarSpec(name=country, country=country), actor="test")
    schedules.create_schedule(conn, ScheduleSpec(name="nightly", cron="30 2 * * *", job=job))
    calendars.assign(conn, "nightly", "DE", actor="alice")  # chosen on the calendar's page
    schedules.update_schedule(conn, "nightly", {"cron": "0 4 * * *"}, actor="alice")
    calendars.assign(conn, "nightly", "FR", actor="bob")
    created, with_de, four_am, with_fr = version_ids(conn)
    client = as_role("editor")
    page = client.get("/schedules/nightly/history").text
    assert "Version 4 (current)" in page and "<del>DE</del>" in page and "<ins>FR</ins>" in page

    back = post(client, "/schedules/nightly/rollback", {"version": str(four_am)})
    assert back.headers["location"] == "/schedules/nightly?done=rolled-back"
    row = conn.execute("SELECT cron FROM schedules").fetchone()
    assert (row["cron"], calendar_of(conn)) == ("0 4 * * *", "DE")
    post(client, "/schedules/nightly/rollback", {"version": str(created)})
    row = conn.execute("SELECT cron FROM schedules").fetchone()
    assert (row["cron"], calendar_of(conn)) == ("30 2 * * *", None)
    post(client, "/schedules/nightly/rollback", {"version": str(with_de)})
    assert calendar_of(conn) == "DE"
    rollback = conn.execute(
        "SELECT details FROM audit_log WHERE action = 'schedule.rollback' ORDER BY id DESC"
    ).fetchone()["details"]
    assert (rollback["before"]["calendar"], rollback["after"]["calendar"]) == (None, "DE")
    # A version naming a calendar deleted since cannot restore it, and says so.
    calendars.delete(conn, "FR", actor="test")
    refused = post(client, "/schedules/nightly/rollback", {"version": str(with_fr)})
    assert refused.status_code == 422
    assert "names the exclusion calendar &#39;FR&#39;, which no longer exists" in refused.text
    assert calendar_of(conn) == "DE"


def test_a_version_from_before_calendars_were_recorded_says_it_leaves_the_calendar(
    as_role: Callable[[str], TestClient], conn: Conn, job: str
) -> None:
    calendars.create(conn, CalendarSpec(name="DE", country="DE"), actor="test")
    schedules.create_schedule(conn, ScheduleSpec(name="nightly", cron="30 2 * * *", job=job))
    schedules.update_schedule(conn, "nightly", {"cron": "0 4 * * *"}, actor="alice")
    # Versions written before snapshots held the calendar.
    conn.execute("UPDATE audit_log SET details = details #- '{after,calendar}' #- "
                 "'{before,calendar}' WHERE target_type = 'schedule'")  # fmt: skip
    calendars.assign(conn, "nightly", "DE", actor="alice")
    created = version_ids(conn)[0]
    client = as_role("editor")
    page = client.get("/schedules/nightly/history").text
    assert page.count("This version did not record its exclusion calendar") == 2
    assert "rolling back to it leaves that as it is now" in page
    assert "<ins>DE</ins>" in page and "<del>" not in page.split("Version 3")[1].split("</li>")[0]
    post(client, "/schedules/nightly/rollback", {"version": str(created)})
    row = conn.execute("SELECT cron FROM schedules").fetchone()
    assert (row["cron"], calendar_of(conn)) == ("30 2 * * *", "DE")


def test_saving_the_edit_form_with_another_calendar_is_one_version(
    as_role: Callable[[str], TestClient], conn: Conn, job: str
) -> None:
    calendars.create(conn, CalendarSpec(name="Germany", country="DE"), actor="test")
    client = as_role("editor")
    post(client, "/schedules", FORM)
    post(client, "/schedules/morning%20report/edit", {**FORM, "calendar": "Germany"})
    assert actions(conn) == [("editor", "schedule.create"), ("editor", "schedule.update")]
    update = conn.execute(
        "SELECT details FROM audit_log WHERE action = 'schedule.update'"
    ).fetchone()["details"]
    assert (update["before"]["calendar"], update["after"]["calendar"]) == (None, "Germany")
    assert calendar_of(conn) == "Germany"


def test_the_list_filters_and_shows_the_next_fire_in_the_viewers_zone(
    as_role: Callable[[str], TestClient], conn: Conn, job: str
) -> None:
    schedules.create_schedule(conn, ScheduleSpec(name="alpha", cron="0 9 * * *", job=job,
                                                 timezone="Asia/Tokyo"))  # fmt: skip
    schedules.create_schedule(conn, ScheduleSpec(name="beta", every_seconds=60, handler="noop"))
    schedules.pause(conn, "beta", note="hold")
    client = as_role("viewer")
    client.cookies.set("sundial_zone", "America/New_York")
    page = client.get("/schedules").text
    assert "Your time" in page and ("EST" in page or "EDT" in page) and "JST" in page
    assert ">alpha<" in client.get("/schedules?name=alp").text
    assert ">beta<" not in client.get("/schedules?name=alp").text
    assert ">alpha<" not in client.get("/schedules?target=beta").text
    paused = client.get("/schedules?state=paused", headers={"HX-Request": "true"}).text
    assert ">beta<" in paused and ">alpha<" not in paused and "<html" not in paused
    client.cookies.set("sundial_zone", "Not/AZone")
    assert "(UTC)" in client.get("/schedules").text


def test_the_list_comes_in_pages_by_name_that_keep_the_filters(
    as_role: Callable[[str], TestClient], conn: Conn, job: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(schedule_reads, "LIST_PAGE", 2)
    for name in ("e-daily", "a-daily", "d-hourly", "c-daily", "b-daily"):
        schedules.create_schedule(conn, ScheduleSpec(name=name, every_seconds=60, job=job))
    client = as_role("viewer")

    def names(html: str) -> list[str]:
        return re.findall(r'<a href="/schedules/([^"/]+)">', html)

    def next_link(html: str) -> str | None:
        found = re.search(r'<a href="([^"]+)" rel="next">', html)
        return found[1].replace("&amp;", "&") if found else None

    first = client.get("/schedules?name=daily").text
    assert names(first) == ["a-daily", "b-daily"] and "4 schedules, 2 on this page" in first
    second = client.get(next_link(first) or "").text
    assert names(second) == ["c-daily", "e-daily"] and next_link(second) is None
    assert "First page" in second and "4 schedules" in second
    assert names(client.get("/schedules").text) == ["a-daily", "b-daily"]
    beyond = client.get("/schedules?after=zzz").text
    assert "No more schedules" in beyond and "First page" in beyond


def test_the_ledger_is_paged_newest_first(
    as_role: Callable[[str], TestClient], conn: Conn, job: str
) -> None:
    schedules.create_schedule(conn, ScheduleSpec(name="often", every_seconds=60, job=job))
    schedule_id = conn.execute("SELECT id FROM schedules").fetchone()["id"]
    conn.execute(
        "INSERT INTO schedule_fires (schedule_id, fire_time, local_time, outcome) "
        "SELECT %s, t, t AT TIME ZONE 'UTC', 'missed' FROM generate_series("
        "'2026-01-01 00:00+00'::timestamptz, '2026-01-01 00:59+00', '1 minute') t",
        (schedule_id,),
    )
    client = as_role("viewer")
    first = client.get("/schedules/often/fires").text
    assert "2026-01-01 00:59" in first and "2026-01-01 00:09" not in first
    assert "Older</a>" in first
    older = first.split("fires?before=")[1].split('"')[0]
    second = client.get("/schedules/often/fires?before=" + older.replace("&amp;", "&")).text
    assert "2026-01-01 00:09" in second and "2026-01-01 00:59" not in second
    assert "Older</a>" not in second and "Newest</a>" in second
    assert client.get("/schedules/often/fires?before=yesterday").status_code == 400


def test_the_ledger_shows_excluded_fires_with_their_reason(
    as_role: Callable[[str], TestClient], conn: Conn, job: str
) -> None:
    schedules.create_schedule(conn, ScheduleSpec(name="daily", cron="0 12 * * *", job=job))
    schedule_id = conn.execute("SELECT id FROM schedules").fetchone()["id"]
    conn.execute(
        "INSERT INTO schedule_fires (schedule_id, fire_time, local_time, outcome, detail) "
        "VALUES (%s, '2026-12-25 12:00+00', '2026-12-25 12:00', 'excluded', "
        "'public holiday in DE: Christmas Day (calendar ''Germany'')')",
        (schedule_id,),
    )
    ledger = as_role("viewer").get("/schedules/daily/fires").text
    assert '<tr class="outcome-excluded">' in ledger
    assert "not run: excluded by its calendar" in ledger
    assert "public holiday in DE: Christmas Day (calendar &#39;Germany&#39;)" in ledger


WRITES = ["/schedules", "/schedules/preview", "/schedules/forecast", "/schedules/s/edit",
          "/schedules/s/pause", "/schedules/s/resume", "/schedules/s/run", "/schedules/s/delete",
          "/schedules/s/rollback"]  # fmt: skip


@pytest.mark.parametrize("path", WRITES)
def test_a_viewer_gets_403_on_every_write_and_sees_no_buttons(
    as_role: Callable[[str], TestClient], conn: Conn, job: str, path: str
) -> None:
    schedules.create_schedule(conn, ScheduleSpec(name="s", cron="0 9 * * *", job=job))
    client = as_role("viewer")
    assert post(client, path, {**FORM, "confirm": "yes", "note": "x"}).status_code == 403
    page = client.get("/schedules/s").text
    assert "Run now" not in page and "Pause" not in page and "Delete" not in page
    assert "Roll back" not in client.get("/schedules/s/history").text
    assert count(conn, "schedules") == 1 and len(actions(conn)) == 1


def test_an_operator_may_not_edit_or_delete(
    as_role: Callable[[str], TestClient], conn: Conn, job: str
) -> None:
    schedules.create_schedule(conn, ScheduleSpec(name="s", cron="0 9 * * *", job=job))
    client = as_role("operator")
    assert client.get("/schedules/new").status_code == 403
    assert post(client, "/schedules/s/delete", {"confirm": "yes"}).status_code == 403
    assert post(client, "/schedules/s/edit", FORM).status_code == 403


@pytest.mark.parametrize("path", WRITES)
def test_a_write_without_the_csrf_token_is_refused(
    as_role: Callable[[str], TestClient], conn: Conn, job: str, path: str
) -> None:
    schedules.create_schedule(conn, ScheduleSpec(name="s", cron="0 9 * * *", job=job))
    client = as_role("admin")
    refused = client.post(path, data={**FORM, "confirm": "yes"}, follow_redirects=False)
    assert refused.status_code == 403
    assert count(conn, "schedules") == 1 and len(actions(conn)) == 1


def test_pages_of_an_unknown_schedule_are_404(as_role: Callable[[str], TestClient]) -> None:
    client = as_role("admin")
    for path in ("", "/edit", "/fires", "/history"):
        assert client.get("/schedules/nope" + path).status_code == 404
    assert post(client, "/schedules/nope/resume", {}).status_code == 404


def test_an_editor_schedules_a_workflow_and_its_fire_starts_a_dag_run(
    as_role: Callable[[str], TestClient], conn: Conn, job: str
) -> None:
    steps = {"pull": workflow_shapes.Step(job), "mail": workflow_shapes.Step(job)}
    spec = workflows.WorkflowSpec("etl", steps, [("pull", "mail")])
    workflows.define(conn, spec, actor="test")
    client = as_role("editor")
    form = {**FORM, "name": "morning etl", "target_kind": "workflow", "workflow": "etl"}
    assert post(client, "/schedules", form).status_code == 303
    row = conn.execute("SELECT id, workflow_id, job_id, next_fire_time FROM schedules").fetchone()
    assert row["workflow_id"] is not None and row["job_id"] is None
    assert "etl" in client.get("/schedules/morning%20etl").text

    # The trigger's next tick after the first fire starts one DAG run of the workflow.
    Trigger(Settings.from_env({})).run_once(conn, now=row["next_fire_time"] + timedelta(minutes=2))
    (dag,) = conn.execute("SELECT id FROM dag_runs WHERE schedule_id = %s", (row["id"],))
    steps_run = conn.execute(
        "SELECT status FROM job_runs WHERE dag_run_id = %s ORDER BY status", (dag["id"],)
    ).fetchall()
    assert [s["status"] for s in steps_run] == ["blocked", "pending"]
    page = client.get("/schedules/morning%20etl").text
    assert f'<a href="/dag-runs/{dag["id"]}">a run of the workflow</a>' in page

    # Run now: the page it returns to links to the DAG run it started
    answer = post(as_role("operator"), "/schedules/morning%20etl/run", {})
    started = conn.execute(
        "SELECT id FROM dag_runs WHERE schedule_id = %s AND id <> %s", (row["id"], dag["id"])
    ).fetchone()
    assert answer.headers["location"].endswith(f"?done=ran&dag_run={started['id']}")
    shown = client.get(answer.headers["location"]).text
    assert f'<a href="/dag-runs/{started["id"]}">Open its DAG run</a>' in shown
