"""Picking a job in the schedule and workflow editors: a list while the jobs are few, a
field that finds them by part of their name once there are too many to list (its
suggestions come from /jobs/names). Either way the form sends the job's name, and a name
that is no job is refused next to its field with nothing written."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import psycopg
from starlette.testclient import TestClient

from app.catalog import job_definitions
from app.catalog.job_definitions import PICK_FROM_LIST, JobSpec
from tests.helpers.databases import count
from tests.helpers.job_picker import many_jobs
from tests.helpers.schedule_pages import FORM
from tests.helpers.web import post
from tests.helpers.workflow_pages import form as workflow_form
from tests.helpers.workflow_pages import post as workflow_post

Conn = psycopg.Connection[Any]


def suggestions(client: TestClient, **params: str) -> list[str]:
    page = client.get("/jobs/names", params=params, headers={"HX-Request": "true"})
    assert page.status_code == 200, page.text
    return re.findall(r'<option value="([^"]*)">', page.text)


def test_a_few_jobs_are_listed_to_choose_from(
    as_role: Callable[[str], TestClient], conn: Conn
) -> None:
    for name in ("billing", "report"):
        job_definitions.create(conn, JobSpec(name=name, handler="noop"), actor="test")
    client = as_role("editor")
    for path in ("/schedules/new", "/workflows/new"):
        page = client.get(path).text
        assert re.search(r'<select id="(job|step-0-job)"', page), path
        assert '<option value="report"' in page and 'job-names"' not in page, path


def test_too_many_jobs_to_list_are_found_by_part_of_their_name(
    as_role: Callable[[str], TestClient], conn: Conn
) -> None:
    many_jobs(conn, PICK_FROM_LIST + 1)
    client = as_role("editor")
    schedule_page = client.get("/schedules/new").text
    assert '<input id="job" name="job"' in schedule_page
    assert 'list="job-names"' in schedule_page and '<datalist id="job-names">' in schedule_page
    assert "job-0150" not in schedule_page  # no name is listed up front
    workflow_page = client.get("/workflows/new").text
    assert '<input id="step-0-job" name="step_job"' in workflow_page
    assert "job-0150" not in workflow_page


def test_suggestions_hold_the_text_typed_starting_with_it_first_and_few(
    as_role: Callable[[str], TestClient], conn: Conn
) -> None:
    many_jobs(conn, PICK_FROM_LIST + 1)
    for name in ("nightly 50% sample", "nightly 5_0 export", "Report 50%", "x-job-0001"):
        job_definitions.create(conn, JobSpec(name=name, handler="noop"), actor="test")
    client = as_role("viewer")
    # as the schedule field sends it, and as a workflow step's field sends it
    assert suggestions(client, job="JOB-0001") == ["job-0001", "x-job-0001"]
    nine = [f"job-000{i}" for i in range(1, 10)]
    assert suggestions(client, step_job="job-000") == [*nine, "x-job-0001"]
    # LIKE's wildcards are the characters typed, not patterns
    assert sorted(suggestions(client, q="50%")) == ["Report 50%", "nightly 50% sample"]
    assert suggestions(client, q="5_0") == ["nightly 5_0 export"]
    assert len(suggestions(client, q="job")) == job_definitions.FOUND_NAMES
    assert suggestions(client, q="   ") == []
    assert suggestions(client, q="no such thing") == []


def test_suggestions_are_for_signed_in_users_only(client: TestClient) -> None:
    response = client.get("/jobs/names", params={"q": "a"}, follow_redirects=False)
    assert response.status_code in (302, 303, 401)


def test_a_job_typed_by_name_is_saved_and_an_unknown_one_refused(
    as_role: Callable[[str], TestClient], conn: Conn
) -> None:
    many_jobs(conn, PICK_FROM_LIST + 1)
    client = as_role("editor")
    refused = post(client, "/schedules", {**FORM, "job": "job-9999"})
    assert refused.status_code == 422
    assert "no job definition named" in refused.text
    assert 'value="job-9999"' in refused.text  # what was typed stays in the field
    assert count(conn, "schedules") == 0
    assert post(client, "/schedules", {**FORM, "job": "job-0042"}).status_code == 303
    row = conn.execute(
        "SELECT j.name FROM schedules s JOIN job_definitions j ON j.id = s.job_id"
    ).fetchone()
    assert row == {"name": "job-0042"}

    steps = [("fetch", "job-0007", []), ("load", "job-9999", [0])]
    refused = workflow_post(client, "/workflows", workflow_form("etl", steps))
    assert refused.status_code == 422
    assert "no job definition named" in refused.text
    assert count(conn, "workflows") == 0
    steps = [("fetch", "job-0007", []), ("load", "job-0008", [0])]
    assert workflow_post(client, "/workflows", workflow_form("etl", steps)).status_code == 303
    assert count(conn, "workflow_steps") == 2
